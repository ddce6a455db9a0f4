"""Saving and restoring the training state `{"params", "opt_state", "step"}` with orbax.

Checkpoints are `<workdir>/checkpoints/<step>` (the best evaluation's in `checkpoints_best/`).
`restore` is the one way to read one back; a `Saver` reports a failed save as one SaveError.
Each checkpoint holds a CRC-32 of every array (item "checksums", committed with the state),
verified when it is read: flipped bytes in its data files make it damaged, like a missing file.
"""

import errno
import json
import logging
import os
import shutil
import sys
import time
import traceback
import zlib

import jax
import numpy as np
import orbax.checkpoint as ocp
from absl import logging as absl_logging
from jax.experimental import multihost_utils

import crash_points
import errors
from training import workdir as workdir_lib


def checkpoint_dir(workdir, best=False):
    """`<workdir>/checkpoints`, or with `best` `<workdir>/checkpoints_best`."""
    return os.path.join(os.path.abspath(workdir), "checkpoints_best" if best else "checkpoints")


def _is_library_noise(exc_value, exc_traceback):
    """Whether an exception a library thread reports is orbax's (its caller gets the failure)."""
    if isinstance(exc_value, RuntimeError) and "Event loop is closed" in str(exc_value):
        return True
    return any(f"{os.sep}orbax{os.sep}" in frame.f_code.co_filename
               for frame, _ in traceback.walk_tb(exc_traceback))


def _not_library_noise(record):
    """A log filter: drops orbax's records and asyncio's "Task exception was never retrieved"."""
    return not (f"{os.sep}orbax{os.sep}" in record.pathname or record.name == "asyncio")


_QUIET = {"installed": False}


def quiet_library_logs():
    """Hides the libraries' logs of a failed read or write, unless `--verbosity=0`. Idempotent."""
    if _QUIET["installed"] or absl_logging.get_verbosity() >= absl_logging.INFO:
        return
    _QUIET["installed"] = True
    logging.getLogger("absl").addFilter(_not_library_noise)
    logging.getLogger("asyncio").addFilter(_not_library_noise)
    default_hook = sys.unraisablehook

    def unraisable_hook(unraisable):
        if not _is_library_noise(unraisable.exc_value, unraisable.exc_traceback):
            default_hook(unraisable)

    sys.unraisablehook = unraisable_hook


class _LeasedRename(ocp.path.atomicity.AtomicRenameTemporaryPath):
    """Orbax's commit of a step folder (a rename), made only while this trainer still holds
    the workdir's lease: one that lost it (stopped meanwhile, another trainer took over)
    deletes its unfinished folder and stops (WorkdirError naming the holder)."""

    async def finalize(self):
        final = str(self.get_final())
        if os.path.basename(final).isdigit():  # A step folder (not an item inside one).
            try:
                workdir_lib.check()
            except workdir_lib.WorkdirError:
                shutil.rmtree(str(self.get()), ignore_errors=True)
                raise
            if os.path.basename(os.path.dirname(final)) == "checkpoints":
                crash_points.passed(f"checkpoints/{os.path.basename(final)} lease confirmed")
        await super().finalize()


def _causes(error):
    """`error` and the errors it came from (at most 10: a library could make a circle)."""
    for _ in range(10):
        if error is None:
            return
        yield error
        error = error.__cause__ or error.__context__


def _manager(folder, **options):
    quiet_library_logs()
    return ocp.CheckpointManager(folder, options=ocp.CheckpointManagerOptions(
        cleanup_tmp_directories=True,  # Left behind by a process killed mid-save.
        temporary_path_class=_LeasedRename, **options))


def manager(workdir, *, keep=3, asynchronous=True):
    """The orbax CheckpointManager of `<workdir>/checkpoints`, keeping the newest `keep`."""
    return _manager(checkpoint_dir(workdir), max_to_keep=keep,
                    enable_async_checkpointing=asynchronous)


def best_manager(workdir, metric):
    """The manager of `<workdir>/checkpoints_best`: keeps the state with the highest `metric`."""
    return _manager(
        checkpoint_dir(workdir, best=True), max_to_keep=1,
        best_fn=lambda metrics: metrics[metric], best_mode="max",
        keep_checkpoints_without_metrics=False,
        # Its own barrier names: saving the same step as the regular manager would
        # otherwise make the processes' barriers collide and hang a multi-process run.
        multiprocessing_options=ocp.options.MultiprocessingOptions(
            barrier_sync_key_prefix="best"))


class CheckpointError(errors.RunError):
    """A checkpoint cannot be restored: unreadable, or not of this model (names path and step)."""


class IncompatibleCheckpoint(CheckpointError):
    """The checkpoint is readable but its parameters do not fit the model."""


class SaveError(CheckpointError):
    """A checkpoint could not be saved: names the step, the folder, the cause, and what the
    same command does (from what the folders hold when it is made: `now()` once saves end)."""

    def __init__(self, step, folder, cause, space=False):
        self.step, self.folder, self.cause, self.space = step, folder, cause, space
        workdir = os.path.dirname(folder)  # Of checkpoints/ and checkpoints_best/ alike.
        done = steps(workdir)
        resume = (f"resumes from step {done[-1]} ({_step_path(workdir, done[-1])})" if done
                  else "starts afresh (no checkpoint is saved yet)")
        if done and done[-1] == step and folder == checkpoint_dir(workdir, best=True):
            resume += " (and saves the best checkpoint again if its evaluation is the best)"
        super().__init__(f"step {step}: saving checkpoint {os.path.join(folder, str(step))} "
                         f"failed: {cause}; {'make room, and' if space else 'once that is fixed,'}"
                         f" the same command {resume}")

    def now(self):
        return SaveError(self.step, self.folder, self.cause, self.space)


def checksums(tree):
    """{array path: {shard index: CRC-32 of its bytes}} of the shards this process holds, one
    per distinct index (replicas are the same)."""
    sums = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        pieces = ({str(shard.index): shard.data for shard in leaf.addressable_shards}
                  if hasattr(leaf, "addressable_shards") else {"()": leaf})
        sums[jax.tree_util.keystr(path, simple=True, separator="/")] = {
            index: zlib.crc32(np.ascontiguousarray(jax.device_get(data)).view(np.uint8))
            for index, data in pieces.items()}
    return sums


def _checksum_mismatch(path, tree):
    """The first array of `tree` (read from checkpoint folder `path`) whose bytes differ from
    the checksums saved with it, or None (also when it has none: saved before they were)."""
    saved_file = os.path.join(path, "checksums", "metadata")  # JsonSave's file name.
    if not os.path.isfile(saved_file):
        return None
    with open(saved_file, encoding="utf-8") as f:
        saved = json.load(f).get(str(jax.process_index()), {})
    prefix = "" if "opt_state" in tree else "params/"
    return next((prefix + name for name, sums in checksums(tree).items()
                 for index, crc in sums.items()
                 if saved.get(prefix + name, {}).get(index, crc) != crc), None)


class Saver:
    """Saves checkpoints through an orbax manager; a failed save stops training at once.
    `save` checks free space and starts the save, `poll` (every step, no collective) reports a
    failed background save, `wait` waits; each raises SaveError naming step, folder and cause."""

    def __init__(self, mngr):
        self._mngr = mngr
        self.folder = str(mngr.directory)  # <workdir>/checkpoints or checkpoints_best.
        self._pending = None  # (step, bytes needed, bytes free) of the save in the background.

    def save(self, step, state, metrics=None):
        """Starts saving `state` as checkpoint `step`, with `metrics` for `best_manager`."""
        self.wait()  # Orbax would wait for the previous save too; its failure comes first.
        if step in _steps_in(self.folder):
            # Left by a run stopped before its other writes of this step: a resumed run
            # retrains bit for bit, so it holds this very state.
            return
        needed, available = self._space(state), shutil.disk_usage(self.folder).free
        if available < needed:
            raise SaveError(step, self.folder, f"not enough free space: needs about "
                            f"{needed / 1e6:.1f} MB, {available / 1e6:.1f} MB available", True)
        # Orbax writes JSON from process 0: the other processes' shards go unchecked.
        sums = {str(jax.process_index()): checksums(state)}
        try:
            self._mngr.save(step, args=ocp.args.Composite(
                default=ocp.args.StandardSave(state), checksums=ocp.args.JsonSave(sums)),
                metrics=metrics, force=True)
        except Exception as e:  # noqa: BLE001  Any failure to write: the message says which.
            raise self._failure(step, needed, available, e) from None
        self._pending = (step, needed, available)
        crash_points.passed(f"{os.path.basename(self.folder)}/{step}", finish=self.wait)

    def poll(self):
        """Raises SaveError if the background save has failed (cheap: call it every step)."""
        if self._pending is not None and not self._mngr.is_saving_in_progress():
            self.wait()

    def wait(self):
        """Waits for the save in progress; raises SaveError if it failed."""
        pending, self._pending = self._pending, None
        try:
            self._mngr.wait_until_finished()
        except Exception as e:  # noqa: BLE001  Orbax re-raises its background thread's error.
            for cause in _causes(e):  # A save committed after the lease was lost.
                if isinstance(cause, workdir_lib.WorkdirError):
                    raise workdir_lib.WorkdirError(str(cause)) from None
            raise self._failure(*(pending or (None, 0, 0)), e) from None

    def _space(self, state):
        """Bytes the next save needs: the newest checkpoint's size, else the state's."""
        done = _steps_in(self.folder)
        if done:
            return sum(os.path.getsize(os.path.join(root, name)) for root, _, names
                       in os.walk(os.path.join(self.folder, str(done[-1]))) for name in names)
        return sum(getattr(leaf, "nbytes", 0) for leaf in jax.tree.leaves(state))

    def _failure(self, step, needed, available, error):
        """The SaveError of `error`; a full disk says the free space then and now."""
        # A full disk, as OSError or TensorStore says it.
        if not any(isinstance(e, OSError) and e.errno == errno.ENOSPC or "No space left" in str(e)
                   for e in _causes(error)):
            return SaveError(step, self.folder, _first_line(error))
        # Not "the save needed more than was free": another process may have filled the disk.
        now = shutil.disk_usage(self.folder).free
        return SaveError(step, self.folder, f"no space left on the device ({now / 1e6:.1f} MB "
                         f"free now, {available / 1e6:.1f} MB when the save started, for about "
                         f"{needed / 1e6:.1f} MB)", True)


def wait_all(*savers):
    """Waits for every saver's save in progress, then raises the first failure (SaveError)."""
    failure = None
    for saver in savers:
        try:
            saver.wait()
        except SaveError as e:
            failure = failure or e
    if failure:
        raise failure


def steps(workdir, best=False):
    """The steps of the run's complete checkpoints (with `best`: checkpoints_best/'s), ascending."""
    folder = checkpoint_dir(workdir, best)
    if os.path.exists(folder) and not os.path.isdir(folder):  # Before any manager opens it.
        raise CheckpointError(f"{folder} is not a folder; move it away, or use another --workdir")
    return _steps_in(folder) if os.path.isdir(folder) else []


def _steps_in(folder):
    """The step folders of a manager's folder, ascending."""
    return sorted(int(name) for name in os.listdir(folder) if name.isdigit())


def _step_path(workdir, step, best=False):
    return os.path.join(checkpoint_dir(workdir, best), str(step))


def _checkpointer():
    """Reads a step folder as the managers write it: the state is its item "default"."""
    return ocp.Checkpointer(ocp.CompositeCheckpointHandler(
        default=ocp.PyTreeCheckpointHandler(), metrics=ocp.JsonCheckpointHandler(),
        checksums=ocp.JsonCheckpointHandler()))


def _saved_tree(path):
    """The saved tree's metadata (shapes and dtypes), or CheckpointError when unreadable."""
    item = None
    if os.path.isfile(os.path.join(path, "default", "_METADATA")):
        try:
            item = _checkpointer().metadata(path).item_metadata["default"]
        except Exception as e:  # noqa: BLE001  Any failure to read it: the files are damaged.
            raise CheckpointError(f"cannot read its metadata ({_first_line(e)})") from None
    if item is None or item.tree is None:
        raise CheckpointError("cannot read its metadata (no default/_METADATA)")
    return item.tree


def _restore(path, target, partial=False):
    """The item "default" of step folder `path` read into `target` (`partial`: a subtree)."""
    target = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
    args = ocp.args.PyTreeRestore(item=target, partial_restore=partial,
                                  restore_args=ocp.checkpoint_utils.construct_restore_args(target))
    return _checkpointer().restore(path, args=ocp.args.Composite(default=args))["default"]


def _first_line(error):
    """The gist of a library's error: its first line, without TensorStore's spec dump."""
    text = str(error).strip().splitlines()
    text = text[0].split(" See full TensorStore details")[0] if text else type(error).__name__
    return text[:300]


def _shape_mismatches(saved_params, params):
    """["path: saved shape -> model shape", ...] between the saved and the model's params."""
    def flat(tree):
        return {jax.tree_util.keystr(path, simple=True, separator="/"): tuple(leaf.shape)
                for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}
    saved, model = flat(saved_params), flat(params)
    return [f"{k}: {saved.get(k, 'missing')} -> {model.get(k, 'missing')}"
            for k in sorted(set(saved) | set(model)) if saved.get(k) != model.get(k)]


def _readable_step(workdir, step, abstract_params, best):
    """(path, what to call it) of checkpoint `step`, its shapes checked against the model's."""
    available = steps(workdir, best)
    if step not in available:
        raise FileNotFoundError(f"no checkpoint of step {step} in {checkpoint_dir(workdir, best)}"
                                f"; available steps: {', '.join(map(str, available)) or 'none'}")
    path = _step_path(workdir, step, best)
    where = f"checkpoint {path} (step {step})"
    with errors.reraised(CheckpointError, CheckpointError, f"{where} is damaged: "):
        saved = _saved_tree(path)
    if isinstance(saved, dict) and "params" in saved:
        mismatches = _shape_mismatches(saved["params"], abstract_params)
        if mismatches:
            raise IncompatibleCheckpoint(
                f"{where} does not fit the model of the config: {'; '.join(mismatches[:10])}"
                + (f"; and {len(mismatches) - 10} more" if len(mismatches) > 10 else ""))
    return path, where


def check_params(workdir, step, abstract_params):
    """Checks from its metadata that checkpoint `step` (None: the newest) holds parameters of
    the shapes of `abstract_params` (FileNotFoundError, CheckpointError)."""
    available = steps(workdir)  # Checked before by the caller, but it may vanish since.
    _readable_step(workdir, available[-1] if step is None and available else step,
                   abstract_params, best=False)


def _read_step(workdir, step, abstract, best=False):
    """Checkpoint `step` read into `abstract`: the whole state, or the parameters alone."""
    whole = isinstance(abstract, dict) and "opt_state" in abstract
    path, where = _readable_step(workdir, step, abstract["params"] if whole else abstract, best)
    try:
        tree = (_restore(path, abstract) if whole  # Else the parameters alone.
                else _restore(path, {"params": abstract}, partial=True)["params"])
    except Exception as e:  # noqa: BLE001  The shapes fit: a failure is damaged data.
        raise CheckpointError(f"{where} is damaged: {_first_line(e)}") from None
    mismatch = _checksum_mismatch(path, tree)
    if mismatch:
        raise CheckpointError(f"{where} is damaged: the data of {mismatch} differs from its "
                              f"checksum")
    return tree


def parse_step(step):
    """A step as given (None, "best", a number or its text) -> None, "best" or an int >= 0."""
    if step is None or step == "best":
        return step
    try:
        number = int(step)
    except (TypeError, ValueError):
        raise ValueError(f"step {step!r}: expected a number or 'best'") from None
    if number < 0:
        raise ValueError(f"step must be >= 0, got {number}")
    return number


def restore(workdir, abstract, step=None, *, set_aside=False, at_most=None):
    """Restores a checkpoint of the run into the shapes and shardings of `abstract`.

    Args:
        abstract: the state `{"params", "opt_state", "step"}` or the parameters alone, as
            ShapeDtypeStructs with shardings.
        step: None (the newest readable), "best" or a step.
        set_aside: the trainer's resume: damaged checkpoints newer than a readable one, and
            those after `at_most` (the last step metrics.jsonl holds whole), are moved to
            `checkpoints_damaged/`. Without it a damaged checkpoint is an error, and a newest
            one deleted while read is replaced by the newest left.

    Returns (tree, step), or (None, None) when there is no checkpoint; raises
    FileNotFoundError, IncompatibleCheckpoint or CheckpointError.
    """
    quiet_library_logs()
    if set_aside:
        return _restore_resumable(workdir, abstract, at_most)
    if step not in (None, "best"):
        return _read_step(workdir, step, abstract), step
    best = step == "best"
    while True:
        available = steps(workdir, best)
        if not available:
            return None, None
        try:
            return _read_step(workdir, available[-1], abstract, best), available[-1]
        except IncompatibleCheckpoint:
            raise
        except (FileNotFoundError, CheckpointError):
            remaining = steps(workdir, best)
            if available[-1] in remaining:
                raise  # Still there: damaged.
            if remaining:  # Else the next round finds none.
                print(f"note: checkpoint step {available[-1]} was deleted while it was read "
                      f"(by the trainer, which keeps the newest); reading step "
                      f"{remaining[-1]} instead", flush=True)


def _restore_resumable(workdir, abstract_state, at_most):
    """`restore` with `set_aside`."""
    done = steps(workdir)
    # Up to `at_most` (all if none is or `at_most` is None).
    wanted = [step for step in done if at_most is None or step <= at_most] or done
    skipped = [(step, CheckpointError(
        f"checkpoint {_step_path(workdir, step)} (step {step}) is newer than the records "
        f"metrics.jsonl holds whole (to step {at_most})")) for step in done[len(wanted):]]
    damaged = []
    for step in reversed(wanted):
        try:
            state = _read_step(workdir, step, abstract_state)
        except IncompatibleCheckpoint:
            raise
        except CheckpointError as e:
            damaged.append((step, e))
            continue
        for bad_step, error in skipped[::-1] + damaged:
            _set_aside(workdir, bad_step, error, f"resuming from step {step}")
        if at_most is not None and step > at_most and jax.process_index() == 0:
            # Only a file cut by hand gets here: a crash cuts the newest record alone.
            print(f"warning: {workdir}/metrics.jsonl holds whole records only to step "
                  f"{at_most} and no checkpoint of that step or before is kept; resuming from "
                  f"step {step}, so the records of steps {at_most + 1}-{step} are lost",
                  flush=True)
        return state, step
    if damaged:
        raise CheckpointError(
            "no checkpoint of the run can be read: " + "; ".join(str(e) for _, e in damaged)
            + ". Move those folders away to start afresh, or use another --workdir")
    return None, None


def set_aside_damaged_best(workdir):
    """Moves best checkpoints whose state or metrics cannot be read aside, one line each."""
    for step in steps(workdir, best=True):
        path = _step_path(workdir, step, best=True)
        try:
            _saved_tree(path)
            with open(os.path.join(path, "metrics", "metrics"), encoding="utf-8") as f:
                json.load(f)
        except (CheckpointError, OSError, ValueError) as e:
            cause = e if isinstance(e, CheckpointError) else f"its metrics: {_first_line(e)}"
            _set_aside(workdir, step, f"best checkpoint {path} (step {step}) is damaged "
                       f"({cause})", "the best checkpoint is saved again when its step's "
                       "checkpoint is kept", best=True)


def set_aside_to_resume_before(workdir, step, what):
    """Moves checkpoint `step`, which `what` (e.g. "gives a NaN loss"), aside when an older
    one is kept to resume from; else raises CheckpointError."""
    path, older = _step_path(workdir, step), [s for s in steps(workdir) if s < step]
    if not older:
        raise CheckpointError(f"checkpoint {path} (step {step}) {what}; no older checkpoint is "
                              f"kept: move it away to start afresh, or use another --workdir")
    _set_aside(workdir, step, f"checkpoint {path} (step {step}) {what}",
               f"resuming from step {older[-1]}")


def _set_aside(workdir, step, error, then, best=False):
    """Moves a damaged checkpoint to checkpoints_damaged/ (process 0; all processes wait)."""
    source = _step_path(workdir, step, best)
    name = f"best-{step}" if best else str(step)
    target = os.path.join(os.path.abspath(workdir), "checkpoints_damaged", name)
    if os.path.exists(target):
        target = f"{target}.{int(time.time())}"
    if jax.process_index() == 0:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.replace(source, target)
        print(f"warning: {error}; moved it to {target} and {then}", flush=True)
        crash_points.passed(f"checkpoints_damaged/{os.path.basename(target)}")
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(f"set_aside_{name}")
