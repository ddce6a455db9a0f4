"""Model FLOPs of the captioner, counted from its config, and utilization (MFU).

The count is analytic: every matrix multiplication of the forward pass of one
example at the padded lengths the step runs (ViT patch stem and blocks,
attention scores and mixing, the optional MAP head, the image projection,
the mT5 encoder over image + prompt positions, the decoder's self- and
cross-attention and MLPs, the 250k-entry logits layer) at 2 FLOPs per
multiply-add. Elementwise work (norms, softmax, GELU, residual adds, the
optimizer) is left out, as is customary for MFU. Training is 3x the forward
(the backward computes the gradients of both operands of every matmul),
less the gradient of the patch stem's input, the pixels, which is never
computed. Rematerialization recomputes layer forwards in the backward pass:
that work is reported apart (`remat_flops_per_example`) and is not model
FLOPs.

Why not XLA's cost analysis of the compiled step: on GPUs it stops counting
the dots that autotuning turns into library calls (MFU came out ~13x too low
on an H100), and on every backend it counts the body of a while loop once, so
`nn.scan` over layers hides all but one layer. `compiled_flops` stays for
comparison; on the CPU backend and without scan it agrees with this count
within the elementwise work (tests/training/test_flops.py).

Peak numbers are dense bf16 matrix-unit figures from the vendors' data sheets.
"""

import jax

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


def _vit_tokens(vit, image_size):
    """Positions of the ViT's blocks: the patches, plus the [cls] token of 'tok' pooling."""
    ph, pw = vit.patch_size
    return (image_size // ph) * (image_size // pw) + (1 if vit.pool == "tok" else 0)


def _image_tokens(config):
    """Encoder positions the image takes: 1 ('pooled') or one per patch ('patches')."""
    ph, pw = config.vit.patch_size
    patches = (config.image_size // ph) * (config.image_size // pw)
    return 1 if config.fusion == "pooled" else patches


def _attention(q_len, kv_len, width_in, inner, width_out, kv_projected=True):
    """Forward FLOPs of one multi-head attention: projections, scores and mixing.

    Args:
        q_len, kv_len: query and key/value positions.
        width_in: model width of the inputs.
        inner: heads x head_dim.
        width_out: width of the output projection.
        kv_projected: whether the key/value projections run here (always, in training).
    """
    projections = 2 * q_len * width_in * inner + 2 * q_len * inner * width_out
    if kv_projected:
        projections += 2 * 2 * kv_len * width_in * inner
    return projections + _scores_and_mixing(q_len, kv_len, inner)


def _scores_and_mixing(q_len, kv_len, inner):
    """FLOPs of the attention scores q.k and of the weights times the values."""
    return 2 * 2 * q_len * kv_len * inner


def vit_forward_flops(vit, image_size):
    """Forward FLOPs of the ViT on one image, by part.

    Args:
        vit: a model.vit.ViTConfig.
        image_size: square input size in pixels.

    Returns:
        dict with 'vit_stem' (the patch convolution), 'vit_blocks' and 'vit_head'
        (the MAP head; 0 for 'gap' and 'tok' pooling).
    """
    ph, pw = vit.patch_size
    patches = (image_size // ph) * (image_size // pw)
    tokens = _vit_tokens(vit, image_size)
    d, m = vit.width, vit.mlp_dim
    block = _attention(tokens, tokens, d, d, d) + 2 * 2 * tokens * d * m
    head = 0
    if vit.pool == "map":  # One probe query attends to every token, then an MLP.
        head = _attention(1, tokens, d, d, d) + 2 * 2 * d * m
    return {"vit_stem": 2 * patches * ph * pw * 3 * d, "vit_blocks": vit.depth * block,
            "vit_head": head}


def t5_forward_flops(t5, encoder_len, decoder_len):
    """Forward FLOPs of the mT5 encoder-decoder on one example, by part.

    Args:
        t5: a model.t5.T5Config.
        encoder_len: encoder positions (image tokens + prompt, padded).
        decoder_len: decoder positions (the padded target length).

    Returns:
        dict with 't5_encoder', 't5_decoder' (self-attention, cross-attention
        including its key/value projections of the encoder output, MLPs) and
        't5_logits' (the untied output layer).
    """
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
    """Forward FLOPs of the captioner on one example, by part.

    Args:
        config: a model.captioner.CaptionerConfig.
        prompt_len: prompt positions (config.data.max_prompt_len).
        target_len: target positions (config.data.max_target_len).

    Returns:
        dict of FLOPs: 'vit_stem', 'vit_blocks', 'vit_head', 'img_proj',
        't5_encoder', 't5_decoder', 't5_logits'.
    """
    image_tokens = _image_tokens(config)
    parts = vit_forward_flops(config.vit, config.image_size)
    parts["img_proj"] = 2 * image_tokens * config.vit.width * config.t5.emb_dim
    parts.update(t5_forward_flops(config.t5, image_tokens + prompt_len, target_len))
    return parts


def train_flops_per_example(config, prompt_len, target_len):
    """Model FLOPs of one training example: 3x the forward, less the pixels' gradient.

    Args:
        config: a model.captioner.CaptionerConfig.
        prompt_len: padded prompt length.
        target_len: padded target length.

    Returns:
        FLOPs (float) per example, as the step runs them at these lengths
        (padding positions included), rematerialization excluded.
    """
    parts = forward_flops(config, prompt_len, target_len)
    return float(3 * sum(parts.values()) - parts["vit_stem"])


def remat_flops_per_example(config, prompt_len, target_len):
    """Extra FLOPs per training example that rematerialization adds (0 without remat).

    A rematerialized layer (the ViT blocks with `vit.remat`, the mT5 layers
    with `t5.remat`) runs its forward again in the backward pass. With
    remat_policy "full", all of it but its last matmul (the MLP's output
    projection), whose result the backward does not need: XLA drops it; with
    "dots", only the attention scores and their mixing of the values (the
    other matmul outputs are kept; elementwise work is not counted).
    """
    parts = forward_flops(config, prompt_len, target_len)
    vit, t5 = config.vit, config.t5
    extra = 0
    if vit.remat:
        tokens = _vit_tokens(vit, config.image_size)
        if vit.remat_policy == "dots":
            extra += vit.depth * _scores_and_mixing(tokens, tokens, vit.width)
        else:
            extra += parts["vit_blocks"] - vit.depth * 2 * tokens * vit.mlp_dim * vit.width
    if t5.remat:
        encoder_len = _image_tokens(config) + prompt_len
        inner = t5.num_heads * t5.head_dim
        if t5.remat_policy == "dots":
            extra += (t5.num_encoder_layers * _scores_and_mixing(encoder_len, encoder_len, inner)
                      + t5.num_decoder_layers * (_scores_and_mixing(target_len, target_len, inner)
                                                 + _scores_and_mixing(target_len, encoder_len,
                                                                      inner)))
        else:
            last = 2 * t5.mlp_dim * t5.emb_dim * (t5.num_encoder_layers * encoder_len
                                                 + t5.num_decoder_layers * target_len)
            extra += parts["t5_encoder"] + parts["t5_decoder"] - last
    return float(extra)


def train_step_flops(config, batch_size, prompt_len, target_len):
    """Model FLOPs of one training step of `batch_size` examples (all devices together).

    This is what `mfu` takes; train.py's `step_flops`.
    """
    return batch_size * train_flops_per_example(config, prompt_len, target_len)


def peak_flops(device=None):
    """Peak bf16 FLOP/s of `device` (default: the first), or None when unknown (e.g. CPU)."""
    kind = (device or jax.devices()[0]).device_kind.lower()
    for prefix, flops in PEAK_BF16_FLOPS.items():
        if kind.startswith(prefix):
            return flops
    return None


def compiled_flops(compiled):
    """XLA's FLOP count of one call of a compiled jax function (all devices), or None.

    Not model FLOPs: see the module docstring for what it misses.
    """
    analysis = compiled.cost_analysis()
    if isinstance(analysis, (list, tuple)):  # Older jax: one dict per device program.
        analysis = analysis[0] if analysis else None
    if not analysis or "flops" not in analysis:
        return None
    # The analysis is of the per-device SPMD program; the step runs on every device.
    return float(analysis["flops"]) * jax.device_count()


def mfu(step_flops, step_seconds, num_devices=None, peak=None):
    """Fraction of the devices' peak that `step_flops` in `step_seconds` reaches, or None.

    Args:
        step_flops: model FLOPs of one step (`train_step_flops`).
        step_seconds: wall time of one step.
        num_devices: devices the step runs on (default: all).
        peak: FLOP/s of one device (default: its data-sheet `peak_flops`).
    """
    peak = peak or peak_flops()
    if not step_flops or not peak or step_seconds <= 0:
        return None
    return step_flops / step_seconds / (peak * (num_devices or jax.device_count()))
