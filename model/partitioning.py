"""Logical axis names of the model's parameters and activations, and their mesh mapping.

The rules map them onto a ('data', 'model') mesh: data parallelism plus model parallelism over
vocabulary, heads and MLP units, and with `fsdp=True` the parameters' embedding axis sharded over
'data' too. Without `nn.logical_axis_rules` in scope the activation constraints are no-ops.
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
    """(logical name, mesh axis or None) pairs.
    Order matters: flax gives a mesh axis to the first name asking for it, so 'batch' comes first
    and activations keep their batch sharding when 'embed' also asks for 'data' (FSDP)."""
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
    """Wraps a parameter initializer so its value carries logical axis names."""
    return nn.with_logical_partitioning(init, tuple(names))


def constrain(x: jax.Array, names) -> jax.Array:
    """Annotates an activation with logical axis names (no-op without rules)."""
    return nn.with_logical_constraint(x, tuple(names))

