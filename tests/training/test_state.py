"""Tests of training/state.py: the abstract training state the trainer compiles and restores for."""

import jax

from model import captioner
from tests import tiny
from training import state as state_lib


def test_abstract_state_has_the_shapes_of_a_fresh_state(tmp_path):
    config = tiny.tiny_config(str(tmp_path))
    model = captioner.from_config(config.model, vocab_size=128)
    tx, _ = state_lib.create_optimizer(config)
    abstract, _ = state_lib.state_shardings(model, tx, state_lib.make_mesh(config.mesh),
                                            state_lib.axis_rules(config))
    fresh = jax.eval_shape(lambda r: state_lib._init_state(model, tx, r), jax.random.key(0))
    assert jax.tree.structure(abstract) == jax.tree.structure(fresh)
    assert [(x.shape, x.dtype) for x in jax.tree.leaves(abstract)] == [
        (x.shape, x.dtype) for x in jax.tree.leaves(fresh)]


def test_equal_optimizer_settings_give_the_same_optimizer(tmp_path):
    first = state_lib.create_optimizer(tiny.tiny_config(str(tmp_path)))
    again = state_lib.create_optimizer(tiny.tiny_config(str(tmp_path)))
    assert again[0] is first[0] and again[1] is first[1]


def test_another_optimizer_setting_gives_another_optimizer(tmp_path):
    first, _ = state_lib.create_optimizer(tiny.tiny_config(str(tmp_path)))
    other, _ = state_lib.create_optimizer(
        tiny.tiny_config(str(tmp_path), **{"optimizer.clipping_threshold": None}))
    assert other is not first


def test_the_initializer_is_jitted_once_per_model_optimizer_and_shardings(tmp_path):
    # A trainer called again in the same process finds the traced and compiled initializer.
    config = tiny.tiny_config(str(tmp_path))
    model = captioner.from_config(config.model, vocab_size=128)
    tx, _ = state_lib.create_optimizer(config)
    mesh = state_lib.make_mesh(config.mesh)

    def initializer():
        _, shardings = state_lib.state_shardings(model, tx, mesh, state_lib.axis_rules(config))
        return state_lib.init_state_fn(model, tx, shardings)

    assert initializer() is initializer()
