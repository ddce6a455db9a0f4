"""One trainer per workdir: a second train.py is refused in one line naming the first.

The lock (training/workdir.py) is a flock on `<workdir>/.lock`, which the kernel
releases whatever way its process ends; a lock file left by a dead process is
taken over with a note.
"""

import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys

import pytest

from tests import tiny
from tests.training.metrics_files import read_metrics
from training import checkpointing
from training import workdir as workdir_lib

HOLDER = """
import sys, time
from training import workdir
workdir.lock(sys.argv[1])
print("locked", flush=True)
time.sleep(60)
"""


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid  # Reaped: no process of that pid (pids are not reused this fast).


def test_two_trainers_on_one_workdir_the_second_is_refused(tiny_demo, tmp_path):
    config_file = tiny.write_config_file(tmp_path / "tiny_config.py", tiny_demo, **{
        "evals.xm3600.every": 0, "total_steps": 100000, "checkpoint.every": 1000000})
    workdir = tmp_path / "run"
    first = tiny.start(*tiny.train_args(config_file, workdir))
    try:
        assert first.wait_for_line(r"^step \d+/"), first.text
        second = tiny.run(*tiny.train_args(config_file, workdir))
        assert first.proc.poll() is None, first.text  # Still training.
        assert second.code == 2, second.text[-3000:]
        out = second.text.splitlines()
        assert len(out) == 1, out[:40]
        assert out[0].startswith(f"error: --workdir {workdir} is in use by another trainer "
                                 f"(pid {first.pid} on host {socket.gethostname()}, started "), out
        assert "use another --workdir" in out[0]
        first.signal(signal.SIGTERM)  # The first saves and exits normally.
        first.finish(300)
    finally:
        if first.proc.poll() is None:
            first.proc.kill()
    assert first.code == 0, first.text[-3000:]
    saved = checkpointing.steps(str(workdir))
    assert len(saved) == 1
    steps = [r["step"] for r in read_metrics(str(workdir)) if "train/loss" in r]
    assert steps == list(range(1, saved[0] + 1))  # Each step once.
    assert (workdir / ".lock").read_text() == ""  # Released.


def test_a_live_holder_is_named_and_nothing_is_changed(tmp_path):
    workdir = tmp_path / "run"
    workdir.mkdir()
    holder = tiny.start("-c", HOLDER, workdir)
    try:
        assert holder.wait_for_line("^locked$"), holder.text
        before = (workdir / ".lock").read_text()
        with pytest.raises(workdir_lib.WorkdirError,
                           match=rf"is in use by another trainer \(pid {holder.pid} on host "
                                 rf"{socket.gethostname()}, started \d{{4}}-"):
            workdir_lib.lock(str(workdir))
        assert (workdir / ".lock").read_text() == before
        assert sorted(os.listdir(workdir)) == [".lock"]
    finally:
        holder.proc.kill()
        holder.finish()
    # Its process gone (killed: no release), the lock is free and taken over with a note.
    note = workdir_lib.lock(str(workdir))
    try:
        assert note.startswith(f"note: {workdir}/.lock was left by a trainer that is no longer "
                               f"running (pid {holder.pid} on host "), note
        assert json.loads((workdir / ".lock").read_text())["pid"] == os.getpid()
        assert workdir_lib.lock(str(workdir)) is None  # The same process again: its own.
    finally:
        workdir_lib.release(str(workdir))
    assert (workdir / ".lock").read_text() == ""


def test_a_stale_lock_file_of_a_dead_pid_is_taken_over(tmp_path):
    workdir = tmp_path / "run"
    workdir.mkdir()
    pid = _dead_pid()
    (workdir / ".lock").write_text(json.dumps({"host": socket.gethostname(), "pid": pid,
                                               "started": "2026-01-01T00:00:00+00:00"}))
    note = workdir_lib.lock(str(workdir))
    workdir_lib.release(str(workdir))
    assert note == (f"note: {workdir}/.lock was left by a trainer that is no longer running "
                    f"(pid {pid} on host {socket.gethostname()}, started "
                    f"2026-01-01T00:00:00+00:00); taking it over")
    assert workdir_lib.lock(str(workdir)) is None  # Released cleanly: no note.
    workdir_lib.release(str(workdir))


def test_a_filesystem_without_locks_is_a_note_not_an_error(tmp_path, monkeypatch):
    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(workdir_lib.fcntl, "flock", no_locks)
    note = workdir_lib.lock(str(tmp_path))
    assert note == (f"note: cannot lock {tmp_path}/.lock (No locks available); nothing keeps a "
                    f"second trainer off this workdir")
    workdir_lib.release(str(tmp_path))  # Holds nothing: a no-op.


def test_a_workdir_replaced_while_held_is_locked_anew(tmp_path):
    workdir = tmp_path / "run"
    workdir.mkdir()
    workdir_lib.lock(str(workdir))
    shutil.rmtree(workdir)  # Deleted and made again by the user, the lock file with it.
    workdir.mkdir()
    assert workdir_lib.lock(str(workdir)) is None
    try:
        assert json.loads((workdir / ".lock").read_text())["pid"] == os.getpid()
    finally:
        workdir_lib.release(str(workdir))
