"""Puts a loaded pretrained tree into a model's initialized (boxed, abstract or scanned) parameters.

`merge_params` reports missing (kept from init; an error unless allowed), unexpected
(ignored, e.g. a ViT `head`) and reshaped parameters (resampled ViT position embeddings).
Any other shape mismatch is an error: a kept random init would hide a wrong model config.
"""

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

import flax.linen as nn
import jax
import numpy as np

from model import layers as model_layers
from model.upstream import big_vision
from model.upstream.trees import SEP, flatten_tree, unflatten_tree

# Unexpected parameters named in a "lacks ..." error; the Report has them all.
_SHOWN_UNEXPECTED = 8


@dataclasses.dataclass
class Report:
    """What `merge_params` did with one checkpoint (paths relative to `prefix`).
    `reshaped` holds (path, checkpoint shape, model shape, how) of adapted parameters."""
    prefix: str
    source: str = ""
    loaded: list[str] = dataclasses.field(default_factory=list)
    missing: list[str] = dataclasses.field(default_factory=list)
    unexpected: list[str] = dataclasses.field(default_factory=list)
    reshaped: list[tuple[str, tuple, tuple, str]] = dataclasses.field(default_factory=list)

    def __str__(self) -> str:
        where = f" from {self.source}" if self.source else ""
        lines = [f"[{self.prefix}] loaded {len(self.loaded)} arrays{where}"]
        lines += _section("missing (kept from init)", self.missing)
        lines += _section("unexpected (in the checkpoint, ignored)", self.unexpected)
        lines += _section("reshaped", [
            f"{path}: {old} -> {new} ({how})" for path, old, new, how in self.reshaped])
        return "\n".join(lines)


def _section(title: str, items: Sequence[str]) -> list[str]:
    return [f"  {title}: {len(items)}"] + [f"    {item}" for item in items] if items else []


def _unboxed(leaf: Any) -> Any:
    """The array (or ShapeDtypeStruct) inside an nn.LogicallyPartitioned box."""
    return leaf.value if isinstance(leaf, nn.Partitioned) else leaf


def _like(init_leaf: Any, value: Any) -> Any:
    """`value` cast to the init leaf's dtype, in the init leaf's box if any."""
    value = np.asarray(value).astype(_unboxed(init_leaf).dtype, copy=False)
    return init_leaf.replace_boxed(value) if isinstance(init_leaf, nn.Partitioned) else value


def _is_scanned(flat: Mapping[str, Any]) -> bool:
    stacks = set(model_layers.SCANNED_STACKS)
    return any(stacks.intersection(path.split(SEP)) for path in flat)


def _fit_posemb(path: str, value: np.ndarray, target_shape: tuple,
                loaded_flat: Mapping[str, Any], init_flat: Mapping[str, Any],
                out_flat: dict, report: Report) -> np.ndarray:
    """Adapts a ViT position embedding to the model's token count.
    A class-token row the model has no place for is added into the sibling `cls` where both sides
    have one: old ViTs added the posemb after concatenating [cls], so `cls + pe_cls` is what their
    class token saw (as big_vision's `fix_old_checkpoints`)."""
    new, class_row, how = big_vision.fit_posemb(value, target_shape)
    report.reshaped.append((path, tuple(value.shape), tuple(target_shape), how))
    cls_path = path.removesuffix("pos_embedding") + "cls"  # its sibling
    if class_row is not None and cls_path in loaded_flat and cls_path in init_flat:
        cls = np.asarray(loaded_flat[cls_path], np.float32)
        if cls.shape[-1] == class_row.shape[-1]:
            out_flat[cls_path] = _like(init_flat[cls_path], cls + class_row.reshape(cls.shape))
            report.reshaped.append((cls_path, tuple(cls.shape), tuple(cls.shape),
                                    "added the posemb's class-token row"))
    return new


def _raise_if_unfit(report, mismatches, not_allowed):
    """One-line ValueError listing every shape mismatch, else every disallowed missing one."""
    where = f" ({report.source})" if report.source else ""
    if mismatches:
        # One line (the command line prints it as one `error:`), every parameter named.
        raise ValueError(
            f"checkpoint for {report.prefix!r}{where} does not fit the model; {len(mismatches)} "
            f"shape mismatches: " + "; ".join(mismatches))
    if not_allowed:
        # What the checkpoint has instead usually shows the layout difference.
        instead = ""
        if report.unexpected:
            shown = report.unexpected[:_SHOWN_UNEXPECTED]
            more = len(report.unexpected) - len(shown)
            instead = (f"; it has {len(report.unexpected)} parameters the model lacks: "
                       + ", ".join(shown) + (f", ... ({more} more)" if more else ""))
        raise ValueError(
            f"checkpoint for {report.prefix!r}{where} lacks {len(not_allowed)} model parameters "
            f"(pass allow_missing to keep their init): " + ", ".join(not_allowed) + instead)


def _shapes(loaded: Mapping[str, Any], scan: bool) -> dict[str, tuple]:
    """{path: shape} of a loaded tree (in the scanned layout if `scan`), nothing read."""
    shapes = {path: tuple(np.shape(x)) for path, x in flatten_tree(loaded).items()}
    if not scan:
        return shapes
    structs = unflatten_tree({p: jax.ShapeDtypeStruct(s, np.float32) for p, s in shapes.items()})
    structs = jax.eval_shape(model_layers.layers_to_scan, structs)
    return {path: tuple(s.shape) for path, s in flatten_tree(structs).items()}


def _mismatch(path: str, shape: tuple, target_shape: tuple) -> str | None:
    """Why a checkpoint array of `shape` cannot fill the model's `target_shape` (None: it can;
    a `pos_embedding` of another size is resampled)."""
    if shape == target_shape:
        return None
    if path.rpartition(SEP)[2] == "pos_embedding":
        try:  # On zeros of the shape: the refusals depend on the shapes alone.
            big_vision.fit_posemb(np.broadcast_to(np.float32(0), shape), target_shape)
            return None
        except ValueError as e:
            return f"{path}: {e}"
    return f"{path}: checkpoint {shape} vs model {target_shape}"


def merge_params(init_params: Mapping[str, Any], loaded: Mapping[str, Any], *,
                 prefix: str, allow_missing: bool | Sequence[str] = False, source: str = "",
                 check_only: bool = False) -> tuple[dict, Report]:
    """Returns (a new tree with `loaded` under `prefix`, its `Report`).
    `prefix` is a top-level key of `init_params` ('t5', 'img'); leaves come from the checkpoint as
    numpy arrays cast to (and boxed like) the init's. `allow_missing`: True, False or regexes
    full-matched against paths relative to `prefix`. `pos_embedding`s of another size are
    resampled (big_vision's bilinear method). ValueError, one line, lists every shape mismatch
    or disallowed missing parameter, found from the shapes before any array is read (leaves may be
    lazy, as `hugging_face.Lazy`); `check_only` stops there, returning `init_params`."""
    if prefix not in init_params:
        raise ValueError(f"prefix {prefix!r}: the model's parameters have no {prefix!r} at the "
                         f"top level (it has {sorted(init_params)})")
    init_flat = flatten_tree(init_params[prefix])
    scan = _is_scanned(init_flat) and not _is_scanned(flatten_tree(loaded))
    shapes = _shapes(loaded, scan)
    report = Report(prefix=prefix, source=source,
                    missing=[path for path in init_flat if path not in shapes],
                    unexpected=[path for path in shapes if path not in init_flat])
    allowed = [re.compile(p) for p in ((".*",) if allow_missing is True else allow_missing or ())]
    not_allowed = [path for path in report.missing if not any(p.fullmatch(path) for p in allowed)]
    mismatches = [m for path, init_value in init_flat.items() if path in shapes and (
        m := _mismatch(path, shapes[path], tuple(_unboxed(init_value).shape)))]
    _raise_if_unfit(report, mismatches, not_allowed)
    if check_only:
        return init_params, report
    loaded = jax.tree.map(np.asarray, loaded)  # Reads lazy leaves.
    if scan:  # The scanned layout, stacked on the host CPU.
        with jax.default_device(jax.devices("cpu")[0]):
            loaded = jax.tree.map(np.asarray, model_layers.layers_to_scan(loaded))
    loaded_flat = flatten_tree(loaded)
    out_flat: dict[str, Any] = {}
    for path, init_value in init_flat.items():
        if path not in loaded_flat:
            out_flat.setdefault(path, init_value)
            continue
        value = np.asarray(loaded_flat[path])
        target_shape = tuple(_unboxed(init_value).shape)
        if value.shape != target_shape:  # A position embedding `_mismatch` let through.
            value = _fit_posemb(path, value, target_shape, loaded_flat, init_flat, out_flat,
                                report)
        # `setdefault`: a `cls` already adjusted by _fit_posemb keeps its new value.
        out_flat.setdefault(path, _like(init_value, value))
        report.loaded.append(path)
    return {**init_params, prefix: unflatten_tree(out_flat)}, report
