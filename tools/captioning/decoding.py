"""The prediction function that the run and the export share, for a `model.decode.Decoding`.

`predict_fn` is the whole prediction of a batch (decode, then score the result) as one
jittable function of (params, images, prompts, rng). The in-repository captioner jits it;
tools/captioning/export.py serializes the very same function with `jax.export`, which is why an
exported model's captions equal the run's token for token.
"""

import dataclasses

import jax

from model import decode


def program(decoding):
    """`decoding` with only the settings its compiled program depends on (the seed reset):
    the key of the compilations a captioner keeps."""
    if decoding.method == "sample":
        return dataclasses.replace(decoding, seed=None)
    return decoding


def check_logits(decoding, num_logits):
    """DecodingError when top-k sampling asks for more than the model's `num_logits`."""
    if decoding.method == "sample" and decoding.top_k > num_logits:
        raise decode.DecodingError("top_k", f"top-k {decoding.top_k} exceeds the model's "
                                            f"{num_logits} logits")


def rng_data(seed, batch_index):
    """The uint32 key data of batch `batch_index`'s sampling key (threefry, [2])."""
    return jax.random.key_data(jax.random.fold_in(jax.random.key(seed), batch_index))


def predict_fn(model, decoding, max_len, eos_id=1):
    """fn(params, images, prompts, rng) -> (tokens, log_probs) for `decoding`'s program.

    Args:
        model: the Captioner module.
        decoding: a `Decoding` (the seed is not used: it comes in as `rng`).
        max_len: decoding length.
        eos_id: end-of-sequence id.

    Returns:
        A pure function: params (the parameter tree), images float32 [b, H, W, 3] in
        [-1, 1], prompts int32 [b, Lp], rng uint32 [2] key data (unused but by sampling)
        -> tokens int32 [b, max_len] (0 after EOS), log_probs float32 [b] (model
        log-probability of the tokens, see model/decode.log_probs).
    """
    def fn(params, images, prompts, rng):
        if decoding.method == "greedy":
            tokens = decode.greedy(model, params, images, prompts, max_len, eos_id)
        elif decoding.method == "beam":
            tokens, _ = decode.beam_search(model, params, images, prompts, max_len,
                                           decoding.beam_size, decoding.alpha, eos_id)
        else:
            tokens = decode.sample(model, params, images, prompts, max_len,
                                   jax.random.wrap_key_data(rng), decoding.temperature,
                                   decoding.top_k, eos_id)
        return tokens, decode.log_probs(model, params, images, prompts, tokens, eos_id)
    return fn
