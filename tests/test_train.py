"""End-to-end tests of train.py on a tiny config: loop, metrics, resume, and bad input."""

import json
import os

import numpy as np
import pytest

import train
from data import pipeline
from data.pipeline import packing
from tests.tiny import tiny_config
from tests.training.saved_state import assert_same_params, read_metrics
from tools.captioning.inputs import to_unit_range
from training import checkpointing
from training import state as state_lib

# The tests of the shared four-step run read tiny_config's run, trained once for the test run.

def test_trains_every_step(four_step_run):
    records = read_metrics(four_step_run.workdir)
    steps = [r["step"] for r in records if "train/loss" in r]
    assert steps == [1, 2, 3, 4]
    for r in records:
        if "train/loss" in r:
            assert np.isfinite(r["train/loss"]) and r["learning_rate"] == pytest.approx(3e-3)


def _evals(workdir):
    return [r for r in read_metrics(workdir) if "eval/cider_d/avg" in r]


def test_evaluates_at_the_start_then_every_2_steps(four_step_run):
    evals = _evals(four_step_run.workdir)
    assert [r["step"] for r in evals] == [0, 2, 4]
    for r in evals:
        assert np.isclose(r["eval/cider_d/avg"], (r["eval/cider_d/en"] + r["eval/cider_d/zh"]) / 2)


def test_checkpoints_every_2_steps(four_step_run):
    assert checkpointing.steps(four_step_run.workdir) == [2, 4]


def test_keeps_the_best_checkpoint(four_step_run):
    workdir = four_step_run.workdir
    evals = _evals(workdir)
    # The best in-loop evaluation after training started (steps 2 and 4) is kept.
    (kept,) = checkpointing.steps(workdir, best=True)
    score = {r["step"]: r["eval/cider_d/avg"] for r in evals}
    assert kept in (2, 4) and score[kept] == max(score[2], score[4])


def test_saves_its_config(four_step_run):
    workdir = four_step_run.workdir
    with open(os.path.join(workdir, "config.json")) as f:
        assert json.load(f)["total_steps"] == 4


def _spy(monkeypatch, calls, module, name):
    """Records `module.name`'s calls in `calls`, by name."""
    real = getattr(module, name)

    def spied(*args, **kwargs):
        calls.append(name)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spied)


@pytest.fixture(scope="module")
def resumed_run(four_step_run, tmp_path_factory):
    """A run of 2 steps resumed to 4, trained once for the module: (workdir, the calls of
    the fresh run, those of the resumed run, the resumed run's state)."""
    fresh, again = [], []
    workdir = str(tmp_path_factory.mktemp("resumed") / "run")
    with pytest.MonkeyPatch.context() as monkeypatch:
        for calls, config in ((fresh, four_step_run.config(total_steps=2)),
                              (again, four_step_run.config())):
            for module, name in ((pipeline, "train_iterator"), (checkpointing, "restore"),
                                 (state_lib, "init_state"), (train, "compile_train_step")):
                _spy(monkeypatch, calls, module, name)
            state = train.train_and_evaluate(config, workdir)
            monkeypatch.undo()
    return workdir, fresh, again, state


# The input starts once the state is restored or initialized, at its step (decided once).

def test_a_fresh_runs_step_compiles_while_the_state_initializes(resumed_run):
    # A fresh run's step compiles (in a thread) while the state initializes.
    _, fresh, _, _ = resumed_run
    assert fresh == ["compile_train_step", "restore", "init_state", "train_iterator"]


def test_a_resumed_runs_input_starts_at_the_restored_step(resumed_run):
    # A resumed run's step compiles after the restore.
    _, _, again, _ = resumed_run
    assert again == ["restore", "train_iterator", "compile_train_step"]


def test_a_resume_is_bit_for_bit(four_step_run, resumed_run):
    # A run resumed at step 2 ends as the shared four-step run.
    _, _, _, resumed = resumed_run
    assert_same_params(four_step_run.state(4), resumed)


def test_a_resumed_run_logs_each_step_once(resumed_run):
    workdir, _, _, _ = resumed_run
    # One record per step and kind, also across the restart.
    train_steps = [r["step"] for r in read_metrics(workdir) if "train/loss" in r]
    assert train_steps == [1, 2, 3, 4]


def test_a_packed_run_counts_the_examples_left_out_with_a_warning(tiny_demo, tmp_path,
                                                                 monkeypatch, capsys):
    monkeypatch.setattr(packing, "rows_per_group", lambda *args: 1)  # Too few: some left out.
    config = tiny_config(tiny_demo, **{"data.pack": True, "total_steps": 2,
                                       "evals.xm3600.every": 0})
    train.train_and_evaluate(config, str(tmp_path / "run"))
    records = [r for r in read_metrics(str(tmp_path / "run")) if "train/loss" in r]
    # 8 examples of up to 16 caption tokens cannot all fit one row of 16.
    assert [0 < r["train/pack_dropped"] < 8 for r in records] == [True, True]
    assert all(np.isfinite(r["train/loss"]) for r in records)
    out = capsys.readouterr().out
    assert "Packing 8 examples a step into 1 rows" in out
    assert "did not fit the packed rows and were left out of the loss" in out


def test_non_finite_loss_stops_keeping_the_last_good_checkpoint(tiny_demo, tmp_path,
                                                                monkeypatch):
    real = pipeline.train_iterator

    def poisoned(*args, **kwargs):
        for step, batch in enumerate(real(*args, **kwargs), start=kwargs["start_step"] + 1):
            # Float images (the model takes them as well as uint8 pixels) can carry a NaN.
            batch = dict(batch, image=to_unit_range(batch["image"]))
            if step == 3:
                batch["image"] = np.full_like(batch["image"], np.nan)
            yield batch

    real_shapes = pipeline.batch_shapes

    def float_images(*args):  # What the step compiles for.
        shapes = real_shapes(*args)
        return dict(shapes, image=(shapes["image"][0], np.float32))

    monkeypatch.setattr(pipeline, "train_iterator", poisoned)
    monkeypatch.setattr(pipeline, "batch_shapes", float_images)
    workdir = str(tmp_path / "run")
    with pytest.raises(train.TrainingError, match=r"step 3: non-finite train/loss=nan"):
        train.train_and_evaluate(tiny_config(tiny_demo), workdir)
    assert checkpointing.manager(workdir).all_steps() == [2]


def test_data_that_is_not_built_is_one_clear_error(tiny_demo, tmp_path):
    config = tiny_config(str(tiny_demo), **{"data.tfds_data_dir": str(tmp_path / "built")})
    workdir = tmp_path / "run"
    with pytest.raises(train.TrainingError, match=(
            r"^config.data: coco35l is not built for these languages in .*built: missing the "
            r"images and the captions of en, es, hi, zh \(about [\d.]+ [KM]B\); build it with: "
            r"python -m tools.build_data coco35l --manual_dir .*coco35l --data_dir .*built --langs "
            r"en,es,hi,zh \(or run train.py with --build_data")):
        train.train_and_evaluate(config, str(workdir))
    assert not (workdir / "metrics.jsonl").exists()
    assert not (tmp_path / "built").exists()  # Nothing was built unasked.
