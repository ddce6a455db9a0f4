"""A checkpoint's state as saved, without the model's abstract tree (for tests to compare)."""

import os

import jax

from training import checkpointing


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
