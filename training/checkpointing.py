"""Saving and restoring the training state with orbax.

A checkpoint is the pytree `{"params", "opt_state", "step"}` saved with orbax's
CheckpointManager under `<workdir>/checkpoints/<step>`. Orbax writes each save
into a temporary folder and renames it when complete, so `latest_step()` never
names a half-written checkpoint; that is what makes resuming after a crash safe.
"""

import os

import jax
import orbax.checkpoint as ocp


def checkpoint_dir(workdir):
    return os.path.join(os.path.abspath(workdir), "checkpoints")


def has_checkpoint(workdir):
    """Whether `workdir/checkpoints` holds at least one step folder."""
    folder = checkpoint_dir(workdir)
    return os.path.isdir(folder) and any(name.isdigit() for name in os.listdir(folder))


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
    return ocp.CheckpointManager(
        os.path.join(os.path.abspath(workdir), "checkpoints_best"), options=options)


def save(mngr, step, state, metrics=None):
    """Starts saving `state` as checkpoint `step` (returns before it is written when async).

    Args:
        mngr: from `manager()` or `best_manager()`.
        step: the training step.
        state: the training state pytree.
        metrics: for `best_manager()`: the evaluation's scores (with its metric).
    """
    mngr.save(step, args=ocp.args.StandardSave(state), metrics=metrics, force=True)


def restore(mngr, abstract_state, step=None):
    """Restores a checkpoint into the structure, shapes and shardings of `abstract_state`.

    Args:
        mngr: from `manager()`.
        abstract_state: a pytree of jax.ShapeDtypeStruct (with shardings) or arrays.
        step: which checkpoint; None for the latest.

    Returns:
        The restored state, or None when the workdir has no checkpoint.

    Raises:
        FileNotFoundError: `step` was asked for and does not exist (the message
            lists the steps that do).
    """
    available = mngr.all_steps()
    if step is None:
        step = mngr.latest_step()
        if step is None:
            return None
    elif step not in available:
        raise FileNotFoundError(
            f"no checkpoint of step {step} in {mngr.directory}; available steps: "
            f"{sorted(available) or 'none'}")
    abstract_state = jax.tree.map(ocp.utils.to_shape_dtype_struct, abstract_state)
    return mngr.restore(step, args=ocp.args.StandardRestore(abstract_state))


def read_saved_state(workdir, step=None):
    """The state of a checkpoint as saved, without an abstract target (tests, inspection).

    Returns:
        (step, state) of checkpoint `step`, or of the latest one.
    """
    mngr = manager(workdir, read_only=True, asynchronous=False)
    step = mngr.latest_step() if step is None else step
    if step is None:
        raise FileNotFoundError(f"no checkpoint in {checkpoint_dir(workdir)}")
    path = os.path.join(checkpoint_dir(workdir), str(step), "default")
    checkpointer = ocp.StandardCheckpointer()
    # Onto this process's first device, whatever topology wrote the checkpoint.
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    target = jax.tree.map(
        lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device),
        checkpointer.metadata(path).item_metadata.tree)
    return step, checkpointer.restore(path, target)
