"""The worker processes of data/ (Grain's input workers, the build's pool): Ctrl-C is the parent's.

Ctrl-C reaches the whole process group; the parent answers it with one line
(training/preemption.py), and its workers must add nothing to it. So workers start with
SIGINT and SIGTERM blocked (a child inherits its starting thread's mask, before Python's
start-up could print a KeyboardInterrupt); a signal that reaches the parent while it starts
them is acted on once they are started (a worker left without its task would print that its
input ran out); a worker ends within 0.1 s of its parent (Linux's parent-death signal follows
the starting thread, one of Grain's) and at once when its work ends; and the resource
tracker's warning about the shared memory of batches in flight at such an exit is off.
Workers are spawned, not forked (the trainer has threads), without running the parent's
__main__ again (train.py's imports: 2-4 s and 110 MB a worker).
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
def _signals_held():
    """SIGINT and SIGTERM that reach this process in the block are acted on after it (main
    thread only: elsewhere the handlers cannot change); blocked in this thread for the
    processes it starts."""
    held, main = [], threading.current_thread() is threading.main_thread()
    if main:
        wakeup = signal.set_wakeup_fd(-1)  # training/preemption.py's watcher waits.
        handlers = {s: signal.signal(s, lambda signum, frame: held.append(signum))
                    for s in SIGNALS}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if main:
            signal.set_wakeup_fd(wakeup, warn_on_full_buffer=False)
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
            for signum in held:
                signal.raise_signal(signum)


@contextlib.contextmanager
def starting():
    """The block that starts worker processes (see the module docstring)."""
    quiet = "ignore:resource_tracker:UserWarning"
    sys.warnoptions.append(quiet)  # The tracker's interpreter is started with these.
    try:
        resource_tracker.ensure_running()
    finally:
        sys.warnoptions.remove(quiet)
    main = sys.modules["__main__"].__dict__  # What spawn would run again in each worker.
    hidden = {name: main.pop(name) for name in ("__file__", "__spec__") if name in main}
    main["__spec__"] = None
    try:
        with _signals_held():
            yield
    finally:
        main.update(hidden)


def _exit_with(parent_pid):
    while os.getppid() == parent_pid:  # An orphan's parent becomes another process.
        time.sleep(0.1)
    os._exit(0)


def worker_init(parent_pid, *grain_worker_index_and_count):
    """The first call of a worker (Grain's `worker_init_fn`): it ends within 0.1 s of
    `parent_pid`'s end, and at once at its own: its modules' teardown (JAX's, which Grain
    imports: ~0.6 s) would hold up closing the pool. Its signals stay blocked."""
    threading.Thread(target=_exit_with, args=(parent_pid,), daemon=True).start()
    atexit.register(os._exit, 0)  # After multiprocessing's own exit work (its finalizers).


def build_worker_init(parent_pid):
    """The first call of a build worker: Ctrl-C is ignored, SIGTERM kills it (`Pool.terminate`)."""
    worker_init(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
