"""Where the numbers of a run go: `metrics.jsonl`, TensorBoard, and the console.

`metrics.jsonl` has one JSON object per logged step (`step`, `train/loss`,
`learning_rate`, ..., and after each evaluation `eval/cider_d/<lang>`,
`eval/cider_d/avg`). It is appended to, so a resumed run continues the same
file; lines from steps after the restored checkpoint (written before a crash)
are dropped on resume so that the file never holds two values for a step.
"""

import json
import math
import os
import time

import jax
from clu import metric_writers


def _format_duration(seconds):
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
        self._writer = metric_writers.create_default_writer(
            workdir, just_logging=not self.is_main, asynchronous=False)
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
            parts.append(f"ETA {_format_duration(eta)}")
        parts += [f"{k} {v:.3f}" for k, v in self._last_eval.items()]
        print(" | ".join(parts), flush=True)

    def close(self):
        self._writer.close()


def _truncate_after(path, step):
    """Drops lines of steps > `step` (left by a run that died after its last checkpoint)."""
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    kept = [l for l in lines if l.strip() and json.loads(l)["step"] <= step]
    if len(kept) != len(lines):
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(kept)
        os.replace(tmp, path)


def read_metrics(workdir):
    """Returns the list of records of `workdir/metrics.jsonl` (for tests and reports)."""
    with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
