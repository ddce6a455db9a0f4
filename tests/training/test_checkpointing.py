"""checkpointing.Saver: a save that fails (a full disk above all) is reported at once, in a line.

The disk-full tests run on a real small filesystem, a tmpfs mounted for the test, when
the test may mount one (as root); otherwise they are skipped, and the fault-injecting
tests below them (a manager whose background save raises OSError(ENOSPC)) still check
the Saver's side.
"""

import errno
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
                             r"free space: needs about 0\.9 MB, 0\.\d MB available; the last "
                             r"good checkpoint, step 1, is kept"):
        saver.save(2, _state(2))
    assert os.listdir(workdir / "checkpoints") == ["1"]  # Nothing written.
    step, state = checkpointing.read_saved_state(str(workdir))
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
                             r"on the device: needs more than the 2\.\d MB available when it "
                             r"started \(estimated 0\.0 MB\); the "
                             r"last good checkpoint, step 1, is kept; make room and run the same "
                             r"command to resume"):
        _poll_until_done(saver)
    assert checkpointing.steps(str(workdir)) == [1]
    assert checkpointing.read_saved_state(str(workdir))[0] == 1
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
                             r"on the device: needs more than the [\d.]+ MB available when it "
                             r"started \(estimated 2\.0 MB\); the "
                             r"last good checkpoint, step 3, is kept"):
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
        f"step 2: saving checkpoint {folder}/2 failed: PERMISSION_DENIED: cannot write; no "
        f"checkpoint was saved before it; make room and run the same command to resume")


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
    traceback = types.SimpleNamespace(tb_frame=frame, tb_next=None)
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
                             r"on the device: needs more than the [\d.]+ MB available when it "
                             r"started \(estimated 0\.0 MB\); no checkpoint was saved before it"):
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
