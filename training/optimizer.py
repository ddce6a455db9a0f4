"""Adafactor as T5X applies it, whether the layers are scanned or not.

optax's `adafactor` takes a whole array's RMS; with `nn.scan` that would mix a stack's layers,
so here the two block-RMS steps are mapped over the layer axis of every leaf whose path passes
through `model.layers.SCANNED_STACKS` (tests/training/test_optimizer.py).
"""

import jax
import optax

from model import layers


def is_stacked(path):
    """Whether the parameter at `path` (a jax key path) has a leading layer axis."""
    return any(getattr(key, "key", None) in layers.SCANNED_STACKS for key in path)


def per_layer(inner):
    """`inner`, a stateless optax transform, applied to each layer of a stacked leaf on its own."""

    def update_fn(updates, state, params=None):
        def one(path, update, param=None):
            def apply(u, p):
                return inner.update(u, state, p)[0]

            return jax.vmap(apply)(update, param) if is_stacked(path) else apply(update, param)

        # clip_by_block_rms reads no parameters.
        rest = () if params is None else (params,)
        return jax.tree_util.tree_map_with_path(one, updates, *rest), state

    return optax.GradientTransformation(inner.init, update_fn)


def adafactor(learning_rate, *, clipping_threshold=1.0, decay_rate=0.8):
    """Adafactor with T5X's defaults, its block RMS per layer of scanned stacks."""
    clip = ([] if clipping_threshold is None else
            [per_layer(optax.clip_by_block_rms(clipping_threshold))])
    return optax.chain(optax.scale_by_factored_rms(decay_rate=decay_rate), *clip,
                       optax.scale_by_learning_rate(learning_rate, flip_sign=False),
                       per_layer(optax.scale_by_param_block_rms()), optax.scale(-1))
