"""Loader of big_vision / vision_transformer ViT checkpoints (`.npz`).

An `np.savez` zip keyed by '/'-joined parameter paths (bfloat16 comes back as 2-byte void),
possibly a whole train state or a step copy `<file>-<s:09d>`; a trailing `:<key>[/...]`
selects a sub-tree as big_vision's `load_params`. Old layouts are renamed to the modern
names; tensorstore checkpoints and other formats are refused in one line.
"""

import io
import math
import re
import zipfile
from collections.abc import Sequence
from typing import Any

import jax
import ml_dtypes
import numpy as np

import errors
from model import layers as model_layers
from model.upstream import files, trees

_NUMBERED_MODULE = re.compile(r"(.*)_(\d+)$")
_MAP_HEAD_PARTS = ("probe", "MlpBlock_0", "MultiHeadDotProductAttention_0", "LayerNorm_0")


def split_subkey(path: str) -> tuple[str, str | None]:
    """'dir/x.npz:img/sub' -> ('dir/x.npz', 'img/sub'); no suffix (a URL's `gs:` is none): None."""
    match = re.fullmatch(r"(.+):(\w[\w/]*)", path, re.DOTALL)
    if match is None:
        return path, None
    return match.group(1), match.group(2).rstrip("/")


def _read_file(path: str) -> bytes:
    """The file's bytes; a refusal naming what is there if it is no file."""
    if files.isdir(path):
        raise ValueError(f"{path} is not a big_vision .npz: it is a folder, "
                         f"{files.describe_dir(path, files.listdir(path))}")
    if not files.isfile(path):
        hint = (f" ({path}-LAST names the steps of a big_vision tensorstore checkpoint, "
                "which this loader does not read: export its params to .npz)"
                if files.isfile(f"{path}-LAST") else "")
        raise FileNotFoundError(f"no big_vision .npz at {path}: no such file{hint}")
    return files.read_bytes(path)


def _zip_members(data: bytes, path: str) -> list[str]:
    """The member names of an npz's zip, refusing other files and zips."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.namelist()
    except zipfile.BadZipFile as e:
        what = files.describe_file_head(data[:64]) or "a file of unknown format"
        if what == "a zip archive":
            what = f"a damaged zip archive ({files.one_line(e)})"
        raise ValueError(f"{path} is not a big_vision .npz: it is {what}") from e
    if others := [name for name in members if not name.endswith(".npy")]:
        pytorch = " (a PyTorch checkpoint)" if any(
            name.endswith("data.pkl") for name in others) else ""
        raise ValueError(f"{path} is not a big_vision .npz: it is a zip archive of "
                         f"{', '.join(others[:3])}{', ...' if len(others) > 3 else ''}"
                         f"{pytorch}, not of .npy arrays")
    return members


def read_npz(path: str) -> dict[str, np.ndarray]:
    """{flat key: array} of an npz (no `:subkey`), bf16 recovered; ValueError says what it is."""
    data = _read_file(path)
    if not _zip_members(data, path):
        raise ValueError(f"{path} is an empty .npz: it holds no arrays")
    try:
        # np.load needs seekable input; BytesIO serves local and remote alike.
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            flat = {key: npz[key] for key in npz.files}
    except Exception as e:  # zipfile / format errors of every kind
        raise ValueError(f"{path} is a damaged .npz: {files.one_line(e)}") from e
    for key, value in flat.items():
        if value.dtype.kind == "V":
            # np.savez writes bfloat16 as raw 2-byte records.
            if value.dtype.itemsize != 2:
                raise ValueError(f"{path}: array {key!r} has unknown dtype {value.dtype}")
            flat[key] = value.view(ml_dtypes.bfloat16)
    return flat


def renumber_pre_linen(tree: Any) -> Any:
    """Pre-Linen module numbers (one counter over all classes) -> Linen's per-class ones:
    LayerNorm_0, MultiHeadDotProductAttention_1, LayerNorm_2 -> LayerNorm_0, ..._0, LayerNorm_1."""
    if not isinstance(tree, dict):
        return tree
    by_module: dict[str, list[tuple[int, str]]] = {}
    for key in tree:
        if match := _NUMBERED_MODULE.fullmatch(key):
            by_module.setdefault(match.group(1), []).append((int(match.group(2)), key))
    new_name = {key: f"{module}_{index}" for module, numbered in by_module.items()
                for index, (_, key) in enumerate(sorted(numbered))}
    return {new_name.get(key, key): renumber_pre_linen(value) for key, value in tree.items()}


def fix_old_names(tree: dict[str, Any]) -> dict[str, Any]:
    """Old ViT layouts renamed to big_vision's: pre-Linen numbers, `posembed_input` and
    `Transformer/pos_embedding`, an inlined MAP head, scan-stacked blocks (a new dict)."""
    tree = renumber_pre_linen(tree)
    transformer = tree.get("Transformer", {})
    if "posembed_input" in transformer:
        tree["pos_embedding"] = transformer.pop("posembed_input")["pos_embedding"]
    if "pos_embedding" in transformer:
        tree["pos_embedding"] = transformer.pop("pos_embedding")
    if "probe" in tree:
        tree["MAPHead_0"] = {k: tree.pop(k) for k in _MAP_HEAD_PARTS if k in tree}
    return model_layers.scan_to_layers(tree)


def load(path: str, *, dtype: Any | None = np.float32) -> dict[str, Any]:
    """The ViT tree (nested numpy dicts, modern names) of a big_vision `.npz[:subkey]`.
    `dtype` None keeps the stored dtypes. FileNotFoundError for no file, else ValueError."""
    file_path, subkey = split_subkey(path)
    flat = read_npz(file_path)
    with errors.reraised(ValueError, ValueError, f"{file_path}: "):  # a key both array and folder
        tree = trees.unflatten_tree(flat)
    if "params" in tree:
        tree = tree["params"]          # optax train state
    elif "opt" in tree and "target" in tree["opt"]:
        tree = tree["opt"]["target"]   # Flax optimizer train state
    for key in (subkey.split("/") if subkey else ()):
        if not isinstance(tree, dict) or key not in tree:
            have = sorted(tree) if isinstance(tree, dict) else "an array"
            raise ValueError(f"{path}: no sub-tree {subkey!r} (at {key!r} it has {have})")
        tree = tree[key]
    if not isinstance(tree, dict):
        raise ValueError(f"{path}: {subkey!r} is an array, not a parameter tree")
    tree = fix_old_names(tree)
    return tree if dtype is None else jax.tree.map(lambda x: x.astype(dtype, copy=False), tree)


def grid_of(num_tokens: int) -> tuple[int, bool]:
    """(side, has_class_token) of a posemb of N rows: N == side**2, or side**2 + 1 (old ViTs)."""
    for has_class_token in (False, True):
        side = math.isqrt(num_tokens - has_class_token)
        if side * side == num_tokens - has_class_token:
            return side, has_class_token
    raise ValueError(f"{num_tokens} position embeddings are not a square grid (+1 class token)")


def resample_posemb(posemb: np.ndarray, new_grid: int | Sequence[int], *,
                    keep_class_token: bool = True) -> np.ndarray:
    """Bilinearly resamples a [1, N, D] posemb to another grid (side or (h, w)), as big_vision
    (`scipy.ndimage.zoom(order=1)`); a class-token row is kept in front if `keep_class_token`."""
    posemb = np.asarray(posemb)
    if posemb.ndim != 3 or posemb.shape[0] != 1:
        raise ValueError(f"posemb must be [1, N, D], got {posemb.shape}")
    posemb = posemb.astype(np.float64 if posemb.dtype == np.float64 else np.float32)
    old_side, has_class_token = grid_of(posemb.shape[1])
    class_row, grid = posemb[:, :int(has_class_token)], posemb[:, int(has_class_token):]
    new_h, new_w = (new_grid, new_grid) if isinstance(new_grid, int) else tuple(new_grid)
    grid = grid.reshape(old_side, old_side, -1)  # [g, g, D]
    if (new_h, new_w) != (old_side, old_side):
        # Imported here: 0.3 s that every process importing the trainer would pay otherwise.
        import scipy.ndimage  # noqa: PLC0415
        grid = scipy.ndimage.zoom(grid, (new_h / old_side, new_w / old_side, 1), order=1)
    grid = grid.reshape(1, new_h * new_w, -1)
    if has_class_token and keep_class_token:
        grid = np.concatenate([class_row, grid], axis=1)
    return grid


def fit_posemb(posemb: np.ndarray,
               target_shape: Sequence[int]) -> tuple[np.ndarray, np.ndarray | None, str]:
    """Adapts a [1, N, D] posemb to the model's [1, M, D]: (embedding, dropped class-token row
    or None, what was done). ValueError for other widths, non-square grids or a missing class row.
    """
    posemb = np.asarray(posemb)
    target_shape = tuple(target_shape)
    if posemb.ndim != 3 or len(target_shape) != 3 or posemb.shape[-1] != target_shape[-1]:
        raise ValueError(f"checkpoint {tuple(posemb.shape)} vs model {target_shape}: "
                         "only the number of positions can be adapted")
    old_side, old_cls = grid_of(posemb.shape[1])
    new_side, new_cls = grid_of(target_shape[1])
    if new_cls and not old_cls:
        raise ValueError(f"checkpoint {tuple(posemb.shape)} vs model {target_shape}: "
                         "the model has a class-token position, the checkpoint none")
    new = resample_posemb(posemb, new_side, keep_class_token=new_cls)
    how = [f"resampled grid {old_side}x{old_side} -> {new_side}x{new_side}"
           if old_side != new_side else f"grid {old_side}x{old_side} kept"]
    dropped = None
    if old_cls and not new_cls:
        dropped = np.asarray(posemb[:, :1], np.float32)
        how.append("class-token row dropped")
    return new, dropped, ", ".join(how)
