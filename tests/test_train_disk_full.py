"""train.py with its workdir on a full disk: one error line, exit 2, nothing but the newest steps
lost, and the same command resumes once there is room.

The first test runs train.py on a real 4 MB tmpfs where the test may mount one (as root); the
second, in-process, makes the disk that checkpointing sees report 4 MB less what the workdir holds.
"""

import os
import re
import shutil

import pytest

import train
from tests import tiny
from tests.tiny import tiny_config
from tests.training.saved_state import read_metrics, read_saved_state
from training import checkpointing

OVERRIDES = {"evals.xm3600.every": 0, "total_steps": 10, "checkpoint.every": 2,
             "checkpoint.keep": 2}
FULL = (r"step 6: saving checkpoint {workdir}/checkpoints/6 failed: not enough free space: "
        r"needs about 1\.\d MB, 0\.\d MB available; make room, and the same command resumes "
        r"from step 4 \({workdir}/checkpoints/4\)")


@pytest.fixture
def small_fs(tmp_path):
    """A 4 MB tmpfs (skips the test where mounting is not allowed)."""
    with tiny.small_tmpfs(tmp_path / "fs", "4m") as folder:
        yield folder


def _train_steps(workdir):
    return [r["step"] for r in read_metrics(str(workdir)) if "train/loss" in r]


def test_full_disk_stops_train_py_with_one_line_and_the_same_command_resumes(
        tiny_demo, tmp_path, small_fs):
    config_file = tmp_path / "tiny_config.py"
    tiny.write_config_file(config_file, tiny_demo, **OVERRIDES)
    workdir = small_fs / "run"
    (small_fs / "filler").write_bytes(os.urandom(1_500_000))
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
