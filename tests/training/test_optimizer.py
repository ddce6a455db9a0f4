"""Tests of training/optimizer.py: Adafactor takes the same steps whether layers are scanned."""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from model import layers
from training import optimizer, schedules

NUM_LAYERS = 3


def _per_layer_tree(rng, scale_per_layer):
    """A parameter-shaped tree in the per-layer layout; layer i's values times scale[i]."""
    tree = {"encoder": {"relpos_bias": {"rel_embedding": rng.normal(size=(4, 32))}}}
    for i in range(NUM_LAYERS):
        tree["encoder"][f"layers_{i}"] = {
            "mlp": {"wi": scale_per_layer[i] * rng.normal(size=(128, 256))},  # factored
            "norm": {"scale": scale_per_layer[i] * rng.normal(size=(128,))},  # not factored
        }
    return jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), tree)


def _updates(tx, params, grads_per_step):
    state = tx.init(params)
    out = []
    for grads in grads_per_step:
        updates, state = tx.update(grads, state, params)
        params = optax.apply_updates(params, updates)
        out.append(updates)
    return out


def _steps(seed=0):
    rng = np.random.default_rng(seed)
    # Layers whose parameters and gradients differ in size by 100x: the case where an RMS
    # over the whole stack differs from the RMS of each layer.
    params = _per_layer_tree(rng, [1.0, 0.01, 3.0])
    grads = [_per_layer_tree(rng, [100.0, 0.01, 1.0]) for _ in range(3)]
    return params, grads


def _tx(base_tx=optimizer.adafactor):
    return base_tx(schedules.rsqrt_after_constant(1e-2, 2), clipping_threshold=1.0, decay_rate=0.8)


def test_scanned_layers_take_the_steps_of_the_same_layers_unscanned_unlike_optax():
    params, grads = _steps()
    unscanned = _updates(_tx(), params, grads)
    scanned = _updates(_tx(), layers.layers_to_scan(params),
                       [layers.layers_to_scan(g) for g in grads])
    for want, got in zip(unscanned, scanned, strict=True):
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-12),
                     want, layers.scan_to_layers(got))
    # Why the module exists: optax's block RMS over a stacked array is not per layer.
    mixed = layers.scan_to_layers(_updates(
        _tx(lambda lr, **kw: optax.adafactor(learning_rate=lr, **kw)),
        layers.layers_to_scan(params), [layers.layers_to_scan(g) for g in grads])[0])
    wi = unscanned[0]["encoder"]["layers_1"]["mlp"]["wi"]
    assert not np.allclose(mixed["encoder"]["layers_1"]["mlp"]["wi"], wi, rtol=1e-2)


def test_unstacked_parameters_are_updated_exactly_as_by_optax_adafactor():
    params, grads = _steps(seed=1)
    ours = _updates(_tx(), params, grads)
    theirs = _updates(_tx(lambda lr, **kw: optax.adafactor(learning_rate=lr, **kw)), params, grads)
    for a, b in zip(ours, theirs, strict=True):
        jax.tree.map(np.testing.assert_array_equal, a, b)


def test_the_state_is_exactly_optax_adafactors():
    # The state has optax.adafactor's structure: its checkpoints restore into this optimizer.
    params = layers.layers_to_scan(_steps()[0])
    ours = _tx().init(params)
    theirs = _tx(lambda lr, **kw: optax.adafactor(learning_rate=lr, **kw)).init(params)
    assert jax.tree.structure(ours) == jax.tree.structure(theirs)
    jax.tree.map(np.testing.assert_array_equal, ours, theirs)


def test_a_leaf_is_stacked_under_a_scanned_stack_only():
    stacked = jax.tree_util.tree_flatten_with_path(
        {"t5": {"encoder": {"layers": {"mlp": {"wi": 0}}}, "relpos": 0},
         "img": {"Transformer": {"encoderblock": {"MlpBlock_0": 0}, "encoder_norm": 0}}})[0]
    assert {jax.tree_util.keystr(p): optimizer.is_stacked(p) for p, _ in stacked} == {
        "['img']['Transformer']['encoder_norm']": False,
        "['img']['Transformer']['encoderblock']['MlpBlock_0']": True,
        "['t5']['encoder']['layers']['mlp']['wi']": True,
        "['t5']['relpos']": False,
    }
