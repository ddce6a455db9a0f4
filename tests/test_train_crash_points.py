"""A run killed right after any one of its writes resumes to the same parameters, bit for bit.

crash_points.py marks every write that a resumed run reads back (checkpoints, best
checkpoints, metrics.jsonl records and repairs, config.json, damaged checkpoints moved aside, a
lost best checkpoint saved again); with CRASH_AT=<n> the trainer SIGKILLs itself right
after the n-th. The scenario passes through every kind of write: the shared four-step run, with
its newest checkpoint damaged, its metrics.jsonl cut short in its last record and its best
checkpoint gone, is resumed with an evaluation at step 3 (a best checkpoint between two regular
ones) and at step 4 (a best and a regular checkpoint of the same step). Each test kills it at
one point, resumes it, and checks the parameters against the shared run's (trained without a
stop) and that no step has two records of a kind in metrics.jsonl.
"""

import shutil

import pytest

import files
import train
from tests import tiny
from tests.training.saved_state import assert_same_params, read_metrics, read_saved_state
from training import checkpointing
from training import workdir as workdir_lib

# The resumed run: evaluations at steps 3 and 4 (every 3, and the last step; of one batch), a
# training record at step 4 (every 2), checkpoints at 4 (every 2; the one at 2 is restored).
OVERRIDES = {"log_every": 2, "evals.xm3600.every": 3, "evals.xm3600.langs": ("en",),
             "evals.xm3600.max_images": 4}
# Every write of the resumed run, in order (the first test checks that it is the whole list).
POINTS = (
    "checkpoints_damaged/4",
    "metrics.jsonl.damaged",
    "metrics.jsonl repaired",
    "config.json",
    "checkpoints_best/2",
    "metrics.jsonl step 3 perf",
    "metrics.jsonl step 3 eval",
    "checkpoints_best/3",
    "metrics.jsonl step 4 perf train",
    "metrics.jsonl step 4 eval",
    "checkpoints_best/4",
    "checkpoints/4 lease confirmed",  # Its commit next: a kill leaves an unfinished folder.
    "checkpoints/4",
)


def _damaged_copy(four_step_run, folder):
    """The shared four-step run with its newest checkpoint damaged (no _METADATA), its
    metrics.jsonl cut short inside its last record (of step 4) and without its best checkpoint
    (of step 2: the resumed run saves it again from checkpoints/2)."""
    workdir = four_step_run.copy_to(folder / "run")
    (folder / "run" / "checkpoints" / "4" / "default" / "_METADATA").unlink()
    metrics = (folder / "run" / "metrics.jsonl").read_bytes()
    (folder / "run" / "metrics.jsonl").write_bytes(metrics[:-20])
    shutil.rmtree(folder / "run" / "checkpoints_best")
    return workdir


def _run_until(four_step_run, workdir, crash_at):
    """Resumes `workdir` in a new process that kills itself at point `crash_at` (0: none);
    returns (exit status, the points it passed)."""
    result = tiny.run(*tiny.train_script(four_step_run.data_dir, workdir, **OVERRIDES),
                      env={"CRASH_AT": str(crash_at)})
    passed = [line.split(": ", 1)[1] for line in result.text.splitlines()
              if line.startswith("crash point ")]
    return result, passed


def _check_params(four_step_run, workdir):
    """The run ended at step 4 with the parameters of the shared run, bit for bit."""
    expected = four_step_run.state(4)
    step, state = read_saved_state(workdir)
    assert step == 4
    assert_same_params(state, expected)


def _check_resumed(four_step_run, workdir):
    """The run's parameters are the shared run's, and each step has one record of each kind."""
    _check_params(four_step_run, workdir)
    records = read_metrics(workdir)
    steps = {name: [r["step"] for r in records if name in r]
             for name in ("train/loss", "eval/cider_d/avg", "perf/compile_s")}
    assert steps == {"train/loss": [1, 2, 4], "eval/cider_d/avg": [0, 2, 3, 4],
                     "perf/compile_s": [1, 3]}


def test_the_points_are_every_write_of_the_run(four_step_run, tmp_path):
    workdir = _damaged_copy(four_step_run, tmp_path)
    result, passed = _run_until(four_step_run, workdir, 0)
    assert result.code == 0, result.text[-3000:]
    assert tuple(passed) == POINTS
    _check_resumed(four_step_run, workdir)


@pytest.mark.parametrize("point", POINTS)
def test_a_run_killed_after_a_write_resumes_bit_for_bit(four_step_run, tmp_path, point):
    workdir = _damaged_copy(four_step_run, tmp_path)
    result, passed = _run_until(four_step_run, workdir, POINTS.index(point) + 1)
    assert result.code == -9, result.text[-3000:]  # SIGKILL
    assert passed[-1] == point, passed
    # The same run resumes (here, in the test process) and finishes.
    train.train_and_evaluate(four_step_run.config(**OVERRIDES), workdir)
    _check_resumed(four_step_run, workdir)


def test_a_best_checkpoint_of_the_step_being_saved_is_kept(four_step_run, config_file, tmp_path):
    """The issue's reproduction: the newest checkpoint left half-written (as orbax's temporary
    folder) while the best checkpoint of its step is complete; the same command resumes."""
    workdir = four_step_run.copy_to(tmp_path / "run")
    assert checkpointing.steps(workdir, best=True) == [2]  # Its best evaluation.
    shutil.rmtree(f"{workdir}/checkpoints/4")
    shutil.move(f"{workdir}/checkpoints/2", f"{workdir}/checkpoints/2.orbax-checkpoint-tmp-1")
    result = tiny.train_main(config_file, workdir)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Starting {workdir} at step 0 of 4" in result.stdout
    _check_params(four_step_run, workdir)
    train_steps = [r["step"] for r in read_metrics(workdir) if "train/loss" in r]
    assert train_steps == [1, 2, 3, 4]


# ---------------------------------------------------- writes beyond the loop ----
# A results folder replaced (evaluation.evaluate's and tools.table8's folders) and a
# workdir lock made again after `rm .lock`: a process killed after each write loses nothing.
SWAP = """import sys, files
with files.replacing_folder(sys.argv[1]) as folder:
    open(folder + "/scores.json", "w").write("new")
"""
LOCK_LOST = """import os, sys
from training import workdir
workdir.prepare(sys.argv[1])
workdir.lock(sys.argv[1])
os.remove(os.path.join(sys.argv[1], ".lock"))
workdir.check()
"""


@pytest.mark.parametrize("crash_at", [1, 2])
def test_a_results_folder_swap_killed_after_a_write_keeps_the_new_one(tmp_path, crash_at):
    results = tmp_path / "eval_step8"
    results.mkdir()
    (results / "scores.json").write_text("old")
    listed = tiny.run("-c", SWAP, str(results), env={"CRASH_AT": "0"})
    assert listed.code == 0 and listed.text.splitlines() == [
        "crash point 1: eval_step8 moved aside", "crash point 2: eval_step8 renamed in"]
    (results / "scores.json").write_text("old")
    killed = tiny.run("-c", SWAP, str(results), env={"CRASH_AT": str(crash_at)})
    assert killed.code == -9, killed.text
    # What the tools do before they read or write the folder: the new one, written whole.
    said = files.recover_folder(results)
    assert (results / "scores.json").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval_step8"]
    assert said == ("" if crash_at == 2 else f"{results}: an interrupted replacement finished: "
                    f"the new folder, written whole, renamed in")


def test_a_trainer_killed_after_making_its_lock_again_leaves_it_to_the_next(tmp_path):
    killed = tiny.run("-c", LOCK_LOST, str(tmp_path), env={"CRASH_AT": "1"})
    assert killed.code == -9 and "crash point 1: .lock made again" in killed.text, killed.text
    note = workdir_lib.lock(str(tmp_path))
    try:
        assert note.startswith(f"note: {tmp_path}/.lock was left by a trainer that is no longer "
                               f"running (pid {killed.pid} on host "), note
    finally:
        workdir_lib.release(str(tmp_path))
