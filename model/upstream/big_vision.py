"""Loader of big_vision / vision_transformer ViT checkpoints (`.npz`).

Format (big_vision `utils.save_checkpoint` / `load_params`): an `np.savez`
zip whose keys are the flattened parameter paths joined with '/', e.g.
`Transformer/encoderblock_0/MlpBlock_0/Dense_0/kernel`. bfloat16 arrays come
back from numpy as 2-byte void (`V2`) and are viewed as bfloat16. A file may
hold the whole train state (`params/...` or the Flax optimizer's
`opt/target/...`). `save_checkpoint(..., step_copy=s)` also keeps
`<file>-<s:09d>` (e.g. `checkpoint.npz-000050000`), the same format. As in
big_vision's `load_params`, a trailing `:<key>[/<key>...]` selects a sub-tree
of any of these (`siglip.npz:img`, `checkpoint.npz-000050000:img`: the image
tower of a SigLIP / LiT checkpoint).

big_vision's newer tensorstore checkpoints (`save_checkpoint_ts`: folders of
`~`-named arrays with a `-LAST` pointer) are not read; they, folders, and files
of other formats (PyTorch, safetensors, .npy, ...) are refused with one line
naming the path and what it is.

Older checkpoints (the original ViT release, gs://vit_models/...) use pre-Linen
module numbering (`MultiHeadDotProductAttention_1`, `LayerNorm_2`,
`MlpBlock_3` inside a block), keep the position embedding in
`Transformer/posembed_input/pos_embedding` with the class-token position in
front, or inline the MAP head. `load` renames all of these to the modern names
the model uses and leaves the class-token row in the posemb; `fit_posemb`
(called by `merge.merge_params`) drops or keeps it according to the model.
"""

import io
import math
import re
import zipfile
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
import scipy.ndimage

from model.upstream import files, trees

_NUMBERED_MODULE = re.compile(r"(.*)_(\d+)$")
_MAP_HEAD_PARTS = ("probe", "MlpBlock_0", "MultiHeadDotProductAttention_0", "LayerNorm_0")


def split_subkey(path: str) -> tuple[str, str | None]:
    """'dir/x.npz:img/sub' -> ('dir/x.npz', 'img/sub'); no suffix -> (path, None).

    As big_vision's `load_params`, a trailing `:<key>[/<key>...]` selects a
    sub-tree whatever the file is called (`x.npz`, a step copy
    `x.npz-000000010`); the `gs:` of a URL is no such suffix.
    """
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
        hint = ""
        if files.isfile(f"{path}-LAST"):
            hint = (f" ({path}-LAST names the steps of a big_vision tensorstore checkpoint, "
                    "which this loader does not read: export its params to .npz)")
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
    others = [name for name in members if not name.endswith(".npy")]
    if others:
        pytorch = " (a PyTorch checkpoint)" if any(
            name.endswith("data.pkl") for name in others) else ""
        raise ValueError(f"{path} is not a big_vision .npz: it is a zip archive of "
                         f"{', '.join(others[:3])}{', ...' if len(others) > 3 else ''}"
                         f"{pytorch}, not of .npy arrays")
    return members


def read_npz(path: str) -> dict[str, np.ndarray]:
    """Reads an npz checkpoint into {flat key: array}, bfloat16 recovered.

    Args:
        path: local or gs:// path of the `.npz` file (no `:subkey`).

    Returns:
        The file's arrays by key.

    Raises:
        FileNotFoundError: no file at `path`.
        ValueError: not an np.savez archive (the message says what it is),
            an unreadable array, or no arrays at all.
    """
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
    """Renames pre-Linen module numbers to Linen's per-class numbering.

    Pre-Linen Flax numbered submodules with one counter across all classes
    (LayerNorm_0, MultiHeadDotProductAttention_1, LayerNorm_2, MlpBlock_3);
    Linen counts per class (LayerNorm_0, MultiHeadDotProductAttention_0,
    LayerNorm_1, MlpBlock_0). Trees already in Linen form are unchanged.

    Args:
        tree: nested dicts.

    Returns:
        The renamed tree (a new dict).
    """
    if not isinstance(tree, dict):
        return tree
    by_module: dict[str, list[tuple[int, str]]] = {}
    for key in tree:
        match = _NUMBERED_MODULE.fullmatch(key)
        if match:
            by_module.setdefault(match.group(1), []).append((int(match.group(2)), key))
    new_name = {}
    for module, numbered in by_module.items():
        for index, (_, key) in enumerate(sorted(numbered)):
            new_name[key] = f"{module}_{index}"
    return {new_name.get(key, key): renumber_pre_linen(value) for key, value in tree.items()}


def _unstack_scan(tree: dict[str, Any]) -> dict[str, Any]:
    """Splits a lax.scan checkpoint's stacked `encoderblock` into encoderblock_{i}."""
    transformer = tree.get("Transformer")
    if not isinstance(transformer, dict) or "encoderblock" not in transformer:
        return tree
    stacked = transformer.pop("encoderblock")
    depth = len(next(iter(_leaves(stacked))))

    def take(node, i):
        return {k: take(v, i) if isinstance(v, dict) else v[i] for k, v in node.items()}

    for i in range(depth):
        transformer[f"encoderblock_{i}"] = take(stacked, i)
    return tree


def _leaves(tree):
    for value in tree.values():
        if isinstance(value, dict):
            yield from _leaves(value)
        else:
            yield value


def fix_old_names(tree: dict[str, Any]) -> dict[str, Any]:
    """Renames old ViT checkpoint layouts to the modern big_vision names.

    Handles pre-Linen numbering, `Transformer/posembed_input/pos_embedding`
    (original ViT release) and `Transformer/pos_embedding` (pre-2022
    big_vision) -> `pos_embedding`, an inlined MAP head (`probe` & co. at the
    top) -> `MAPHead_0`, and scan-stacked blocks -> `encoderblock_{i}`. The
    posemb keeps a class-token row if it has one (see `fit_posemb`).

    Args:
        tree: the checkpoint's nested parameter dict.

    Returns:
        The renamed tree (a new dict).
    """
    tree = renumber_pre_linen(tree)
    transformer = tree.get("Transformer", {})
    if "posembed_input" in transformer:
        tree["pos_embedding"] = transformer.pop("posembed_input")["pos_embedding"]
    if "pos_embedding" in transformer:
        tree["pos_embedding"] = transformer.pop("pos_embedding")
    if "probe" in tree:
        tree["MAPHead_0"] = {k: tree.pop(k) for k in _MAP_HEAD_PARTS if k in tree}
    return _unstack_scan(tree)


def _cast_tree(tree: Any, dtype) -> Any:
    if isinstance(tree, dict):
        return {k: _cast_tree(v, dtype) for k, v in tree.items()}
    return np.asarray(tree).astype(dtype, copy=False)


def load(path: str, *, dtype: Any | None = np.float32) -> dict[str, Any]:
    """Loads a big_vision / ViT `.npz` checkpoint as the model's ViT tree.

    Args:
        path: local or gs:// `.npz` path (or a step copy `x.npz-000000010`),
            optionally with a `:subkey` suffix (e.g. `siglip.npz:img`)
            selecting a sub-tree.
        dtype: dtype of the returned arrays; None keeps the stored ones.

    Returns:
        Nested dicts of numpy arrays with modern big_vision names
        (`embedding`, `pos_embedding`, `Transformer/encoderblock_{i}/...`,
        `MAPHead_0`, `cls`, `head`, ... as present in the file).

    Raises:
        FileNotFoundError: no file at `path`.
        ValueError: not a readable npz (the message says what it is), or the
            `:subkey` is absent.
    """
    file_path, subkey = split_subkey(path)
    flat = read_npz(file_path)
    try:
        tree = trees.unflatten_tree(flat)
    except ValueError as e:  # a key both an array and a folder
        raise ValueError(f"{file_path}: {e}") from None
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
    return tree if dtype is None else _cast_tree(tree, dtype)


def grid_of(num_tokens: int) -> tuple[int, bool]:
    """Side of the square patch grid a posemb of `num_tokens` rows covers.

    Args:
        num_tokens: N of a [1, N, D] position embedding.

    Returns:
        (side, has_class_token): N == side**2, or N == side**2 + 1 with the
        class-token row in front (old ViTs).

    Raises:
        ValueError: N is neither.
    """
    side = math.isqrt(num_tokens)
    if side * side == num_tokens:
        return side, False
    side = math.isqrt(num_tokens - 1)
    if side * side == num_tokens - 1:
        return side, True
    raise ValueError(f"{num_tokens} position embeddings are not a square grid (+1 class token)")


def resample_posemb(posemb: np.ndarray, new_grid: int | Sequence[int], *,
                    keep_class_token: bool = True) -> np.ndarray:
    """Bilinearly resamples a ViT position embedding to another patch grid.

    As big_vision's `vit.resample_posemb`: the [g, g, D] grid is zoomed with
    `scipy.ndimage.zoom(order=1)` (corner-aligned linear interpolation).

    Args:
        posemb: [1, N, D] with N = g*g, or g*g + 1 with a class-token row first.
        new_grid: side of the new square grid, or (height, width).
        keep_class_token: keep a class-token row (unchanged, in front) if the
            input has one; otherwise it is dropped.

    Returns:
        [1, new_h * new_w (+1), D] embedding, float32 (float64 stays float64).
    """
    posemb = np.asarray(posemb)
    if posemb.ndim != 3 or posemb.shape[0] != 1:
        raise ValueError(f"posemb must be [1, N, D], got {posemb.shape}")
    work_dtype = np.float64 if posemb.dtype == np.float64 else np.float32
    posemb = posemb.astype(work_dtype)
    old_side, has_class_token = grid_of(posemb.shape[1])
    class_row, grid = posemb[:, :int(has_class_token)], posemb[:, int(has_class_token):]
    new_h, new_w = (new_grid, new_grid) if isinstance(new_grid, int) else tuple(new_grid)
    grid = grid.reshape(old_side, old_side, -1)  # [g, g, D]
    if (new_h, new_w) != (old_side, old_side):
        zoom = (new_h / old_side, new_w / old_side, 1)
        grid = scipy.ndimage.zoom(grid, zoom, order=1)  # [new_h, new_w, D]
    grid = grid.reshape(1, new_h * new_w, -1)
    if has_class_token and keep_class_token:
        grid = np.concatenate([class_row, grid], axis=1)
    return grid


def fit_posemb(posemb: np.ndarray,
               target_shape: Sequence[int]) -> tuple[np.ndarray, np.ndarray | None, str]:
    """Adapts a [1, N, D] posemb to a model posemb of `target_shape` [1, M, D].

    The class-token row is kept if the model's M has one (M = g*g + 1) and
    dropped otherwise; the grid is resampled if the sides differ.

    Args:
        posemb: the checkpoint's embedding.
        target_shape: the model's embedding shape.

    Returns:
        (embedding of target_shape, the dropped class-token row [1, 1, D] or
        None, a short description of what was done).

    Raises:
        ValueError: widths differ, a count is not a (square + 1) grid, or the
            model wants a class-token row the checkpoint lacks.
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
