"""Puts a loaded pretrained parameter tree into a model's initialized parameters.

The loaders (`t5x.load`, `big_vision.load`) return the tree as the checkpoint
has it; the model's `init` gives the tree it needs. `merge_params` matches the
two path by path under one prefix ('t5' or 'img' of the captioner) and says,
in a `Report`, what it could not match:

  * missing: in the model, not in the checkpoint: the initialized value is kept
    (an error unless `allow_missing` permits it);
  * unexpected: in the checkpoint, not in the model (e.g. a ViT classifier
    `head`): ignored;
  * reshaped: ViT position embeddings resampled to the model's patch grid
    (another image resolution or patch size), a class-token row dropped or kept.

Any other shape mismatch is an error naming the parameter and both shapes:
silently keeping the random init for a mis-sized weight would hide a wrong
model config.

The model's tree may be boxed (`nn.LogicallyPartitioned`, as `model.init`
returns it; the boxes are kept) or abstract (`jax.eval_shape`), and use the
scanned layout (`layers` / `encoderblock` stacked on axis 0, `scan=True`):
per-layer checkpoints are then stacked with the model's own
`layers.layers_to_scan`.
"""

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import flax.linen as nn
import jax
import numpy as np

from model import layers as model_layers
from model.upstream import big_vision
from model.upstream.trees import SEP, flatten_tree, unflatten_tree

AllowMissing = bool | Sequence[str]
# Unexpected parameters named in a "lacks ..." error; the Report has them all.
_SHOWN_UNEXPECTED = 8


@dataclasses.dataclass
class Report:
    """What `merge_params` did with one checkpoint.

    Attributes:
        prefix: where in the model's tree the checkpoint went ('t5', 'img').
        source: the checkpoint's path (for messages only).
        loaded: paths (relative to `prefix`) taken from the checkpoint.
        missing: paths in the model but not in the checkpoint (kept from init).
        unexpected: paths in the checkpoint but not in the model (ignored).
        reshaped: (path, checkpoint shape, model shape, how) for parameters
            that were adapted rather than copied, e.g. resampled posembs.
    """
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
    if not items:
        return []
    return [f"  {title}: {len(items)}"] + [f"    {item}" for item in items]


def _get_subtree(params: Mapping[str, Any], prefix: str) -> Mapping[str, Any]:
    node = params
    for depth, key in enumerate(prefix.split(SEP)):
        if not isinstance(node, Mapping) or key not in node:
            where = SEP.join(prefix.split(SEP)[:depth]) or "the top level"
            have = sorted(node) if isinstance(node, Mapping) else type(node).__name__
            raise ValueError(
                f"prefix {prefix!r}: the model's parameters have no {key!r} at {where} "
                f"(it has {have})")
        node = node[key]
    if not isinstance(node, Mapping):
        raise ValueError(f"prefix {prefix!r} names an array, not a parameter subtree")
    return node


def _replace_subtree(params: Mapping[str, Any], prefix: str, subtree: dict) -> dict:
    """Returns a copy of `params` with the subtree at `prefix` replaced."""
    head, _, rest = prefix.partition(SEP)
    out = dict(params)
    out[head] = _replace_subtree(params[head], rest, subtree) if rest else subtree
    return out


def _missing_allowed(allow_missing: AllowMissing) -> Callable[[str], bool]:
    if isinstance(allow_missing, bool):
        return lambda path: allow_missing
    if isinstance(allow_missing, str):
        raise TypeError("allow_missing takes a bool or a sequence of regexes, not one string")
    patterns = [re.compile(p) for p in allow_missing]
    return lambda path: any(p.fullmatch(path) for p in patterns)


def _unboxed(leaf: Any) -> Any:
    """The array (or ShapeDtypeStruct) inside an nn.LogicallyPartitioned box."""
    if isinstance(leaf, nn.meta.AxisMetadata):
        return leaf.value if hasattr(leaf, "value") else leaf.unbox()
    return leaf


def _like(init_leaf: Any, value: Any) -> Any:
    """`value` cast to the init leaf's dtype, in the init leaf's box if any."""
    value = np.asarray(value).astype(_unboxed(init_leaf).dtype, copy=False)
    if isinstance(init_leaf, nn.meta.AxisMetadata):
        return init_leaf.replace_boxed(value)
    return value


def _is_scanned(flat: Mapping[str, Any]) -> bool:
    stacks = set(model_layers.SCANNED_STACKS)
    return any(stacks.intersection(path.split(SEP)) for path in flat)


def _to_scanned(loaded: Mapping[str, Any]) -> dict[str, Any]:
    """Per-layer checkpoint -> the scanned layout, stacked on the host CPU."""
    with jax.default_device(jax.devices("cpu")[0]):
        stacked = model_layers.layers_to_scan(dict(loaded))
    return jax.tree_util.tree_map(np.asarray, stacked)


def _fit_posemb(path: str, value: np.ndarray, target_shape: tuple,
                loaded_flat: Mapping[str, Any], init_flat: Mapping[str, Any],
                out_flat: dict, report: Report) -> np.ndarray:
    """Adapts a ViT position embedding to the model's token count.

    A class-token row that the model has no place for is folded into the
    sibling `cls` parameter where both the checkpoint and the model have one:
    old ViTs added the posemb after concatenating [cls], so `cls + pe_cls` is
    what their class token saw (big_vision's `fix_old_checkpoints` does this).
    """
    new, class_row, how = big_vision.fit_posemb(value, target_shape)
    report.reshaped.append((path, tuple(value.shape), tuple(target_shape), how))
    parent = path.rpartition(SEP)[0]
    cls_path = f"{parent}{SEP}cls" if parent else "cls"
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
        # What the checkpoint has instead usually shows the layout difference
        # (e.g. a relative position bias per layer instead of one per stack).
        instead = ""
        if report.unexpected:
            shown = report.unexpected[:_SHOWN_UNEXPECTED]
            more = len(report.unexpected) - len(shown)
            instead = (f"; it has {len(report.unexpected)} parameters the model lacks: "
                       + ", ".join(shown) + (f", ... ({more} more)" if more else ""))
        raise ValueError(
            f"checkpoint for {report.prefix!r}{where} lacks {len(not_allowed)} model parameters "
            f"(pass allow_missing to keep their init): " + ", ".join(not_allowed) + instead)


def merge_params(init_params: Mapping[str, Any], loaded: Mapping[str, Any], *,
                 prefix: str, allow_missing: AllowMissing = False,
                 resample_posemb: bool = True, source: str = "") -> tuple[dict, Report]:
    """Puts `loaded` into `init_params` under `prefix`.

    Args:
        init_params: the model's initialized parameter tree: nested dicts of
            arrays, ShapeDtypeStructs or nn.LogicallyPartitioned boxes of them.
        loaded: the checkpoint's tree, as `t5x.load` / `big_vision.load` give it.
        prefix: '/'-separated path of the subtree the checkpoint is for, e.g.
            't5' or 'img' (or 'params/t5' for a flax variables dict).
        allow_missing: True to keep the init of every model parameter absent
            from the checkpoint, False to fail, or a sequence of regexes
            (full-matched against paths relative to `prefix`) that may be missing.
        resample_posemb: adapt `pos_embedding` parameters of another size by
            bilinear resampling (big_vision's method); if False such a
            mismatch is an error like any other.
        source: the checkpoint's path, only for the report.

    Returns:
        (params, report): a new tree (the input is not modified) whose leaves
        under `prefix` come from the checkpoint as numpy arrays cast to the
        init's dtypes (boxed like the init's), and the `Report`.

    Raises:
        ValueError: shape mismatches (all listed, each with its path and both
            shapes), disallowed missing parameters, or a bad `prefix`; the
            message is one line.
    """
    init_flat = flatten_tree(_get_subtree(init_params, prefix))
    loaded_flat = flatten_tree(loaded)
    if _is_scanned(init_flat) and not _is_scanned(loaded_flat):
        loaded_flat = flatten_tree(_to_scanned(loaded))
    report = Report(prefix=prefix, source=source)
    is_allowed_missing = _missing_allowed(allow_missing)
    out_flat: dict[str, Any] = {}
    mismatches, not_allowed = [], []
    for path, init_value in init_flat.items():
        if path not in loaded_flat:
            out_flat.setdefault(path, init_value)
            report.missing.append(path)
            if not is_allowed_missing(path):
                not_allowed.append(path)
            continue
        value = np.asarray(loaded_flat[path])
        target_shape = tuple(_unboxed(init_value).shape)
        if value.shape != target_shape:
            if resample_posemb and path.rpartition(SEP)[2] == "pos_embedding":
                try:
                    value = _fit_posemb(path, value, target_shape, loaded_flat, init_flat,
                                        out_flat, report)
                except ValueError as e:
                    mismatches.append(f"{path}: {e}")
                    continue
            else:
                mismatches.append(
                    f"{path}: checkpoint {tuple(value.shape)} vs model {target_shape}")
                continue
        # `setdefault`: a `cls` already adjusted by _fit_posemb keeps its new value.
        out_flat.setdefault(path, _like(init_value, value))
        report.loaded.append(path)
    # Errors are raised only after the loop so that they list every problem.
    report.unexpected = [path for path in loaded_flat if path not in init_flat]
    _raise_if_unfit(report, mismatches, not_allowed)
    return _replace_subtree(init_params, prefix, unflatten_tree(out_flat)), report
