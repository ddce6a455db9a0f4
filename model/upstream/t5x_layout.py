"""T5X parameter layouts -> the per-layer tree that `t5x.load` returns.

Published mT5 checkpoints are already per-layer (`encoder/layers_<i>/...`, 2-D attention
kernels). t5x's scalable_t5 (`scan_layers=True`) stacks the layers as `encoder/encoder/...`
with the layer on axis `param_scan_axis` (1 unless only 0 fits the shapes: checkpoints store
no axis names) and keeps attention kernels 3-D; both are undone bit-exactly. Its per-layer
relative position biases (umT5) load faithfully; `merge` names the mismatch.
"""

from collections.abc import Mapping
from typing import Any

import numpy as np

from model.upstream import trees

# t5x/examples/scalable_t5/network.py T5Config.param_scan_axis.
T5X_PARAM_SCAN_AXIS = 1
_ATTENTION_MODULES = ("attention", "self_attention", "encoder_decoder_attention")


def _layer_axis(flat: Mapping[str, np.ndarray], where: str, param_scan_axis: int | None) -> int:
    """The axis that holds the same layer count in every parameter of a stack."""
    def fits(axis):
        sizes = {v.shape[axis] for v in flat.values() if v.ndim > axis}
        return len(sizes) == 1 and all(v.ndim > axis for v in flat.values())

    candidates = ((param_scan_axis,) if param_scan_axis is not None
                  else (T5X_PARAM_SCAN_AXIS, 0))
    for axis in candidates:
        if fits(axis):
            return axis
    shapes = ", ".join(f"{k} {tuple(v.shape)}" for k, v in flat.items())
    tried = " or ".join(str(a) for a in candidates)
    raise ValueError(f"scanned stack {where!r}: no layer axis ({tried}) has the same size in "
                     f"every parameter: {shapes}")


def unscan_stack(stack: Mapping[str, Any], where: str,
                 param_scan_axis: int | None = None) -> dict[str, Any]:
    """{'layers_0': subtree, ...} of contiguous arrays from one scanned stack.
    `param_scan_axis` None takes t5x's 1, or 0 if only that fits the shapes."""
    flat = {path: np.asarray(value) for path, value in trees.flatten_tree(stack).items()}
    if not flat:
        raise ValueError(f"scanned stack {where!r} is empty")
    axis = _layer_axis(flat, where, param_scan_axis)
    return {f"layers_{i}": trees.unflatten_tree({
                path: np.ascontiguousarray(np.take(value, i, axis=axis))
                for path, value in flat.items()})
            for i in range(next(iter(flat.values())).shape[axis])}


def unscan(tree: Mapping[str, Any], param_scan_axis: int | None = None) -> dict[str, Any]:
    """A new tree with scalable_t5's `encoder/encoder`, `decoder/decoder` split into `layers_<i>`.
    ValueError for a stack with both scanned and per-layer parameters or no consistent layer
    axis."""
    out = dict(tree)
    for parent in ("encoder", "decoder"):  # Each stack is named as its parent module.
        module = tree.get(parent)
        if not isinstance(module, Mapping) or not isinstance(module.get(parent), Mapping):
            continue
        where = f"{parent}/{parent}"
        if clash := sorted(k for k in module if k.startswith("layers_")):
            raise ValueError(f"{parent!r} has both a scanned stack {where!r} and per-layer "
                             f"parameters {clash}")
        out[parent] = {**{k: v for k, v in module.items() if k != parent},
                       **unscan_stack(module[parent], where, param_scan_axis)}
    return out


def flatten_attention_kernels(tree: Mapping[str, Any]) -> dict[str, Any]:
    """3-D attention kernels reshaped row-major to T5X's stored 2-D layout.
    [embed, heads, kv] -> [embed, heads*kv] (query/key/value),
    [heads, kv, embed] -> [heads*kv, embed] (out). Other leaves are kept."""
    flat = trees.flatten_tree(tree)
    for path, value in flat.items():
        *_, module, projection, leaf = [""] * 3 + path.split(trees.SEP)
        if leaf != "kernel" or module not in _ATTENTION_MODULES or np.ndim(value) != 3:
            continue
        value = np.asarray(value)
        if projection in ("query", "key", "value"):
            flat[path] = value.reshape(value.shape[0], -1)
        elif projection == "out":
            flat[path] = value.reshape(-1, value.shape[-1])
    return trees.unflatten_tree(flat)


def to_per_layer(tree: Mapping[str, Any], param_scan_axis: int | None = None) -> dict[str, Any]:
    """Any T5X layout above -> per-layer tree with 2-D attention kernels (bit-identical values)."""
    return flatten_attention_kernels(unscan(tree, param_scan_axis))
