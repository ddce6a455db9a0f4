"""Logical axis names of the model and their mapping onto a device mesh.

Every parameter of the ViT, the projection and the mT5 carries T5X-style
logical axis names (attached with `nn.with_logical_partitioning`), and the
main activations are annotated with `nn.with_logical_constraint`. The rules
below map those names onto a ('data', 'model') mesh: plain data parallelism
plus model (tensor) parallelism over vocabulary, heads and MLP units, or, with
`fsdp=True`, additionally the embedding dimension of every parameter sharded
over 'data' (fully sharded data parallelism).

Without `nn.logical_axis_rules` in scope (e.g. in the tests, on one CPU) the
activation constraints are no-ops.
"""

import flax.linen as nn
import jax

# Logical names used on parameters and activations.
BATCH = "batch"      # examples (activations only)
LENGTH = "length"    # sequence positions (activations only)
EMBED = "embed"      # model width (T5 emb_dim, ViT width)
VOCAB = "vocab"      # vocabulary entries
HEADS = "heads"      # attention heads
KV = "kv"            # per-head feature dimension
JOINED_KV = "joined_kv"  # heads * head_dim flattened (T5X's 2-D kernels)
MLP = "mlp"          # hidden units of the MLP blocks
RELPOS = "relpos_buckets"  # relative position buckets of T5
LAYERS = "layers"    # the stacked axis of nn.scan'ed layers

DATA_AXIS = "data"
MODEL_AXIS = "model"


def logical_axis_rules(fsdp: bool = False) -> tuple:
    """Returns the rules mapping logical axis names to ('data', 'model') axes.

    Order matters: flax assigns a mesh axis to the first logical name that
    asks for it, so 'batch' comes first and activations keep their batch
    sharding even when 'embed' also asks for 'data' under FSDP (the second
    request is then left unsharded).

    Args:
        fsdp: also shard the 'embed' dimension of parameters over 'data'.

    Returns:
        A tuple of (logical name, mesh axis or None) pairs.
    """
    return (
        (BATCH, DATA_AXIS),
        (VOCAB, MODEL_AXIS),
        (HEADS, MODEL_AXIS),
        (MLP, MODEL_AXIS),
        (JOINED_KV, MODEL_AXIS),
        (EMBED, DATA_AXIS if fsdp else None),
        (KV, None),
        (LENGTH, None),
        (RELPOS, None),
        (LAYERS, None),
    )


def param_init(init, names):
    """Wraps a parameter initializer so its value carries logical axis names.

    Args:
        init: a flax initializer (rng, shape, dtype) -> array.
        names: one logical name (or None) per dimension of the parameter.

    Returns:
        The wrapped initializer.
    """
    return nn.with_logical_partitioning(init, tuple(names))


def constrain(x: jax.Array, names) -> jax.Array:
    """Annotates an activation with logical axis names (no-op without rules).

    Args:
        x: the activation.
        names: one logical name (or None) per dimension of `x`.

    Returns:
        `x`, constrained to the sharding the active rules give those names.
    """
    return nn.with_logical_constraint(x, tuple(names))

