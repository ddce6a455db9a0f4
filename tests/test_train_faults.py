"""Faults and bad input in train.py: nothing already written is lost, every error is one line."""

import json
import os
import pathlib
import re
import shutil
import threading
import time

import pytest

import train
from tests import tiny
from tests.tiny import tiny_config
from tests.training import saved_state
from tests.training.saved_state import assert_same_params, read_metrics
from training import checkpointing


def _one_error_line(result):
    """The process failed with exit status 2 and exactly one `error:` line, no traceback."""
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr[-2000:]
    return errors[0]


def _copy(four_step_run, tmp_path):
    """A copy of the shared four-step run (checkpoints 2 and 4), for a test that harms it."""
    return pathlib.Path(four_step_run.copy_to(tmp_path / "run"))


# ------------------------------------------------------- nothing is lost ----
def test_failed_resume_leaves_the_config_with_the_checkpoints_as_they_were(four_step_run, tmp_path):
    workdir = _copy(four_step_run, tmp_path)
    before = (workdir / "config.json").read_bytes()
    wider = four_step_run.config(**{"evals.xm3600.every": 0, "total_steps": 6,
                                    "model.vit.width": 64})
    with pytest.raises(train.TrainingError, match=r"checkpoints/4 \(step 4\) does not fit the "
                                                  r"model of the config: img/.*\(32,\) -> \(64,\)"
                                                  r".*changed config fields: model.vit.width"):
        train.train_and_evaluate(wider, str(workdir), allow_change=True)
    assert (workdir / "config.json").read_bytes() == before
    assert checkpointing.steps(str(workdir)) == [2, 4]
    # The original config still resumes.
    state = train.train_and_evaluate(
        four_step_run.config(**{"evals.xm3600.every": 0, "total_steps": 6}), str(workdir))
    assert int(state["step"]) == 6


@pytest.mark.parametrize("damage", ["truncated data file", "deleted _METADATA"])
def test_a_damaged_latest_checkpoint_is_set_aside_for_the_one_before(four_step_run,
                                                                        tmp_path, capsys,
                                                                        damage):
    workdir = _copy(four_step_run, tmp_path)
    if damage == "truncated data file":
        saved_state.truncate_largest_data_file(workdir / "checkpoints" / "4")
    else:
        (workdir / "checkpoints" / "4" / "default" / "_METADATA").unlink()
    state = train.train_and_evaluate(four_step_run.config(**{"evals.xm3600.every": 0}),
                                     str(workdir))
    out = capsys.readouterr().out
    assert re.search(r"warning: checkpoint .*/checkpoints/4 \(step 4\) is damaged: .*; moved "
                     r"it to .*/checkpoints_damaged/4 and resuming from step 2", out), out
    assert "Resuming" in out and "at step 2 of 4" in out
    assert (workdir / "checkpoints_damaged" / "4" / "default").is_dir()  # Nothing deleted.
    steps = [r["step"] for r in read_metrics(str(workdir)) if "train/loss" in r]
    assert steps == [1, 2, 3, 4]
    # The input, started at step 4 (the newest folder) before the restore fell back to step
    # 2, was started again there: steps 3 and 4 are those of the run without damage.
    assert_same_params(state, four_step_run.state(4))


def test_cut_short_last_metrics_line_is_dropped_on_resume(four_step_run, tmp_path):
    workdir = _copy(four_step_run, tmp_path)
    with open(workdir / "metrics.jsonl", "a", encoding="utf-8") as f:
        f.write('{"step": 5, "train/lo')  # A crash while writing.
    assert [r["step"] for r in read_metrics(str(workdir))][-1] == 4
    train.train_and_evaluate(
        four_step_run.config(**{"evals.xm3600.every": 0, "total_steps": 5}), str(workdir))
    steps = [r["step"] for r in read_metrics(str(workdir)) if "train/loss" in r]
    assert steps == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("cut", ["inside the training record", "at the start of the "
                                 "evaluation record", "inside the evaluation record"])
def test_metrics_cut_in_the_restored_steps_own_records_are_logged_again(four_step_run,
                                                                         tmp_path, cut):
    """metrics.jsonl cut short in a record of step 4, whose checkpoint is the newest: the run
    resumes from step 2 (checkpoint 4 is set aside), so step 4's records are logged again and
    every step has each of its records once."""
    workdir = four_step_run.copy_to(tmp_path / "run")
    path = tmp_path / "run" / "metrics.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    train_4, eval_4 = (i for i, line in enumerate(lines) if line.startswith('{"step": 4'))
    line = lines[train_4] if cut.startswith("inside the training") else lines[eval_4]
    kept = 4 if cut.startswith("at the start") else len(line) // 2
    path.write_text("".join(lines[:lines.index(line)]) + line[:kept])
    state = train.train_and_evaluate(four_step_run.config(), workdir)
    records = read_metrics(workdir)
    assert [r["step"] for r in records if "train/loss" in r] == [1, 2, 3, 4]
    assert [r["step"] for r in records if "eval/cider_d/avg" in r] == [0, 2, 4]
    assert_same_params(state, four_step_run.state(4))
    assert checkpointing.steps(workdir) == [2, 4]
    assert os.listdir(tmp_path / "run" / "checkpoints_damaged") == ["4"]


def test_malformed_metrics_line_in_the_middle_is_a_clear_error(four_step_run, tmp_path):
    workdir = _copy(four_step_run, tmp_path)
    lines = (workdir / "metrics.jsonl").read_text().splitlines(keepends=True)
    lines.insert(1, "not json\n")
    (workdir / "metrics.jsonl").write_text("".join(lines))
    with pytest.raises(train.TrainingError, match=r"metrics.jsonl:2: not a metrics record"):
        train.train_and_evaluate(
            four_step_run.config(**{"evals.xm3600.every": 0, "total_steps": 5}),
            str(workdir))
    assert (workdir / "metrics.jsonl").read_text() == "".join(lines)


# ------------------------------------------------------ one-line errors ----
def test_unwritable_workdir_is_refused(tiny_demo, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(train.TrainingError, match=rf"--workdir {blocker}/run: cannot write "
                                                  r"there \(Not a directory\)"):
        train.train_and_evaluate(tiny_config(str(tiny_demo)), str(blocker / "run"))


@pytest.mark.parametrize("args,message", [
    (["--config.total_step=20"],
     r"--config.total_step=20: the config has no field 'total_step' \(did you mean "
     r"total_steps\?\)"),
    (["--config.total_steps=abc"], r"--config.total_steps=abc: invalid literal for int"),
    (["--config.evals.xm3600.langs=en,xx"],
     r"config.evals.xm3600.langs: unknown language 'xx'; known: ar, bn"),
    (["--config.model.t5.no_such_field=3"], r"the config has no field 'no_such_field'"),
])
def test_bad_command_line_is_one_error_line(config_file, tmp_path, args, message):
    workdir = tmp_path / "run"
    line = _one_error_line(tiny.train_main(config_file, workdir, *args))
    assert re.search(message, line), line
    assert not workdir.exists()


def test_changed_batch_size_on_resume_is_one_error_line(config_file, four_step_run, tmp_path):
    workdir = _copy(four_step_run, tmp_path)
    line = _one_error_line(tiny.train_main(config_file, workdir, "--config.batch_size=4"))
    assert re.search(r"holds checkpoints of a run with another config; changed fields: "
                     r"batch_size: 8 -> 4\. .*--allow_config_change", line), line


def test_corrupt_training_image_is_found_before_the_first_evaluation(tiny_demo, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(tiny_demo, data)
    jpeg = sorted((data / "coco35l" / "train2014").iterdir())[0]
    jpeg.write_bytes(b"\xff\xd8 not a jpeg")
    shutil.rmtree(data / "tfds")  # Built again from the release files.
    config = tiny_config(str(data))
    workdir = tmp_path / "run"
    with pytest.raises(train.TrainingError, match=rf"corrupt image .*{jpeg.stem[-6:]}.*"
                                                  r"--config.data.corrupt_images=skip"):
        train.train_and_evaluate(config, str(workdir), build_data=True)
    assert not (workdir / "metrics.jsonl").exists()  # No evaluation ran first.
    skipping = tiny_config(str(data), **{"data.corrupt_images": "skip", "total_steps": 2})
    train.train_and_evaluate(skipping, str(tmp_path / "skipping"), build_data=True)
    assert checkpointing.steps(str(tmp_path / "skipping")) == [2]


# --------------------------------------------------------------- console ----
def test_console_shows_only_progress_evaluations_resumption(config_file, tmp_path):
    workdir = tmp_path / "run"
    first = tiny.run(*tiny.train_args(config_file, workdir, "--config.total_steps=2"))
    assert first.code == 0, first.text[-2000:]
    second = tiny.run(*tiny.train_args(config_file, workdir, "--config.total_steps=4"))
    assert second.code == 0, second.text[-2000:]
    for result, opening in ((first, "Starting"), (second, "Resuming")):
        lines = result.text.splitlines()
        assert lines[0].startswith(f"{opening} {workdir} at step"), lines
        for line in lines[1:]:  # Progress and evaluation lines, nothing from the libraries.
            assert re.match(r"step \d+(/\d+ \||  ?evaluation:)|(Initialized the parameters|"
                            r"Compiled the train step) in [\d.]+ s \(persistent cache: ",
                            line), line
    assert json.loads((workdir / "config.json").read_text())["total_steps"] == 4
    # --verbosity brings the libraries' logs (and the config) back. In the test process: what
    # a new process alone shows is checked above; this is one more run of a finished workdir.
    verbose = tiny.train_main(config_file, workdir, "--config.total_steps=4", "--verbosity=0")
    assert verbose.returncode == 0, verbose.stderr[-2000:]
    assert "Config:" in verbose.stderr



def test_an_error_while_the_step_compiles_waits_for_the_compile(tiny_demo, tmp_path,
                                                                monkeypatch):
    """A bad pretrained checkpoint is read while the step compiles in its thread: the error
    waits for that thread, so that the interpreter never exits under a running compile (which
    aborts, exit 134, after the error line)."""
    ended = threading.Event()
    lower = train.lower_train_step

    class SlowCompile:
        def __init__(self, lowered):
            self.lowered = lowered

        def compile(self):
            time.sleep(2)
            compiled = self.lowered.compile()
            ended.set()
            return compiled

    def unreadable(*args, **kwargs):
        raise ValueError("init.mt5: not a T5X checkpoint")

    monkeypatch.setattr(train, "lower_train_step", lambda *args: SlowCompile(lower(*args)))
    monkeypatch.setattr(train.pretrained, "initialize", unreadable)
    with pytest.raises(train.TrainingError, match="init.mt5: not a T5X checkpoint"):
        train.train_and_evaluate(tiny_config(str(tiny_demo)), str(tmp_path / "run"))
    assert ended.is_set()
