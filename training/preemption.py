"""Clean stops on SIGTERM (preemption) that every process agrees on.

A cluster preempting a job sends SIGTERM, then kills it after a grace period.
The handler only sets a flag; the training loop asks `should_stop()` after
each step, saves a checkpoint and exits. With several processes the flag is
OR-reduced over all of them, so they stop at the same step (a checkpoint is a
collective operation: one process stopping alone would hang the others).
"""

import signal
import threading

import jax
import numpy as np
from jax.experimental import multihost_utils

_stop = threading.Event()


def _handler(signum, frame):
    del frame
    _stop.set()


def install():
    """Routes SIGTERM to the stop flag (only the main thread can; elsewhere a no-op)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _handler)


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
