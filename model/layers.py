"""Building blocks shared by the ViT and the mT5 (T5X's RMSNorm and DenseGeneral, the
attention core), and conversion between `nn.scan`'s stacked trees and per-layer ones."""

import contextlib
import contextvars
import dataclasses
import functools
import re
from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

import errors
from model import partitioning as part

# Masked attention logits (as T5X): finite so that fully masked rows softmax to uniform, not NaN.
NEG_INF = -1e10

# Names of the scanned stacks (per layer: "<name>_<i>").
SCANNED_STACKS = ("layers", "encoderblock")

# What a rematerialized layer keeps for the backward pass: "full" only its input (least
# memory); "dots" also its unbatched matmuls' outputs (projections, MLPs), so only norms,
# activations, softmax and attention scores run again.
REMAT_POLICIES = {"full": None, "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable}


class RMSNorm(nn.Module):
    """T5 layer norm: scales by the root mean square (in float32), no mean, no bias."""
    epsilon: float = 1e-6
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        scale = self.param("scale", part.param_init(nn.initializers.ones, (part.EMBED,)),
                           (x.shape[-1],), jnp.float32)
        x = x.astype(jnp.float32)
        mean_square = jnp.mean(jnp.square(x), axis=-1, keepdims=True)
        y = x * jax.lax.rsqrt(mean_square + self.epsilon)
        return y.astype(self.dtype) * scale.astype(self.dtype)


class DenseGeneral(nn.Module):
    """Bias-free linear map over several axes; kernel stored 2-D [prod(in), prod(out)] as T5X."""
    features: Any
    axis: Any = -1
    kernel_axes: Sequence[str] = (None, None)
    kernel_init: Any = nn.initializers.variance_scaling(1.0, "fan_in", "truncated_normal")
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, inputs: jax.Array) -> jax.Array:
        features = tuple(np.atleast_1d(self.features).tolist())
        axis = tuple(a % inputs.ndim for a in np.atleast_1d(self.axis).tolist())
        in_dims = tuple(inputs.shape[a] for a in axis)
        stored_shape = (int(np.prod(in_dims)), int(np.prod(features)))
        kernel = self.param("kernel", part.param_init(self.kernel_init, self.kernel_axes),
                            stored_shape, jnp.float32)
        kernel = jnp.reshape(kernel.astype(self.dtype), in_dims + features)
        return jax.lax.dot_general(inputs.astype(self.dtype), kernel,
                                   ((axis, tuple(range(len(axis)))), ((), ())))


def layer_stack(cls, cfg, num_layers: int, name: str, **attrs):
    """A callable running `num_layers` layers `cls(config=cfg, **attrs)` (remat per `cfg`) on
    (x, *args): scanned as `name` (parameters stacked on axis 0, a cache on axis 1, `args` the
    same for every layer) or `name_<i>`."""
    if cfg.remat:  # Under nn.scan, XLA cannot merge the recomputation with the forward (no CSE).
        cls = nn.remat(cls, prevent_cse=not cfg.scan, policy=REMAT_POLICIES[cfg.remat_policy])

    def run(x, *args):
        if cfg.scan:
            scanned = nn.scan(
                cls, variable_axes={"params": 0, "cache": 1},
                split_rngs={"params": True, "dropout": True},
                in_axes=(nn.broadcast,) * len(args), length=num_layers,
                metadata_params={nn.PARTITION_NAME: part.LAYERS})
            return scanned(config=cfg, scanned=True, name=name, **attrs)(x, *args)[0]
        for i in range(num_layers):
            x = cls(config=cfg, name=f"{name}_{i}", **attrs)(x, *args)
        return x
    return run


def mask_to_bias(mask: jax.Array, dtype) -> jax.Array:
    """Turns a boolean attention mask (True = may attend) into an additive bias."""
    return jnp.where(mask, 0.0, NEG_INF).astype(dtype)


# Set within `cudnn_stand_in()`: attention that a GPU would give to cuDNN is traced as XLA's.
_CUDNN_STAND_IN = contextvars.ContextVar("cudnn_stand_in", default=False)


@contextlib.contextmanager
def cudnn_stand_in():
    """Within it, on any backend, attention that cuDNN would run on a GPU is XLA's under
    `jax.checkpoint`: like cuDNN's fused kernel it keeps only its inputs for the backward pass,
    never the [batch, heads, q, kv] scores (training/preflight.py sizes a GPU's step so)."""
    token = _CUDNN_STAND_IN.set(True)
    try:
        yield
    finally:
        _CUDNN_STAND_IN.reset(token)


def traced_platform():
    """The platform a trace is for: the default backend, or "gpu" within `cudnn_stand_in()`."""
    return "gpu" if _CUDNN_STAND_IN.get() else jax.default_backend()


def attention_implementation(platform, dtype, head_dim, has_bias):
    """"cudnn" or "xla": the `jax.nn.dot_product_attention` backend for these shapes.
    cuDNN needs an NVIDIA GPU, bf16/fp16 and head_dim a multiple of 8 up to 128; biased attention
    (T5's) stays on XLA, which measured faster (benchmarks/accelerator_report.py)."""
    cudnn = (platform == "gpu" and jnp.dtype(dtype) in (jnp.bfloat16, jnp.float16)
             and not head_dim % 8 and head_dim <= 128 and not has_bias)
    return "cudnn" if cudnn else "xla"


def even_length_attention(query, key, value, kv_length=None, implementation="cudnn"):
    """Unbiased, unscaled attention with odd lengths padded by one (cuDNN takes even ones only):
    the padded key is masked out by its length and the padded query row dropped. Keys from
    `kv_length` on are padding already (masked out)."""
    def padded(x):
        return jnp.pad(x, ((0, 0), (0, x.shape[1] % 2), (0, 0), (0, 0)))

    if kv_length is None and key.shape[1] % 2:
        kv_length = key.shape[1]
    return jax.nn.dot_product_attention(padded(query), padded(key), padded(value), scale=1.0,
                                        key_value_seq_lengths=_lengths(key, kv_length),
                                        implementation=implementation)[:, :query.shape[1]]


def _lengths(key, kv_length):
    """`jax.nn.dot_product_attention`'s key_value_seq_lengths: `kv_length` for every example."""
    return None if kv_length is None else jnp.full((key.shape[0],), kv_length, jnp.int32)


def dot_product_attention(query, key, value, bias=None, dropout_rng=None,
                          dropout_rate=0.0, deterministic=True, dtype=jnp.float32,
                          kv_length=None):
    """softmax(q.k + bias) @ v, unscaled (T5 folds 1/sqrt(d) into the query init, the ViT scales).
    Without dropout `jax.nn.dot_product_attention` (float32 scores), keys from `kv_length` on
    masked out; with dropout, T5X's (one mask per key shared by every query, which jax's lacks)
    spelled out."""
    query, key, value = (x.astype(dtype) for x in (query, key, value))
    if deterministic or dropout_rate == 0.0:
        if bias is not None:
            bias = jnp.broadcast_to(bias, bias.shape[:-2] + (query.shape[1], key.shape[1]))
        attend = functools.partial(jax.nn.dot_product_attention, bias=bias, scale=1.0,
                                   key_value_seq_lengths=_lengths(key, kv_length))
        if attention_implementation(traced_platform(), dtype, query.shape[-1],
                                    bias is not None) != "cudnn":
            return attend(query, key, value)
        if _CUDNN_STAND_IN.get():
            return jax.checkpoint(attend)(query, key, value)
        # cuDNN's own rules for shapes change between versions.
        with contextlib.suppress(NotImplementedError):
            return even_length_attention(query, key, value, kv_length)
        return attend(query, key, value)
    if kv_length is not None:
        raise ValueError("kv_length is for attention without dropout")
    # [batch, heads, q_len, kv_len], accumulated in float32 as jax's.
    logits = jnp.einsum("bqhd,bkhd->bhqk", query, key, preferred_element_type=jnp.float32)
    if bias is not None:
        logits = logits + bias.astype(jnp.float32)
    weights = jax.nn.softmax(logits, axis=-1).astype(dtype)
    keep_prob = 1.0 - dropout_rate
    # One draw per key, shared by every query.
    keep = jax.random.bernoulli(dropout_rng, keep_prob, (*weights.shape[:-2], 1, weights.shape[-1]))
    weights = weights * (keep.astype(dtype) / jnp.asarray(keep_prob, dtype))
    return jnp.einsum("bhqk,bkhd->bqhd", weights, value)


def scan_to_layers(params: Any) -> Any:
    """Splits every scanned stack ('layers', 'encoderblock'; layer on axis 0) into 'layers_<i>'."""
    params = nn.unbox(params)
    if not hasattr(params, "items"):
        return params
    out = {}
    for name, sub in params.items():
        if name in SCANNED_STACKS and hasattr(sub, "items"):
            for i in range(jax.tree_util.tree_leaves(sub)[0].shape[0]):
                out[f"{name}_{i}"] = jax.tree_util.tree_map(lambda x, i=i: x[i], dict(sub))
        else:
            out[name] = scan_to_layers(sub)
    return out


def layers_to_scan(params: Any) -> Any:
    """Inverse of `scan_to_layers`; ValueError for gaps in the layer numbers or unlike layers."""
    params = nn.unbox(params)
    if not hasattr(params, "items"):
        return params
    out, stacks = {}, {}
    for name, sub in params.items():
        if (match := re.fullmatch(r"(layers|encoderblock)_(\d+)", name)) and hasattr(sub, "items"):
            stacks.setdefault(match.group(1), {})[int(match.group(2))] = dict(sub)
        else:
            out[name] = layers_to_scan(sub)
    for stack, layers in stacks.items():
        if sorted(layers) != list(range(len(layers))):
            raise ValueError(f"'{stack}_*' layers are not numbered 0..{len(layers) - 1}: "
                             f"found {sorted(layers)}")
        with errors.reraised(ValueError, ValueError, f"'{stack}_*' layers differ in structure: "):
            out[stack] = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs),
                                                *(layers[i] for i in range(len(layers))))
    return out


def random_params(abstract: Any, seed: int = 0) -> Any:
    """Random float32 parameters for a tree of shapes, by numpy (no compile; tests, benchmarks).
    Norm scales 1 + N(0, 0.1), biases N(0, 0.1), embeddings N(0, 1), others N(0, 1 / fan_in)."""
    rng = np.random.default_rng(seed)

    def fill(path, leaf):
        name = str(getattr(path[-1], "key", path[-1]))
        shape = tuple(leaf.shape)
        noise = rng.standard_normal(shape, dtype=np.float32)
        if name == "scale":
            value = 1.0 + 0.1 * noise
        elif name in ("bias", "cls"):
            value = 0.1 * noise
        elif name == "embedding" and len(shape) == 2:
            value = noise
        else:  # fan_in: the product of all but the last axis
            value = noise / np.sqrt(max(int(np.prod(shape[:-1])), 1))
        return jnp.asarray(value, jnp.float32)

    return jax.tree_util.tree_map_with_path(fill, nn.unbox(abstract))


def with_overrides(config_class, fields, overrides):
    """`fields` updated with the non-None `overrides`; ValueError for one naming no field."""
    known = {f.name for f in dataclasses.fields(config_class)}
    if unknown := [key for key in overrides if key not in known]:
        raise ValueError(f"unknown {config_class.__name__} field {unknown[0]!r}; known: "
                         f"{', '.join(sorted(known))}")
    return {**fields, **{k: v for k, v in overrides.items() if v is not None}}
