"""Saving and restoring the training state with orbax.

A checkpoint is the pytree `{"params", "opt_state", "step"}` saved with orbax's
CheckpointManager under `<workdir>/checkpoints/<step>`. Orbax writes each save
into a temporary folder and renames it when complete, so `steps()` never
lists a half-written checkpoint; that is what makes resuming after a crash safe.
Restoring reads the checkpoint's own metadata first: parameters of other
shapes are reported by name (a config change), unreadable files as damage,
and `restore_latest` sets a damaged newest checkpoint aside and resumes from
the one before it.
"""

import os
import time

import jax
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils

import errors


def checkpoint_dir(workdir, best=False):
    """`<workdir>/checkpoints`, or with `best` `<workdir>/checkpoints_best` (`best_manager`'s)."""
    return os.path.join(os.path.abspath(workdir), "checkpoints_best" if best else "checkpoints")


def has_checkpoint(workdir):
    """Whether `workdir/checkpoints` holds at least one complete checkpoint."""
    return bool(steps(workdir))


def manager(workdir, *, keep=3, asynchronous=True, read_only=False):
    """Returns an orbax CheckpointManager for the run in `workdir`.

    Args:
        workdir: the run's folder.
        keep: how many of the most recent checkpoints to keep.
        asynchronous: save in a background thread (training goes on meanwhile).
        read_only: for evaluation tools, which must never write or delete.
    """
    options = ocp.CheckpointManagerOptions(
        max_to_keep=keep, create=not read_only, read_only=read_only,
        cleanup_tmp_directories=not read_only,  # Left behind by a process killed mid-save.
        enable_async_checkpointing=asynchronous)
    return ocp.CheckpointManager(checkpoint_dir(workdir), options=options)


def best_manager(workdir, metric):
    """A manager under `<workdir>/checkpoints_best` that keeps the state with the highest
    `metric` (`config.checkpoint.best_metric`; orbax compares the metrics saved with each
    step, so save to it only with evaluations that measured `metric`)."""
    options = ocp.CheckpointManagerOptions(
        max_to_keep=1, best_fn=lambda metrics: metrics[metric], best_mode="max",
        keep_checkpoints_without_metrics=False, cleanup_tmp_directories=True,
        # Its own barrier names: saving the same step as the regular manager would
        # otherwise make the processes' barriers collide and hang a multi-process run.
        multiprocessing_options=ocp.options.MultiprocessingOptions(
            barrier_sync_key_prefix="best"))
    return ocp.CheckpointManager(checkpoint_dir(workdir, best=True), options=options)


def save(mngr, step, state, metrics=None):
    """Starts saving `state` as checkpoint `step` (returns before it is written when async).

    Args:
        mngr: from `manager()` or `best_manager()`.
        step: the training step.
        state: the training state pytree.
        metrics: for `best_manager()`: the evaluation's scores (with its metric).
    """
    mngr.save(step, args=ocp.args.StandardSave(state), metrics=metrics, force=True)


class CheckpointError(errors.RunError):
    """A checkpoint cannot be restored: unreadable, or not of this model (names path and step)."""


class IncompatibleCheckpoint(CheckpointError):
    """The checkpoint is readable but its parameters do not fit the model."""


def steps(workdir, best=False):
    """The complete checkpoints of the run (with `best`: in checkpoints_best/), ascending
    (orbax renames a save's folder to its step number only when the save is complete)."""
    folder = checkpoint_dir(workdir, best)
    if not os.path.isdir(folder):
        return []
    return sorted(int(name) for name in os.listdir(folder) if name.isdigit())


def _step_path(workdir, step, best=False):
    return os.path.join(checkpoint_dir(workdir, best), str(step))


def _checkpointer():
    """Reads a step folder as the managers write it: the state is its item "default"."""
    # "metrics": what best_manager() saves beside the state (read by nobody here).
    return ocp.Checkpointer(ocp.CompositeCheckpointHandler(
        default=ocp.StandardCheckpointHandler(), metrics=ocp.JsonCheckpointHandler()))


def _saved_tree(path):
    """The saved tree's metadata (shapes and dtypes), or CheckpointError when unreadable."""
    if not os.path.isfile(os.path.join(path, "default", "_METADATA")):
        raise CheckpointError("cannot read its metadata (no default/_METADATA)")
    try:
        item = _checkpointer().metadata(path).item_metadata["default"]
        tree = None if item is None else item.tree
    except Exception as e:  # noqa: BLE001  Any failure to read it means the files are damaged.
        raise CheckpointError(f"cannot read its metadata ({_first_line(e)})") from None
    if tree is None:
        raise CheckpointError("cannot read its metadata (no default/_METADATA)")
    return tree


def _restore(path, target):
    args = ocp.args.Composite(default=ocp.args.StandardRestore(target))
    return _checkpointer().restore(path, args=args)["default"]


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
    out = [f"{k}: {saved.get(k, 'missing')} -> {model.get(k, 'missing')}"
           for k in sorted(set(saved) | set(model)) if saved.get(k) != model.get(k)]
    return out


def restore_step(workdir, step, abstract_state, best=False):
    """Restores checkpoint `step` of the run into the shapes and shardings of `abstract_state`.

    With `best`, the one of `<workdir>/checkpoints_best`.

    Raises:
        FileNotFoundError: no checkpoint of that step (the message lists those there are).
        CheckpointError: its files are unreadable, or its parameters do not have the
            model's shapes (every differing one named); the message names the folder.
    """
    if step not in steps(workdir, best):
        raise FileNotFoundError(f"no checkpoint of step {step} in "
                                f"{checkpoint_dir(workdir, best)}; available steps: "
                                f"{steps(workdir, best) or 'none'}")
    path = _step_path(workdir, step, best)
    where = f"checkpoint {path} (step {step})"
    try:
        saved = _saved_tree(path)
    except CheckpointError as e:
        raise CheckpointError(f"{where} is damaged: {e}") from None
    if isinstance(saved, dict) and "params" in saved:
        mismatches = _shape_mismatches(saved["params"], abstract_state["params"])
        if mismatches:
            raise IncompatibleCheckpoint(
                f"{where} does not fit the model of the config: {'; '.join(mismatches[:10])}"
                + (f"; and {len(mismatches) - 10} more" if len(mismatches) > 10 else ""))
    target = jax.tree.map(ocp.utils.to_shape_dtype_struct, abstract_state)
    try:
        return _restore(path, target)
    except Exception as e:  # noqa: BLE001  The shapes fit: a failure is damaged data.
        raise CheckpointError(f"{where} is damaged: {_first_line(e)}") from None


def restore_latest(workdir, abstract_state):
    """Restores the newest checkpoint that can be read, setting damaged newer ones aside.

    A damaged checkpoint (a crash or a full disk while writing, a file truncated
    later) newer than a readable one is moved to `<workdir>/checkpoints_damaged/`
    with a warning naming it, and the readable one is used: nothing is deleted.
    When none can be read, nothing is moved and the error names each folder.

    Returns:
        (state, step), or (None, None) when the run has no checkpoint.

    Raises:
        IncompatibleCheckpoint: the newest readable checkpoint is of another model.
        CheckpointError: no checkpoint could be read.
    """
    damaged = []
    for step in reversed(steps(workdir)):
        try:
            state = restore_step(workdir, step, abstract_state)
        except IncompatibleCheckpoint:
            raise
        except CheckpointError as e:
            damaged.append((step, e))
            continue
        for bad_step, error in damaged:
            _set_aside(workdir, bad_step, error, step)
        return state, step
    if damaged:
        raise CheckpointError(
            "no checkpoint of the run can be read: " + "; ".join(str(e) for _, e in damaged)
            + ". Move those folders away to start afresh, or use another --workdir")
    return None, None


def _set_aside(workdir, step, error, resume_step):
    """Moves a damaged checkpoint out of checkpoints/ (process 0; all processes wait)."""
    source = _step_path(workdir, step)
    target = os.path.join(os.path.abspath(workdir), "checkpoints_damaged", str(step))
    if os.path.exists(target):
        target = f"{target}.{int(time.time())}"
    if jax.process_index() == 0:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.replace(source, target)
        print(f"warning: {error}; moved it to {target} and resuming from step {resume_step}",
              flush=True)
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(f"set_aside_{step}")


def read_saved_state(workdir, step=None):
    """The state of a checkpoint as saved, without an abstract target (tests, inspection).

    Returns:
        (step, state) of checkpoint `step`, or of the latest one.
    """
    step = (steps(workdir) or [None])[-1] if step is None else step
    if step is None:
        raise FileNotFoundError(f"no checkpoint in {checkpoint_dir(workdir)}")
    path = _step_path(workdir, step)
    # Onto this process's first device, whatever topology wrote the checkpoint.
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    target = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device),
                          _saved_tree(path))
    return step, _restore(path, target)
