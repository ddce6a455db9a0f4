"""Reader of T5X checkpoints saved by t5x's Orbax checkpoint manager.

`checkpoint_<step>/state/` is the item of `PyTreeCheckpointHandler(use_ocdbt=True)`:
`train_state.state_dict()` = {'target': <params>, 'state': {'step', 'param_states'}, ...}
(no 'optimizer' wrapper), with `_METADATA` (every leaf's key path), `manifest.ocdbt`,
`d/` and `ocdbt.process_<i>/`; without OCDBT, one zarr folder per leaf beside the same
`_METADATA` (orbax reads both). t5x's save dtype is not applied on this path, so the
parameters are in their training dtype. Only `target` is restored (partial restore).
"""

import contextlib
import json
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from model.upstream import files, trees

# t5x's item holding the train state, and the parameters' key in it.
STATE_ITEM = "state"
TARGET_KEY = "target"
# Leaf of the structure handed to orbax's partial restore (only keys matter).
_LEAF = 0


def is_item_dir(path: str) -> bool:
    """Whether `path` is an Orbax PyTree item (holds `_METADATA`)."""
    return files.isfile(files.join(path, files.ORBAX_TREE_METADATA))


def _top_keys_and_target(item_dir: str) -> tuple[list[str], dict[str, Any]]:
    """The tree's top-level keys and the structure of its `target`, from `_METADATA`.
    Read from the JSON ({'tree_metadata': {"('target', ...)": {'key_metadata': [{'key': ...},
    ...]}}}) rather than with orbax's `metadata()`, which opens every array's metadata."""
    path = files.join(item_dir, files.ORBAX_TREE_METADATA)
    try:
        entries = json.loads(files.read_bytes(path))["tree_metadata"].values()
        key_paths = [[str(k["key"]) for k in entry["key_metadata"]] for entry in entries]
    except Exception as e:  # JSON syntax, missing fields, wrong types alike
        raise ValueError(f"{item_dir} is an Orbax checkpoint whose `_METADATA` cannot be "
                         f"read: {type(e).__name__}: {files.one_line(e)}") from e
    target = trees.unflatten_tree({trees.SEP.join(keys[1:]): _LEAF for keys in key_paths
                                   if len(keys) > 1 and keys[0] == TARGET_KEY})
    return sorted({keys[0] for keys in key_paths if keys}), target


def read_target(item_dir: str) -> dict[str, Any]:
    """The `target` tree of a `checkpoint_<step>/state` folder: numpy arrays in stored dtypes.
    ValueError (naming the folder) for unreadable metadata, no `target`, or an unreadable array."""
    top_keys, target = _top_keys_and_target(item_dir)
    if not target:
        hint = (" (its `params` suggest a checkpoint of this repository: "
                "use init.checkpoint for those)" if "params" in top_keys else "")
        raise ValueError(
            f"{item_dir} is an Orbax checkpoint without T5X's `{TARGET_KEY}` parameter "
            f"tree (top-level keys: {top_keys}){hint}")
    item = {TARGET_KEY: target}
    # numpy restore: no device placement, the arrays go to merge on the host.
    restore_args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), item)
    with contextlib.closing(ocp.PyTreeCheckpointHandler()) as handler:
        try:
            restored = handler.restore(epath.Path(item_dir), args=ocp.args.PyTreeRestore(
                item=item, restore_args=restore_args, partial_restore=True))
        except Exception as e:  # tensorstore / orbax report missing data variously
            raise ValueError(f"{item_dir}: cannot read the Orbax checkpoint's "
                             f"`{TARGET_KEY}` arrays: {files.one_line(e)}") from e
    return restored[TARGET_KEY]
