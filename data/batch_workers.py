"""Worker processes that make training batches in parallel, for data/pipeline.py.

Each worker (`python -m data.batch_workers`, started by data/workers.py) builds
a `batches.BatchMaker` from a picklable spec and then makes whole batches:
fetching the records, decoding and resizing the images, tokenising the
captions, stacking. Step s goes to worker s % num_workers, which writes the
batch straight into slot s % depth of a shared-memory ring (an anonymous
memfd, or an unlinked temporary file off Linux) and answers "done" over its
pipe; the trainer takes the steps in order, copies the slot out (one memcpy
per batch, the only serial work left) and hands the slot to step s + depth.
So the batches are exactly `BatchMaker.make(step)`, whatever the number of
workers, and throughput grows with the cores. An error in a worker (a corrupt
image, say) is raised by `next()` at that step, with its type.
"""

import mmap
import os
import tempfile

import numpy as np

from data import batches, workers


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


class WorkerPool:
    """Iterator over the batches of steps start_step, start_step + 1, ... made by worker processes.

    Args:
        spec: the `batches.BatchMaker` spec.
        num_workers: worker processes.
        start_step: the first step.
        depth: batches in flight (made or being made), at least num_workers.
    """

    def __init__(self, spec, num_workers, start_step, depth):
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
                proc, tasks, results = workers.start("data.batch_workers", (self._fd,),
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

    @property
    def pids(self):
        """The worker processes' ids (to measure their CPU time, say)."""
        return [proc.pid for proc in self._procs]

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
        workers.stop(self._procs, self._tasks + self._results)
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


def _serve_batches(tasks, results, args):
    """A batch worker: builds the BatchMaker, then makes each (step, slot) asked for."""
    try:
        spec, fields, slot_size, size = tasks.recv()
    except EOFError:
        return
    try:
        maker = batches.BatchMaker(spec)
        buffer = mmap.mmap(args.shared, size)
        results.send(("ready", None))
    except Exception as e:  # pylint: disable=broad-except
        results.send(("error", workers.picklable(e)))
        return

    def make(task):
        step, slot = task
        maker.make(step, out=_views(buffer, fields, slot_size, slot))
        return step

    workers.serve(tasks, results, make)


if __name__ == "__main__":
    workers.worker_main(_serve_batches, extra=("shared",))
