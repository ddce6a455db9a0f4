"""Vision Transformer with the parameter tree of big_vision checkpoints.

As big_vision/models/vit.py: conv patch stem, learned or 2-D sin-cos position embeddings
added before the optional [cls] token, pre-LayerNorm blocks (eps 1e-6, tanh GELU, queries
scaled by 1/sqrt(head_dim)), 'encoder_norm', pooling 'gap', 'map' or 'tok'. No
classification head: the captioner needs the pooled vector and the tokens.
"""

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from model import layers
from model import partitioning as part

# big_vision's decode_variant table (arXiv:2106.04560, Table 2), plus "mu" for tests.
# size: (width, depth, mlp_dim, num_heads)
_SIZES = {"mu": (32, 2, 64, 2), "Ti": (192, 12, 768, 3), "S": (384, 12, 1536, 6),
          "M": (512, 12, 2048, 8), "B": (768, 12, 3072, 12), "L": (1024, 24, 4096, 16),
          "So400m": (1152, 27, 4304, 16), "H": (1280, 32, 5120, 16), "g": (1408, 40, 6144, 16),
          "G": (1664, 48, 8192, 16), "e": (1792, 56, 15360, 16)}
POOL_TYPES = ("gap", "map", "tok")
POSEMB_TYPES = ("learn", "sincos2d")


@dataclasses.dataclass(frozen=True)
class ViTConfig:
    """Hyperparameters of the image encoder (names as big_vision's _Model)."""
    width: int
    depth: int
    mlp_dim: int
    num_heads: int
    patch_size: tuple[int, int] = (16, 16)
    posemb: str = "learn"
    pool: str = "gap"
    dropout_rate: float = 0.0
    dtype: Any = jnp.float32  # activations; parameters are always float32
    scan: bool = False   # nn.scan over blocks ('encoderblock' instead of '_{i}')
    remat: bool = False  # rematerialize each block in the backward pass
    remat_policy: str = "full"  # what it keeps: a key of layers.REMAT_POLICIES

    def __post_init__(self):
        for field, known in (("pool", POOL_TYPES), ("posemb", POSEMB_TYPES)):
            if getattr(self, field) not in known:
                raise ValueError(f"unknown ViT {field} {getattr(self, field)!r}; "
                                 f"known: {', '.join(known)}")
        if self.width % self.num_heads:
            raise ValueError(f"ViT width {self.width} is not divisible by "
                             f"num_heads {self.num_heads}")


def vit_config(variant: str, **overrides) -> ViTConfig:
    """The config of a variant "<size>[/<patch>]" ("B/16"; patch 16), with non-None `overrides`."""
    size, _, patch = variant.partition("/")
    if size not in _SIZES:
        raise ValueError(f"unknown ViT variant {variant!r}; sizes: {', '.join(_SIZES)}")
    fields = dict(zip(("width", "depth", "mlp_dim", "num_heads"), _SIZES[size], strict=True))
    if patch:
        if not patch.isdigit() or int(patch) <= 0:
            raise ValueError(f"bad patch size {patch!r} in ViT variant {variant!r}")
        fields["patch_size"] = (int(patch), int(patch))
    return ViTConfig(**layers.with_overrides(ViTConfig, fields, overrides))


def posemb_sincos_2d(h: int, w: int, width: int) -> jax.Array:
    """Fixed 2-D sin-cos position embeddings (MoCo v3, temperature 10^4), [1, h * w, width]."""
    if width % 4:
        raise ValueError(f"sincos2d position embeddings need width % 4 == 0, got {width}")
    omega = 1.0 / 10_000.0 ** (np.arange(width // 4) / (width // 4 - 1))
    y, x = (np.outer(grid.flatten(), omega) for grid in np.mgrid[:h, :w])
    pe = np.concatenate([np.sin(x), np.cos(x), np.sin(y), np.cos(y)], axis=1)
    return jnp.asarray(pe, jnp.float32)[None]


def _dense(features, in_name, out_name, dtype, name):
    """big_vision's MLP Dense (its initializers), with logical axis names."""
    return nn.Dense(
        features, dtype=dtype, param_dtype=jnp.float32, name=name,
        kernel_init=part.param_init(nn.initializers.xavier_uniform(), (in_name, out_name)),
        bias_init=part.param_init(nn.initializers.normal(stddev=1e-6), (out_name,)))


def _layer_norm(dtype, name=None):
    return nn.LayerNorm(
        epsilon=1e-6, dtype=dtype, param_dtype=jnp.float32, name=name,
        scale_init=part.param_init(nn.initializers.ones, (part.EMBED,)),
        bias_init=part.param_init(nn.initializers.zeros, (part.EMBED,)))


class MlpBlock(nn.Module):
    """Dense -> GELU -> dropout -> Dense ('Dense_0', 'Dense_1')."""
    config: ViTConfig

    @nn.compact
    def __call__(self, x, deterministic: bool = True):
        cfg = self.config
        h = _dense(cfg.mlp_dim, part.EMBED, part.MLP, cfg.dtype, "Dense_0")(x)
        h = nn.gelu(h)  # tanh approximation, as big_vision (flax default)
        h = nn.Dropout(cfg.dropout_rate)(h, deterministic)
        h = part.constrain(h, (part.BATCH, part.LENGTH, part.MLP))
        return _dense(x.shape[-1], part.MLP, part.EMBED, cfg.dtype, "Dense_1")(h)


class _HeadsDense(nn.Module):
    """flax DenseGeneral's parameters for a projection into or out of attention heads: the
    input's last `in_axes` axes times the kernel's first, plus a bias over the kernel's others.
    flax's DenseGeneral reshapes a flattened kernel, which applies the 3-D sharding constraint to
    the 2-D kernel and fails under a mesh; here the kernel is made in its stored shape, with fans
    over the same axes (flax's distribution)."""
    kernel_shape: tuple
    kernel_names: tuple
    in_axes: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x):
        n = self.in_axes
        init = nn.initializers.xavier_uniform(in_axis=tuple(range(n)),
                                              out_axis=tuple(range(n, len(self.kernel_shape))))
        kernel = self.param("kernel", part.param_init(init, self.kernel_names),
                            self.kernel_shape, jnp.float32)
        bias = self.param("bias", part.param_init(nn.initializers.zeros, self.kernel_names[n:]),
                          self.kernel_shape[n:], jnp.float32)
        y = jnp.tensordot(x.astype(self.dtype), kernel.astype(self.dtype), n)
        return y + bias.astype(self.dtype)


class MultiHeadDotProductAttention(nn.Module):
    """flax's MultiHeadDotProductAttention layout: query/key/value [width, heads, head_dim],
    out [heads, head_dim, width], with biases."""
    num_heads: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, inputs_q, inputs_kv, kv_length=None):
        """Keys from `kv_length` on (when given) are padding: no query attends to them."""
        width = inputs_q.shape[-1]
        head_dim = width // self.num_heads

        def projection(name, x):
            x = _HeadsDense((width, self.num_heads, head_dim), (part.EMBED, part.HEADS, part.KV),
                            1, self.dtype, name=name)(x)
            return part.constrain(x, (part.BATCH, part.LENGTH, part.HEADS, part.KV))

        # [batch, length, heads, head_dim]
        query = projection("query", inputs_q) / jnp.sqrt(head_dim).astype(self.dtype)
        key = projection("key", inputs_kv)
        value = projection("value", inputs_kv)
        x = layers.dot_product_attention(query, key, value, dtype=self.dtype,
                                         kv_length=kv_length)
        return _HeadsDense((self.num_heads, head_dim, width), (part.HEADS, part.KV, part.EMBED),
                           2, self.dtype, name="out")(x)


class Encoder1DBlock(nn.Module):
    """Pre-LN self-attention + MLP block ('encoderblock_{i}')."""
    config: ViTConfig
    deterministic: bool = True
    scanned: bool = False
    kv_length: int | None = None  # Tokens from kv_length on are padding.

    @nn.compact
    def __call__(self, x):
        cfg, det = self.config, self.deterministic
        y = _layer_norm(cfg.dtype, "LayerNorm_0")(x)
        y = MultiHeadDotProductAttention(cfg.num_heads, cfg.dtype,
                                         name="MultiHeadDotProductAttention_0")(
                                             y, y, self.kv_length)
        x = x + nn.Dropout(cfg.dropout_rate)(y, det)
        y = _layer_norm(cfg.dtype, "LayerNorm_1")(x)
        y = MlpBlock(cfg, name="MlpBlock_0")(y, det)
        x = x + nn.Dropout(cfg.dropout_rate)(y, det)
        x = part.constrain(x, (part.BATCH, part.LENGTH, part.EMBED))
        return (x, None) if self.scanned else x


class Encoder(nn.Module):
    """The block stack and final norm ('Transformer')."""
    config: ViTConfig

    @nn.compact
    def __call__(self, x, train: bool = False):
        cfg = self.config
        length = x.shape[1]
        # cuDNN's fused attention takes even lengths only: an odd sequence (196 patches + [cls])
        # is padded by one token here, once, rather than in every layer's attention (whose pads
        # and slices took 7.7 ms of BB's 132 ms step on an H200); the pad is masked out as a
        # key and its own outputs are dropped.
        pad = length % 2 and layers.attention_implementation(
            layers.traced_platform(), cfg.dtype, cfg.width // cfg.num_heads, False) == "cudnn"
        if pad:
            x = jnp.pad(x, ((0, 0), (0, 1), (0, 0)))
        x = layers.layer_stack(Encoder1DBlock, cfg, cfg.depth, "encoderblock",
                               deterministic=not train, kv_length=length if pad else None)(x)
        return _layer_norm(cfg.dtype, "encoder_norm")(x[:, :length])


class MAPHead(nn.Module):
    """Multihead attention pooling with a learned probe ('MAPHead_0')."""
    config: ViTConfig

    @nn.compact
    def __call__(self, x):
        """[batch, length, width] -> [batch, width]."""
        cfg = self.config
        batch, _, width = x.shape
        probe = self.param("probe", part.param_init(nn.initializers.xavier_uniform(),
                                                    (None, None, part.EMBED)),
                           (1, 1, width), jnp.float32)
        probe = jnp.tile(probe.astype(cfg.dtype), [batch, 1, 1])
        x = MultiHeadDotProductAttention(cfg.num_heads, cfg.dtype,
                                         name="MultiHeadDotProductAttention_0")(probe, x)
        y = _layer_norm(cfg.dtype, "LayerNorm_0")(x)
        x = x + MlpBlock(cfg, name="MlpBlock_0")(y)  # no dropout: deterministic
        return x[:, 0]


class ViT(nn.Module):
    """Image encoder returning (pooled [B, width], patch tokens [B, N, width])."""
    config: ViTConfig

    @nn.compact
    def __call__(self, images, train: bool = False):
        """Images [batch, H, W, 3] in [-1, 1] -> (pooled [batch, width], final-normed tokens)."""
        cfg = self.config
        ph, pw = cfg.patch_size
        if images.ndim != 4 or images.shape[1] % ph or images.shape[2] % pw:
            raise ValueError(f"images must be [batch, H, W, C] with H, W multiples of the "
                             f"patch size {cfg.patch_size}; got shape {images.shape}")
        x = nn.Conv(cfg.width, (ph, pw), strides=(ph, pw), padding="VALID", dtype=cfg.dtype,
                    param_dtype=jnp.float32, name="embedding",
                    kernel_init=part.param_init(nn.initializers.lecun_normal(),
                                                (None, None, None, part.EMBED)),
                    bias_init=part.param_init(nn.initializers.zeros, (part.EMBED,)))(
                        images.astype(cfg.dtype))
        batch, h, w, width = x.shape
        # [batch, num_patches, width]
        x = jnp.reshape(x, [batch, h * w, width])
        x = x + self._posemb(h, w, width).astype(cfg.dtype)
        if cfg.pool == "tok":
            cls = self.param("cls", part.param_init(nn.initializers.zeros,
                                                    (None, None, part.EMBED)),
                             (1, 1, width), jnp.float32)
            x = jnp.concatenate([jnp.tile(cls.astype(cfg.dtype), [batch, 1, 1]), x], axis=1)
        x = nn.Dropout(cfg.dropout_rate)(x, not train)
        x = part.constrain(x, (part.BATCH, part.LENGTH, part.EMBED))
        x = Encoder(cfg, name="Transformer")(x, train=train)

        if cfg.pool == "map":
            return MAPHead(cfg, name="MAPHead_0")(x), x
        if cfg.pool == "tok":
            return x[:, 0], x[:, 1:]
        return jnp.mean(x, axis=1), x

    def _posemb(self, h: int, w: int, width: int) -> jax.Array:
        """[1, h * w, width] position embeddings (a parameter when 'learn')."""
        if self.config.posemb == "sincos2d":
            return posemb_sincos_2d(h, w, width)
        init = nn.initializers.normal(stddev=1 / np.sqrt(width))
        return self.param("pos_embedding", part.param_init(init, (None, None, part.EMBED)),
                          (1, h * w, width), jnp.float32)


def num_patches(config: ViTConfig, image_size: int) -> int:
    """Number of patch tokens for square images of `image_size` pixels."""
    ph, pw = config.patch_size
    if image_size % ph or image_size % pw:
        raise ValueError(f"image_size {image_size} is not a multiple of the ViT patch size "
                         f"{config.patch_size}")
    return (image_size // ph) * (image_size // pw)

