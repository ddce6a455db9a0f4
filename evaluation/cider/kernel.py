"""The jit-compiled JAX kernel of `evaluation.cider`: cosines, length penalties, per-image means.

Inputs are the per-(reference, n) dot products and per-(image, n) squared norms of `ngram_match`,
padded to powers of two of at least `MIN_PAD` so one compilation serves every XM3600 language.
"""

import functools
import typing

import jax
import jax.numpy as jnp
import numpy as np

from evaluation.cider.df import MAX_N

SIGMA = 6.0
# Smallest padded size of the kernel's arrays: one compilation serves every
# XM3600 language (up to 16384 references), and tiny inputs cost nothing more.
MIN_PAD = 1 << 14


def size_class(n):
    """Padded size: the next power of two, so that similar sizes share a compilation."""
    return max(MIN_PAD, 1 << max(0, int(n) - 1).bit_length())


def pad(array, size, fill):
    """`array` extended along its first axis to `size` rows of `fill`."""
    out = np.full((size,) + array.shape[1:], fill, dtype=array.dtype)
    out[:array.shape[0]] = array
    return out


class RefArrays(typing.NamedTuple):
    """Per-reference side of the kernel, padded."""
    ref_norm: jax.Array   # [C, 4] |r| per reference and n
    ref_len: jax.Array    # [C] reference length (bigram count)
    ref_image: jax.Array  # [C] image of each reference, ascending
    ref_count: jax.Array  # [I] references per image


@functools.partial(jax.jit, static_argnames=("clipped",))
def kernel(refs, dot, hyp_norm2, hyp_len, *, clipped):
    """[I] float64 per-image scores from per-(reference, n) and per-(image, n) sums.
    `dot` [C * 4]: per reference and n, the sum over shared n-grams of min(tf_h, tf_r) tf_r
    idf^2 (CIDEr-D, `clipped`, with the length penalty) or tf_h tf_r idf^2 (CIDEr);
    `hyp_norm2` [I * 4]; `hyp_len` [I] (bigram counts)."""
    num_images = refs.ref_count.shape[0]
    num_refs = refs.ref_norm.shape[0]
    dot = dot.reshape(num_refs, MAX_N)  # [C, 4]
    hyp_norm = jnp.sqrt(hyp_norm2).reshape(num_images, MAX_N)  # [I, 4]
    denom = hyp_norm[refs.ref_image] * refs.ref_norm  # [C, 4]
    # Where a norm is 0 the dot product is 0 too; the reference leaves it undivided.
    cosine = jnp.where(denom > 0, dot / jnp.where(denom > 0, denom, 1.0), dot)
    if clipped:
        delta = hyp_len[refs.ref_image].astype(dot.dtype) - refs.ref_len  # [C]
        cosine = cosine * jnp.exp(-delta ** 2 / (2 * SIGMA ** 2))[:, None]
    per_ref = cosine.mean(axis=1)  # [C]
    per_image = jax.ops.segment_sum(per_ref, refs.ref_image, num_images,
                                    indices_are_sorted=True)  # [I]
    return per_image / refs.ref_count * 10.0
