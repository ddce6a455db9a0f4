"""One trainer per workdir: a second train.py is refused in one line naming the first.

The flock on `<workdir>/.lock` is released however its process ends, a stale file is taken
over, and it is a lease: made again if removed; a trainer stops before writing when another
holds it."""

import errno
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from tests import tiny
from tests.training.saved_state import read_metrics
from training import checkpointing, metrics
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
        # `rm .lock` by hand: a trainer started now waits for the first to make it again, and
        # is refused.
        os.remove(workdir / ".lock")
        start = time.monotonic()
        with pytest.raises(workdir_lib.WorkdirError, match=rf"in use by another trainer \(pid "
                                                           rf"{first.pid} on host "):
            workdir_lib.lock(str(workdir))
        assert time.monotonic() - start < workdir_lib.WAIT_S
        assert first.proc.poll() is None, first.text  # Still training.
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


def test_a_live_holder_is_named_changing_nothing_until_it_is_gone(tmp_path):
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


def test_a_stale_lock_file_is_taken_over(tmp_path):
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


def test_a_replaced_workdir_is_locked_anew(tmp_path):
    workdir = tmp_path / "run"
    workdir.mkdir()
    assert workdir_lib.lock(str(workdir)) is None
    shutil.rmtree(workdir)  # Deleted and made again by the user while held, the lock with it.
    workdir.mkdir()
    assert workdir_lib.lock(str(workdir)) is None
    try:
        assert json.loads((workdir / ".lock").read_text())["pid"] == os.getpid()
    finally:
        workdir_lib.release(str(workdir))


def test_a_filesystem_without_locks_is_a_note_not_an_error(tmp_path, monkeypatch):
    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(workdir_lib.fcntl, "flock", no_locks)
    note = workdir_lib.lock(str(tmp_path))
    assert note == (f"note: cannot lock {tmp_path}/.lock (No locks available); nothing keeps a "
                    f"second trainer off this workdir")
    workdir_lib.release(str(tmp_path))  # Holds nothing: a no-op.


def _other_trainer(workdir):
    """Takes the workdir's lock file as another process would: its own open file, flocked."""
    fd = os.open(workdir / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, json.dumps({"host": "elsewhere", "pid": 7, "started": "now"}).encode())
    return fd


def test_the_lease_remakes_a_removed_lock_but_stops_before_writing_when_taken(tmp_path):
    workdir = tmp_path / "run"
    workdir.mkdir()
    (workdir / ".config.json.abcd1234.tmp").write_text("{")  # Left by kills: removed.
    (workdir / ".metrics.jsonl.a_b_c_d_.tmp").write_text("")
    (workdir / ".other.abcd1234.tmp").write_text("")  # Not the run's: kept.
    assert workdir_lib.lock(str(workdir)) is None
    try:
        assert sorted(os.listdir(workdir)) == [".lock", ".other.abcd1234.tmp"]
        mine = json.loads((workdir / ".lock").read_text())
        assert mine["pid"] == os.getpid() and len(mine["token"]) == 32
        os.remove(workdir / ".lock")
        workdir_lib.check()  # Made again, naming this start.
        assert json.loads((workdir / ".lock").read_text()) == mine
        logger = metrics.MetricsLogger(str(workdir), total_steps=3)
        logger.log(1, {"train/loss": 1.0})
        os.remove(workdir / ".lock")
        other = _other_trainer(workdir)
        try:
            with pytest.raises(workdir_lib.WorkdirError, match=(
                    rf"^{workdir}/.lock no longer names this trainer: another trainer \(pid 7 "
                    rf"on host elsewhere, started now\) holds {workdir} now; this one stopped "
                    rf"without writing more$")):
                logger.log(2, {"train/loss": 0.5})
            logger.close()
            assert [r["step"] for r in read_metrics(str(workdir))] == [1]
            workdir_lib.release(str(workdir))
            assert json.loads((workdir / ".lock").read_text())["pid"] == 7  # Not emptied.
        finally:
            os.close(other)
    finally:
        workdir_lib.release(str(workdir))


def test_a_missing_lock_file_in_a_run_waits_for_its_holder_to_make_it_again(tmp_path):
    workdir = tmp_path / "run"
    workdir.mkdir()
    (workdir / "metrics.jsonl").write_text('{"step": 1}\n')
    taken = []
    holder = threading.Timer(0.5, lambda: taken.append(_other_trainer(workdir)))
    holder.start()
    try:
        with pytest.raises(workdir_lib.WorkdirError, match=r"in use by another trainer \(pid 7"):
            workdir_lib.lock(str(workdir))
    finally:
        holder.join()
        os.close(taken[0])
