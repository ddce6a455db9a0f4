"""Ctrl-C and SIGTERM at any moment of a run: one line, the right exit status, nothing lost.

Starting: exit at once with 130 (Ctrl-C) or 143 (SIGTERM). Training: the first signal sets a
flag the loop reads after each step (`should_stop()`), then it saves and exits 0; a second
Ctrl-C exits at once (130). Finished: exit 0. No handler raises: a watcher thread reads the
signals from `signal.set_wakeup_fd`'s pipe, even while XLA holds the main thread. With
several processes the flag is OR-reduced, so all stop at the same step.
"""

import atexit
import os
import signal
import threading

STARTING, TRAINING, FINISHED = "starting", "training", "finished"
SIGNALS = (signal.SIGINT, signal.SIGTERM)
_NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}

_lock = threading.Lock()
_stop = threading.Event()
_reason = []
_stage = [STARTING]
_installed = []  # [(read fd, write fd, previous wakeup fd)] while installed.
_exit = os._exit  # Tests replace it.
_before_exit_now = []  # Run before an exit at once: what the kernel would not undo (a lock's
# holder record, training/workdir.py).


def before_exit_now(function):
    """Runs `function` before any exit at once (once, however often it is registered)."""
    if function not in _before_exit_now:
        _before_exit_now.append(function)


def _exit_now(status):
    for function in _before_exit_now:
        function()
    _exit(status)


def _say(text):
    """Writes one line to stderr at once (no buffer, safe from any thread)."""
    prefix = "\n" if os.isatty(2) else ""  # After the terminal's echoed "^C".
    os.write(2, (prefix + text + "\n").encode())


def on_signal(signum):
    """What SIGINT or SIGTERM does, by the stage of the run (the watcher thread calls it)."""
    with _lock:
        name = _NAMES.get(signum, f"signal {signum}")
        if _stage[0] == STARTING:
            _say(f"{name}: stopped before the first training step (nothing to save).")
            _exit_now(128 + signum)  # 130 for Ctrl-C, 143 for SIGTERM.
        elif _stage[0] == FINISHED:
            _say(f"{name}: exiting now (the run's state is saved).")
            _exit_now(0)
        elif not _stop.is_set():
            _reason.append(name)
            if signum == signal.SIGINT:  # A user is waiting; a cluster is not.
                _say("Ctrl-C: saving a checkpoint after this step, then exiting "
                     "(Ctrl-C again to exit now, without saving).")
            _stop.set()  # After the line: the loop's "Stopped by" line comes after it.
        elif signum == signal.SIGINT:
            _say("Second Ctrl-C: exiting now, without saving.")
            _exit_now(128 + signum)
        # A repeated SIGTERM: the save is under way already.


def _watch(read_fd):
    """Acts on each signal number the C-level handler writes into the pipe."""
    while True:
        try:
            data = os.read(read_fd, 64)
        except OSError:
            return
        if not data:  # `uninstall` closed the other end.
            os.close(read_fd)
            return
        for signum in data:
            if signum in _NAMES:
                on_signal(signum)


def _do_nothing(signum, frame):
    """The Python-level handler: the watcher thread acts (see the module docstring)."""
    del signum, frame


def _ignore_signals_at_exit():
    """Ignores the signals after every other exit handler, so a late Ctrl-C changes no status."""
    if _installed:
        for signum in SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


def install():
    """Routes SIGINT and SIGTERM to `on_signal`; False if installed or not on the main thread."""
    if _installed or threading.current_thread() is not threading.main_thread():
        return False
    # A parent may have blocked them (children inherit the mask): they would never arrive.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)  # The C handler must never block.
    previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    _installed.append((read_fd, write_fd, previous))
    reinstall()
    atexit.unregister(_ignore_signals_at_exit)
    atexit.register(_ignore_signals_at_exit)
    reset()
    threading.Thread(target=_watch, args=(read_fd,), name="signal-watcher",
                     daemon=True).start()
    return True


def reinstall():
    """Sets the Python-level handlers (again, if a library replaced them; no-op uninstalled)."""
    if _installed and threading.current_thread() is threading.main_thread():
        for signum in SIGNALS:
            signal.signal(signum, _do_nothing)


def uninstall():
    """Gives SIGINT and SIGTERM back their default behaviour (in-process callers, tests)."""
    if not _installed or threading.current_thread() is not threading.main_thread():
        return
    _, write_fd, previous = _installed.pop()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.set_wakeup_fd(previous)
    os.close(write_fd)  # The watcher reads the end of the pipe, closes it and returns.
    reset()


def started_training():
    """From now on a signal saves the state (called once the first step has run)."""
    with _lock:
        if _stage[0] == STARTING:
            _stage[0] = TRAINING


def finished():
    """The state is saved: a signal from now on exits at once with status 0."""
    with _lock:
        _stage[0] = FINISHED


def stage():
    """STARTING, TRAINING or FINISHED."""
    return _stage[0]


def reason():
    """What asked for the stop ("SIGTERM", "Ctrl-C"), or "another process"."""
    return _reason[0] if _reason else "another process"


def should_stop():
    """Whether any process has been asked to stop (collective with several processes)."""
    import jax  # Deferred: this module is installed before JAX is imported.

    flag = _stop.is_set()
    if jax.process_count() == 1:
        return flag
    import numpy as np
    from jax.experimental import multihost_utils

    return bool(np.any(multihost_utils.process_allgather(np.asarray(flag))))


def reset():
    """Clears the flag and goes back to the starting stage (tests, `install`)."""
    with _lock:
        _stop.clear()
        _reason.clear()
        _stage[0] = STARTING
