"""Where the numbers of a run go: `metrics.jsonl`, TensorBoard, and the console.

Also the clocks behind them: `StepTimer` (step time, throughput, MFU of the
training steps), `Progress` (images decoded, rate and ETA of an evaluation)
and `format_duration`, which both print with.

`metrics.jsonl` has one JSON object per logged step (`step`, `train/loss`,
`learning_rate`, ..., and after each evaluation `eval/cider_d/<lang>`,
`eval/cider_d/avg`). It is appended to, so a resumed run continues the same
file; lines from steps after the restored checkpoint (written before a crash)
are dropped on resume so that the file never holds two values for a step.
"""

import json
import math
import os
import socket
import sys
import time

import jax
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.record_writer import RecordWriter

import errors
from training import flops


def format_duration(seconds):
    """"42s", "3m07s" or "2h05m"."""
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class MetricsLogger:
    """Writes measurements of the main process; other processes write nothing.

    Args:
        workdir: the run's folder.
        total_steps: the run's length, for the ETA.
        start_step: the step training starts (or resumes) from.
        resumed: whether the run restored a checkpoint of `start_step`; if not,
            an old metrics file in the workdir is started afresh.
    """

    def __init__(self, workdir, total_steps, start_step=0, resumed=False):
        self.is_main = jax.process_index() == 0
        self.path = os.path.join(workdir, "metrics.jsonl")
        self.total_steps = total_steps
        self._t0, self._step0 = time.time(), start_step
        self._last_eval = {}
        self._writer = TensorBoardWriter(workdir) if self.is_main else None
        if self.is_main:
            _truncate_after(self.path, start_step if resumed else -1)

    def log(self, step, measurements):
        """Records scalar `measurements` (name -> number) of `step`."""
        measurements = {k: float(v) for k, v in measurements.items()}
        evals = {k: v for k, v in measurements.items() if k.startswith("eval/")}
        if evals:
            self._last_eval = {k: v for k, v in evals.items() if k.endswith("/avg")}
        if not self.is_main:
            return
        if evals:
            print(f"step {step} evaluation: "
                  + " | ".join(f"{k.removeprefix('eval/')} {v:.3f}" for k, v in evals.items()),
                  flush=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"step": int(step), **measurements}) + "\n")
        self._writer.write_scalars(int(step), measurements)
        self._writer.flush()

    def progress(self, step, measurements):
        """Prints one progress line: step, steps/s, loss, learning rate, ETA, latest CIDEr."""
        if not self.is_main:
            return
        # steps/s of the recent steps (evaluations excluded); the ETA uses the
        # whole run's pace, which includes evaluations and compilation.
        step_time = measurements.get("perf/step_time_s")
        elapsed, done = time.time() - self._t0, step - self._step0
        pace = elapsed / done if done > 0 else float("nan")
        eta = (self.total_steps - step) * pace
        parts = [f"step {step}/{self.total_steps}"]
        if step_time:
            parts.append(f"{1 / step_time:.2f} steps/s")
        for name in ("train/loss", "learning_rate"):
            if name in measurements:
                parts.append(f"{name.split('/')[-1]} {measurements[name]:.4g}")
        if not math.isnan(eta):
            parts.append(f"ETA {format_duration(eta)}")
        parts += [f"{k} {v:.3f}" for k, v in self._last_eval.items()]
        print(" | ".join(parts), flush=True)

    def close(self):
        if self._writer is not None:
            self._writer.close()


class TensorBoardWriter:
    """Scalars in a TensorBoard event file, written without TensorFlow.

    Each `write_scalars` appends one `Event` with a `simple_value` per name,
    framed as TFRecords, with tensorboard's own protos and record writer (pure
    Python). Not tensorboard's `EventFileWriter` nor clu's writers: those
    import TensorFlow whenever it is installed (seconds at every start, and
    on GPUs it claims device memory), and the training process never needs it.
    Every run (and resumption) writes a new file; TensorBoard reads them all.
    """

    def __init__(self, logdir):
        os.makedirs(logdir, exist_ok=True)
        now = time.time()
        # TensorBoard finds event files by the "tfevents" in their names.
        path = os.path.join(logdir, f"events.out.tfevents.{now:.0f}.{socket.gethostname()}."
                                    f"{os.getpid()}.v2")
        self._records = RecordWriter(open(path, "ab"))  # noqa: SIM115  Closed by close().
        self._write(event_pb2.Event(wall_time=now, file_version="brain.Event:2"))

    def _write(self, event):
        self._records.write(event.SerializeToString())

    def write_scalars(self, step, scalars):
        """Appends the scalars (name -> number) of `step`."""
        summary = summary_pb2.Summary(value=[
            summary_pb2.Summary.Value(tag=name, simple_value=float(value))
            for name, value in scalars.items()])
        self._write(event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary))

    def flush(self):
        self._records.flush()

    def close(self):
        self._records.close()


def _parse_lines(path):
    """[(line, record or None)] of a metrics file; a cut-short last line (a crash while
    writing it) gives None, any other line that is not a JSON object is an error."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.readlines()
    parsed = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("step"), int):
                raise ValueError("not an object with an integer 'step'")
        except ValueError as e:
            if number == len(lines) and not line.endswith("\n"):
                parsed.append((line, None))
                continue
            raise MetricsFileError(f"{path}:{number}: not a metrics record ({e}); fix or "
                                   f"delete that line") from None
        parsed.append((line, record))
    return parsed


class MetricsFileError(errors.InputError):
    """metrics.jsonl has a malformed line that is not a cut-short last one."""


def _truncate_after(path, step):
    """Drops lines of steps > `step` (left by a run that died after its last checkpoint)
    and a cut-short last line (left by a crash while writing it)."""
    if not os.path.exists(path):
        return
    parsed = _parse_lines(path)
    kept = [line for line, record in parsed if record is not None and record["step"] <= step]
    if any(record is None for _, record in parsed):
        print(f"warning: {path}: dropped a cut-short last line (written when the run "
              f"stopped)", flush=True)
    if len(kept) != len(parsed):
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(kept)
        os.replace(tmp, path)


def read_metrics(workdir):
    """Returns the list of records of `workdir/metrics.jsonl` (for tests and reports).

    A cut-short last line is left out.
    """
    path = os.path.join(workdir, "metrics.jsonl")
    return [record for _, record in _parse_lines(path) if record is not None]


class StepTimer:
    """Step time, examples/s, tokens/s and MFU since the last measurement, evaluations excluded."""

    def __init__(self, step):
        self._step, self._time = step, time.time()

    def restart(self, step):
        """Restarts the clock at `step` (after an evaluation, which is not training time)."""
        self._step, self._time = step, time.time()

    def measure(self, step, batch_size, step_flops, tokens):
        """The `perf/*` measurements of the steps since the last call (or restart)."""
        now = time.time()
        steps = step - self._step
        seconds = (now - self._time) / max(steps, 1)
        self._step, self._time = step, now
        out = {"perf/step_time_s": seconds, "perf/examples_per_s": batch_size / seconds,
               "perf/tokens_per_s": tokens / seconds}
        utilization = flops.mfu(step_flops, seconds)
        if utilization is not None:
            out["perf/mfu"] = utilization
        stats = jax.local_devices()[0].memory_stats() or {}
        if "peak_bytes_in_use" in stats:
            out["perf/peak_memory_gib"] = stats["peak_bytes_in_use"] / 2**30
        return out


class Progress:
    """Prints evaluation progress (images decoded) with an ETA, at most every `interval` s.

    Call it as `progress(lang, images done, images of lang)` after each batch.
    The rate is measured from the end of the first batch on, so that
    compilation does not inflate the ETA.
    """

    def __init__(self, total_images, num_langs, what, stream=None, interval=10.0):
        self.total, self.num_langs, self.what = total_images, num_langs, what
        self.interval = interval
        self.stream = stream or sys.stdout
        self._done_before = 0   # images of finished languages
        self._langs_done = 0
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
