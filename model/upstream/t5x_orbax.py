"""Reader of T5X checkpoints saved by t5x's Orbax checkpoint manager.

Format (t5x/checkpoints.py, `OrbaxCheckpointManagerInterface`): an orbax
`CheckpointManager` with `step_prefix='checkpoint'` and two items writes
`<model_dir>/checkpoint_<step>/` holding

  * `_CHECKPOINT_METADATA`: orbax's JSON step metadata (item handlers, times);
  * `state/`: the item of `ocp.PyTreeCheckpointHandler(use_ocdbt=True)`, i.e.
    `train_state.state_dict()` = {'target': <params>, 'state': {'step',
    'param_states': <Adafactor>}, optionally 'flax_mutables'}. No 'version'
    and no 'optimizer' wrapper, unlike the msgpack format. On disk:
    `_METADATA` (JSON: every leaf's key path and value type), `_sharding`,
    `array_metadatas/`, `manifest.ocdbt` and `d/` (the OCDBT key-value store
    that holds one zarr array per leaf, keyed by its '.'-joined path), and
    `ocdbt.process_<i>/` (each writing process's own OCDBT store);
  * `dataset/`: the tf.data iterator (`train_ds-<shard>-of-<n>...`), when
    the run saved it.

t5x's save dtype is not applied on this path (its `_construct_save_args`
compares the '/'-joined name's first '.'-part with 'target'), so the
parameters are stored in the dtype they had in training. Orbax without OCDBT
(`use_ocdbt=False`) wrote one zarr folder per leaf (`state/target.encoder...`)
beside the same `_METADATA`; orbax reads both layouts.

Only `target` is restored (orbax's partial restore): the optimizer state is
never deserialized.
"""

import json
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from model.upstream import files

# The item that t5x's manager saves the train state in, and the key of the
# parameters in that state dict.
STATE_ITEM = "state"
TARGET_KEY = "target"
# Leaf of the structure handed to orbax's partial restore (only keys matter).
_LEAF = 0


def is_item_dir(path: str) -> bool:
    """Whether `path` is an Orbax PyTree item (holds `_METADATA`)."""
    return files.isfile(files.join(path, files.ORBAX_TREE_METADATA))


def _top_keys_and_target(item_dir: str) -> tuple[list[str], dict[str, Any]]:
    """The tree's top-level keys and the structure of its `target`, from `_METADATA`.

    Read from the JSON itself rather than with orbax's `metadata()`, which
    would open every array's metadata, the optimizer state's included.
    `_METADATA` is {'tree_metadata': {"('target', 'encoder', ...)":
    {'key_metadata': [{'key': 'target', 'key_type': 2}, ...],
    'value_metadata': {...}}, ...}, 'use_ocdbt': ..., ...}.
    """
    path = files.join(item_dir, files.ORBAX_TREE_METADATA)
    try:
        entries = json.loads(files.read_bytes(path))["tree_metadata"].values()
        key_paths = [[str(k["key"]) for k in entry["key_metadata"]] for entry in entries]
    except Exception as e:  # JSON syntax, missing fields, wrong types alike
        raise ValueError(f"{item_dir} is an Orbax checkpoint whose `_METADATA` cannot be "
                         f"read: {type(e).__name__}: {files.one_line(e)}") from e
    target: dict[str, Any] = {}
    for keys in key_paths:
        if len(keys) < 2 or keys[0] != TARGET_KEY:
            continue
        node = target
        for key in keys[1:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = _LEAF
    return sorted({keys[0] for keys in key_paths if keys}), target


def read_target(item_dir: str) -> dict[str, Any]:
    """Restores the `target` parameter tree of a T5X Orbax `state` item.

    Args:
        item_dir: the `checkpoint_<step>/state` folder (local or gs://).

    Returns:
        Nested dicts of numpy arrays in their stored dtypes, with T5X names.

    Raises:
        ValueError: the metadata is unreadable, has no `target` tree, or an
            array cannot be read (the message names the folder).
    """
    top_keys, target = _top_keys_and_target(item_dir)
    if not target:
        hint = ""
        if "params" in top_keys:
            hint = (" (its `params` suggest a checkpoint of this repository: "
                    "use init.checkpoint for those)")
        raise ValueError(
            f"{item_dir} is an Orbax checkpoint without T5X's `{TARGET_KEY}` parameter "
            f"tree (top-level keys: {top_keys}){hint}")
    handler = ocp.PyTreeCheckpointHandler()
    try:
        item = {TARGET_KEY: target}
        # numpy restore: no device placement, the arrays go to merge on the host.
        restore_args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), item)
        try:
            restored = handler.restore(epath.Path(item_dir), args=ocp.args.PyTreeRestore(
                item=item, restore_args=restore_args, partial_restore=True))
        except Exception as e:  # tensorstore / orbax report missing data variously
            raise ValueError(f"{item_dir}: cannot read the Orbax checkpoint's "
                             f"`{TARGET_KEY}` arrays: {files.one_line(e)}") from e
    finally:
        handler.close()
    return restored[TARGET_KEY]
