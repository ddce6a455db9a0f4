"""Loader of T5X checkpoints (the published mT5 ones, gs://t5-data/.../t5x/).

Three on-disk formats, told apart by `locate`:
1. `Checkpointer.save` (all published ones): a msgpack `checkpoint_<step>/checkpoint` of
   {'version', 'optimizer': {'target': <params>, 'state'}}, small arrays inline, large
   ones as tensorstore zarr specs of folders beside it. Their kvstore driver is rewritten
   to `gcs` or `file` as T5X does (GCS-written ones carry a dummy bucket); old specs keep
   the path at the top level; version 2 stored bfloat16 as zarr '<u2'.
2. The Orbax manager (current t5x): `checkpoint_<step>/state/_METADATA`; see `t5x_orbax`.
3. Orbax before `_METADATA` (mid-2023): a msgpack `state/checkpoint` whose arrays are
   'PLACEHOLDER://<name>' for a zarr folder beside it.
Only the parameters are read; `t5x_layout` converts scanned stacks and 3-D kernels.
"""

import copy
import os
import posixpath
import re
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import tensorstore as ts
from flax import serialization

import errors
from model.upstream import files, t5x_layout, t5x_orbax, trees

CHECKPOINT_FILE = "checkpoint"
# Orbax-era T5X layouts put the train state under <checkpoint_dir>/state/.
_STATE_DIR = t5x_orbax.STATE_ITEM
# Kinds of checkpoint `locate` finds.
MSGPACK, ORBAX = "msgpack", "orbax"
_ORBAX_PLACEHOLDER = "PLACEHOLDER://"
_KVSTORE_DRIVERS = ("file", "gfile", "gcs")
_TS_CONTEXT = ts.Context({"file_io_concurrency": {"limit": 64}})


def locate(path: str) -> tuple[str, str]:
    """(MSGPACK, the msgpack file) or (ORBAX, the item folder) for a checkpoint path.
    `path`: a `checkpoint_<step>` folder, its `state/`, its msgpack `checkpoint` or `_METADATA`;
    local or gs://. FileNotFoundError says what is there instead (for a model directory, its step
    folders)."""
    path = files.strip_slash(path)
    if files.isfile(path):
        parent = posixpath.dirname(path) or "."
        # As t5x's detect_checkpoint_type: a `_METADATA` beside it makes it Orbax.
        if (posixpath.basename(path) == files.ORBAX_TREE_METADATA
                or t5x_orbax.is_item_dir(parent)):
            return ORBAX, parent
        return MSGPACK, path
    if not files.isdir(path):
        raise FileNotFoundError(f"no T5X checkpoint at {path}: no such file or folder")
    if files.ORBAX_TMP_MARK in posixpath.basename(path):
        # Its arrays may be incomplete even where `_METADATA` is already written.
        raise FileNotFoundError(f"{path} is {files.describe_dir(path, [])}")
    state_dir = files.join(path, _STATE_DIR)
    # _METADATA first: orbax may also keep an aggregate `checkpoint` file.
    for item_dir in (path, state_dir):
        if t5x_orbax.is_item_dir(item_dir):
            return ORBAX, item_dir
    for candidate in (files.join(path, CHECKPOINT_FILE), files.join(state_dir, CHECKPOINT_FILE)):
        if files.isfile(candidate):
            return MSGPACK, candidate
    names = files.listdir(path)
    if _STATE_DIR in names and files.isdir(state_dir):
        # The step folder is fine; say what is wrong inside `state/`.
        raise FileNotFoundError(
            f"{path} is an Orbax T5X checkpoint whose `{_STATE_DIR}/` has no "
            f"`{files.ORBAX_TREE_METADATA}`: it holds "
            f"{files.describe_dir(state_dir, files.listdir(state_dir))}")
    if steps := files.step_folders(names):
        raise FileNotFoundError(f"{path} is a T5X model directory, not one checkpoint: pick "
                                f"one of its step folders: {', '.join(steps)}")
    raise FileNotFoundError(
        f"{path} is not a T5X checkpoint: no `{CHECKPOINT_FILE}` file and no Orbax "
        f"`{files.ORBAX_TREE_METADATA}` in it or in its `{_STATE_DIR}/`; it looks like "
        f"{files.describe_dir(path, names)}")


def read_contents(checkpoint_file: str) -> dict[str, Any]:
    """The decoded msgpack dict (zarr-backed arrays are spec dicts); ValueError if it is none."""
    data = files.read_bytes(checkpoint_file)
    what = files.describe_file_head(data[:64])
    if what is not None and not what.startswith("a msgpack"):
        raise ValueError(f"{checkpoint_file} is not a T5X checkpoint: it is {what}")
    try:
        contents = serialization.msgpack_restore(data)
    except Exception as e:  # msgpack raises several unrelated types
        raise ValueError(f"{checkpoint_file} is not a T5X checkpoint: not a msgpack file "
                         f"({files.one_line(e)})") from e
    if not isinstance(contents, dict):
        raise ValueError(f"{checkpoint_file} is not a T5X checkpoint: its msgpack holds a "
                         f"{type(contents).__name__}, not a dict")
    return contents


def target_of(contents: dict[str, Any], checkpoint_file: str) -> dict[str, Any]:
    """The parameter tree `optimizer/target` (plain Flax and Orbax-era files: `target`)."""
    # Version 0 files are plain Flax optimizer state dicts without the wrapper.
    optimizer = contents.get("optimizer", contents)
    if not isinstance(optimizer, dict) or not isinstance(optimizer.get("target"), dict):
        raise ValueError(f"{checkpoint_file} is a msgpack file but not a T5X checkpoint: no "
                         f"`optimizer/target` parameter tree (top-level keys: "
                         f"{sorted(contents)})")
    return optimizer["target"]


def _placeholder_spec(node: str, checkpoint_dir: str, name: str) -> dict[str, Any]:
    if files.isfile(files.join(checkpoint_dir, files.ORBAX_OCDBT_MANIFEST)):
        raise ValueError(
            f"{checkpoint_dir} is an Orbax OCDBT checkpoint without `"
            f"{files.ORBAX_TREE_METADATA}` (parameter {name!r} is in `"
            f"{files.ORBAX_OCDBT_MANIFEST}`, which needs it): an unfinished or partly "
            "copied save")
    folder = node[len(_ORBAX_PLACEHOLDER):]
    return {"driver": "zarr", "kvstore": {"driver": "file", "path": folder}}


def is_ts_spec(node: Any) -> bool:
    """Whether a msgpack node is a tensorstore spec standing for an array."""
    return isinstance(node, dict) and isinstance(node.get("driver"), str) and "kvstore" in node


def resolve_spec(spec: dict[str, Any], checkpoint_dir: str, name: str) -> dict[str, Any]:
    """The stored spec made openable from the checkpoint's place now.
    An absolute `file` or `gcs` kvstore, without the write-time `chunks` / `compressor` (read from
    the zarr's own metadata)."""
    spec = copy.deepcopy(spec)
    kvstore = spec.pop("kvstore")
    if not isinstance(kvstore, dict) or kvstore.get("driver") not in _KVSTORE_DRIVERS:
        raise ValueError(f"parameter {name!r}: unsupported tensorstore kvstore {kvstore!r}")
    # tensorstore < 0.1.14 specs keep the path at the top level.
    relative = posixpath.join(kvstore.get("path", ""), spec.pop("path", ""))
    if not relative:
        raise ValueError(f"parameter {name!r}: tensorstore spec without a path: {spec!r}")
    if match := re.fullmatch(r"gs://([^/]+)/?(.*)", checkpoint_dir, re.DOTALL):
        bucket, base = match.groups()
        spec["kvstore"] = {"driver": "gcs", "bucket": bucket,
                           "path": posixpath.join(base, relative)}
    else:
        spec["kvstore"] = {"driver": "file",
                           "path": os.path.join(os.path.abspath(checkpoint_dir), relative)}
    spec["metadata"] = {k: v for k, v in spec.get("metadata", {}).items()
                        if k not in ("chunks", "compressor")}
    return spec


def _read_arrays(specs: dict[str, dict], checkpoint_file: str,
                 convert: Callable[[np.ndarray], np.ndarray]) -> dict[str, np.ndarray]:
    """Reads tensorstore arrays, all requests in flight together.
    `convert` runs on each as it arrives, so the stored copies need not all be held at once."""
    def result(name, future):
        try:
            return future.result()
        except Exception as e:  # tensorstore reports everything as ValueError
            message = (f"{checkpoint_file}: cannot read parameter {name!r} from its zarr array "
                       f"{specs[name]['kvstore'].get('path')}: {files.one_line(e)}")
            error = FileNotFoundError if "NOT_FOUND" in str(e) else ValueError
            raise error(message) from e

    opening = {name: ts.open(spec, open=True, read=True, context=_TS_CONTEXT)
               for name, spec in specs.items()}
    reading = {name: result(name, future).read() for name, future in opening.items()}
    return {name: convert(result(name, future)) for name, future in reading.items()}


def _cast(array: np.ndarray, dtype: Any | None) -> np.ndarray:
    return array if dtype is None else array.astype(dtype, copy=False)


def _inline_array(value: Any, name: str, checkpoint_file: str) -> np.ndarray:
    """An inline msgpack leaf as an array, refusing what is not numeric."""
    array = np.asarray(value)
    if array.dtype.kind not in "biuf" and array.dtype != ml_dtypes.bfloat16:
        raise ValueError(f"{checkpoint_file}: parameter {name!r} is not an array but "
                         f"{type(value).__name__} {str(value)[:60]!r}")
    return array


def _read_msgpack_target(checkpoint_file: str, dtype: Any | None) -> dict[str, np.ndarray]:
    """The flat target tree of a msgpack checkpoint (formats 1 and 3)."""
    target = target_of(read_contents(checkpoint_file), checkpoint_file)
    checkpoint_dir = posixpath.dirname(checkpoint_file) or "."
    flat = trees.flatten_tree(target, is_leaf=is_ts_spec)
    specs = {}
    for name, value in flat.items():
        # An early Orbax aggregate file's reference to a zarr folder.
        if isinstance(value, str) and value.startswith(_ORBAX_PLACEHOLDER):
            value = _placeholder_spec(value, checkpoint_dir, name)
        if is_ts_spec(value):
            specs[name] = resolve_spec(value, checkpoint_dir, name)

    def convert(array):
        if array.dtype == np.uint16:  # Version 2 wrote bfloat16 bits as uint16 (zarr '<u2').
            array = array.view(ml_dtypes.bfloat16)
        return _cast(array, dtype)

    from_zarr = _read_arrays(specs, checkpoint_file, convert)
    # Inline leaves are numpy arrays or scalars from flax's msgpack decoding.
    return {name: from_zarr[name] if name in specs
            else convert(_inline_array(value, name, checkpoint_file))
            for name, value in flat.items()}


def load(path: str, *, dtype: Any | None = np.float32,
         param_scan_axis: int | None = None) -> dict[str, Any]:
    """The parameters of a T5X checkpoint of any format above, as nested numpy dicts.
    `path` as `locate`'s (e.g. gs://t5-data/pretrained_models/t5x/mt5_base/checkpoint_1000000);
    `dtype` None keeps the stored one; `param_scan_axis`: see `t5x_layout.unscan_stack`. Scanned
    stacks come back as `layers_<i>` and attention kernels 2-D. FileNotFoundError for no checkpoint
    or an absent zarr array; ValueError for anything unreadable."""
    kind, where = locate(path)
    if kind == ORBAX:
        # Orbax stores bfloat16 natively: no uint16 reinterpretation here.
        flat = {name: _cast(np.asarray(value), dtype) for name, value
                in trees.flatten_tree(t5x_orbax.read_target(where)).items()}
    else:
        flat = _read_msgpack_target(where, dtype)
    with errors.reraised(ValueError, ValueError, f"{where}: "):
        return t5x_layout.to_per_layer(trees.unflatten_tree(flat), param_scan_axis)
