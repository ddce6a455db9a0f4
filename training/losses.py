"""Token-level losses of the captioner (T5X's cross entropy with z-loss and label smoothing).

`fused_cross_entropy` makes the logits from the decoder's last hidden states a few positions
at a time, with their gradients in the same pass, so float32 logits [batch, length, vocab]
never exist whole. `captioner_loss` is the train step's loss. Neither builds a one-hot.
"""

import functools

import jax
import jax.numpy as jnp

from model import captioner as captioner_lib
from training import flops

# Target positions per chunk of `fused_cross_entropy`: float32 logits of
# batch x 8 x vocab at a time (256 MiB for 32 examples and mT5's 250k entries).
CHUNK_LEN = 8


def shift_right(targets, segments=None):
    """Decoder inputs: the targets shifted right by one, starting from token 0 (T5); with
    segment ids (packed rows), each segment starts from token 0."""
    shifted = jnp.pad(targets, ((0, 0), (1, 0)))[:, :-1]  # [batch, length]
    if segments is None:
        return shifted
    return jnp.where(segments == jnp.pad(segments, ((0, 0), (1, 0)))[:, :-1], shifted, 0)


def _smoothing(label_smoothing, vocab):
    """(weight of the target, weight of every entry, entropy of the smoothed targets)."""
    confidence = 1.0 - label_smoothing
    low = label_smoothing / (vocab - 1)
    # Entropy of the smoothed target distribution; 0 without smoothing (T5X's normalizer).
    normalizer = -(confidence * jnp.log(confidence) + (vocab - 1) * low * jnp.log(low + 1e-20))
    return confidence, low, normalizer


def _token_losses(logits, targets, label_smoothing):
    """Per-token smoothed cross entropy and log-normalizer of float32 logits [..., vocab]."""
    vocab = logits.shape[-1]
    confidence, low, normalizer = _smoothing(label_smoothing, vocab)
    log_z = jax.nn.logsumexp(logits, axis=-1)
    target_logit = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    token_loss = -(confidence - low) * (target_logit - log_z) - normalizer
    if label_smoothing:
        token_loss = token_loss - low * (jnp.sum(logits, axis=-1) - vocab * log_z)
    return token_loss, log_z


def _sums(token_loss, log_z, targets, z_loss):
    weights = (targets > 0).astype(jnp.float32)
    return (jnp.sum(token_loss * weights), jnp.sum(z_loss * jnp.square(log_z) * weights),
            jnp.sum(weights))


def _chunked(x, chunk_len):
    """[batch, length, ...] -> [chunks, batch, chunk_len, ...], length padded with zeros."""
    pad = -x.shape[1] % chunk_len
    x = jnp.pad(x, [(0, 0), (0, pad)] + [(0, 0)] * (x.ndim - 2))
    x = x.reshape(x.shape[0], -1, chunk_len, *x.shape[2:])
    return jnp.moveaxis(x, 1, 0)


def _chunk_scan(hidden, kernel, targets, label_smoothing, z_loss, chunk_len, with_grads):
    """(loss_sum + z_loss_sum, loss_sum, z_loss_sum, weight) over chunks of positions; with
    the gradients of the first when `with_grads`."""
    compute_kernel = kernel.astype(hidden.dtype)
    confidence, low, _ = _smoothing(label_smoothing, kernel.shape[-1])

    def body(carry, chunk):
        sums, dkernel = carry
        h, t = chunk  # [batch, chunk_len, emb], [batch, chunk_len]
        # [batch, chunk_len, vocab] float32 (accumulated in float32 from bf16 inputs).
        logits = jnp.einsum("bce,ev->bcv", h, compute_kernel, preferred_element_type=jnp.float32)
        token_loss, log_z = _token_losses(logits, t, label_smoothing)
        sums = jax.tree.map(jnp.add, sums, _sums(token_loss, log_z, t, z_loss))
        if not with_grads:
            return (sums, None), None
        # d(loss + z-loss)/d logits, per token: p * (1 + 2 z log Z) - soft targets.
        weights = (t > 0).astype(jnp.float32)[..., None]
        probs = jnp.exp(logits - log_z[..., None])
        is_target = jnp.arange(logits.shape[-1]) == t[..., None]
        dlogits = (weights * (probs * (1.0 + 2.0 * z_loss * log_z)[..., None]
                              - jnp.where(is_target, confidence, low))).astype(hidden.dtype)
        dh = jnp.einsum("bcv,ev->bce", dlogits, compute_kernel,
                        preferred_element_type=jnp.float32).astype(hidden.dtype)
        dkernel = dkernel + jnp.einsum("bce,bcv->ev", h, dlogits,
                                       preferred_element_type=jnp.float32)
        return (sums, dkernel), dh

    init = ((jnp.zeros((), jnp.float32),) * 3,
            jnp.zeros(kernel.shape, jnp.float32) if with_grads else None)
    ((loss_sum, z_loss_sum, weight), dkernel), dh = jax.lax.scan(
        body, init, (_chunked(hidden, chunk_len), _chunked(targets, chunk_len)))
    sums = (loss_sum + z_loss_sum, loss_sum, z_loss_sum, weight)
    if not with_grads:
        return sums, None
    # [chunks, batch, chunk_len, emb] -> [batch, length, emb]
    dh = jnp.moveaxis(dh, 0, 1).reshape(hidden.shape[0], -1, hidden.shape[-1])
    return sums, (dh[:, :hidden.shape[1]], dkernel.astype(kernel.dtype))


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def _fused_sums(hidden, kernel, targets, label_smoothing, z_loss, chunk_len):
    """(loss_sum + z_loss_sum, loss_sum, z_loss_sum, weight); only the first is differentiable."""
    return _chunk_scan(hidden, kernel, targets, label_smoothing, z_loss, chunk_len, False)[0]


def _fused_sums_bwd(_label_smoothing, _z_loss, _chunk_len, grads, cotangents):
    # The other outputs leave `fused_cross_entropy` through stop_gradient: their
    # cotangents are zero.
    (dh, dkernel), scale = grads, cotangents[0]
    return (dh * scale.astype(dh.dtype), dkernel * scale, None)


_fused_sums.defvjp(functools.partial(_chunk_scan, with_grads=True), _fused_sums_bwd)


def fused_cross_entropy(hidden, kernel, targets, *, label_smoothing=0.0, z_loss=0.0,
                        chunk_len=CHUNK_LEN):
    """The mean token cross entropy (T5X's) over non-padding targets (0 = padding) of the
    logits `hidden @ kernel`, made `chunk_len` positions at a time in float32. Returns (loss,
    sums {"loss_sum", "z_loss_sum", "weight"} for exact averaging); only `loss` carries
    gradients (computed in the same pass)."""
    total, *sums = _fused_sums(
        hidden, kernel, targets, float(label_smoothing), float(z_loss), int(chunk_len))
    aux = dict(zip(("loss_sum", "z_loss_sum", "weight"), jax.lax.stop_gradient(sums),
                   strict=True))
    return total / jnp.maximum(aux["weight"], 1.0), aux


def captioner_loss(model, params, batch, rng, *, label_smoothing=0.0, z_loss=0.0):
    """The train step's loss: the teacher-forced captioner, then `fused_cross_entropy`; a
    batch with "decoder_segments" is packed (data/pipeline/packing.py)."""
    packed = "decoder_segments" in batch
    decoder_inputs = shift_right(batch["targets"], batch.get("decoder_segments"))
    hidden = model.apply({"params": params}, batch["image"], batch if packed else batch["prompt"],
                         decoder_inputs, train=True, rngs={"dropout": rng},
                         method="packed_hidden" if packed else "hidden")
    return fused_cross_entropy(hidden, captioner_lib.logits_kernel(params), batch["targets"],
                               label_smoothing=label_smoothing, z_loss=z_loss)


def length_sums(batch, image_tokens):
    """`flops.length_sums` of the batch's examples' real encoder (a: image and prompt
    positions) and decoder (d: caption tokens) lengths (packed rows: per segment)."""
    if "decoder_segments" in batch:
        enc, dec = batch["encoder_segments"], batch["decoder_segments"]
        segments = min(enc.shape[1], dec.shape[1]) + 1  # Each example has both parts.
        a = jax.nn.one_hot(enc, segments, dtype=jnp.int32).sum(1)[:, 1:]  # [rows, segments]
        d = jax.nn.one_hot(dec, segments, dtype=jnp.int32).sum(1)[:, 1:]
    else:
        a = image_tokens + (batch["prompt"] != 0).sum(1, dtype=jnp.int32)
        d = (batch["targets"] != 0).sum(1, dtype=jnp.int32)
    return flops.length_sums(a, d)
