"""Tests of training/losses.py against optax's cross entropy and direct formulas."""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from training import losses


def _batch(seed=0, batch=3, length=5, vocab=11):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(batch, length, vocab)).astype(np.float32)
    targets = rng.integers(1, vocab, size=(batch, length)).astype(np.int32)
    targets[0, 3:] = 0  # Padding must not count.
    targets[2, 1:] = 0
    return jnp.asarray(logits), jnp.asarray(targets)


def test_shift_right():
    out = losses.shift_right(jnp.array([[5, 6, 1, 0]]))
    np.testing.assert_array_equal(out, [[0, 5, 6, 1]])


def test_plain_cross_entropy_matches_optax_on_non_padding():
    logits, targets = _batch()
    loss, aux = losses.cross_entropy(logits, targets)
    per_token = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
    mask = np.asarray(targets > 0)
    np.testing.assert_allclose(loss, np.asarray(per_token)[mask].mean(), rtol=1e-6)
    assert aux["weight"] == mask.sum()
    assert aux["z_loss_sum"] == 0.0


def test_z_loss_adds_squared_log_normalizer():
    logits, targets = _batch(1)
    base, _ = losses.cross_entropy(logits, targets)
    with_z, aux = losses.cross_entropy(logits, targets, z_loss=1e-4)
    log_z = np.asarray(jax.nn.logsumexp(logits, axis=-1))
    mask = np.asarray(targets > 0)
    expected = 1e-4 * (log_z[mask] ** 2).mean()
    np.testing.assert_allclose(with_z - base, expected, atol=1e-6)  # float32 difference
    np.testing.assert_allclose(aux["z_loss_sum"] / aux["weight"], expected, rtol=1e-5)


def test_label_smoothing_is_zero_at_the_smoothed_optimum():
    vocab, smoothing = 7, 0.1
    targets = jnp.array([[3, 2, 0]])
    soft = np.full((1, 3, vocab), smoothing / (vocab - 1))
    soft[0, 0, 3] = soft[0, 1, 2] = 1 - smoothing
    loss, _ = losses.cross_entropy(jnp.log(jnp.asarray(soft)), targets,
                                   label_smoothing=smoothing)
    np.testing.assert_allclose(loss, 0.0, atol=1e-6)
