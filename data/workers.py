"""Worker processes that make training batches in parallel (for data/pipeline.py).

Each worker is a fresh Python process (`python -m data.workers`, not a fork of
the trainer: the trainer has threads, and its imports are heavy) that builds a
`batches.BatchMaker` from a picklable spec and then makes whole batches:
fetching the records, decoding and resizing the images, tokenising the
captions, stacking. Step s goes to worker s % num_workers, which writes the
batch straight into slot s % depth of a shared-memory ring (an anonymous
memfd, or an unlinked temporary file off Linux) and answers "done" over a
pipe; the trainer takes the steps in order, copies the slot out (one memcpy
per batch, the only serial work left) and hands the slot to step s + depth.
So the batches are exactly `BatchMaker.make(step)`, whatever the number of
workers, and throughput grows with the cores.

A worker ignores SIGINT and SIGTERM (the trainer decides when to stop, and
Ctrl-C reaches the whole process group) and exits when its pipe closes, so it
never outlives the trainer. An error in a worker (a corrupt image, say) is
raised in the trainer, with its type, when the trainer reaches that step.
"""

import argparse
import mmap
import os
import pickle
import signal
import subprocess
import sys
import tempfile
from multiprocessing.connection import Connection

import numpy as np


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
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [root, *filter(None, [os.environ.get("PYTHONPATH")])]))
        try:
            for _ in range(num_workers):
                task_r, task_w = os.pipe()
                result_r, result_w = os.pipe()
                proc = subprocess.Popen(
                    [sys.executable, "-m", "data.workers", "--tasks", str(task_r), "--results",
                     str(result_w), "--shared", str(self._fd)],
                    pass_fds=(task_r, result_w, self._fd), env=env, stdin=subprocess.DEVNULL)
                os.close(task_r)
                os.close(result_w)
                self._procs.append(proc)
                self._tasks.append(Connection(task_w, readable=False))
                self._results.append(Connection(result_r, writable=False))
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
        for tasks in self._tasks:
            try:
                tasks.send(None)
            except OSError:
                pass  # Already gone.
            tasks.close()
        for proc in self._procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for results in self._results:
            results.close()
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


def _serve(tasks, results, shared_fd):
    """A worker's loop: build the BatchMaker, then make each step asked for into its slot."""
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
    while True:
        try:
            task = tasks.recv()
        except EOFError:
            return
        if task is None:
            return
        step, slot = task
        try:
            maker.make(step, out=_views(buffer, fields, slot_size, slot))
            results.send(("done", step))
        except Exception as e:  # pylint: disable=broad-except
            results.send(("error", _picklable(e)))


def main(argv=None):
    parser = argparse.ArgumentParser(description="An input worker (started by data/workers.py).")
    parser.add_argument("--tasks", type=int, required=True)
    parser.add_argument("--results", type=int, required=True)
    parser.add_argument("--shared", type=int, required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    tasks = Connection(args.tasks, writable=False)
    results = Connection(args.results, readable=False)
    try:
        _serve(tasks, results, args.shared)
    except (BrokenPipeError, ConnectionResetError):
        pass  # The trainer is gone.


if __name__ == "__main__":
    main()
