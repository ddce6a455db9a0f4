"""Bad input to python -m evaluation.evaluate: one `error:` line before any work, results kept.
The flags are checked on a --workdir that does not exist; full disks are a small tmpfs."""

import os
import re
import shutil

import ml_collections
import pytest

import train
from evaluation import evaluate, results_folder
from evaluation import evaluators as evaluators_lib
from tests import cli, tiny
from tests.evaluation import full_disk
from tests.tiny import tiny_config


@pytest.fixture(scope="module")
def config_path(tiny_demo, tmp_path_factory):
    path = tmp_path_factory.mktemp("eval_inputs") / "tiny_config.py"
    return tiny.write_config_file(path, tiny_demo, **{"total_steps": 1, "checkpoint.every": 1,
                                                      "evals.xm3600.every": 0})


@pytest.fixture(scope="module")
def tiny_run(two_step_run, tmp_path_factory):
    """A run whose newest checkpoint is step 1: the test run's shared `two_step_run` copied
    without its step-2 checkpoint (the tests write into it)."""
    workdir = two_step_run.copy_to(tmp_path_factory.mktemp("eval_inputs_run") / "run")
    shutil.rmtree(os.path.join(workdir, "checkpoints", "2"))
    return workdir


def _fail(capsys, *args):
    """Runs the tool, expecting status 2; returns its stderr lines."""
    lines = cli.error_lines(capsys, evaluate.main, ["evaluation.evaluate", *args])
    return [line for line in lines if line.strip()]


@pytest.mark.parametrize("args, message", [
    (["--decode=beam", "--alpha=nan"], r"--alpha: length-penalty alpha must be a finite number"),
    (["--decode=beam", "--alpha=inf"], r"--alpha: .* finite number >= 0, got inf"),
    (["--decode=beam", "--alpha=-0.5"], r"--alpha: .* >= 0, got -0.5"),
    (["--decode=beam", "--beam_size=0"], r"--beam_size: beam size must be an integer >= 1"),
    (["--alpha=0.3"], r"--alpha apply to --decode=beam only"),
    (["--decode=greedy", "--beam_size=4"], r"--beam_size: applies to beam decoding only, not "
                                           r"to greedy"),
    (["--decode=beam", "--alpha=50"], r"--alpha: length-penalty alpha must be at most 10"),
    (["--step=-1"], r"--step must be >= 0, got -1"),
    (["stray"], r"unexpected argument 'stray'"),
    (["--config.evals.xm3600.max_images=-3"],
     r"config.evals.xm3600.max_images=-3; expected an integer >= 1"),
    (["--config.evals.xm3600.max_images=0"], r"config.evals.xm3600.max_images=0; expected"),
])
def test_a_bad_flag_is_one_error_line_before_any_work(config_path, tmp_path, capsys, args, message):
    lines = _fail(capsys, "--config", config_path, "--workdir", str(tmp_path / "no_run"),
                  "--out", str(tmp_path / "out"), *args)
    assert len(lines) == 1 and lines[0].startswith("error: ") and re.search(message, lines[0]), \
        lines
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("make_out, message", [
    (lambda tmp: "/proc/x", r"--out /proc/x: cannot write there"),
    (lambda tmp: (tmp / "file").write_text("x") and str(tmp / "file"), r"--out .*file is a file"),
    (lambda tmp: (tmp / "file").write_text("x") and str(tmp / "file" / "sub"),
     r"--out .*file/sub: cannot write there"),
])
def test_a_bad_out_is_one_error_line_before_any_work(config_path, tmp_path, capsys, make_out,
                                                     message):
    out = make_out(tmp_path)
    # No run at --workdir: an error about --out shows it came before the checkpoint was read.
    lines = _fail(capsys, "--config", config_path, "--workdir", str(tmp_path / "no_run"),
                  "--out", out)
    assert len(lines) == 1 and re.search(message, lines[0]), lines


def test_an_out_created_for_a_run_that_fails_is_removed(config_path, tmp_path, capsys):
    lines = _fail(capsys, "--config", config_path, "--workdir", str(tmp_path / "no_run"),
                  "--out", str(tmp_path / "new" / "out"))
    assert lines[0].startswith("error: no checkpoint in")
    assert not (tmp_path / "new" / "out").exists()


def test_the_default_results_folder_is_checked_before_the_evaluation(config_path, tiny_run, capsys):
    blocker = os.path.join(tiny_run, "eval_step1")
    with open(blocker, "w") as f:
        f.write("not a folder")
    try:
        lines = _fail(capsys, "--config", config_path, "--workdir", tiny_run, "--evals",
                      "xm3600", "--langs", "en")
    finally:
        os.remove(blocker)
    assert len(lines) == 1 and re.search(r"results folder .*eval_step1 is a file", lines[0])


def test_a_full_disk_is_refused_before_the_evaluation(config_path, tiny_run, tmp_path, capsys):
    with full_disk.full_disk(tmp_path / "disk") as disk:
        lines = _fail(capsys, "--config", config_path, "--workdir", tiny_run, "--evals",
                      "xm3600", "--langs", "en", "--out", str(disk / "out"))
        assert full_disk.listing(disk) == {}
    assert len(lines) == 1 and re.search(r"--out .*disk/out: 0.0 MB free there, and the "
                                         r"results need up to 1.\d MB \(8 captions", lines[0])


def test_a_disk_that_fills_during_the_evaluation_leaves_the_earlier_results(
        config_path, tiny_run, tmp_path, capsys, monkeypatch):
    args = ["evaluation.evaluate", "--config", config_path, "--workdir", tiny_run, "--evals",
            "xm3600", "--langs", "en"]
    with tiny.small_tmpfs(tmp_path / "disk", "4m") as disk:
        out = disk / "out"
        evaluate.main([*args, "--out", str(out)])
        before = {name: (out / name).read_bytes() for name in os.listdir(out)}
        check_room = results_folder.check_room

        def room_then_none(*check_args, **kwargs):  # Another process fills the disk.
            check_room(*check_args, **kwargs)
            full_disk.fill(disk)

        monkeypatch.setattr(results_folder, "check_room", room_then_none)
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            evaluate.main([*args, "--out", str(out), "--name", "second"])
        # The earlier results, whole; no half folder beside them.
        assert {name: (out / name).read_bytes() for name in os.listdir(out)} == before
        assert sorted(os.listdir(disk)) == [".filler", "out"]
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.startswith("error:")]
    match = re.search(r"cannot write the results into .*out \(No space left on device\); the "
                      r"results are in (\S+) instead", lines[0])
    assert len(lines) == 1 and match, captured.err
    assert sorted(os.listdir(match.group(1))) == sorted(before)  # Complete, elsewhere.
    assert re.search(r"^xm3600: en \d", captured.out, re.M)  # The scores, printed too.


def test_train_gets_the_evaluators_checks(tiny_demo):
    config = tiny_config(str(tiny_demo), **{"evals.xm3600.max_images": -3})
    with pytest.raises(ValueError, match=r"config.evals.xm3600.max_images=-3"):
        evaluators_lib.check_configs(config.evals)
    with pytest.raises(ValueError, match=r"config.evals.xm3600.max_images=-3"):
        train.check_config(config)


def test_an_evaluators_own_fields_are_checked(tiny_demo):
    config = tiny_config(str(tiny_demo))  # an evaluator's own fields
    config.unlock()
    config.evals.vifidel = ml_collections.ConfigDict({
        "type": "tools.vifidel.evaluator:Xm3600Vifidel",
        "every": 0, "data_dir": f"{tiny_demo}/xm3600", "langs": ("en",),
        "batch_size": 4, "max_decode_len": 8, "vectors": "v/{lang}.vec",
        "min_confidence": float("nan")})
    with pytest.raises(ValueError, match=r"config.evals.vifidel: --min-confidence must be in"):
        evaluators_lib.check_configs(config.evals)


@pytest.mark.parametrize("fields, message", [
    ({"alpha": float("nan"), "decode": "beam"},
     r"config.evals.xm3600.alpha: length-penalty alpha must be a finite number >= 0, got nan"),
    ({"beam_size": 0, "decode": "beam"}, r"config.evals.xm3600.beam_size: beam size must be an "
                                         r"integer >= 1, got 0"),
    ({"beam_size": 4}, r"config.evals.xm3600.beam_size: applies to beam decoding only, not to "
                       r"greedy"),
    ({"decode": "sample"}, r"config.evals.xm3600.decode: an evaluation decodes greedy or beam"),
])
def test_the_config_decoding_is_checked_with_the_config(tiny_demo, fields, message):
    config = tiny_config(str(tiny_demo))
    config.unlock()
    config.evals.xm3600.update(fields)
    with pytest.raises(ValueError, match=message):
        evaluators_lib.check_configs(config.evals)


def test_missing_evaluation_data_is_named_by_its_field(config_path, tiny_run, tmp_path, capsys):
    lines = _fail(capsys, "--config", config_path, "--workdir", tiny_run, "--out",
                  str(tmp_path / "out"), "--config.evals.xm3600.data_dir=/nonexistent")
    assert lines == ["error: config.evals.xm3600: XM3600 captions file not found: "
                     "/nonexistent/captions.jsonl"], lines


@pytest.mark.parametrize("args, message", [
    (["--config.evals.xm3600.batch_size=100000000"],
     r"error: config.evals.xm3600.batch_size: batch 100000000 x 8 tokens: decoding needs about "
     r"[\d.]+ GiB, more than the [\d.]+ GiB of memory here; give fewer"),
    (["--decode=beam", "--beam_size=100000000"],
     r"error: --beam_size: 100000000 beams x batch 4 x 8 tokens: decoding needs about"),
    (["--config.evals.xm3600.max_decode_len=1000"],
     r"error: config.evals.xm3600.max_decode_len: 1000 is longer than the run was trained or "
     r"evaluated for \(at most 16: "),
], ids=["batch", "beams", "length"])
def test_a_decoding_too_large_is_one_error_line_before_anything_is_allocated(
        config_path, tiny_run, tmp_path, capsys, args, message):
    out = tmp_path / "out"
    lines = _fail(capsys, "--config", config_path, "--workdir", tiny_run, "--evals", "xm3600",
                  "--out", str(out), *args)
    assert len(lines) == 1 and re.match(message, lines[0]), lines
    assert not out.exists()
