"""T5X parameter layouts -> the per-layer tree that `t5x.load` returns.

The published mT5 checkpoints (t5x/examples/t5/network.py) already have the
per-layer layout: `encoder/layers_<i>/...`, `decoder/layers_<i>/...`, 2-D
attention kernels. t5x's `scalable_t5` network (t5x/examples/scalable_t5/
network.py, `scan_layers=True`, the default of its mT5 / T5.1.1 / umT5 gin
configs) differs in two ways:

  * Scanned layers. `scan_with_axes(..., variable_axes={'params':
    param_scan_axis}, axis_name='layers')(name='encoder')` inside the
    `encoder` module stacks all layers under one name, `encoder/encoder/...`
    (and `decoder/decoder/...`), with the layer index on axis
    `param_scan_axis` (T5Config default 1) of every parameter; flax inserts
    'layers' at that position of the logical axes:
        pre_*_layer_norm/scale        ('embed', 'layers')
        <attn>/{query,key,value}/kernel ('embed', 'layers', 'heads', 'kv')
        <attn>/out/kernel             ('heads', 'layers', 'kv', 'embed')
        mlp/wi_<k>/kernel             ('embed', 'layers', 'mlp')
        mlp/wo/kernel                 ('mlp', 'layers', 'embed')
        relpos_bias/rel_embedding     ('heads', 'layers', 'relpos_buckets')
    Checkpoints store no axis names, so the axis is taken as 1 unless the
    shapes only fit 0 (a `param_scan_axis=0` run), or as the caller says.
    The stack is split into `layers_<i>` (bit-exact slices).
  * 3-D attention kernels. scalable_t5's DenseGeneral keeps the kernel in
    its natural shape ([embed, heads, kv], out [heads, kv, embed]) where the
    t5 example stores [embed, heads*kv] and reshapes it row-major to
    [embed, heads, kv]; those are flattened the same way (bit-exact).

scalable_t5 layers also carry their own relative position bias
(`layers_<i>/relpos_bias/rel_embedding`, as umT5), where the T5.1.1 model of
this repository shares one per stack (`encoder/relpos_bias`): such trees load
faithfully, and `merge.merge_params` then names the mismatch.
"""

from collections.abc import Mapping
from typing import Any

import numpy as np

from model.upstream import trees

# t5x/examples/scalable_t5/network.py T5Config.param_scan_axis.
T5X_PARAM_SCAN_AXIS = 1
# Parent module name -> name of its scanned stack inside it.
SCANNED_STACKS = {"encoder": "encoder", "decoder": "decoder"}
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
    """Splits one scanned stack into per-layer subtrees.

    Args:
        stack: the stacked subtree (e.g. the checkpoint's `encoder/encoder`).
        where: its path, for messages.
        param_scan_axis: the layer axis; None takes t5x's 1, or 0 if only
            that fits the shapes.

    Returns:
        {'layers_0': subtree, 'layers_1': ...} of contiguous arrays.
    """
    flat = {path: np.asarray(value) for path, value in trees.flatten_tree(stack).items()}
    if not flat:
        raise ValueError(f"scanned stack {where!r} is empty")
    axis = _layer_axis(flat, where, param_scan_axis)
    num_layers = next(iter(flat.values())).shape[axis]
    per_layer = {}
    for i in range(num_layers):
        per_layer[f"layers_{i}"] = trees.unflatten_tree({
            path: np.ascontiguousarray(np.take(value, i, axis=axis))
            for path, value in flat.items()})
    return per_layer


def unscan(tree: Mapping[str, Any], param_scan_axis: int | None = None) -> dict[str, Any]:
    """Replaces scalable_t5's scanned `encoder/encoder`, `decoder/decoder` by `layers_<i>`.

    Args:
        tree: a T5X parameter tree (nested dicts of arrays).
        param_scan_axis: see `unscan_stack`.

    Returns:
        A new tree; unscanned trees come back unchanged (shallow copies).

    Raises:
        ValueError: a stack has both a scanned and per-layer parameters, or
            no consistent layer axis.
    """
    out = dict(tree)
    for parent, stack_name in SCANNED_STACKS.items():
        module = tree.get(parent)
        if not isinstance(module, Mapping) or not isinstance(module.get(stack_name), Mapping):
            continue
        where = f"{parent}/{stack_name}"
        clash = sorted(k for k in module if k.startswith("layers_"))
        if clash:
            raise ValueError(f"{parent!r} has both a scanned stack {where!r} and per-layer "
                             f"parameters {clash}")
        module = dict(module)
        module.update(unscan_stack(module.pop(stack_name), where, param_scan_axis))
        out[parent] = module
    return out


def flatten_attention_kernels(tree: Mapping[str, Any]) -> dict[str, Any]:
    """Reshapes 3-D attention kernels to T5X's stored 2-D layout.

    [embed, heads, kv] -> [embed, heads*kv] for query/key/value and
    [heads, kv, embed] -> [heads*kv, embed] for out, row-major, as the t5
    example's DenseGeneral reshapes its 2-D kernel. Other leaves are kept.

    Args:
        tree: a per-layer T5X parameter tree.

    Returns:
        A new tree (nested dicts).
    """
    flat = trees.flatten_tree(tree)
    for path, value in flat.items():
        *_, module, projection, leaf = [""] * 3 + path.split(trees.SEP)
        if (leaf != "kernel" or module not in _ATTENTION_MODULES
                or np.ndim(value) != 3):
            continue
        value = np.asarray(value)
        if projection in ("query", "key", "value"):
            flat[path] = value.reshape(value.shape[0], -1)
        elif projection == "out":
            flat[path] = value.reshape(-1, value.shape[-1])
    return trees.unflatten_tree(flat)


def to_per_layer(tree: Mapping[str, Any], param_scan_axis: int | None = None) -> dict[str, Any]:
    """Any T5X layout above -> per-layer `layers_<i>` tree with 2-D attention kernels.

    Args:
        tree: the checkpoint's `target` tree.
        param_scan_axis: layer axis of scanned stacks (None: detect, see `unscan_stack`).

    Returns:
        The per-layer tree; values are bit-identical, only sliced and reshaped.
    """
    return flatten_attention_kernels(unscan(tree, param_scan_axis))
