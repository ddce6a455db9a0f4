"""Where the numbers of a run go: `metrics.jsonl`, TensorBoard, the console; and the clocks
(`Progress`, `format_duration`).

`metrics.jsonl` holds one JSON object per logged step and kind (`step`, `train/loss`, ...,
`eval/cider_d/<lang>`), appended; a resumed run `repair`s it first. A full disk is a one-line
`MetricsWriteError`.
"""

import contextlib
import json
import os
import re
import socket
import sys
import time

import jax
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.record_writer import RecordWriter

import crash_points
import errors
import files
from training import schedules
from training import workdir as workdir_lib


def metrics_path(workdir):
    """The run's metrics file: one JSON record a line."""
    return os.path.join(workdir, "metrics.jsonl")


def format_duration(seconds):
    """"42s", "3m07s" or "2h05m"."""
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class MetricsLogger:
    """Writes the main process's measurements (other processes write nothing).

    `start_step` > 0: the run restored a checkpoint of that step (0: an old file starts afresh).
    Records of multiples of `sync_every` (checkpoint steps) and the last are fsynced.
    MetricsFileError / MetricsWriteError: see `repair`.
    """

    def __init__(self, workdir, total_steps, start_step=0, sync_every=1, log_every=None):
        self.is_main = jax.process_index() == 0
        self.path = metrics_path(workdir)
        self.total_steps, self.sync_every = total_steps, sync_every
        self._t0, self._step0 = time.time(), start_step
        self._last_eval = {}
        self._writer = None
        if self.is_main:
            repair(self.path, start_step or -1, log_every)
            self._writer = TensorBoardWriter(workdir)

    def log(self, step, measurements):
        """Records scalar `measurements` (name -> number) of `step`; MetricsWriteError (a full
        disk) or WorkdirError (another trainer holds the workdir) stops the run."""
        if not self.is_main:
            return
        measurements = {k: float(v) for k, v in measurements.items()}
        evals = {k: v for k, v in measurements.items() if k.startswith("eval/")}
        if evals:
            self._last_eval = {k: v for k, v in evals.items() if k.endswith("/avg")}
            print(f"step {step} evaluation: "
                  + " | ".join(f"{k.removeprefix('eval/')} {v:.3f}" for k, v in evals.items()),
                  flush=True)
        record = json.dumps({"step": int(step), **measurements}) + "\n"
        workdir_lib.check()  # Still this run's workdir: else stop before writing.
        with _writing(self.path, f"step {step}: "):
            # Flushed per record: a crash cuts at most this one, which `repair` sets aside.
            with open(self.path, "ab") as f:
                f.write(record.encode("utf-8"))
                f.flush()
                if schedules.itstime(step, self.sync_every, self.total_steps):
                    os.fsync(f.fileno())
        kinds = " ".join(sorted({name.split("/")[0] for name in measurements if "/" in name}))
        crash_points.passed(f"metrics.jsonl step {step} {kinds}")
        with _writing(self._writer.path, f"step {step}: "):
            self._writer.write_scalars(int(step), measurements)

    def progress(self, step, measurements):
        """Prints one progress line: step, steps/s, loss, learning rate, ETA, latest CIDEr."""
        if not self.is_main:
            return
        # steps/s of the recent steps (evaluations excluded); the ETA uses the
        # whole run's pace, which includes evaluations and compilation.
        step_time, done = measurements.get("perf/step_time_s"), step - self._step0
        parts = [f"step {step}/{self.total_steps}"]
        if step_time:
            parts.append(f"{1 / step_time:.2f} steps/s")
        parts += [f"{name.split('/')[-1]} {measurements[name]:.4g}"
                  for name in ("train/loss", "learning_rate") if name in measurements]
        if done > 0:
            pace = (time.time() - self._t0) / done
            parts.append(f"ETA {format_duration((self.total_steps - step) * pace)}")
        parts += [f"{k} {v:.3f}" for k, v in self._last_eval.items()]
        print(" | ".join(parts), flush=True)

    def close(self):
        """Closes the event file; after a write error (already raised) quietly."""
        if self._writer is not None:
            with _writing(self._writer.path):
                self._writer.close()


class TensorBoardWriter:
    """Scalars in a TensorBoard event file (a new one per start), written with tensorboard's
    pure Python protos and record writer: its `EventFileWriter` and clu's import TensorFlow
    when installed (seconds, and GPU memory). OSErrors pass through."""

    def __init__(self, logdir):
        now = time.time()
        # TensorBoard finds event files by the "tfevents" in their names.
        self.path = os.path.join(logdir, f"events.out.tfevents.{now:.0f}."
                                         f"{socket.gethostname()}.{os.getpid()}.v2")
        self._failed = False
        with _writing(self.path):
            os.makedirs(logdir, exist_ok=True)
            self._records = RecordWriter(open(self.path, "ab"))  # noqa: SIM115  close() closes.
            try:
                self._write(event_pb2.Event(wall_time=now, file_version="brain.Event:2"))
            except OSError:
                self.close()
                raise

    def _write(self, event):
        """Appends `event` and flushes; after an OSError `close` does not raise it again."""
        self._failed = True
        self._records.write(event.SerializeToString())
        self._records.flush()
        self._failed = False

    def write_scalars(self, step, scalars):
        """Appends the scalars (name -> number) of `step`."""
        summary = summary_pb2.Summary(value=[
            summary_pb2.Summary.Value(tag=name, simple_value=float(value))
            for name, value in scalars.items()])
        self._write(event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary))

    def close(self):
        """Closes the file (a buffered file closes even when its last flush fails)."""
        try:
            self._records.close()
        except OSError:
            if not self._failed:  # Else already reported: the bytes that failed again.
                raise


class MetricsFileError(errors.InputError):
    """metrics.jsonl is not a file, or has a malformed line that is not a cut-short last one."""


class MetricsWriteError(errors.RunError):
    """metrics.jsonl or the TensorBoard event file cannot be written (a full disk, ...)."""


@contextlib.contextmanager
def _writing(path, prefix=""):
    """Turns an OSError while writing `path` into a one-line MetricsWriteError."""
    try:
        yield
    except OSError as e:
        raise MetricsWriteError(
            f"{prefix}cannot write {path} ({e.strerror or e}); the run stopped: make room "
            f"there and run the same command to resume from the last checkpoint") from None


_DECODER = json.JSONDecoder()


def _records_in(text):
    """([(text, record)] of the whole metrics records at the start of `text`, back to back;
    the rest of `text`)."""
    found, pos = [], 0
    while pos < len(text):
        try:
            record, end = _DECODER.raw_decode(text, pos)
        except ValueError:
            break
        if not isinstance(record, dict) or type(record.get("step")) is not int:
            break
        found.append((text[pos:end], record))
        pos = end
    return found, text[pos:]


def _why_not_a_record(text):
    try:
        json.loads(text)
    except ValueError as e:
        return str(e)
    return "not an object with an integer 'step'"


def _read(path):
    """The bytes of a metrics file (b"" when there is none); a folder is an error."""
    if os.path.isdir(path):
        raise MetricsFileError(f"{path} is a folder, not a file: the run writes its metrics "
                               f"there; move it away")
    try:
        with open(path, "rb") as f:
            return f.read()
    except (FileNotFoundError, NotADirectoryError):  # A workdir that is not one: said later.
        return b""
    except OSError as e:
        raise MetricsFileError(f"{path}: cannot read it ({e.strerror})") from None


def _scan(path, data):
    """Splits a metrics file's bytes into ([(text, record)], the tail cut short by a crash).

    A line may hold records back to back (appended onto a line that lacked its newline).
    Decoded with surrogateescape: encoding gives the bytes back. MetricsFileError names a bad
    line.
    """
    *lines, last = data.decode("utf-8", "surrogateescape").split("\n")
    records = []
    for number, line in enumerate(lines, 1):
        found, rest = _records_in(line.strip())
        records += found
        if rest:
            raise MetricsFileError(f"{path}:{number}: not a metrics record "
                                   f"({_why_not_a_record(rest)}); fix or delete that line")
    found, rest = _records_in(last.lstrip())  # Cut short by a crash: its rest is the tail.
    return records + found, rest


def check_metrics_file(workdir):
    """The last step whose records `workdir/metrics.jsonl` holds whole (None if none is cut):
    a resumed run restores that step or before. MetricsFileError as `repair`."""
    path = metrics_path(workdir)
    records, tail = _scan(path, _read(path))
    tail = tail.strip()
    if not tail:
        return None
    of_step = re.match(r'\{"step": (\d+)[,}]', tail)
    if of_step:
        return int(of_step.group(1)) - 1
    # Cut before its step is whole: it is at least the last whole record's step.
    last = records[-1][1]["step"] if records else 0
    return last - 1 if f'{{"step": {last},'.startswith(tail) else last


def evaluations(workdir, metric):
    """{step: scores} of metrics.jsonl's evaluations that hold `metric`, after step 0."""
    path = metrics_path(workdir)
    return {r["step"]: {k: v for k, v in r.items() if k != "step"}
            for _, r in _scan(path, _read(path))[0]
            if r["step"] > 0 and isinstance(r.get(metric), int | float)}


def metrics_lost_warning(workdir):
    """[the warning line] when a run with checkpoints has no or an empty metrics.jsonl."""
    path = metrics_path(workdir)
    if os.path.exists(path) and os.path.getsize(path) > 0:
        return []
    return [f"warning: {path} is {'empty' if os.path.exists(path) else 'gone'} though the "
            f"run has checkpoints: the records of the steps it resumes after are lost (a run "
            f"writes it from its first step; it was removed or emptied since)"]


def repair(path, step, log_every=None):
    """Makes `path` the records of steps <= `step`, one a line (logged again after it).

    A record cut short by a crash goes to `path`.damaged, with a warning; one missing, doubled
    (the second dropped) or out of order is named in one warning. MetricsFileError for a
    folder or a malformed line not the last (nothing changed); MetricsWriteError.
    """
    data = _read(path)
    records, tail = _scan(path, data)
    kept, wrong = _check_sequence(records, step, log_every)
    if wrong:
        print(f"warning: {path}: {'; '.join(wrong)} (edited by hand?); the other records are "
              f"kept", flush=True)
    repaired = "".join(text + "\n" for text in kept).encode("utf-8", "surrogateescape")
    if repaired == data:
        return
    if tail.strip() and os.path.isdir(path + ".damaged"):
        raise MetricsFileError(f"{path}.damaged is a folder, not a file: the run sets records "
                               f"cut short by a crash aside there; move it away")
    with _writing(path):
        if tail.strip():
            damaged = tail.encode("utf-8", "surrogateescape")
            with open(path + ".damaged", "ab") as f:
                f.write(damaged + b"\n")
            crash_points.passed("metrics.jsonl.damaged")
            of_step = re.match(r'\{"step": (\d+),', tail)
            where = (f"of step {of_step.group(1)}" if of_step else
                     f"after step {records[-1][1]['step']}" if records else "at its start")
            print(f"warning: {path}: dropped a record cut short when the run stopped "
                  f"({where}, {len(damaged)} bytes); its bytes are in {path}.damaged",
                  flush=True)
        files.write_bytes(path, repaired)  # A crash leaves the old file or the new one.
    crash_points.passed("metrics.jsonl repaired")


def _check_sequence(records, step, log_every=None):
    """(The records' texts to keep: steps <= `step`, each step and kind once; what is wrong,
    in words). A train record is due at each multiple of `log_every` when the records keep
    to it (a short file too), else of the commonest gap, if seen twice."""
    if step < 0:
        return [], []
    kept, seen, wrong, last = [], set(), [], -1
    for text, record in records:
        if record["step"] < last:
            wrong.append(f"step {record['step']} after step {last} (out of order)")
        last = record["step"]
        kind = (record["step"], frozenset(record))
        if kind in seen:
            wrong.append(f"step {record['step']} twice (kept once)")
        elif record["step"] <= step:
            kept.append(text)
        seen.add(kind)
    logged = sorted({r["step"] for _, r in records if "train/loss" in r and r["step"] <= step})
    gaps = [b - a for a, b in zip(logged, logged[1:], strict=False)]
    every = max(set(gaps), key=gaps.count) if gaps else 0
    every = every if gaps.count(every) > 1 else 0
    if log_every and logged and all(s % log_every == 0 for s in logged[:-1]):
        every = log_every
    missing = [s for a, b in zip([0, *logged], [*logged, step + 1], strict=True)
               for s in range(a + 1, b) if every and s % every == 0]
    if missing:
        wrong.append(f"no train record of step {', '.join(map(str, missing[:5]))}"
                     + (f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""))
    return kept, wrong


class Progress:
    """Prints evaluation progress with an ETA (from the end of the first batch: compiles
    excluded) at most every `interval` s; called (lang, images done, images of lang)."""

    def __init__(self, total_images, num_langs, what, stream=None, interval=10.0):
        self.total, self.num_langs, self.what = total_images, num_langs, what
        self.interval = interval
        self.stream = stream or sys.stdout
        self._done_before = self._langs_done = 0  # Images and languages finished.
        self._start = time.time()
        self._rate_start = None  # (time, images) after the first batch
        self._last_print = 0.0

    def __call__(self, lang, done, count):
        now = time.time()
        total_done = self._done_before + done
        if self._rate_start is None:
            self._rate_start = (now, total_done)
        finished = done == count
        if finished or now - self._last_print >= self.interval:
            t0, n0 = self._rate_start
            rate = (total_done - n0) / (now - t0) if now > t0 and total_done > n0 else None
            eta = format_duration((self.total - total_done) / rate) if rate else "?"
            speed = f"{rate:.1f} images/s" if rate else "first batch"
            print(f"{self.what} [{lang} {self._langs_done + 1}/{self.num_langs}] {done}/{count} "
                  f"images | {speed} | elapsed {format_duration(now - self._start)} | ETA {eta}",
                  file=self.stream, flush=True)
            self._last_print = now
        if finished:
            self._done_before += count
            self._langs_done += 1
