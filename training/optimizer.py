"""Adafactor as T5X applies it, whether the layers are scanned or not.

optax's `adafactor` takes a whole array's RMS twice (`clip_by_block_rms`,
`scale_by_param_block_rms`); T5X per layer. When `nn.scan` stacks a stack's layers in one
array (`config.model.scan`, every baseline), optax's RMS would mix them, one layer's large
updates shrinking the others' steps; here the two block-RMS steps are mapped over the layer
axis, so a scanned model takes exactly the unscanned model's steps
(tests/training/test_optimizer.py). The factored second moments are per layer already (the
layer axis is never one of the two largest). A leaf is stacked when its path passes through
`model.layers.SCANNED_STACKS`; its leading axis is the layer.
"""

import jax
import optax

from model import layers


def is_stacked(path):
    """Whether the parameter at `path` (a jax key path) has a leading layer axis."""
    return any(getattr(key, "key", None) in layers.SCANNED_STACKS for key in path)


def per_layer(inner):
    """`inner`, a stateless optax transform, applied to each layer of a stacked leaf on its own
    (and as is to unstacked leaves)."""

    def update_fn(updates, state, params=None):
        def one(path, update, param):
            def apply(u, p):
                return inner.update(u, state, p)[0]

            if not is_stacked(path):
                return apply(update, param)
            if param is None:
                return jax.vmap(lambda u: apply(u, None))(update)
            return jax.vmap(apply)(update, param)

        if params is None:  # clip_by_block_rms reads no parameters.
            return jax.tree_util.tree_map_with_path(
                lambda path, u: one(path, u, None), updates), state
        return jax.tree_util.tree_map_with_path(one, updates, params), state

    return optax.GradientTransformation(inner.init, update_fn)


def adafactor(learning_rate, *, clipping_threshold=1.0, decay_rate=0.8):
    """Adafactor with T5X's defaults, its block RMS taken per layer of scanned stacks.

    `optax.adafactor`'s chain with its defaults: factored second moments (decay
    1 - (step + 1)^-decay_rate), update clipping at `clipping_threshold` (None: none), the
    learning rate (a float or a schedule), scaling by the parameter's RMS floored at 1e-3.
    """
    chain = [optax.scale_by_factored_rms(decay_rate=decay_rate)]
    if clipping_threshold is not None:
        chain.append(per_layer(optax.clip_by_block_rms(clipping_threshold)))
    chain += [optax.scale_by_learning_rate(learning_rate, flip_sign=False),
              per_layer(optax.scale_by_param_block_rms()),
              optax.scale(-1)]
    return optax.chain(*chain)
