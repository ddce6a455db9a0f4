"""Model FLOPs of the captioner, counted from its config, and utilization (MFU).

Analytic: every matmul of the forward, at 2 FLOPs a multiply-add; training is 3x the forward
less the pixels' gradient; rematerialization is reported apart (benchmarks/train_step.py, with
XLA's count). Two counts: "computed", at the lengths the step computes (every padded position,
or every position of the packed rows), and "useful", at the batch's real lengths (image and
prompt positions, caption tokens). Not XLA's cost analysis, which misses dots autotuned into
library calls and counts a scan's body once. Peaks are dense bf16.
"""

import jax

from model import vit as vit_lib

# device_kind (as jax reports it, lowercased prefix) -> peak dense bf16 FLOP/s per device.
PEAK_BF16_FLOPS = {
    "tpu v4": 275e12,
    "tpu v5 lite": 197e12,
    "tpu v5e": 197e12,
    "tpu v5p": 459e12,
    "tpu v6 lite": 918e12,
    "nvidia h100": 989e12,
    "nvidia h200": 989e12,
    "nvidia a100": 312e12,
}


def vit_tokens(vit, image_size):
    """Positions of the ViT's blocks: the patches, plus the [cls] token of 'tok' pooling."""
    return vit_lib.num_patches(vit, image_size) + (1 if vit.pool == "tok" else 0)


def _attention(q_len, kv_len, width_in, inner, width_out):
    """Forward FLOPs of one multi-head attention; `inner` = heads x head_dim."""
    projections = (2 * q_len * width_in * inner + 2 * q_len * inner * width_out
                   + 2 * 2 * kv_len * width_in * inner)  # q and out; k and v.
    return projections + scores_and_mixing(q_len, kv_len, inner)


def scores_and_mixing(q_len, kv_len, inner):
    """FLOPs of the attention scores q.k and of the weights times the values."""
    return 2 * 2 * q_len * kv_len * inner


def vit_forward_flops(vit, image_size):
    """Forward FLOPs of the ViT on one image: {'vit_stem', 'vit_blocks', 'vit_head' (MAP)}."""
    ph, pw = vit.patch_size
    tokens = vit_tokens(vit, image_size)
    d, m = vit.width, vit.mlp_dim
    block = _attention(tokens, tokens, d, d, d) + 2 * 2 * tokens * d * m
    head = 0
    if vit.pool == "map":  # One probe query attends to every token, then an MLP.
        head = _attention(1, tokens, d, d, d) + 2 * 2 * d * m
    return {"vit_stem": 2 * vit_lib.num_patches(vit, image_size) * ph * pw * 3 * d,
            "vit_blocks": vit.depth * block, "vit_head": head}


def t5_forward_flops(t5, encoder_len, decoder_len):
    """Forward FLOPs of the mT5 on one example: {'t5_encoder', 't5_decoder', 't5_logits'}."""
    e, inner, f = t5.emb_dim, t5.num_heads * t5.head_dim, t5.mlp_dim
    gated_mlp = lambda n: 3 * 2 * n * e * f  # noqa: E731  (wi_0, wi_1, wo)
    encoder_layer = _attention(encoder_len, encoder_len, e, inner, e) + gated_mlp(encoder_len)
    decoder_layer = (_attention(decoder_len, decoder_len, e, inner, e)
                     + _attention(decoder_len, encoder_len, e, inner, e)
                     + gated_mlp(decoder_len))
    return {"t5_encoder": t5.num_encoder_layers * encoder_layer,
            "t5_decoder": t5.num_decoder_layers * decoder_layer,
            "t5_logits": 2 * decoder_len * e * t5.vocab_size}


def forward_flops(config, prompt_len, target_len):
    """Forward FLOPs of the captioner on one example, by part (the ViT's, 'img_proj', the mT5's)."""
    tokens = config.image_tokens
    parts = vit_forward_flops(config.vit, config.image_size)
    parts["img_proj"] = 2 * tokens * config.vit.width * config.t5.emb_dim
    parts.update(t5_forward_flops(config.t5, tokens + prompt_len, target_len))
    return parts


def _training_flops(config, batch_size, t5_flops):
    """Training FLOPs of `batch_size` images and an mT5 forward of `t5_flops`: 3x the
    forward, less the pixels' gradient."""
    parts = forward_flops(config, 0, 0)
    image = sum(v for k, v in parts.items() if not k.startswith("t5_"))  # ViT and projection.
    return float(3 * (batch_size * image + t5_flops) - batch_size * parts["vit_stem"])


def train_step_flops(config, batch_size, prompt_len, target_len, rows=None):
    """Model FLOPs computed by one training step of `batch_size` examples (all devices): the
    mT5 at the padded lengths of each example, or of each of `rows` packed rows (`prompt_len`:
    a row's text positions, packing.Layout.prompt_len)."""
    t5 = t5_forward_flops(config.t5, config.image_tokens + prompt_len, target_len)
    return _training_flops(config, batch_size, (rows or batch_size) * sum(t5.values()))


def length_sums(a, d):
    """The sums `useful_step_flops` takes of examples' encoder (a) and decoder (d) lengths."""
    return {"enc": a.sum(), "enc2": (a * a).sum(), "dec": d.sum(), "dec2": (d * d).sum(),
            "enc_dec": (a * d).sum()}


def useful_step_flops(config, batch_size, sums):
    """Model FLOPs of one training step at its examples' real lengths, from
    `losses.length_sums` (the mT5's FLOPs are a quadratic in the encoder and decoder lengths
    with no constant term: its coefficients are read off the count at lengths 0, 1 and 2)."""
    def t5(a, d):
        return sum(t5_forward_flops(config.t5, a, d).values())
    c_aa, c_dd = (t5(2, 0) - 2 * t5(1, 0)) / 2, (t5(0, 2) - 2 * t5(0, 1)) / 2
    c_ad = t5(1, 1) - t5(1, 0) - t5(0, 1)
    text = ((t5(1, 0) - c_aa) * sums["enc"] + c_aa * sums["enc2"] + (t5(0, 1) - c_dd)
            * sums["dec"] + c_dd * sums["dec2"] + c_ad * sums["enc_dec"])
    return _training_flops(config, batch_size, float(text))


def peak_flops(device=None):
    """Peak bf16 FLOP/s of `device` (default: the first), or None when unknown (e.g. CPU)."""
    kind = (device or jax.devices()[0]).device_kind.lower()
    return next((flops for prefix, flops in PEAK_BF16_FLOPS.items() if kind.startswith(prefix)),
                None)


def mfu(step_flops, step_seconds, num_devices=None, peak=None):
    """Fraction of the devices' peak that `step_flops` in `step_seconds` reaches, or None."""
    peak = peak or peak_flops()
    if not step_flops or not peak or step_seconds <= 0:
        return None
    return step_flops / step_seconds / (peak * (num_devices or jax.device_count()))
