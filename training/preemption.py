"""Clean stops on SIGTERM (preemption) and Ctrl-C that every process agrees on.

A cluster preempting a job sends SIGTERM, then kills it after a grace period;
a user stops a run with Ctrl-C (SIGINT). Either only sets a flag: the training
loop asks `should_stop()` after each step, saves a checkpoint and exits, so a
signal never lands inside a library (Python would raise KeyboardInterrupt
wherever the main thread happens to be, even in a garbage-collection callback
that swallows it). A second Ctrl-C exits at once, without saving. With
several processes the flag is OR-reduced over all of them, so they stop at
the same step (a checkpoint is a collective operation: one process stopping
alone would hang the others).
"""

import os
import signal
import threading

import jax
import numpy as np
from jax.experimental import multihost_utils

_stop = threading.Event()
_SIGNAL_NAMES = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "Ctrl-C"}
_reason = []


def _handler(signum, frame):
    del frame
    if signum == signal.SIGINT and _stop.is_set():
        # The second Ctrl-C: the user does not want to wait for the save.
        os.write(2, b"\nSecond Ctrl-C: exiting now, without saving this step.\n")
        os._exit(130)
    _reason.append(_SIGNAL_NAMES.get(signum, str(signum)))
    _stop.set()
    if signum == signal.SIGINT:
        os.write(2, b"\nCtrl-C: saving a checkpoint after this step, then exiting "
                    b"(Ctrl-C again to exit now, without saving).\n")


def install():
    """Routes SIGTERM and SIGINT to the stop flag (only the main thread can; else a no-op)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _handler)
        signal.signal(signal.SIGINT, _handler)


def uninstall():
    """Gives SIGTERM and SIGINT back their default behaviour (after the loop)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)


def reason():
    """What asked for the stop ("SIGTERM", "Ctrl-C"), or "another process"."""
    return _reason[0] if _reason else "another process"


def should_stop():
    """Whether any process has been asked to stop (collective with several processes)."""
    flag = _stop.is_set()
    if jax.process_count() == 1:
        return flag
    flags = multihost_utils.process_allgather(np.asarray(flag))
    return bool(np.any(flags))


def reset():
    """Clears the flag (tests)."""
    _stop.clear()
    _reason.clear()


