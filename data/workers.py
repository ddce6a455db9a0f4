"""Worker processes: training batches in parallel (data/pipeline.py), and the build's tasks.

Each worker is a fresh Python process (`python -m data.workers`): not a fork
of the trainer (it has threads, and its imports are heavy), and not a
`multiprocessing` spawn either, which would import the parent's `__main__`
(train.py and JAX) again in every worker.

`WorkerPool` makes training batches. Each of its workers builds a
`batches.BatchMaker` from a picklable spec and then makes whole batches:
fetching the records, decoding and resizing the images, tokenising the
captions, stacking. Step s goes to worker s % num_workers, which writes the
batch straight into slot s % depth of a shared-memory ring (an anonymous
memfd, or an unlinked temporary file off Linux) and answers "done" over a
pipe; the trainer takes the steps in order, copies the slot out (one memcpy
per batch, the only serial work left) and hands the slot to step s + depth.
So the batches are exactly `BatchMaker.make(step)`, whatever the number of
workers, and throughput grows with the cores.

`CallPool` runs module-level functions in worker processes and returns
`concurrent.futures.Future`s: the build (data/builders/corpus.py) writes its
image shards and caption tables with it.

A worker ignores SIGINT and SIGTERM (the parent decides when to stop, and
Ctrl-C reaches the whole process group) and exits when its pipe closes, so it
never outlives its parent. An error in a worker (a corrupt image, say) is
raised in the parent with its type: by `next()` at that step, or by the future.
"""

import argparse
import concurrent.futures
import importlib
import mmap
import os
import pickle
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from multiprocessing.connection import Connection

import numpy as np


def _start(mode, extra_fds=(), extra_args=()):
    """Starts `python -m data.workers <mode>`: (process, task connection, result connection)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root, *filter(None, [os.environ.get("PYTHONPATH")])]))
    task_r, task_w = os.pipe()
    result_r, result_w = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "data.workers", mode, "--tasks", str(task_r), "--results",
             str(result_w), *extra_args],
            pass_fds=(task_r, result_w, *extra_fds), env=env, stdin=subprocess.DEVNULL)
    except BaseException:
        for fd in (task_w, result_r):
            os.close(fd)
        raise
    finally:
        os.close(task_r)
        os.close(result_w)
    return proc, Connection(task_w, readable=False), Connection(result_r, writable=False)


def _stop(procs, connections, kill=False):
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


def _layout(shapes):
    """[(feature, shape, dtype, offset)] of one slot, and the slot's size (64-byte aligned)."""
    fields, offset = [], 0
    for name, (shape, dtype) in sorted(shapes.items()):
        fields.append((name, tuple(shape), np.dtype(dtype).str, offset))
        offset += -(-int(np.prod(shape)) * np.dtype(dtype).itemsize // 64) * 64
    return fields, offset


def _views(buffer, fields, slot_size, slot):
    return {name: np.ndarray(shape, dtype, buffer=buffer, offset=slot * slot_size + offset)
            for name, shape, dtype, offset in fields}


def _shared_file(size):
    """A file descriptor of `size` bytes of shared memory that no path names."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("xm3600-batches", os.MFD_CLOEXEC)
    else:
        handle = tempfile.TemporaryFile()
        fd = os.dup(handle.fileno())
        handle.close()
    os.ftruncate(fd, size)
    return fd


def _picklable(error):
    """`error` if it survives pickling, else a RuntimeError with its message."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # pylint: disable=broad-except
        return RuntimeError(f"{type(error).__name__}: {error}")


class WorkerPool:
    """Iterator over the batches of steps start_step, start_step + 1, ... made by worker processes.

    Args:
        spec: the `batches.BatchMaker` spec.
        num_workers: worker processes.
        start_step: the first step.
        depth: batches in flight (made or being made), at least num_workers.
    """

    def __init__(self, spec, num_workers, start_step, depth):
        from data import batches

        self._procs, self._tasks, self._results = [], [], []
        self._fd = None
        self._closed = False
        shapes = batches.BatchMaker.shapes_of(spec)
        self._fields, self._slot_size = _layout(shapes)
        self._depth = max(depth, num_workers)
        size = self._slot_size * self._depth
        self._fd = _shared_file(size)
        self._buffer = mmap.mmap(self._fd, size)
        try:
            for _ in range(num_workers):
                proc, tasks, results = _start("batches", (self._fd,),
                                              ("--shared", str(self._fd)))
                self._procs.append(proc)
                self._tasks.append(tasks)
                self._results.append(results)
            for tasks in self._tasks:
                tasks.send((spec, self._fields, self._slot_size, size))
            for worker in range(num_workers):
                self._receive(worker)  # "ready", or the worker's error raised here.
        except BaseException:
            self.close()
            raise
        self._next = start_step
        for step in range(start_step, start_step + self._depth):
            self._submit(step)

    def _submit(self, step):
        self._tasks[step % len(self._tasks)].send((step, step % self._depth))

    def _receive(self, worker):
        try:
            kind, payload = self._results[worker].recv()
        except (EOFError, OSError):
            code = self._procs[worker].poll()
            raise RuntimeError(f"input worker {worker} exited unexpectedly (exit status "
                               f"{code}); see its messages above") from None
        if kind == "error":
            self.close()
            raise payload
        return payload

    def __iter__(self):
        return self

    def __next__(self):
        if self._closed:
            raise StopIteration
        step = self._next
        done = self._receive(step % len(self._procs))
        assert done == step, (done, step)
        views = _views(self._buffer, self._fields, self._slot_size, step % self._depth)
        batch = {name: np.array(view) for name, view in views.items()}  # The slot is reused.
        self._next += 1
        self._submit(step + self._depth)
        return batch

    def close(self):
        """Stops the workers and frees the shared memory."""
        if self._closed:
            return
        self._closed = True
        _stop(self._procs, self._tasks + self._results)
        if self._fd is not None:
            try:
                self._buffer.close()
            except (BufferError, AttributeError):
                pass  # A view still exists; the mapping goes with it.
            os.close(self._fd)
            self._fd = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # pylint: disable=broad-except
            pass  # At interpreter exit modules may be gone.


class CallPool:
    """Runs `fn(*args)` (fn a module-level function) in worker processes; futures back.

    Like `concurrent.futures.ProcessPoolExecutor` with `submit` and `shutdown`,
    minus the re-import of the parent's `__main__`.

    Args:
        num_workers: worker processes.
    """

    def __init__(self, num_workers):
        self._queue = queue.Queue()
        self._workers = [_start("calls") for _ in range(num_workers)]
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
            _stop([p for p, _, _ in self._workers], [], kill=True)
        if wait or kill:
            for thread in self._threads:
                thread.join()
        _stop([p for p, _, _ in self._workers],
              [c for _, t, r in self._workers for c in (t, r)])


def _serve(tasks, results, handle):
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
            results.send(("error", _picklable(e)))


def _serve_batches(tasks, results, shared_fd):
    """A batch worker: builds the BatchMaker, then makes each (step, slot) asked for."""
    try:
        spec, fields, slot_size, size = tasks.recv()
    except EOFError:
        return
    try:
        from data import batches

        maker = batches.BatchMaker(spec)
        buffer = mmap.mmap(shared_fd, size)
        results.send(("ready", None))
    except Exception as e:  # pylint: disable=broad-except
        results.send(("error", _picklable(e)))
        return

    def make(task):
        step, slot = task
        maker.make(step, out=_views(buffer, fields, slot_size, slot))
        return step

    _serve(tasks, results, make)


def _call(task):
    """fn(*args) of a (module, function name, args) task."""
    module, name, args = task
    fn = importlib.import_module(module)
    for part in name.split("."):
        fn = getattr(fn, part)
    return fn(*args)


def main(argv=None):
    parser = argparse.ArgumentParser(description="A worker process (started by data/workers.py).")
    parser.add_argument("mode", choices=("batches", "calls"))
    parser.add_argument("--tasks", type=int, required=True)
    parser.add_argument("--results", type=int, required=True)
    parser.add_argument("--shared", type=int, default=None)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    tasks = Connection(args.tasks, writable=False)
    results = Connection(args.results, readable=False)
    try:
        if args.mode == "batches":
            _serve_batches(tasks, results, args.shared)
        else:
            _serve(tasks, results, _call)
    except (BrokenPipeError, ConnectionResetError):
        pass  # The parent is gone.


if __name__ == "__main__":
    main()
