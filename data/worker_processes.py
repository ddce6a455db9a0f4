"""The worker processes of data/ (Grain's input workers, the build's pool): Ctrl-C is the parent's.

Workers start with SIGINT and SIGTERM blocked (the parent answers Ctrl-C in one line,
training/preemption.py), end within 0.1 s of their parent, and are spawned without re-running
the parent's __main__ (train.py's imports: 2-4 s and 110 MB a worker).
"""

import atexit
import contextlib
import os
import signal
import sys
import threading
import time
from multiprocessing import resource_tracker

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def available_cores():
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@contextlib.contextmanager
def starting():
    """The block that starts worker processes (see the module docstring): SIGINT and SIGTERM
    reaching it are acted on after it (main thread only), and are blocked in this thread for the
    processes it starts."""
    quiet = "ignore:resource_tracker:UserWarning"
    sys.warnoptions.append(quiet)  # The tracker's interpreter is started with these.
    try:
        resource_tracker.ensure_running()
    finally:
        sys.warnoptions.remove(quiet)
    held, main_thread = [], threading.current_thread() is threading.main_thread()
    if main_thread:
        wakeup = signal.set_wakeup_fd(-1)  # training/preemption.py's watcher waits.
        handlers = {s: signal.signal(s, lambda signum, frame: held.append(signum))
                    for s in SIGNALS}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    main = sys.modules["__main__"].__dict__  # What spawn would run again in each worker.
    hidden = {name: main.pop(name) for name in ("__file__", "__spec__") if name in main}
    main["__spec__"] = None
    try:
        yield
    finally:
        main.update(hidden)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if main_thread:
            signal.set_wakeup_fd(wakeup, warn_on_full_buffer=False)
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
            for signum in held:
                signal.raise_signal(signum)


def _exit_with(parent_pid):
    while os.getppid() == parent_pid:  # An orphan's parent becomes another process.
        time.sleep(0.1)
    os._exit(0)


def worker_init(parent_pid, *grain_worker_index_and_count):
    """A worker's first call (Grain's `worker_init_fn`): it ends within 0.1 s of `parent_pid`, and
    at once at its own end (the teardown of the JAX Grain imports, ~0.6 s, would hold up the pool).
    """
    threading.Thread(target=_exit_with, args=(parent_pid,), daemon=True).start()
    atexit.register(os._exit, 0)  # After multiprocessing's own exit work (its finalizers).


def build_worker_init(parent_pid):
    """The first call of a build worker: Ctrl-C is ignored, SIGTERM kills it (`Pool.terminate`)."""
    worker_init(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
