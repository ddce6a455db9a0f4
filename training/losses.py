"""Token-level losses of the captioner (T5X's cross entropy with z-loss and label smoothing)."""

import jax
import jax.numpy as jnp


def shift_right(targets):
    """Decoder inputs: the targets shifted right by one, starting from token 0 (T5)."""
    return jnp.pad(targets, ((0, 0), (1, 0)))[:, :-1]  # [batch, length]


def cross_entropy(logits, targets, *, label_smoothing=0.0, z_loss=0.0):
    """Mean token cross entropy over non-padding targets.

    As T5X: the label-smoothed loss is shifted by the entropy of the smoothed
    distribution so that a perfect prediction has loss 0, and the auxiliary
    z-loss `z_loss * logsumexp(logits)^2` keeps the softmax normalizer near 1.

    Args:
        logits: [batch, length, vocab] float.
        targets: [batch, length] int, 0 = padding (not counted).
        label_smoothing: mass spread uniformly over the vocabulary.
        z_loss: coefficient of the log(Z)^2 term (T5X uses 1e-4).

    Returns:
        (loss, aux): the scalar mean loss (z-loss included) to differentiate, and
        sums {"loss_sum", "z_loss_sum", "weight"} for exact averaging across
        micro-batches and devices.
    """
    logits = logits.astype(jnp.float32)
    vocab = logits.shape[-1]
    confidence = 1.0 - label_smoothing
    low = label_smoothing / (vocab - 1)
    # Entropy of the smoothed target distribution; 0 without smoothing.
    normalizer = -(confidence * jnp.log(confidence) + (vocab - 1) * low * jnp.log(low + 1e-20))
    soft_targets = jax.nn.one_hot(targets, vocab) * (confidence - low) + low
    log_z = jax.nn.logsumexp(logits, axis=-1)                     # [batch, length]
    log_probs = logits - log_z[..., None]
    token_loss = -jnp.sum(soft_targets * log_probs, axis=-1) - normalizer
    token_z_loss = z_loss * jnp.square(log_z)
    weights = (targets > 0).astype(jnp.float32)
    weight = jnp.sum(weights)
    loss_sum = jnp.sum(token_loss * weights)
    z_loss_sum = jnp.sum(token_z_loss * weights)
    loss = (loss_sum + z_loss_sum) / jnp.maximum(weight, 1.0)
    return loss, {"loss_sum": loss_sum, "z_loss_sum": z_loss_sum, "weight": weight}
