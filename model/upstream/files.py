"""Local-or-gs:// file access for the loaders, and naming what a path holds.

Refusals say what a wrong `config.init` path looks like instead ("a PyTorch checkpoint",
...) from a folder's listing or a file's first bytes.
"""

import os
import posixpath
import re

# Orbax names (orbax/checkpoint/_src: step and PyTree handler metadata, OCDBT).
ORBAX_TREE_METADATA = "_METADATA"
ORBAX_STEP_METADATA = "_CHECKPOINT_METADATA"
ORBAX_OCDBT_MANIFEST = "manifest.ocdbt"
ORBAX_TMP_MARK = ".orbax-checkpoint-tmp"


def is_gcs(path: str) -> bool:
    return path.startswith("gs://")


def _gfile():
    # Only gs:// paths pay for importing TensorFlow.
    from tensorflow.io import gfile  # pylint: disable=import-outside-toplevel
    return gfile


def isdir(path: str) -> bool:
    return _gfile().isdir(path) if is_gcs(path) else os.path.isdir(path)


def isfile(path: str) -> bool:
    if is_gcs(path):
        return _gfile().exists(path) and not _gfile().isdir(path)
    return os.path.isfile(path)


def listdir(path: str) -> list[str]:
    """Names in a folder, without the trailing '/' that GCS puts on folders."""
    names = _gfile().listdir(path) if is_gcs(path) else os.listdir(path)
    return sorted(name.rstrip("/") for name in names)


def read_bytes(path: str) -> bytes:
    """The file's bytes."""
    with (_gfile().GFile(path, "rb") if is_gcs(path) else open(path, "rb")) as f:
        return f.read()


def join(*parts: str) -> str:
    return posixpath.join(*parts) if is_gcs(parts[0]) else os.path.join(*parts)


def strip_slash(path: str) -> str:
    return path.rstrip("/") if len(path) > 1 else path


def one_line(error: BaseException) -> str:
    """An exception's message on one line (its class name if it has none)."""
    return re.sub(r"\s*\n\s*", " ", str(error)).strip() or type(error).__name__


def step_folders(names: list[str]) -> list[str]:
    """The `checkpoint_<step>` folders (T5X's step naming) among a model directory's `names`."""
    steps = [n for n in names if re.fullmatch(r"checkpoint_\d+", n)]
    return sorted(steps, key=lambda n: int(n.rpartition("_")[2]))


# What a file starting with these bytes (magic numbers of the formats people confuse with the
# ones read here) is.
_HEADS = ((b"\x93NUMPY", "a single NumPy array (np.save), not an np.savez archive"),
          (b"PK\x03\x04", "a zip archive"), (b"\x89HDF\r\n\x1a\n", "an HDF5 file (Keras .h5?)"),
          (b"\x1f\x8b", "a gzip file"),
          (b"model_checkpoint_path", "a TensorFlow `checkpoint` index file (Mesh TensorFlow "
                                     "T5; t5x converts those with "
                                     "t5x/scripts/convert_tf_checkpoint.py)"))


def describe_file_head(head: bytes) -> str | None:
    """What a file starting with `head` is, if recognizable."""
    if not head:
        return "an empty file"
    for magic, what in _HEADS:
        if head.startswith(magic):
            return what
    if head.startswith(b"\x80") and len(head) > 1 and head[1] <= 5:
        return "a Python pickle (PyTorch .bin / .pt?)"
    if len(head) > 9 and head[8:10] == b'{"':
        return "a safetensors file"
    if 0x80 <= head[0] <= 0x8F or head[0] in (0xDE, 0xDF):  # msgpack fixmap, map16/32
        return "a msgpack map (a T5X / Flax `checkpoint` file?)"
    return None


def describe_dir(path: str, names: list[str]) -> str:
    """What a folder holding `names` is, as far as its listing tells."""
    base = posixpath.basename(strip_slash(path))
    if ORBAX_TMP_MARK in base:
        return ("an unfinished Orbax save (orbax renames `*.orbax-checkpoint-tmp*` "
                "folders when a save completes)")
    if ORBAX_TREE_METADATA in names:
        return "an Orbax PyTree checkpoint item"
    if ORBAX_OCDBT_MANIFEST in names or any(n.startswith("ocdbt.process_") for n in names):
        return ("Orbax OCDBT data without the `_METADATA` that orbax writes last "
                "(an unfinished or partly copied save)")
    if ORBAX_STEP_METADATA in names:
        items = [n for n in names if isdir(join(path, n))]
        return f"an Orbax checkpoint step with the items {items or 'none'}"
    if steps := step_folders(names):
        return f"a T5X model directory with the step folders {', '.join(steps)}"
    if any("~" in n for n in names):
        return ("a big_vision tensorstore checkpoint (save_checkpoint_ts: one `~`-named "
                "array per folder)")
    if not names:
        return "an empty folder"
    if any(n.startswith("pytorch_model") for n in names):
        return ("a Hugging Face model folder without safetensors (its pytorch_model*.bin is not "
                "read; docs/files.md)")
    if any(n.endswith(".npz") for n in names):
        return "a folder of .npz files"
    shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
    return f"a folder holding {shown}"

