"""bfloat16 activations train like float32: same losses and gradients, same loss curve.

At float32's parameters before each step the bf16 loss is within LOSS_TOLERANCE and its gradient
near float32's (GRAD_COSINE, GRAD_COSINE_MIN); run freely, the bf16 curve stays within
CURVE_TOLERANCE of float32's. It trains at LEARNING_RATE, where the float32 curve does not
amplify round-off (checked first: STABILITY from parameters perturbed by 1e-6)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax

from model import captioner, layers
from tests.tiny import tiny_config
from training import losses
from training import state as state_lib

STEPS = 50
LEARNING_RATE = 2e-3
STABILITY = 0.02        # f32 vs f32 from parameters perturbed by 1e-6, any step
LOSS_TOLERANCE = 0.01   # bf16 vs f32 loss at the same parameters, any step
GRAD_COSINE = 0.99      # bf16 vs f32 gradient at the same parameters, mean over the steps
GRAD_COSINE_MIN = 0.95  # ... and at any step
CURVE_TOLERANCE = 0.03  # bf16 vs f32 loss curves, any step
VOCAB = 64


@functools.cache
def _functions(dtype):
    """(model, optimizer, jitted train step) of the tiny captioner computing in `dtype`."""
    config = tiny_config("unused", **{"model.dtype": dtype, "model.dropout": 0.0,
                                      "lr.base": LEARNING_RATE})
    model = captioner.from_config(config.model, VOCAB)
    tx, _ = state_lib.create_optimizer(config)

    def loss(params, batch):
        return losses.captioner_loss(model, params, batch, jax.random.key(0),
                                     z_loss=config.z_loss)[0]

    @jax.jit
    def step(params, opt_state, batch):
        """The next (params, opt_state), and the loss and gradients at `params`."""
        loss_value, grads = jax.value_and_grad(loss)(params, batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss_value, grads

    return model, tx, step


@jax.jit
def _cosine(a, b):
    a, b = (jnp.concatenate([x.ravel() for x in jax.tree.leaves(t)]) for t in (a, b))
    return a @ b / (jnp.linalg.norm(a) * jnp.linalg.norm(b))


def _train(dtype, params, batch, probe_dtype=None):
    """The loss curve of STEPS steps in `dtype`; with `probe_dtype`, also that dtype's loss
    and the cosine of its gradient with this run's at each step's parameters."""
    _, tx, step = _functions(dtype)
    probe = _functions(probe_dtype)[2] if probe_dtype else None
    opt_state, rows = tx.init(params), []
    for _ in range(STEPS):
        probed = probe(params, opt_state, batch)[2:] if probe else None
        params, opt_state, loss, grads = step(params, opt_state, batch)
        rows.append([loss] + ([probed[0], _cosine(grads, probed[1])] if probe else []))
    return np.array(jax.device_get(rows), np.float64).T


def test_bfloat16_step_follows_the_float32_loss_curve():
    model = _functions("float32")[0]
    params = layers.random_params(captioner.abstract_params(model), seed=0)
    rng = np.random.default_rng(0)
    size, batch_size = model.config.image_size, 8
    targets = rng.integers(2, VOCAB, (batch_size, 12)).astype(np.int32)
    targets[:, 9:] = 0
    batch = {"image": rng.uniform(-1, 1, (batch_size, size, size, 3)).astype(np.float32),
             "prompt": rng.integers(2, VOCAB, (batch_size, 3)).astype(np.int32),
             "targets": targets}
    f32, bf16_at_f32, cosine = _train("float32", params, batch, probe_dtype="bfloat16")
    noise = np.random.default_rng(1)
    perturbed = jax.tree.map(
        lambda p: p * (1 + 1e-6 * noise.standard_normal(p.shape)).astype(np.float32), params)
    (f32_perturbed,) = _train("float32", perturbed, batch)
    (bf16,) = _train("bfloat16", params, batch)

    assert f32[-1] < 0.5 * f32[0]  # It learns.
    assert np.all(np.diff(f32) < 0), "the float32 curve is not smooth: see the docstring"
    np.testing.assert_allclose(f32_perturbed, f32, rtol=STABILITY,
                               err_msg="float32 training amplifies round-off here")
    np.testing.assert_allclose(bf16_at_f32, f32, rtol=LOSS_TOLERANCE)
    assert cosine.mean() >= GRAD_COSINE and cosine.min() >= GRAD_COSINE_MIN, cosine
    np.testing.assert_allclose(bf16, f32, rtol=CURVE_TOLERANCE)
