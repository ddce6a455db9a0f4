"""What a run saved, read back for tests to compare: its metrics and a checkpoint's state."""

import os

import jax

from training import checkpointing, metrics


def read_metrics(workdir):
    """The records of `workdir/metrics.jsonl`; one cut short at the end is left out."""
    path = metrics.metrics_path(workdir)
    return [record for _, record in metrics._scan(path, metrics._read(path))[0]]


def read_saved_state(workdir, step=None):
    """(step, state) of checkpoint `step` of the run (default: the newest), read onto this
    process's first device whatever topology wrote it."""
    step = (checkpointing.steps(workdir) or [None])[-1] if step is None else step
    if step is None:
        raise FileNotFoundError(f"no checkpoint in {checkpointing.checkpoint_dir(workdir)}")
    path = os.path.join(checkpointing.checkpoint_dir(workdir), str(step))
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    abstract = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device),
                            checkpointing._saved_tree(path))
    return step, checkpointing._restore(path, abstract)
