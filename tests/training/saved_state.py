"""What a run saved, read back for tests to compare: its metrics and a checkpoint's state."""

import os

import jax
import numpy as np

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


def assert_same_params(a, b):
    """The states `a` and `b` hold the same parameters, bit for bit."""
    for x, y in zip(jax.tree.leaves(a["params"]), jax.tree.leaves(b["params"]), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def truncate_largest_data_file(step_dir):
    """Cuts the largest OCDBT data file of checkpoint folder `step_dir` to a third."""
    data = [p for p in (step_dir / "default").rglob("*") if p.is_file() and p.parent.name == "d"]
    largest = max(data, key=lambda p: p.stat().st_size)
    with open(largest, "r+b") as f:
        f.truncate(largest.stat().st_size // 3)
