"""train.py with its workdir on a full disk: one error line, exit 2, nothing but the newest steps
lost, and the same command resumes once there is room.

The first test runs train.py on a real tmpfs where the test may mount one (as root), filled so
that one checkpoint and a half fit (measured there with a copy of a checkpoint of the same model:
how a file system counts blocks differs between kernels); the second, in-process, makes the disk
that checkpointing sees report 2.5 MB less what the workdir holds.
"""

import errno
import os
import re
import shutil

import pytest

import train
from tests import tiny
from tests.tiny import tiny_config
from tests.training.saved_state import assert_same_params, read_metrics, read_saved_state
from training import checkpointing

OVERRIDES = {"evals.xm3600.every": 0, "total_steps": 10, "checkpoint.every": 2,
             "checkpoint.keep": 2}
FULL = (r"step 6: saving checkpoint {workdir}/checkpoints/6 failed: not enough free space: "
        r"needs about 1\.\d MB, 0\.\d MB available; make room, and the same command resumes "
        r"from step 4 \({workdir}/checkpoints/4\)")


@pytest.fixture
def small_fs(tmp_path):
    """An 8 MB tmpfs (skips the test where mounting is not allowed)."""
    with tiny.small_tmpfs(tmp_path / "fs", "8m") as folder:
        yield folder


def _fill_leaving_room_for(disk, checkpoint):
    """Fills `disk` so that a run of `checkpoint`'s model saves its first checkpoint and then
    finds too little room for the third while the first two are kept: free space left for
    the run's small files (8 blocks), one checkpoint as the disk counts it (the first save), and
    the bytes the space check asks for plus half a checkpoint (the second save passes, the
    third not)."""
    free = shutil.disk_usage(disk).free
    copy = shutil.copytree(checkpoint, disk / "measure")
    on_disk = free - shutil.disk_usage(disk).free
    asked = sum(f.stat().st_size for f in copy.rglob("*") if f.is_file())
    shutil.rmtree(copy)
    room = 8 * os.statvfs(disk).f_frsize + on_disk + asked + on_disk // 2
    filler = disk / "filler"
    filler.write_bytes(os.urandom(free - room))
    # Once more with the file system's own rounding of the filler taken into account.
    filler.write_bytes(os.urandom(free - room + shutil.disk_usage(disk).free - room))


def _train_steps(workdir):
    return [r["step"] for r in read_metrics(str(workdir)) if "train/loss" in r]


def test_full_disk_stops_train_py_with_one_line_then_the_same_command_resumes(
        tiny_demo, tmp_path, small_fs, four_step_run):
    config_file = tmp_path / "tiny_config.py"
    tiny.write_config_file(config_file, tiny_demo, **OVERRIDES)
    workdir = small_fs / "run"
    _fill_leaving_room_for(small_fs, os.path.join(four_step_run.workdir, "checkpoints", "2"))
    # The in-process test below trains the same config and loads these programs from the
    # compilation cache instead of compiling them again (or this one loads its programs).
    full = tiny.run(*tiny.train_args(config_file, workdir))
    assert full.code == 2, full.text[-3000:]
    lines = full.text.splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, lines
    assert re.fullmatch("error: " + FULL.format(workdir=re.escape(str(workdir))), errors[0])
    others = [line for line in lines if not line.startswith(
        ("error: ", "step ", "Starting", "Initialized the parameters", "Compiled the train"))]
    assert not others, others  # No tracebacks, no library logs.
    assert checkpointing.steps(str(workdir)) == [2, 4]
    step, state = read_saved_state(str(workdir))
    assert step == 4 and int(state["step"]) == 4
    assert _train_steps(workdir) == list(range(1, 7))
    # Room made: the same command resumes from step 4 and finishes.
    (small_fs / "filler").unlink()
    resumed = tiny.run(*tiny.train_args(config_file, workdir))
    assert resumed.code == 0, resumed.text[-3000:]
    assert f"Resuming {workdir} at step 4 of 10" in resumed.text
    assert checkpointing.steps(str(workdir)) == [8, 10]
    assert _train_steps(workdir) == list(range(1, 11))  # Each step once.


def test_full_disk_injected_stops_training_at_the_save(tiny_demo, tmp_path, monkeypatch):
    workdir = tmp_path / "run"
    capacity = {"bytes": 4_000_000 - 1_500_000}
    real_disk_usage = shutil.disk_usage

    def small_disk(path):
        used = sum(os.path.getsize(os.path.join(root, name))
                   for root, _, names in os.walk(workdir) for name in names)
        return real_disk_usage(path)._replace(free=max(capacity["bytes"] - used, 0))

    monkeypatch.setattr(checkpointing.shutil, "disk_usage", small_disk)
    config = tiny_config(str(tiny_demo), **OVERRIDES)
    with pytest.raises(checkpointing.SaveError, match=FULL.format(workdir=re.escape(str(workdir)))):
        train.train_and_evaluate(config, str(workdir))
    assert checkpointing.steps(str(workdir)) == [2, 4]
    assert _train_steps(workdir) == list(range(1, 7))
    capacity["bytes"] = 4_000_000
    state = train.train_and_evaluate(config, str(workdir))
    assert int(state["step"]) == 10
    assert checkpointing.steps(str(workdir)) == [8, 10]
    assert _train_steps(workdir) == list(range(1, 11))


def test_a_best_checkpoint_lost_to_a_full_disk_is_saved_again(tiny_demo, tmp_path, monkeypatch,
                                                              four_step_run):
    """The best save of step 2 fails in the background while the step's own checkpoint is
    saved: the error says the rerun resumes from that checkpoint, and the rerun saves the
    best checkpoint again from it (the state of the uninterrupted run, bit for bit)."""
    workdir, real_best_manager, failed = str(tmp_path / "run"), checkpointing.best_manager, []

    def best_manager_whose_write_fails(run, metric):
        mngr = real_best_manager(run, metric)
        finish = mngr.wait_until_finished

        def wait_until_finished():
            finish()
            if 2 in checkpointing.steps(run, best=True) and not failed:  # Nothing of it kept.
                failed.append(shutil.rmtree(os.path.join(run, "checkpoints_best", "2")))
                raise OSError(errno.ENOSPC, "No space left on device")
        mngr.wait_until_finished = wait_until_finished
        return mngr

    monkeypatch.setattr(checkpointing, "best_manager", best_manager_whose_write_fails)
    with pytest.raises(checkpointing.SaveError) as error:
        train.train_and_evaluate(four_step_run.config(), workdir)
    assert re.fullmatch(
        rf"step 2: saving checkpoint {workdir}/checkpoints_best/2 failed: no space left on the "
        rf"device \([\d.]+ MB free now, [\d.]+ MB when the save started, for about [\d.]+ MB\); "
        rf"make room, and the same command resumes from step 2 \({workdir}/checkpoints/2\) "
        rf"\(and saves the best checkpoint again if its evaluation is the best\)",
        str(error.value)), str(error.value)
    monkeypatch.undo()
    train.train_and_evaluate(four_step_run.config(), workdir)
    assert checkpointing.steps(workdir, best=True) == [2]
    expected = four_step_run.state(2)
    restored, _ = checkpointing.restore(workdir, expected["params"], step="best")
    assert_same_params({"params": restored}, expected)
    assert_same_params(read_saved_state(workdir, 4)[1],
                       four_step_run.state(4))
