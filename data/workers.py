"""Worker processes that the input pipeline and the build start: fresh interpreters, not forks.

A worker is `python -m <module>`: not a fork of the parent (the trainer has
threads, and its imports are heavy), and not a `multiprocessing` spawn either,
which would import the parent's `__main__` (train.py and JAX) again in every
worker. Parent and worker talk over two pipes (`multiprocessing.connection`
framing): tasks in, ("done", value) or ("error", exception) out.

`CallPool` runs module-level functions in such workers and returns
`concurrent.futures.Future`s: the build (data/builders/corpus.py) writes its
image shards and caption tables with it. data/batch_workers.py makes training
batches with the same machinery.

A worker ignores SIGINT and SIGTERM (the parent decides when to stop, and
Ctrl-C reaches the whole process group) and exits when its pipe closes, so it
never outlives its parent. An error in a worker (a corrupt image, say) is
raised in the parent with its type.
"""

import argparse
import concurrent.futures
import importlib
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
from multiprocessing.connection import Connection


def start(module, extra_fds=(), extra_args=()):
    """Starts `python -m <module>` (which calls `worker_main`): (process, tasks, results).

    Args:
        module: the worker's module, e.g. "data.workers".
        extra_fds: file descriptors the worker inherits besides its two pipes.
        extra_args: more command-line arguments for the worker.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root, *filter(None, [os.environ.get("PYTHONPATH")])]))
    task_r, task_w = os.pipe()
    result_r, result_w = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, "--tasks", str(task_r), "--results", str(result_w),
             *extra_args],
            pass_fds=(task_r, result_w, *extra_fds), env=env, stdin=subprocess.DEVNULL)
    except BaseException:
        for fd in (task_w, result_r):
            os.close(fd)
        raise
    finally:
        os.close(task_r)
        os.close(result_w)
    return proc, Connection(task_w, readable=False), Connection(result_r, writable=False)


def stop(procs, connections, kill=False):
    """Closes the connections (a worker exits when its pipe closes) and reaps the processes."""
    for connection in connections:
        connection.close()
    for proc in procs:
        if kill:
            proc.kill()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def picklable(error):
    """`error` if it survives pickling, else a RuntimeError with its message."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # pylint: disable=broad-except
        return RuntimeError(f"{type(error).__name__}: {error}")


class CallPool:
    """Runs `fn(*args)` (fn a module-level function) in worker processes; futures back.

    Like `concurrent.futures.ProcessPoolExecutor` with `submit` and `shutdown`,
    minus the re-import of the parent's `__main__`.

    Args:
        num_workers: worker processes.
    """

    def __init__(self, num_workers):
        self._queue = queue.Queue()
        self._workers = [start("data.workers") for _ in range(num_workers)]
        self._threads = [threading.Thread(target=self._feed, args=worker, daemon=True)
                         for worker in self._workers]
        for thread in self._threads:
            thread.start()

    def submit(self, fn, *args):
        future = concurrent.futures.Future()
        self._queue.put((future, fn, args))
        return future

    def _feed(self, proc, tasks, results):
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                tasks.send((fn.__module__, fn.__qualname__, args))
                kind, payload = results.recv()
            except (EOFError, OSError):
                future.set_exception(RuntimeError(
                    f"a build worker exited unexpectedly (exit status {proc.poll()})"))
                return
            if kind == "error":
                future.set_exception(payload)
            else:
                future.set_result(payload)

    def shutdown(self, wait=True, cancel_futures=False, kill=False):
        """Stops the workers: after their running tasks (`wait`), or at once (`kill`)."""
        if cancel_futures or kill:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in self._threads:
            self._queue.put(None)
        if kill:
            stop([p for p, _, _ in self._workers], [], kill=True)
        if wait or kill:
            for thread in self._threads:
                thread.join()
        stop([p for p, _, _ in self._workers],
              [c for _, t, r in self._workers for c in (t, r)])


def serve(tasks, results, handle):
    """A worker's loop: each task in, ("done", handle(task)) or ("error", exception) out."""
    while True:
        try:
            task = tasks.recv()
        except EOFError:
            return
        if task is None:
            return
        try:
            results.send(("done", handle(task)))
        except Exception as e:  # pylint: disable=broad-except
            results.send(("error", picklable(e)))


def _call(task):
    """fn(*args) of a (module, function name, args) task."""
    module, name, args = task
    fn = importlib.import_module(module)
    for part in name.split("."):
        fn = getattr(fn, part)
    return fn(*args)


def worker_main(serve_tasks, argv=None, extra=()):
    """The main of a worker process: parses its pipes, ignores the signals, runs `serve_tasks`.

    Args:
        serve_tasks: fn(tasks, results, args) serving until the tasks pipe closes.
        argv: the command line (default sys.argv).
        extra: names of more integer arguments the worker takes ("--shared").
    """
    parser = argparse.ArgumentParser(description="A worker process (see data/workers.py).")
    parser.add_argument("--tasks", type=int, required=True)
    parser.add_argument("--results", type=int, required=True)
    for name in extra:
        parser.add_argument(f"--{name}", type=int, required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    tasks = Connection(args.tasks, writable=False)
    results = Connection(args.results, readable=False)
    try:
        serve_tasks(tasks, results, args)
    except (EOFError, OSError):
        pass  # The parent is gone (mid-message too: it may have exited at any moment).


if __name__ == "__main__":
    worker_main(lambda tasks, results, args: serve(tasks, results, _call))
