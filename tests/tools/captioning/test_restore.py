"""The parameters-only restore (training/checkpointing.restore) of captioning, the export and
the checkpoint tool: it never builds the optimizer, so a checkpoint whose optimizer state is
NaNs of another structure, or absent, still gives the run's parameters bit for bit. Also: a
URL vocabulary path, and bad values in config.json named in one line."""

import json
import os
import shutil
import subprocess
import sys

import jax
import ml_collections
import numpy as np
import pytest

from data import tokenizer
from errors import InputError
from evaluation import evaluate
from model import captioner as captioner_lib
from tests import tiny
from tests.cli import error_line
from tests.training.saved_state import read_saved_state
from tools.captioning import Captioner, Decoding, export, restore
from tools.captioning import __main__ as cli
from training import checkpointing, run_config
from training import run as run_lib


@pytest.fixture(scope="module")
def saved(caption_run):
    """The run's step-4 checkpoint as saved (orbax's own read, no target)."""
    return read_saved_state(caption_run, 4)[1]


@pytest.fixture(scope="module")
def optimizer_state_gone(caption_run, saved, tmp_path_factory):
    """{"corrupted" | "deleted": a copy of the run whose step-4 checkpoint has the run's
    parameters and, as optimizer state, NaNs of another structure or nothing}."""
    runs = {}
    for name, opt_state in (("corrupted", {"v": np.full((3, 5), np.nan, np.float32)}),
                            ("deleted", None)):
        workdir = tmp_path_factory.mktemp(f"opt_state_{name}") / "run"
        workdir.mkdir()
        shutil.copy(os.path.join(caption_run, "config.json"), workdir)
        state = {"params": saved["params"], "step": saved["step"]}
        if opt_state is not None:
            state["opt_state"] = opt_state
        saver = checkpointing.Saver(checkpointing.manager(str(workdir), asynchronous=False))
        saver.save(4, state)  # As the trainer writes its checkpoints.
        saver.wait()
        runs[name] = str(workdir)
    return runs


def _equal(tree, other):
    return jax.tree.all(jax.tree.map(
        lambda a, b: a.dtype == b.dtype and np.array_equal(np.asarray(a), np.asarray(b)),
        tree, other))


def _config(workdir):
    return ml_collections.ConfigDict(run_config.load(workdir))


def test_only_the_trainers_restore_needs_the_optimizer_state(optimizer_state_gone, caption_run,
                                                            captioner, demo_images, saved):
    # What these copies prove: a restore of the whole state cannot read them.
    config = _config(caption_run)
    vocab = tokenizer.get_vocabulary(config.vocab.path)
    for workdir in optimizer_state_gone.values():
        with pytest.raises(checkpointing.CheckpointError, match="is damaged"):
            tiny.restore_whole_state_params(config, workdir, vocab.vocab_size, 4)
    # Captions need only the parameters, and so does the checkpoint tool.
    want = captioner.caption(demo_images[:2], "en,zh", Decoding("beam", beam_size=3))
    for workdir in optimizer_state_gone.values():
        got = Captioner.from_run(workdir).caption(demo_images[:2], "en,zh",
                                                  Decoding("beam", beam_size=3))
        assert [(c.tokens, c.text, c.log_prob) for c in got] == \
            [(c.tokens, c.text, c.log_prob) for c in want]
    for workdir in optimizer_state_gone.values():
        for step in (None, 4):  # The newest, and a step asked for.
            params, got_step = evaluate._restore(run_lib.Run.open(workdir), step)
            assert got_step == 4 and _equal(params, saved["params"])


@pytest.fixture(scope="module")
def latest(caption_run):
    """The run's latest checkpoint, restored once for the module."""
    return restore.restore(caption_run)


def _abstract(latest):
    return captioner_lib.abstract_params(latest.model, boxed=False)


def test_restore_params_reads_the_latest_as_saved(latest, saved):
    run = latest
    assert run.step == 4 and _equal(run.params, saved["params"])


def test_restore_params_reads_the_best_as_saved(caption_run, saved):
    best = restore.restore(caption_run, "best")
    orbax_best = checkpointing._restore(
        os.path.join(caption_run, "checkpoints_best", "2"),
        jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), saved))
    assert (best.step, best.best) == (2, True) and _equal(best.params, orbax_best["params"])


def test_restore_names_a_missing_step_with_the_steps_there(caption_run, latest):
    with pytest.raises(FileNotFoundError, match=r"no checkpoint of step 3 .* 2, 4$"):
        checkpointing.restore(caption_run, _abstract(latest), 3)


def test_restore_names_each_parameter_of_another_shape(caption_run, latest):
    abstract = _abstract(latest)
    # Another model's shapes: each differing parameter named.
    other = jax.tree.map(lambda x: x, abstract)
    kernel = other["t5"]["decoder"]["logits_dense"]["kernel"]
    other["t5"]["decoder"]["logits_dense"]["kernel"] = jax.ShapeDtypeStruct(
        (kernel.shape[0], kernel.shape[1] + 1), kernel.dtype)
    with pytest.raises(checkpointing.IncompatibleCheckpoint,
                       match=r"t5/decoder/logits_dense/kernel: \(32, 768\) -> \(32, 769\)"):
        checkpointing.restore(caption_run, other, 4)


def test_restore_names_a_checkpoint_without_its_metadata_damaged(caption_run, latest, tmp_path):
    abstract = _abstract(latest)
    # A checkpoint without its metadata: damaged, named.
    copy = tmp_path / "run"
    shutil.copytree(caption_run, copy)
    os.remove(copy / "checkpoints" / "4" / "default" / "_METADATA")
    with pytest.raises(checkpointing.CheckpointError, match=r"checkpoints/4 \(step 4\) is "
                                                            r"damaged"):
        checkpointing.restore(str(copy), abstract, 4)


def _with_vocab_path(four_step_run, folder, vocab_path):
    """A copy of the shared run whose config.json's vocab.path is vocab_path(the path it has)."""
    workdir = four_step_run.copy_to(folder)
    saved = run_config.load(workdir)
    saved["vocab"]["path"] = vocab_path(saved["vocab"]["path"])
    with open(run_config.path(workdir), "w", encoding="utf-8") as f:
        json.dump(saved, f)
    return workdir


@pytest.fixture(scope="module")
def url_run(four_step_run, tmp_path_factory):
    """A copy of the shared run whose vocabulary is given as a file:// URL."""
    return _with_vocab_path(four_step_run, tmp_path_factory.mktemp("url") / "run",
                            lambda p: f"file://{p}")


def test_a_vocabulary_url_captions(url_run, captioner, demo_images):
    got = Captioner.from_run(url_run).caption(demo_images[:2], "en,zh")
    assert [(c.tokens, c.text) for c in got] == \
        [(c.tokens, c.text) for c in captioner.caption(demo_images[:2], "en,zh")]


def test_a_vocabulary_url_evaluates(url_run, four_step_run, tmp_path):
    workdir = url_run
    config = _config(workdir)
    assert config.vocab.path.startswith("file://")
    out, scores, _ = evaluate.evaluate_checkpoint(config, workdir, names=["xm3600"],
                                                  langs="en", out=str(tmp_path / "eval"))
    assert scores["xm3600"]["en"] == evaluate.evaluate_checkpoint(
        _config(four_step_run.workdir), four_step_run.workdir, names=["xm3600"], langs="en",
        out=str(tmp_path / "eval_local"))[1]["xm3600"]["en"]


def test_a_vocabulary_url_exports(url_run, captioner, demo_images, tmp_path):
    path = str(tmp_path / "captioner.npz")
    export.main(["--workdir", url_run, "--out", path])
    assert [c.tokens for c in Captioner.from_exported(path).caption(demo_images[:2], "en,zh")] \
        == [c.tokens for c in captioner.caption(demo_images[:2], "en,zh")]


def test_an_unreadable_remote_vocabulary_is_one_error_line(four_step_run, demo_images, tmp_path):
    # Offline, without TensorFlow (gs:// has no file system then), as on a captioning machine.
    remote = "gs://no-such-bucket-of-this-repository/vocab.model"
    workdir = _with_vocab_path(four_step_run, tmp_path / "run", lambda _: remote)
    result = subprocess.run(
        [sys.executable, "-m", "tools.captioning", demo_images[0], "--workdir", workdir],
        cwd=tiny.REPO, env=tiny.no_tensorflow_env(str(tmp_path / "no_tf")), capture_output=True,
        text=True, timeout=300)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {remote} is remote and cannot be read here (")
    assert line.endswith("copy it to this machine and set vocab.path in the run's config.json "
                         "to the copy (the same as --config.vocab.path=/local/copy.model for "
                         "train.py)")


# Hand-edited config.json values: (where, key, value, what the error line says after the file).
HAND_EDITED = [
    ("vocab", "path", None, "config.vocab.path=None; expected a string"),
    ("vocab", "path", 5, "config.vocab.path=5; expected a string"),
    ("data", "langs", 5, "config.data.langs=5; expected a list of strings"),
    ("model.t5", "emb_dim", "32", "config.model.t5.emb_dim='32'; expected an integer >= 1"),
    ("data", "max_prompt_len", float("nan"),
     "config.data.max_prompt_len=nan; expected an integer in [1, 512]"),
    ("data", "max_target_len", -3,
     "config.data.max_target_len=-3; expected an integer in [1, 1024]"),
    ("data", "max_prompt_len", 1,
     "config.data.max_prompt_len=1 is too short for the prompt '<2en>' (3 tokens with EOS)"),
]


def test_hand_edited_config_values_are_one_error_line(four_step_run, demo_images, tmp_path,
                                                      capsys):
    workdir = four_step_run.copy_to(tmp_path / "run")
    original = run_config.load(workdir)
    file = run_config.path(workdir)
    for where, key, value, message in HAND_EDITED:
        saved = json.loads(json.dumps(original))
        node = saved
        for part in where.split("."):
            node = node[part]
        node[key] = value
        with open(file, "w", encoding="utf-8") as f:
            json.dump(saved, f)
        want = f"{file}: {message}"
        with pytest.raises(InputError) as raised:
            Captioner.from_run(workdir)
        assert str(raised.value) == want
        assert error_line(capsys, cli.main, [demo_images[0], "--workdir", workdir]) == \
            f"error: {want}\n"
        out = tmp_path / "m.npz"
        assert error_line(capsys, export.main, ["--workdir", workdir, "--out", str(out)]) == \
            f"error: {want}\n"
        assert not out.exists()
