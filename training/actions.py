"""What the training loop does after each step: log, evaluate, checkpoint, stop; each decides
by `schedules.itstime` whether the step is its own.
"""

import os
import time

import jax
import numpy as np

import errors
from training import checkpointing, flops, preemption, schedules
from training import workdir as workdir_lib


class TrainingError(errors.RunError):
    """Training cannot go on (non-finite loss, incompatible checkpoint, bad data, ...)."""


def _not_finite(step, measurements):
    """What is not finite of the loss and gradient norm, naming `step` (None when both are)."""
    bad = [k for k in ("train/loss", "train/grad_norm") if not np.isfinite(measurements[k])]
    if bad:
        return f"step {step}: non-finite {', '.join(f'{k}={measurements[k]}' for k in bad)}"
    return None


def check_finite(step, measurements, resumed_from=None):
    """Stops training on a NaN/Inf loss or gradient, naming the step and the quantity, and
    `resumed_from`: the checkpoint the run resumed from with no checkpoint saved since."""
    bad = _not_finite(step, measurements)
    if bad:
        since = (f"; the run resumed from {resumed_from} and saved no checkpoint since: if its "
                 f"data is damaged, move it away to resume from the one before"
                 if resumed_from else "")
        raise TrainingError(f"{bad}; the last good checkpoint is kept in the workdir{since}")


class RestoredNotFinite(TrainingError):
    """The first step after a restore was not finite: the checkpoint's data is damaged."""

    def __init__(self, restored_step, message):
        super().__init__(message)
        self.restored_step = restored_step


def check_restored(restored_step, measurements):
    """Raises RestoredNotFinite when `measurements` of the first step trained from checkpoint
    `restored_step` are not finite (a sync, once per resume)."""
    bad = _not_finite(restored_step + 1, jax.device_get(measurements))
    if bad:
        raise RestoredNotFinite(restored_step, f"gives {bad} as the first step trained from it "
                                f"(its files are damaged?)")


class Log:
    """Logs the training measurements of every `config.log_every`-th step (and the last)."""

    def __init__(self, logger, config, start_step, step_flops, checkpoint, model_config=None):
        self._logger, self._config, self._step_flops = logger, config, step_flops
        self._model_config = model_config  # For the useful FLOPs (none: not measured).
        self._clock = (start_step, time.time())  # Steps from then on are timed.
        self._pending = None  # (step, measurements on the device)
        # Up to its first save after a resume, a non-finite step names the checkpoint read.
        self._checkpoint = checkpoint
        self._dropped = 0  # Examples left out of packed rows since the last record (device).

    def __call__(self, step, measurements):
        """Writes the measurements held (now: no device idling); holds `step`'s."""
        self.flush()
        if "train/pack_dropped" in measurements:
            self._dropped = measurements["train/pack_dropped"] + self._dropped
            measurements = {**measurements, "train/pack_dropped": self._dropped}
        if schedules.itstime(step, self._config.log_every, self._config.total_steps):
            self._pending, self._dropped = (step, measurements), 0

    def flush(self):
        """Fetches the held measurements (waiting for their step), checks and writes them."""
        if self._pending is None:
            return
        (step, measurements), self._pending = self._pending, None
        measurements = jax.device_get(measurements)
        check_finite(step, measurements, self._checkpoint.resumed_from)
        measurements.update(self._perf(step, measurements))
        if measurements.get("train/pack_dropped") and self._logger.is_main:
            print(f"warning: {measurements['train/pack_dropped']} example(s) of the steps up to "
                  f"{step} did not fit the packed rows and were left out of the loss "
                  f"(train/pack_dropped; data/pipeline/packing.py)", flush=True)
        self._logger.log(step, measurements)
        self._logger.progress(step, measurements)

    def restart_clock(self, step):
        """Steps from `step` on are timed afresh (an evaluation is not training time)."""
        self._clock = (step, time.time())

    def _perf(self, step, measurements):
        """The `perf/*` measurements of the steps since the clock last started (takes the
        "lengths" out of `measurements`): MFU of the FLOPs computed and of those at the real
        lengths."""
        batch, lengths = self._config.batch_size, measurements.pop("lengths")
        useful = self._model_config and flops.useful_step_flops(self._model_config, batch, lengths)
        (since, then), now = self._clock, time.time()
        self._clock = (step, now)
        seconds = (now - then) / max(step - since, 1)
        out = {"perf/step_time_s": seconds, "perf/examples_per_s": batch / seconds,
               "perf/tokens_per_s": measurements["train/tokens"] / seconds}
        for name, work in (("perf/mfu_computed", self._step_flops), ("perf/mfu_useful", useful)):
            utilization = flops.mfu(work, seconds)
            if utilization is not None:
                out[name] = utilization
        stats = jax.local_devices()[0].memory_stats() or {}
        if "peak_bytes_in_use" in stats:
            out["perf/peak_memory_gib"] = stats["peak_bytes_in_use"] / 2**30
        return out


class Evaluate:
    """Runs the evaluators due at a step; saves the best checkpoint by its metric."""

    def __init__(self, evaluators, logger, best_saver, config):
        self._evaluators, self._logger, self._saver = evaluators, logger, best_saver
        self._metric, self._total_steps = config.checkpoint.best_metric, config.total_steps

    def due(self, step):
        """The evaluators that run at `step` (none: an empty list)."""
        return [e for e in self._evaluators.values()
                if schedules.itstime(step, e.every, self._total_steps, first=True)]

    def __call__(self, step, state):
        for evaluator in self.due(step):
            scores = evaluator.run(state["params"])
            self._logger.log(step, scores)
            if step > 0 and self._metric in scores:
                self._saver.save(step, state, metrics=scores)

    def poll(self):
        self._saver.poll()


class Checkpoint:
    """Saves the state every `config.checkpoint.every` steps and at the last one."""

    def __init__(self, saver, config, start_step):
        # The newest step saved, or restored; the checkpoint resumed from until a save.
        self._saver, self._config, self._saved = saver, config, start_step
        self.resumed_from = os.path.join(saver.folder, str(start_step)) if start_step else None

    def due(self, step):
        return schedules.itstime(step, self._config.checkpoint.every, self._config.total_steps)

    def __call__(self, step, state, measurements):
        """Saves `state` of `step` unless its loss or gradient is not finite."""
        check_finite(step, jax.device_get(measurements), self.resumed_from)
        workdir_lib.check()  # The workdir still this run's, else stop before writing.
        self._saver.save(step, state)
        self._saved, self.resumed_from = step, None

    def before_error(self, step, state, measurements, error):
        """Saves the last completed `step` before `error` ends the run (single process only);
        returns the error, naming the saved step."""
        if step == self._saved or jax.process_count() > 1:
            return error
        try:
            self(step, state, measurements)
        except TrainingError:
            return error
        self._saver.wait()
        return TrainingError(f"{error}; saved step {step} in {self._saver.folder} first")

    def poll(self):
        self._saver.poll()
        workdir_lib.check(renew=False)  # What the lease's thread found: no I/O each step.


def stop(step, saver, best_saver):
    """Ends the run a signal asked to stop: waits for the saves of `step`, then says so."""
    checkpointing.wait_all(saver, best_saver)
    preemption.finished()  # A Ctrl-C from now on exits 0: the step is saved.
    if jax.process_index() == 0:
        print(f"Stopped by {preemption.reason()}: saved step {step} in {saver.folder}; run the "
              f"same command to resume.", flush=True)
