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
