"""checkpointing.Saver: a save that fails (a full disk above all) is reported at once, in a line.

The disk-full tests run on a real small filesystem, a tmpfs mounted for the test, when the test may
mount one (as root); otherwise they are skipped, and the fault-injecting tests below them (a manager
whose background save raises OSError(ENOSPC)) still check the Saver's side.
"""

import errno
import json
import logging
import os
import sys
import threading
import time
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl import logging as absl_logging

from tests import tiny
from tests.training.saved_state import read_saved_state
from training import checkpointing


def _state(seed, megabytes=1):
    """A state of about `megabytes` of random float32 (which compresses poorly)."""
    n = int(megabytes * 1e6 / 4)
    return {"params": {"w": jax.random.normal(jax.random.key(seed), (n,))},
            "step": jnp.int32(seed)}


@pytest.fixture
def small_fs(tmp_path):
    """A 3 MB tmpfs (skips the test where mounting is not allowed)."""
    with tiny.small_tmpfs(tmp_path / "fs", "3m") as folder:
        yield folder


def _poll_until_done(saver, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        saver.poll()
        time.sleep(0.05)


def test_a_save_that_does_not_fit_is_refused_before_writing(small_fs):
    workdir = small_fs / "run"
    saver = checkpointing.Saver(checkpointing.manager(str(workdir), keep=3))
    saver.save(1, _state(1))
    saver.wait()
    (small_fs / "filler").write_bytes(os.urandom(1_600_000))
    with pytest.raises(checkpointing.SaveError,
                       match=r"step 2: saving checkpoint .*/checkpoints/2 failed: not enough "
                             r"free space: needs about 0\.9 MB, 0\.\d MB available; make room, "
                             r"and the same command resumes from step 1 \(.*/checkpoints/1\)$"):
        saver.save(2, _state(2))
    assert os.listdir(workdir / "checkpoints") == ["1"]  # Nothing written.
    step, state = read_saved_state(str(workdir))
    assert step == 1
    np.testing.assert_array_equal(state["params"]["w"], _state(1)["params"]["w"])


def test_a_background_save_hitting_a_full_disk_is_reported_by_poll(small_fs, monkeypatch):
    workdir = small_fs / "run"
    saver = checkpointing.Saver(checkpointing.manager(str(workdir), keep=3))
    saver.save(1, _state(1))
    saver.wait()
    monkeypatch.setattr(checkpointing.Saver, "_space", lambda self, state: 0)  # No pre-flight.
    saver.save(2, _state(2, megabytes=2.5))  # Returns at once; the disk fills behind it.
    with pytest.raises(checkpointing.SaveError,
                       match=r"step 2: saving checkpoint .*/checkpoints/2 failed: no space left "
                             r"on the device \([\d.]+ MB free now, 2\.\d MB when the save "
                             r"started, for about 0\.0 MB\); make room, and the same command "
                             r"resumes from step 1 \(.*/checkpoints/1\)$"):
        _poll_until_done(saver)
    assert checkpointing.steps(str(workdir)) == [1]
    assert read_saved_state(str(workdir))[0] == 1
    saver.wait()  # Reported once.


# ------------------------------------------------------ injected faults ----
class _FailingManager:
    """An orbax manager stand-in whose background save fails with `error` after `delay` s."""

    def __init__(self, directory, error, delay=0.1):
        self.directory, self._error, self._delay = directory, error, delay
        self._thread, self._failure = None, None

    def save(self, step, args=None, metrics=None, force=False):
        def write():
            time.sleep(self._delay)
            self._failure = self._error
        self._thread = threading.Thread(target=write)
        self._thread.start()

    def is_saving_in_progress(self):
        return self._thread is not None and self._thread.is_alive()

    def wait_until_finished(self):
        if self._thread is not None:
            self._thread.join()
        failure, self._failure = self._failure, None
        if failure:
            raise failure


def test_injected_background_enospc_is_reported_by_poll_with_the_space(tmp_path):
    folder = tmp_path / "checkpoints"
    (folder / "3").mkdir(parents=True)
    (folder / "3" / "data").write_bytes(b"x" * 2_000_000)
    saver = checkpointing.Saver(_FailingManager(str(folder), OSError(
        errno.ENOSPC, "No space left on device")))
    saver.save(6, _state(6, megabytes=0.01))
    saver.poll()  # Still writing: nothing to report yet.
    with pytest.raises(checkpointing.SaveError,
                       match=r"step 6: saving checkpoint .*/checkpoints/6 failed: no space left "
                             r"on the device \([\d.]+ MB free now, [\d.]+ MB when the save "
                             r"started, for about 2\.0 MB\); make room, and the same command "
                             r"resumes from step 3 \(.*/checkpoints/3\)$"):
        _poll_until_done(saver)


def test_injected_other_failure_is_one_line_with_its_first_line(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    saver = checkpointing.Saver(_FailingManager(str(folder), ValueError(
        "PERMISSION_DENIED: cannot write\nSee full TensorStore details: {...}")))
    saver.save(2, _state(2, megabytes=0.01))
    with pytest.raises(checkpointing.SaveError) as raised:
        saver.wait()
    assert str(raised.value) == (
        f"step 2: saving checkpoint {folder}/2 failed: PERMISSION_DENIED: cannot write; once "
        f"that is fixed, the same command starts afresh (no checkpoint is saved yet)")


def test_wait_all_waits_for_every_saver_then_raises_the_first_failure(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    failing = checkpointing.Saver(_FailingManager(str(tmp_path / "a"), OSError(errno.EIO, "I/O")))
    other = _FailingManager(str(tmp_path / "b"), None, delay=0.3)
    second = checkpointing.Saver(other)
    failing.save(1, {})
    second.save(1, {})
    with pytest.raises(checkpointing.SaveError, match=r"step 1: .*/a/1 failed"):
        checkpointing.wait_all(failing, second)
    assert not other.is_saving_in_progress()  # Waited for, though the first one failed.


# ------------------------------------------ what a failure message says ----
def test_a_failing_best_save_names_the_regular_checkpoint_a_resume_starts_from(tmp_path):
    """Not the best checkpoints' own newest step (10), nor "no checkpoint was saved": a run
    resumes from checkpoints/, whichever saver failed; nor "make room" for a failure that is
    not a full disk."""
    for step in (4, 8, 16):
        (tmp_path / "checkpoints" / str(step)).mkdir(parents=True)
    (tmp_path / "checkpoints_best" / "10").mkdir(parents=True)
    saver = checkpointing.Saver(_FailingManager(str(tmp_path / "checkpoints_best"), OSError(
        errno.EIO, "Input/output error")))
    saver.save(20, _state(20, megabytes=0.01), metrics={"eval/cider_d/avg": 0.5})
    with pytest.raises(checkpointing.SaveError) as raised:
        saver.wait()
    assert str(raised.value) == (
        f"step 20: saving checkpoint {tmp_path}/checkpoints_best/20 failed: [Errno 5] "
        f"Input/output error; once that is fixed, the same command resumes from step 16 "
        f"({tmp_path}/checkpoints/16)")


def test_a_disk_filled_by_another_process_is_told_as_it_happened(tmp_path, monkeypatch):
    """The save had room when it started; the message gives the free space then and now,
    not a claim that it needed more than was free."""
    (tmp_path / "checkpoints" / "4").mkdir(parents=True)
    (tmp_path / "checkpoints" / "4" / "data").write_bytes(b"x" * 7_300_000)
    free = {"bytes": 62_900_000}
    monkeypatch.setattr(checkpointing.shutil, "disk_usage",
                        lambda path: types.SimpleNamespace(free=free["bytes"]))
    saver = checkpointing.Saver(_FailingManager(str(tmp_path / "checkpoints"), OSError(
        errno.ENOSPC, "No space left on device")))
    saver.save(8, _state(8, megabytes=0.01))
    free["bytes"] = 20_000  # Another process fills the disk.
    with pytest.raises(checkpointing.SaveError) as raised:
        saver.wait()
    assert str(raised.value) == (
        f"step 8: saving checkpoint {tmp_path}/checkpoints/8 failed: no space left on the "
        f"device (0.0 MB free now, 62.9 MB when the save started, for about 7.3 MB); make "
        f"room, and the same command resumes from step 4 ({tmp_path}/checkpoints/4)")


def test_saving_a_step_the_folder_holds_keeps_it(tmp_path):
    """A resumed run saving a step that a stopped run saved already (a best checkpoint, say)
    keeps that checkpoint: it holds the same state; orbax would refuse the step."""
    first = checkpointing.Saver(checkpointing.manager(str(tmp_path), keep=3))
    first.save(1, _state(1))
    first.wait()
    saver = checkpointing.Saver(checkpointing.manager(str(tmp_path), keep=3))
    saver.save(1, _state(1))
    saver.wait()
    saver.save(2, _state(2))
    saver.wait()
    assert checkpointing.steps(str(tmp_path)) == [1, 2]


def test_checkpoints_being_a_file_is_a_checkpoint_error(tmp_path):
    (tmp_path / "checkpoints").write_text("not a folder")
    with pytest.raises(checkpointing.CheckpointError,
                       match=r"/checkpoints is not a folder; move it away"):
        checkpointing.steps(str(tmp_path))


def test_library_noise_is_recognised():
    assert checkpointing._is_library_noise(RuntimeError("Event loop is closed"), None)
    assert not checkpointing._is_library_noise(RuntimeError("something else"), None)
    frame = types.SimpleNamespace(f_code=types.SimpleNamespace(
        co_filename=f"{os.sep}site-packages{os.sep}orbax{os.sep}checkpoint{os.sep}x.py"))
    traceback = types.SimpleNamespace(tb_frame=frame, tb_lineno=1, tb_next=None)
    assert checkpointing._is_library_noise(Exception("Encountered error"), traceback)


def test_injected_enospc_while_starting_the_save_is_one_line(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    manager = _FailingManager(str(folder), None)

    def save(step, args=None, metrics=None, force=False):
        raise OSError(errno.ENOSPC, "No space left on device", str(folder / "4.orbax-tmp"))

    manager.save = save
    with pytest.raises(checkpointing.SaveError,
                       match=r"step 4: saving checkpoint .*/checkpoints/4 failed: no space left "
                             r"on the device \([\d.]+ MB free now, [\d.]+ MB when the save "
                             r"started, for about 0\.0 MB\); make room, and the same command "
                             r"starts afresh \(no checkpoint is saved yet\)$"):
        checkpointing.Saver(manager).save(4, _state(4, megabytes=0.01))


class _RaisesWhenCollected:
    """An object whose __del__ raises: Python reports that through sys.unraisablehook."""

    def __init__(self, error):
        self.error = error

    def __del__(self):
        raise self.error


def test_quiet_library_logs_hides_only_the_libraries_reports(monkeypatch):
    """What orbax, asyncio and TensorStore's callbacks print while a damaged checkpoint is read
    (unraisable "Event loop is closed", "Task exception was never retrieved", orbax's logs)."""
    monkeypatch.setattr(checkpointing, "_QUIET", {"installed": False})
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))
    loggers = [logging.getLogger("absl"), logging.getLogger("asyncio")]
    filters = [list(logger.filters) for logger in loggers]
    try:
        checkpointing.quiet_library_logs()
        _RaisesWhenCollected(RuntimeError("Event loop is closed"))
        _RaisesWhenCollected(ValueError("a bug of ours"))
        assert [str(e) for e in reported] == ["a bug of ours"]

        def record(name, path):
            return logging.LogRecord(name, logging.ERROR, path, 1, "message", None, None)

        orbax_file = os.path.join("site-packages", "orbax", "checkpoint", "manager.py")
        assert not loggers[0].filter(record("absl", orbax_file))
        assert loggers[0].filter(record("absl", "train.py"))
        assert not loggers[1].filter(record("asyncio", "base_events.py"))
    finally:
        for logger, kept in zip(loggers, filters, strict=True):
            logger.filters[:] = kept


def test_quiet_library_logs_hides_nothing_at_verbosity_info(monkeypatch):
    monkeypatch.setattr(checkpointing, "_QUIET", {"installed": False})
    monkeypatch.setattr(absl_logging, "get_verbosity", lambda: absl_logging.INFO)
    hook = sys.unraisablehook
    checkpointing.quiet_library_logs()
    assert sys.unraisablehook is hook and not checkpointing._QUIET["installed"]


def _abstract(state):
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype,
                                                       sharding=x.sharding), state)


def _train_state(seed):
    """A state as the trainer's: parameters, optimizer state and step."""
    return {**_state(seed), "opt_state": {"v": jnp.full((1000,), seed, jnp.float32)}}


def _saved(folder, *steps):
    saver = checkpointing.Saver(checkpointing.manager(str(folder), keep=3))
    for step in steps:
        saver.save(step, _train_state(step))
        saver.wait()



def test_a_save_holds_a_checksum_of_every_array(tmp_path):
    _saved(tmp_path, 1)
    with open(tmp_path / "checkpoints" / "1" / "checksums" / "metadata") as f:
        saved = json.load(f)
    assert saved == {"0": checkpointing.checksums(_train_state(1))}
    assert sorted(saved["0"]) == ["opt_state/v", "params/w", "step"]


def _flip_16_bytes(step_folder):
    """Flips 16 bytes in the middle of the largest data file of a checkpoint (the probe)."""
    files = [os.path.join(root, name) for root, _, names in os.walk(step_folder / "default")
             for name in names if os.sep + "d" + os.sep in os.path.join(root, name)]
    path = max(files, key=os.path.getsize)
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        data = f.read(16)
        f.seek(os.path.getsize(path) // 2)
        f.write(bytes(b ^ 0xFF for b in data))


def _change_checksum(step_folder, name):
    with open(step_folder / "checksums" / "metadata") as f:
        saved = json.load(f)
    for index in saved["0"][name]:
        saved["0"][name][index] ^= 1
    with open(step_folder / "checksums" / "metadata", "w") as f:
        json.dump(saved, f)


def test_flipped_bytes_in_a_data_file_set_the_checkpoint_aside_for_the_one_before(tmp_path,
                                                                                  capsys):
    _saved(tmp_path, 1, 2)
    _flip_16_bytes(tmp_path / "checkpoints" / "2")
    state, step = checkpointing.restore(str(tmp_path), _abstract(_train_state(2)),
                                        set_aside=True)
    assert step == 1
    np.testing.assert_array_equal(state["params"]["w"], _state(1)["params"]["w"])
    out = capsys.readouterr().out
    assert (f"warning: checkpoint {tmp_path}/checkpoints/2 (step 2) is damaged: " in out
            and f"; moved it to {tmp_path}/checkpoints_damaged/2" in out), out


def test_data_that_differs_from_its_checksum_makes_the_checkpoint_damaged(tmp_path):
    _saved(tmp_path, 1)
    _change_checksum(tmp_path / "checkpoints" / "1", "params/w")
    with pytest.raises(checkpointing.CheckpointError,
                       match=r"\(step 1\) is damaged: the data of params/w differs from its "
                             r"checksum"):
        checkpointing.restore(str(tmp_path), _abstract(_train_state(1)), step=1)


def test_parameters_read_alone_are_checked_against_their_checksums(tmp_path):
    _saved(tmp_path, 1)
    _change_checksum(tmp_path / "checkpoints" / "1", "params/w")
    with pytest.raises(checkpointing.CheckpointError, match=r"the data of params/w differs"):
        checkpointing.restore(str(tmp_path), _abstract(_train_state(1))["params"], step=1)


def test_a_save_committed_after_the_lease_was_taken_over_leaves_nothing(tmp_path):
    """The trainer stopped mid-save (SIGSTOP) while another took its workdir over: its save
    is not renamed into checkpoints/, and it stops in one line naming the holder."""
    import fcntl

    from training import workdir as workdir_lib

    workdir = str(tmp_path)
    assert workdir_lib.lock(workdir) is None
    try:
        saver = checkpointing.Saver(checkpointing.manager(workdir, keep=3))
        os.remove(tmp_path / workdir_lib.LOCK_FILE)  # By hand; then the other trainer's lock:
        with open(tmp_path / workdir_lib.LOCK_FILE, "w") as other:
            fcntl.flock(other, fcntl.LOCK_EX)
            other.write(json.dumps({"pid": 4242, "host": "elsewhere", "started": "then"}))
            other.flush()
            with pytest.raises(workdir_lib.WorkdirError,
                               match=r"another trainer \(pid 4242 on host elsewhere"):
                saver.save(1, _train_state(1))
                saver.wait()
        assert os.listdir(tmp_path / "checkpoints") == []
    finally:
        workdir_lib.release(workdir)
