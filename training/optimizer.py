"""Adafactor as T5X applies it, whether the layers are scanned or not.

optax's `adafactor` takes the root mean square of a whole parameter array twice: to clip the
update (`clip_by_block_rms`, threshold 1.0) and to scale it by the parameter's size
(`scale_by_param_block_rms`). T5X computes both per parameter of each layer. When the
layers are stacked by `nn.scan` (`config.model.scan`; every baseline), one array holds all
the layers of a stack, so optax's RMS would mix them: a layer with large updates would shrink
the steps of every other layer of its stack. T5X treats the stacked axis as a batch axis of
its factored Adafactor; here the two block-RMS steps are mapped over that axis, so a
scanned model takes exactly the steps of the same model unscanned (tests/training/
test_optimizer.py). The factored second moments need nothing: their two factored axes are
the kernel's own (the layer axis is never among the two largest of at least 128), so they are
per layer already.

A leaf is stacked when its path passes through a scanned stack (`model.layers.SCANNED_STACKS`:
'layers' in mT5, 'encoderblock' in the ViT); its leading axis is the layer.
"""

import jax
import optax

from model import layers


def is_stacked(path):
    """Whether the parameter at `path` (a jax key path) has a leading layer axis."""
    return any(getattr(key, "key", None) in layers.SCANNED_STACKS for key in path)


def per_layer(inner):
    """`inner`, a stateless transform, applied to each layer of a stacked leaf on its own.

    Args:
        inner: an optax transform whose state is empty (the block-RMS transforms).

    Returns:
        A transform equal to `inner` on unstacked leaves and to `inner` of each layer,
        restacked, on stacked ones.
    """

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

    The same chain as `optax.adafactor` with its defaults (factored second moments with
    decay 1 - (step + 1)^-decay_rate, update clipping at `clipping_threshold`, the learning
    rate, scaling by the parameter's RMS floored at 1e-3, no momentum).

    Args:
        learning_rate: a float or a schedule of the step.
        clipping_threshold: the update RMS above which it is scaled down; None: no clipping.
        decay_rate: of the second-moment estimate.
    """
    chain = [optax.scale_by_factored_rms(decay_rate=decay_rate)]
    if clipping_threshold is not None:
        chain.append(per_layer(optax.clip_by_block_rms(clipping_threshold)))
    chain += [optax.scale_by_learning_rate(learning_rate, flip_sign=False),
              per_layer(optax.scale_by_param_block_rms()),
              optax.scale(-1)]
    return optax.chain(*chain)
