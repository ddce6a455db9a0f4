"""Tests of model/layers.py's attention core: backend choice and the maths of both paths."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from model import layers


def _reference(query, key, value, bias):
    """softmax(q.k + bias) v in float64 numpy."""
    q, k, v = (np.asarray(x, np.float64) for x in (query, key, value))
    logits = np.einsum("bqhd,bkhd->bhqk", q, k)
    if bias is not None:
        logits = logits + np.asarray(bias, np.float64)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", weights, v)


def _inputs(q_len=5, kv_len=7, heads=2, depth=8):
    # Drawn by numpy: jax.random would compile a sampler for each of the four shapes.
    rng = np.random.default_rng(0)

    def normal(*shape):
        return jnp.asarray(rng.standard_normal(shape), jnp.float32)

    query = normal(2, q_len, heads, depth)
    key = normal(2, kv_len, heads, depth)
    value = normal(2, kv_len, heads, depth)
    # Relative-position-like bias per head plus a padding mask on example 1.
    positions = normal(1, heads, q_len, kv_len)
    mask = jnp.ones((2, kv_len), bool).at[1, -2:].set(False)
    bias = positions + layers.mask_to_bias(mask[:, None, None, :], jnp.float32)
    return query, key, value, bias


@pytest.mark.parametrize("with_bias", [False, True])
def test_attention_equals_the_formula(with_bias):
    query, key, value, bias = _inputs()
    bias = bias if with_bias else None
    got = layers.dot_product_attention(query, key, value, bias)
    np.testing.assert_allclose(got, _reference(query, key, value, bias), atol=1e-5)


def test_keys_from_kv_length_on_are_masked_out():
    query, key, value, _ = _inputs()
    got = layers.dot_product_attention(query, key, value, kv_length=5)
    np.testing.assert_allclose(got, _reference(query, key[:, :5], value[:, :5], None), atol=1e-5)


def test_kv_length_with_dropout_is_refused():
    query, key, value, _ = _inputs()
    with pytest.raises(ValueError, match="kv_length"):
        layers.dot_product_attention(query, key, value, dropout_rng=jax.random.key(1),
                                     dropout_rate=0.1, deterministic=False, kv_length=5)


def test_the_dropout_path_agrees_with_the_fused_path():
    query, key, value, bias = _inputs()
    fused = layers.dot_product_attention(query, key, value, bias)
    spelled_out = layers.dot_product_attention(
        query, key, value, bias, dropout_rng=jax.random.key(1), dropout_rate=1e-12,
        deterministic=False)
    np.testing.assert_allclose(spelled_out, fused, atol=1e-6)  # nothing dropped


def test_bfloat16_attention_agrees_with_the_float32_reference():
    query, key, value, bias = _inputs()
    got = layers.dot_product_attention(query, key, value, bias, dtype=jnp.bfloat16)
    assert got.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(got, np.float32), _reference(query, key, value, bias),
                               atol=0.05)


def _saved_by_bf16_attention():
    """Bytes that unbiased bf16 attention (cuDNN's case on a GPU) keeps for its backward pass,
    its inputs aside."""
    from training import preflight
    q = jax.ShapeDtypeStruct((2, 16, 2, 8), jnp.bfloat16)

    def total(q, k, v):
        return jnp.sum(layers.dot_product_attention(q, k, v, dtype=jnp.bfloat16))
    return preflight.saved_bytes(total, q, q, q)


def test_the_cudnn_stand_in_keeps_only_the_inputs_as_cudnn_does():
    assert _saved_by_bf16_attention() >= 2 * 2 * 16 * 16 * 4  # XLA's: the float32 scores.
    with layers.cudnn_stand_in():
        assert _saved_by_bf16_attention() == 0


def test_the_cudnn_stand_in_computes_the_same_values_and_gradients():
    query, key, value, _ = _inputs(q_len=6, kv_len=6)
    query, key, value = (x.astype(jnp.bfloat16) for x in (query, key, value))

    def outputs_and_gradients():
        def total(*args):
            return jnp.sum(layers.dot_product_attention(*args, dtype=jnp.bfloat16))
        return (layers.dot_product_attention(query, key, value, dtype=jnp.bfloat16),
                jax.grad(total, argnums=(0, 1, 2))(query, key, value))

    want = outputs_and_gradients()
    with layers.cudnn_stand_in():
        got = outputs_and_gradients()
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(w, np.float32))


@pytest.mark.parametrize("platform, dtype, head_dim, has_bias, want", [
    ("cpu", jnp.bfloat16, 64, False, "xla"),
    ("tpu", jnp.bfloat16, 64, False, "xla"),
    ("gpu", jnp.float32, 64, False, "xla"),      # cuDNN: bf16/fp16 only
    ("gpu", jnp.bfloat16, 64, False, "cudnn"),   # ViT-B/16 blocks, MAP pooling
    ("gpu", jnp.bfloat16, 64, True, "xla"),      # mT5 attention: a bias
    ("gpu", jnp.bfloat16, 88, False, "cudnn"),   # ViT-g/14 (1408 / 16 heads)
    ("gpu", jnp.bfloat16, 100, False, "xla"),    # head_dim not a multiple of 8
])
def test_attention_implementation(platform, dtype, head_dim, has_bias, want):
    assert layers.attention_implementation(platform, dtype, head_dim, has_bias) == want


@pytest.mark.parametrize("q_len, kv_len", [(7, 7), (1, 16), (6, 5), (4, 8)])
def test_even_length_padding_changes_neither_values_nor_gradients(q_len, kv_len):
    # XLA stands in for cuDNN here: the padding and the masked key are the same.
    rng = np.random.default_rng(1)
    query, key, value = (jnp.asarray(rng.standard_normal((2, n, 3, 8)), jnp.float32)
                         for n in (q_len, kv_len, kv_len))
    position_weights = jnp.arange(q_len, dtype=jnp.float32)[None, :, None, None]

    @functools.partial(jax.jit, static_argnums=0)  # One program each (eagerly: ~4 s a case).
    def outputs_and_gradients(attention, *args):
        def total(*args):
            return jnp.sum(attention(*args) * position_weights)
        return attention(*args), jax.grad(total, argnums=(0, 1, 2))(*args)

    padded = functools.partial(layers.even_length_attention, implementation="xla")
    plain = functools.partial(jax.nn.dot_product_attention, scale=1.0, implementation="xla")
    got, want = (outputs_and_gradients(f, query, key, value) for f in (padded, plain))
    np.testing.assert_allclose(got[0], want[0], atol=1e-6)
    for g, w in zip(got[1], want[1], strict=True):
        np.testing.assert_allclose(g, w, atol=1e-5)
