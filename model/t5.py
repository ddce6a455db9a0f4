"""mT5 / T5.1.1 encoder-decoder with the parameter tree of T5X checkpoints.

As t5x/examples/t5/network.py: pre-norm RMSNorm, no biases, gated-GELU MLP, relative
position buckets (one table per stack), no 1/sqrt(d) attention scaling (folded into the
query init), untied output layer. Differences that keep the math on valid positions: the
encoder takes embedded inputs and a mask (image embeddings go before the prompt), decoder
self-attention is causal only, embeddings are a gather, and the decoding cache is
[batch, length, heads, head_dim] per layer plus a 'cache_index' per decoder.
"""

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from model import layers
from model import partitioning as part

# Sizes from the T5X gin files (t5x/examples/t5/mt5/*.gin); "t5-tiny" is for tests.
# name: (emb_dim, mlp_dim, num_heads, head_dim, encoder and decoder layers, vocab_size)
_VARIANTS = {"mt5-small": (512, 1024, 6, 64, 8, None), "mt5-base": (768, 2048, 12, 64, 12, None),
             "mt5-large": (1024, 2816, 16, 64, 24, None), "mt5-xl": (2048, 5120, 32, 64, 24, None),
             "mt5-xxl": (4096, 10240, 64, 64, 24, None), "t5-tiny": (32, 64, 4, 8, 2, 128)}
MT5_VOCAB_SIZE = 250112


@dataclasses.dataclass(frozen=True)
class T5Config:
    """Hyperparameters of the encoder-decoder (names as T5X's T5Config)."""
    vocab_size: int
    emb_dim: int
    num_heads: int
    head_dim: int
    mlp_dim: int
    num_encoder_layers: int
    num_decoder_layers: int
    dropout_rate: float = 0.0
    dtype: Any = jnp.float32  # activations; parameters are always float32
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    layer_norm_epsilon: float = 1e-6
    scan: bool = False   # nn.scan over layers ('layers' instead of 'layers_{i}')
    remat: bool = False  # rematerialize each layer in the backward pass
    remat_policy: str = "full"  # what it keeps: a key of layers.REMAT_POLICIES


def t5_config(variant: str, **overrides) -> T5Config:
    """The config of a named size (`_VARIANTS`), with non-None `overrides` replacing fields."""
    if variant not in _VARIANTS:
        raise ValueError(f"unknown T5 variant {variant!r}; known: {', '.join(_VARIANTS)}")
    emb_dim, mlp_dim, num_heads, head_dim, num_layers, vocab_size = _VARIANTS[variant]
    fields = dict(vocab_size=vocab_size or MT5_VOCAB_SIZE, emb_dim=emb_dim, mlp_dim=mlp_dim,
                  num_heads=num_heads, head_dim=head_dim, num_encoder_layers=num_layers,
                  num_decoder_layers=num_layers)
    return T5Config(**layers.with_overrides(T5Config, fields, overrides))


def relative_position_bucket(relative_position, bidirectional: bool, num_buckets: int,
                             max_distance: int):
    """Maps key - query offsets to T5's buckets: int32 ids in [0, num_buckets).
    Half the buckets (per direction) hold exact offsets, the rest grow logarithmically up to
    `max_distance`; causal stacks see only non-positive offsets."""
    n = -relative_position
    bucket = jnp.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (n < 0).astype(jnp.int32) * num_buckets
        n = jnp.abs(n)
    else:
        n = jnp.maximum(n, 0)
    max_exact = num_buckets // 2
    # T5X's float32 epsilon, so bucket edges fall where they did in pre-training.
    log_ratio = jnp.log(n.astype(jnp.float32) / max_exact + np.finfo(np.float32).eps)
    large = max_exact + (log_ratio / np.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).astype(jnp.int32)
    large = jnp.minimum(large, num_buckets - 1)
    return (bucket + jnp.where(n < max_exact, n, large)).astype(jnp.int32)


class RelativePositionBias(nn.Module):
    """One table of per-head scalar biases indexed by relative position bucket."""
    config: T5Config
    bidirectional: bool

    @nn.compact
    def __call__(self, q_len: int, k_len: int, q_offset=0) -> jax.Array:
        """The bias [1, heads, q_len, k_len] for queries q_offset + i."""
        cfg = self.config
        num_buckets = cfg.relative_attention_num_buckets
        table = self.param(
            "rel_embedding",
            part.param_init(nn.initializers.variance_scaling(1.0, "fan_avg", "uniform"),
                            (part.HEADS, part.RELPOS)),
            (cfg.num_heads, num_buckets), jnp.float32)
        q_pos = jnp.arange(q_len, dtype=jnp.int32)[:, None] + q_offset
        k_pos = jnp.arange(k_len, dtype=jnp.int32)[None, :]
        buckets = relative_position_bucket(k_pos - q_pos, self.bidirectional, num_buckets,
                                           cfg.relative_attention_max_distance)
        # [1, heads, q_len, k_len]
        return jnp.take(table.astype(cfg.dtype), buckets, axis=1)[None]


def key_mask(mask, q_segments=None, k_segments=None):
    """May-attend [batch, 1, 1 or q_len, k_len]: the keys of `mask` [batch, k_len]; with
    segment ids (packed rows, 0 = none), only those of the query's segment."""
    if k_segments is None:
        return mask[:, None, None, :]
    return mask[:, None, None, :] & (q_segments[:, None, :, None] == k_segments[:, None, None, :])


class Embed(nn.Module):
    """Token embedding table [vocab, emb] ('token_embedder/embedding')."""
    vocab_size: int
    emb_dim: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        """[batch, length] int -> [batch, length, emb]."""
        table = self.param(
            "embedding",
            part.param_init(nn.initializers.normal(stddev=1.0), (part.VOCAB, part.EMBED)),
            (self.vocab_size, self.emb_dim), jnp.float32)
        return jnp.take(table, tokens.astype(jnp.int32), axis=0).astype(self.dtype)


class Attention(nn.Module):
    """T5X multi-head attention; `decode` keeps past keys/values in the 'cache' collection."""
    num_heads: int
    head_dim: int
    dropout_rate: float = 0.0
    dtype: Any = jnp.float32
    deterministic: bool = True
    decode: bool = False

    @nn.compact
    def __call__(self, inputs_q, inputs_kv, bias=None, cache_index=None):
        """Attends from inputs_q [batch, q_len, emb] to inputs_kv [batch, kv_len, emb].
        `bias` broadcasts to [batch, heads, q_len, kv_len] (the whole cache when decoding);
        `cache_index` is the position written in the cache."""
        kernel_init = nn.initializers.variance_scaling(1.0, "fan_in", "normal")

        def query_init(*args):
            # T5 has no 1/sqrt(d) in attention; T5X puts it in the query init.
            return kernel_init(*args) / jnp.sqrt(self.head_dim).astype(jnp.float32)

        def projection(name, init, x):
            x = layers.DenseGeneral(
                features=(self.num_heads, self.head_dim), axis=-1,
                kernel_axes=(part.EMBED, part.JOINED_KV), kernel_init=init,
                dtype=self.dtype, name=name)(x)
            return part.constrain(x, (part.BATCH, part.LENGTH, part.HEADS, part.KV))

        # [batch, length, heads, head_dim]
        query = projection("query", query_init, inputs_q)
        key = projection("key", kernel_init, inputs_kv)
        value = projection("value", kernel_init, inputs_kv)

        if self.decode:
            filled = self.has_variable("cache", "cached_key")

            def cached(name, x):
                """x written into the cache at `cache_index` (one position per call, the
                Decoder checks it): the whole cache; x itself when the cache is made."""
                var = self.variable("cache", f"cached_{name}", jnp.zeros, x.shape, x.dtype)
                if filled:
                    var.value = jax.lax.dynamic_update_slice(var.value, x, (0, cache_index, 0, 0))
                return var.value if filled else x

            key, value = cached("key", key), cached("value", value)

        dropout_rng = (self.make_rng("dropout")
                       if not self.deterministic and self.dropout_rate > 0.0 else None)
        x = layers.dot_product_attention(query, key, value, bias, dropout_rng,
                                         self.dropout_rate, self.deterministic, self.dtype)
        return layers.DenseGeneral(
            features=inputs_q.shape[-1], axis=(-2, -1),
            kernel_axes=(part.JOINED_KV, part.EMBED), kernel_init=kernel_init,
            dtype=self.dtype, name="out")(x)


def _dropout(cfg: T5Config, x, deterministic: bool):
    # T5X broadcasts hidden-state dropout over the length axis.
    return nn.Dropout(cfg.dropout_rate, broadcast_dims=(-2,))(x, deterministic=deterministic)


class MlpBlock(nn.Module):
    """Gated-GELU feed-forward: wo(gelu(wi_0 x) * wi_1 x)."""
    config: T5Config
    deterministic: bool = True

    @nn.compact
    def __call__(self, x):
        """[batch, length, emb] -> [batch, length, emb]."""
        cfg = self.config
        init = nn.initializers.variance_scaling(1.0, "fan_in", "truncated_normal")

        def dense(features, axes, name):
            return layers.DenseGeneral(features, kernel_axes=axes, kernel_init=init,
                                       dtype=cfg.dtype, name=name)

        # nn.gelu defaults to the tanh approximation, as T5X's 'gelu'.
        gate = nn.gelu(dense(cfg.mlp_dim, (part.EMBED, part.MLP), "wi_0")(x))
        linear = dense(cfg.mlp_dim, (part.EMBED, part.MLP), "wi_1")(x)
        # [batch, length, mlp]
        h = _dropout(cfg, gate * linear, self.deterministic)
        h = part.constrain(h, (part.BATCH, part.LENGTH, part.MLP))
        return dense(x.shape[-1], (part.MLP, part.EMBED), "wo")(h)


_RESIDUAL = (part.BATCH, part.LENGTH, part.EMBED)


def _stack(cfg: T5Config, det: bool, x, layer, num_layers: int, norm_name: str, *args, **attrs):
    """Dropout, the `layer`s (each given `args`), the final RMSNorm named `norm_name`, dropout."""
    x = part.constrain(_dropout(cfg, x, det).astype(cfg.dtype), _RESIDUAL)
    x = layers.layer_stack(layer, cfg, num_layers, "layers", deterministic=det, **attrs)(x, *args)
    x = layers.RMSNorm(cfg.layer_norm_epsilon, cfg.dtype, name=norm_name)(x)
    return _dropout(cfg, x, det)


class _Layer(nn.Module):
    """What encoder and decoder layers share: pre-norm residual sublayers, the MLP last."""
    config: T5Config
    deterministic: bool = True
    scanned: bool = False

    def sublayer(self, x, norm_name, block):
        """x + dropout(block(RMSNorm(x))), the norm named `norm_name`."""
        cfg = self.config
        y = layers.RMSNorm(cfg.layer_norm_epsilon, cfg.dtype, name=norm_name)(x)
        return x + _dropout(cfg, block(y), self.deterministic)

    def attention(self, name, decode=False):
        cfg = self.config
        return Attention(cfg.num_heads, cfg.head_dim, cfg.dropout_rate, cfg.dtype,
                         self.deterministic, decode, name=name)

    def mlp_and_output(self, x):
        """The MLP sublayer, then the layer's output (with nn.scan's empty carry if scanned)."""
        x = self.sublayer(x, "pre_mlp_layer_norm",
                          lambda y: MlpBlock(self.config, self.deterministic, name="mlp")(y))
        x = part.constrain(x, _RESIDUAL)
        return (x, None) if self.scanned else x


class EncoderLayer(_Layer):
    """Pre-norm self-attention + MLP block ('layers_{i}' of the encoder)."""

    @nn.compact
    def __call__(self, x, bias):
        """x [batch, length, emb], bias [batch, heads, length, length]."""
        x = self.sublayer(x, "pre_attention_layer_norm",
                          lambda y: self.attention("attention")(y, y, bias))
        return self.mlp_and_output(x)


class DecoderLayer(_Layer):
    """Self-attention, cross-attention and MLP ('layers_{i}' of the decoder)."""
    decode: bool = False

    @nn.compact
    def __call__(self, x, encoded, self_bias, cross_bias, cache_index):
        """x [batch, length, emb], encoded [batch, enc_length, emb]."""
        x = self.sublayer(x, "pre_self_attention_layer_norm", lambda y: self.attention(
            "self_attention", self.decode)(y, y, self_bias, cache_index))
        x = self.sublayer(x, "pre_cross_attention_layer_norm", lambda y: self.attention(
            "encoder_decoder_attention")(y, encoded, cross_bias))
        return self.mlp_and_output(x)


class Encoder(nn.Module):
    """Encoder stack over already embedded inputs."""
    config: T5Config

    @nn.compact
    def __call__(self, embeddings, mask, train: bool = False, segments=None):
        """[batch, length, emb] embeddings, [batch, length] bool mask -> encodings.
        `segments` [batch, length] (packed rows): each position attends to its own only."""
        cfg, det = self.config, not train
        length = embeddings.shape[1]
        # [batch, heads, length, length]: padding keys masked, plus positions.
        bias = (layers.mask_to_bias(key_mask(mask, segments, segments), cfg.dtype)
                + RelativePositionBias(cfg, True, name="relpos_bias")(length, length))
        return _stack(cfg, det, embeddings, EncoderLayer, cfg.num_encoder_layers, "encoder_norm",
                      bias)


class Decoder(nn.Module):
    """Decoder stack with output projection, embedding with the encoder's `shared_embedding`."""
    config: T5Config
    shared_embedding: nn.Module

    @nn.compact
    def __call__(self, encoded, encoder_mask, decoder_input_tokens, decode: bool = False,
                 train: bool = False, hidden_only: bool = False, segments=None):
        """Float32 logits [batch, length, vocab].
        `decoder_input_tokens` are the targets shifted right (starting with 0), one position
        ([batch, 1]) per call when decoding with a filled cache. `hidden_only` returns the last
        hidden states [batch, length, emb] instead, for a loss that makes the logits itself
        (training/losses.py). `segments` (packed rows, training): (decoder [batch, length],
        encoder [batch, enc_length]) segment ids; a position attends within its own segment."""
        dec_segments, enc_segments = segments or (None, None)
        cfg, det = self.config, not train
        length = decoder_input_tokens.shape[1]
        rel_bias = RelativePositionBias(cfg, False, name="relpos_bias")

        step = decode and self.has_variable("cache", "cache_index")
        cache_index = jnp.zeros((), jnp.int32)
        if decode:
            index_var = self.variable("cache", "cache_index", jnp.zeros, (), jnp.int32)
        if step:
            if length != 1:
                raise ValueError(f"cached decoding takes one position per call, got {length}")
            cache_index = index_var.value
            index_var.value = cache_index + 1
            # The query is position `cache_index`; keys are the whole cache, whose keys are
            # [batch, (layers,) length, heads, head_dim].
            layer = self.variables["cache"]["layers" if cfg.scan else "layers_0"]
            cache_len = layer["self_attention"]["cached_key"].shape[-3]
            causal = jnp.arange(cache_len) <= cache_index
            self_bias = (layers.mask_to_bias(causal[None, None, None, :], cfg.dtype)
                         + rel_bias(1, cache_len, cache_index))
        else:
            causal = jnp.tril(jnp.ones((length, length), bool))[None, None]
            if dec_segments is not None:
                causal = causal & key_mask(dec_segments > 0, dec_segments, dec_segments)
            self_bias = layers.mask_to_bias(causal, cfg.dtype) + rel_bias(length, length)
        cross_bias = layers.mask_to_bias(key_mask(encoder_mask, dec_segments, enc_segments),
                                         cfg.dtype)

        y = _stack(cfg, det, self.shared_embedding(decoder_input_tokens), DecoderLayer,
                   cfg.num_decoder_layers, "decoder_norm", encoded, self_bias, cross_bias,
                   cache_index, decode=decode)
        if hidden_only:
            return y
        # Logits in float32 for a stable softmax, as T5X.
        logits = layers.DenseGeneral(cfg.vocab_size, kernel_axes=(part.EMBED, part.VOCAB),
                                     dtype=jnp.float32, name="logits_dense")(y)
        return part.constrain(logits, (part.BATCH, part.LENGTH, part.VOCAB))


class T5(nn.Module):
    """Encoder-decoder taking embedded encoder inputs ('token_embedder', ...)."""
    config: T5Config

    def setup(self):
        cfg = self.config
        self.token_embedder = Embed(cfg.vocab_size, cfg.emb_dim, cfg.dtype)
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg, shared_embedding=self.token_embedder)

    def embed(self, tokens):
        return self.token_embedder(tokens)

    def encode(self, encoder_input_embeddings, encoder_mask, train: bool = False):
        """Encodes [batch, length, emb] embeddings; mask [batch, length] bool."""
        return self.encoder(encoder_input_embeddings, encoder_mask, train=train)

    def decode(self, encoded, encoder_mask, decoder_input_tokens, decode: bool = False,
               train: bool = False):
        """Decoder logits; see `Decoder.__call__`."""
        return self.decoder(encoded, encoder_mask, decoder_input_tokens, decode=decode,
                            train=train)

    def __call__(self, encoder_input_embeddings, encoder_mask, decoder_input_tokens,
                 train: bool = False):
        """Teacher-forced float32 logits [batch, target_length, vocab]."""
        encoded = self.encode(encoder_input_embeddings, encoder_mask, train)
        return self.decode(encoded, encoder_mask, decoder_input_tokens, train=train)
