"""training/preemption.py: what SIGINT and SIGTERM do at each stage of a run, by direct calls of
`on_signal` and by real signals to this process."""

import os
import signal
import threading
import time

import pytest

from training import preemption


class Exited(Exception):
    """Stands for os._exit in `on_signal` (called in the test's thread)."""


@pytest.fixture
def exits(monkeypatch):
    """The exit statuses `on_signal` asked for; raising Exited in the calling thread."""
    codes = []

    def fake_exit(code):
        codes.append(code)
        if threading.current_thread() is threading.main_thread():
            raise Exited(code)

    monkeypatch.setattr(preemption, "_exit", fake_exit)
    preemption.reset()
    yield codes
    preemption.reset()


def _lines(capfd):
    return [line for line in capfd.readouterr().err.splitlines() if line.strip()]


@pytest.mark.parametrize("signum,code,name", [(signal.SIGINT, 130, "Ctrl-C"),
                                              (signal.SIGTERM, 143, "SIGTERM")])
def test_before_the_first_step_a_signal_exits_with_one_line(exits, capfd, signum, code, name):
    with pytest.raises(Exited):
        preemption.on_signal(signum)
    assert exits == [code]
    assert _lines(capfd) == [f"{name}: stopped before the first training step (nothing to "
                             f"save)."]


def test_in_training_the_first_ctrl_c_asks_for_a_save(exits, capfd):
    preemption.started_training()
    preemption.on_signal(signal.SIGINT)
    assert exits == [] and preemption.should_stop() and preemption.reason() == "Ctrl-C"
    assert _lines(capfd) == ["Ctrl-C: saving a checkpoint after this step, then exiting "
                             "(Ctrl-C again to exit now, without saving)."]


def test_in_training_the_second_ctrl_c_exits_without_saving(exits, capfd):
    preemption.started_training()
    preemption.on_signal(signal.SIGINT)
    capfd.readouterr()
    with pytest.raises(Exited):
        preemption.on_signal(signal.SIGINT)
    assert exits == [130]
    assert _lines(capfd) == ["Second Ctrl-C: exiting now, without saving."]


def test_in_training_repeated_sigterms_ask_for_one_silent_save(exits, capfd):
    preemption.started_training()
    preemption.on_signal(signal.SIGTERM)
    preemption.on_signal(signal.SIGTERM)
    assert exits == [] and preemption.should_stop() and preemption.reason() == "SIGTERM"
    assert _lines(capfd) == []


def test_finished_cannot_go_back_to_training(exits):
    preemption.started_training()
    preemption.finished()  # Finished cannot go back to training.
    preemption.started_training()
    assert preemption.stage() == preemption.FINISHED


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_after_the_save_a_signal_exits_with_success(exits, capfd, signum):
    preemption.started_training()
    preemption.on_signal(signum)  # The stop that was saved.
    preemption.finished()
    with pytest.raises(Exited):
        preemption.on_signal(signal.SIGINT)
    assert exits == [0]
    assert _lines(capfd)[-1] == "Ctrl-C: exiting now (the run's state is saved)."


def _wait_for(condition, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def test_installed_handlers_act_in_the_watcher_thread_raising_nothing(exits):
    assert preemption.install()
    try:
        assert not preemption.install()  # Once.
        os.kill(os.getpid(), signal.SIGINT)  # Starting: an exit, asked for by the watcher.
        assert _wait_for(lambda: exits == [130])
        preemption.reset()
        preemption.started_training()
        os.kill(os.getpid(), signal.SIGTERM)
        assert _wait_for(preemption.should_stop)
        for _ in range(100):  # Python runs its (do-nothing) handler in this thread: no error.
            time.sleep(0.001)
        assert exits == [130] and preemption.reason() == "SIGTERM"
    finally:
        preemption.uninstall()


def test_uninstall_gives_the_signals_back_their_default(exits):
    assert preemption.install()
    preemption.uninstall()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    with pytest.raises(KeyboardInterrupt):  # The default is back.
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)


def test_install_unblocks_the_signals(exits):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        assert preemption.install()
        assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    finally:
        preemption.uninstall()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_reinstall_puts_back_handlers_a_library_replaced(exits):
    try:
        assert preemption.install()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        preemption.reinstall()
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        assert signal.getsignal(signal.SIGINT) is signal.getsignal(signal.SIGTERM)
    finally:
        preemption.uninstall()


def test_importing_it_imports_no_jax():
    """train.py installs it before its heavy imports."""
    import subprocess
    import sys

    code = ("import sys; from training import preemption; "
            "print(any(m == 'jax' or m.startswith('jax.') for m in sys.modules))")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                            text=True, check=True)
    assert result.stdout.strip() == "False"


def test_at_exit_the_signals_are_ignored_not_given_back_their_default(exits):
    """Python's finalization would make a late Ctrl-C kill a finished run (-SIGINT)."""
    assert preemption.install()
    try:
        preemption._ignore_signals_at_exit()  # What atexit runs last.
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        preemption.uninstall()
    preemption._ignore_signals_at_exit()  # Not installed: nothing changes.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_exit_at_once_before_the_first_step_releases_the_workdir_lock(exits, tmp_path):
    """Else the next run of the same command prints a takeover note for a lock nobody holds."""
    from training import workdir as workdir_lib

    assert workdir_lib.lock(str(tmp_path)) is None
    with pytest.raises(Exited):
        preemption.on_signal(signal.SIGINT)
    assert (tmp_path / workdir_lib.LOCK_FILE).read_text() == ""  # No holder named.
    assert workdir_lib.lock(str(tmp_path)) is None  # Not "taking it over".
    workdir_lib.release(str(tmp_path))
