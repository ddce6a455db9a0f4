"""bfloat16 activations train like float32: the loss curves of a tiny captioner agree.

The same parameters, batch and Adafactor steps run twice, with
`model.dtype` float32 and bfloat16 (parameters, optimizer state, softmaxes
and the fused loss's logits stay float32 either way). bf16 rounds every
activation to 8 bits of mantissa (relative error ~0.4%), so the curves
cannot be equal; they must stay within TOLERANCE of each other at every step
while the loss falls by more than half (measured: at most 1.4% apart over
40 steps from 5.41 to 2.12).
"""

import jax
import numpy as np
import optax

from model import captioner, layers
from tests.tiny import tiny_config
from training import losses
from training import state as state_lib

STEPS = 40
TOLERANCE = 0.03  # relative difference of the two losses at any step
VOCAB = 64


def _loss_curve(dtype, params, batch):
    config = tiny_config("unused", **{"model.dtype": dtype, "model.dropout": 0.0})
    model = state_lib.create_model(config, VOCAB)
    tx, _ = state_lib.create_optimizer(config)

    @jax.jit
    def step(params, opt_state):
        (loss, _), grads = jax.value_and_grad(losses.captioner_loss, argnums=1, has_aux=True)(
            model, params, batch, jax.random.key(0), z_loss=config.z_loss)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    opt_state, curve = tx.init(params), []
    for _ in range(STEPS):
        params, opt_state, loss = step(params, opt_state)
        curve.append(float(loss))
    return np.array(curve)


def test_bfloat16_step_follows_the_float32_loss_curve():
    config = tiny_config("unused")
    model = state_lib.create_model(config, VOCAB)
    params = layers.random_params(captioner.abstract_params(model), seed=0)
    rng = np.random.default_rng(0)
    size, batch_size = config.model.image_size, 8
    targets = rng.integers(2, VOCAB, (batch_size, 12)).astype(np.int32)
    targets[:, 9:] = 0
    batch = {"image": rng.uniform(-1, 1, (batch_size, size, size, 3)).astype(np.float32),
             "prompt": rng.integers(2, VOCAB, (batch_size, 3)).astype(np.int32),
             "targets": targets}
    f32 = _loss_curve("float32", params, batch)
    bf16 = _loss_curve("bfloat16", params, batch)
    assert f32[-1] < 0.5 * f32[0]  # It learns.
    np.testing.assert_allclose(bf16, f32, rtol=TOLERANCE)
