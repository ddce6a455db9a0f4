"""Loader of T5X checkpoints (the published mT5 ones, gs://t5-data/.../t5x/).

Format (t5x/checkpoints.py, `Checkpointer.save`): a directory
`checkpoint_<step>/` holding

  * `checkpoint`: a msgpack file (flax.serialization) of
    {'version': 3, 'optimizer': {'target': <params>, 'state': <Adafactor>}}.
    Small arrays are stored inline (flax's ndarray ext type); each large one
    is replaced by the JSON of a tensorstore spec, e.g.
    {'driver': 'zarr', 'dtype': 'bfloat16',
     'kvstore': {'driver': 'file', 'path': 'target.encoder.layers_0.mlp.wi_0.kernel'},
     'metadata': {'chunks': [...], 'compressor': {'id': 'gzip'}, 'shape': [...]}};
  * one zarr directory per such array, named after its '/'-path with '.'.

Spec paths are relative to the checkpoint directory (absolute ones are used as
they are); the kvstore driver is rewritten to `gcs` (bucket from the path) for
gs:// checkpoints and to `file` otherwise, as T5X does, since checkpoints
written on GCS carry a dummy bucket and internal ones a `gfile` driver.
Old tensorstore specs put the path at the top level instead of in `kvstore`.
Checkpoints of version 2 (before 2021-06-10) store bfloat16 as zarr `<u2`
(spec dtype 'uint16'); those bits are viewed back as bfloat16.

Only `optimizer/target` is read; the optimizer state's zarr arrays are never
opened.
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

from model.checkpoints import trees

CHECKPOINT_FILE = "checkpoint"
# Newer T5X layouts put the msgpack under <checkpoint_dir>/state/.
_STATE_DIR = "state"
_KVSTORE_DRIVERS = ("file", "gfile", "gcs")
_TS_CONTEXT = ts.Context({"file_io_concurrency": {"limit": 64}})


def _is_gcs(path: str) -> bool:
    return path.startswith("gs://")


def _gfile():
    # Only gs:// paths pay for importing TensorFlow.
    from tensorflow.io import gfile  # pylint: disable=import-outside-toplevel
    return gfile


def _isdir(path: str) -> bool:
    return _gfile().isdir(path) if _is_gcs(path) else os.path.isdir(path)


def _isfile(path: str) -> bool:
    if _is_gcs(path):
        return _gfile().exists(path) and not _gfile().isdir(path)
    return os.path.isfile(path)


def _read_bytes(path: str) -> bytes:
    if _is_gcs(path):
        with _gfile().GFile(path, "rb") as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()


def find_checkpoint_file(path: str) -> str:
    """Returns the msgpack `checkpoint` file of a T5X checkpoint.

    Args:
        path: the `checkpoint_<step>` directory or its `checkpoint` file,
            local or gs://.

    Raises:
        FileNotFoundError: neither exists; for a model directory holding
            several `checkpoint_<step>` folders the message lists them.
    """
    path = path.rstrip("/") if len(path) > 1 else path
    if _isdir(path):
        for candidate in (posixpath.join(path, CHECKPOINT_FILE),
                          posixpath.join(path, _STATE_DIR, CHECKPOINT_FILE)):
            if _isfile(candidate):
                return candidate
        listing = _gfile().listdir(path) if _is_gcs(path) else os.listdir(path)
        steps = sorted(name.rstrip("/") for name in listing
                       if re.fullmatch(r"checkpoint_\d+/?", name))
        hint = f"; pick one of its step folders: {', '.join(steps)}" if steps else ""
        raise FileNotFoundError(
            f"no T5X checkpoint at {path}: no `{CHECKPOINT_FILE}` file in it{hint}")
    if _isfile(path):
        return path
    raise FileNotFoundError(f"no T5X checkpoint at {path}")


def read_contents(checkpoint_file: str) -> dict[str, Any]:
    """Parses the msgpack file (inline arrays become numpy arrays).

    Args:
        checkpoint_file: path of the `checkpoint` msgpack file.

    Returns:
        The decoded dict; tensorstore-backed arrays are spec dicts.
    """
    data = _read_bytes(checkpoint_file)
    try:
        contents = serialization.msgpack_restore(data)
    except Exception as e:  # msgpack raises several unrelated types
        raise ValueError(f"{checkpoint_file}: not a T5X msgpack checkpoint ({e})") from e
    if not isinstance(contents, dict):
        raise ValueError(f"{checkpoint_file}: not a T5X checkpoint (top level is "
                         f"{type(contents).__name__}, not a dict)")
    return contents


def target_of(contents: dict[str, Any], checkpoint_file: str) -> dict[str, Any]:
    """The parameter tree `optimizer/target` (plain Flax files: `target`)."""
    # Version 0 files are plain Flax optimizer state dicts without the wrapper.
    optimizer = contents.get("optimizer", contents)
    if not isinstance(optimizer, dict) or not isinstance(optimizer.get("target"), dict):
        raise ValueError(f"{checkpoint_file}: no `optimizer/target` parameter tree "
                         f"(top-level keys: {sorted(contents)})")
    return optimizer["target"]


def is_ts_spec(node: Any) -> bool:
    """Whether a msgpack node is a tensorstore spec standing for an array."""
    return isinstance(node, dict) and isinstance(node.get("driver"), str) and "kvstore" in node


def resolve_spec(spec: dict[str, Any], checkpoint_dir: str, name: str) -> dict[str, Any]:
    """Makes a stored spec openable from where the checkpoint is now.

    Args:
        spec: the spec dict from the msgpack file.
        checkpoint_dir: the directory holding the msgpack file (local or gs://).
        name: the parameter's '/'-path, for error messages.

    Returns:
        A spec with an absolute `file` or `gcs` kvstore and without the
        write-time `chunks` / `compressor` (read from the zarr's own metadata).
    """
    spec = copy.deepcopy(spec)
    kvstore = spec.pop("kvstore")
    if not isinstance(kvstore, dict) or kvstore.get("driver") not in _KVSTORE_DRIVERS:
        raise ValueError(f"parameter {name!r}: unsupported tensorstore kvstore {kvstore!r}")
    # tensorstore < 0.1.14 specs keep the path at the top level.
    relative = posixpath.join(kvstore.get("path", ""), spec.pop("path", ""))
    if not relative:
        raise ValueError(f"parameter {name!r}: tensorstore spec without a path: {spec!r}")
    match = re.fullmatch(r"gs://([^/]+)/?(.*)", checkpoint_dir, re.DOTALL)
    if match:
        bucket, base = match.groups()
        spec["kvstore"] = {"driver": "gcs", "bucket": bucket,
                           "path": posixpath.join(base, relative)}
    else:
        spec["kvstore"] = {"driver": "file",
                           "path": os.path.join(os.path.abspath(checkpoint_dir), relative)}
    metadata = dict(spec.get("metadata", {}))
    metadata.pop("chunks", None)
    metadata.pop("compressor", None)
    spec["metadata"] = metadata
    return spec


def _open_error(checkpoint_file: str, name: str, spec: dict, error: Exception) -> Exception:
    where = spec["kvstore"].get("path")
    message = (f"{checkpoint_file}: cannot read parameter {name!r} from its zarr array "
               f"{where}: {error}")
    return FileNotFoundError(message) if "NOT_FOUND" in str(error) else ValueError(message)


def _read_arrays(specs: dict[str, dict], checkpoint_file: str,
                 convert: Callable[[np.ndarray], np.ndarray]) -> dict[str, np.ndarray]:
    """Reads tensorstore arrays, all requests in flight together.

    `convert` runs on each array as it arrives so that the stored copies
    (bfloat16) need not all be held next to the converted ones.
    """
    opening = {name: ts.open(spec, open=True, read=True, context=_TS_CONTEXT)
               for name, spec in specs.items()}
    reading = {}
    for name, future in opening.items():
        try:
            reading[name] = future.result().read()
        except Exception as e:  # tensorstore reports everything as ValueError
            raise _open_error(checkpoint_file, name, specs[name], e) from e
    arrays = {}
    for name, future in reading.items():
        try:
            array = future.result()
        except Exception as e:
            raise _open_error(checkpoint_file, name, specs[name], e) from e
        arrays[name] = convert(array)
    return arrays


def _fix_dtype(array: np.ndarray, dtype: Any | None) -> np.ndarray:
    if array.dtype == np.uint16:
        # Version-2 checkpoints wrote bfloat16 bits as uint16 (zarr '<u2').
        array = array.view(ml_dtypes.bfloat16)
    return array if dtype is None else array.astype(dtype, copy=False)


def load(path: str, *, dtype: Any | None = np.float32) -> dict[str, Any]:
    """Loads the parameters of a T5X checkpoint.

    Args:
        path: the `checkpoint_<step>` directory or its `checkpoint` file, local
            or gs:// (e.g. gs://t5-data/pretrained_models/t5x/mt5_base/checkpoint_1000000).
        dtype: dtype of the returned arrays; None keeps the stored one
            (bfloat16 for legacy uint16 arrays).

    Returns:
        The `optimizer/target` tree as nested dicts of numpy arrays with T5X
        names (`token_embedder/embedding`, `encoder/layers_0/...`, ...).

    Raises:
        FileNotFoundError: no checkpoint at `path`, or a zarr array it points to
            is absent.
        ValueError: the file is not a T5X checkpoint or an array is unreadable.
    """
    checkpoint_file = find_checkpoint_file(path)
    target = target_of(read_contents(checkpoint_file), checkpoint_file)
    checkpoint_dir = posixpath.dirname(checkpoint_file) or "."
    flat = trees.flatten_tree(target, is_leaf=is_ts_spec)
    specs = {name: resolve_spec(value, checkpoint_dir, name)
             for name, value in flat.items() if is_ts_spec(value)}
    def convert(array):
        return _fix_dtype(array, dtype)

    from_zarr = _read_arrays(specs, checkpoint_file, convert)
    # Inline leaves are numpy arrays or scalars from flax's msgpack decoding.
    return trees.unflatten_tree({
        name: from_zarr[name] if name in specs else convert(np.asarray(value))
        for name, value in flat.items()})
