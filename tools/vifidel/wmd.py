"""The Word Mover's Distance and the VIFIDEL score of one caption (Madhyastha et al., ACL 2019).

    VIFIDEL(I, S) = exp(-WMD(d^I, d^S))                                       (Eq. 3)

d^I is the normalized bag of the image's object labels, d^S the normalized bag of the
caption's content words, and WMD the earth mover's distance between the two bags (Eq. 2),
solved exactly by POT's network simplex (`ot.emd2`). The cost of moving mass from unit i to
unit j (Eq. 1) is

    c(i, j) = ||x_i - x_j||_2^p

with x the unit word vectors and p the `power`: 2 as Eq. 1 writes it (the default), or 1, the
plain Euclidean distance of the authors' public script.

With references (Eq. 4), every unit k, label or caption word, gets an importance penalty from
the content words t of each of the image's M references r:

    rho_k = (1 / M) sum_r (1 - max_t cos(x_k, x_t)) / 2                         ("halved")

in [0, 1] (the halving is part of the paper's definition: cosines lie in [-1, 1]); near 0 for
what the references mention, near 1/2 for an unrelated (orthogonal) word. It scales the vectors
in the cost (Eq. 5):

    c'(i, j) = ||rho_i x_i - rho_j x_j||_2^p

so moving mass between things the references mention is nearly free. `penalty="clipped"` is
this repository's former reading, rho_k = mean_r clip(1 - max_t cos, 0, 1), twice the paper's
wherever the cosine is positive. Where the authors' script differs from the paper: p = 1, the
penalty (1 - cos) / 2 clipped at 0 (the same as Eq. 4 for unit vectors up to rounding); it
returns the WMD itself rather than exp(-WMD), and infinity when every cost is 0.
"""

import os

import numpy as np

# POT imports every array library it finds (TensorFlow alone takes seconds) to offer it as a
# backend; VIFIDEL hands it numpy arrays only. It is imported on first use: the trainer imports
# this module with its evaluators, and the GPU machines have no POT (a 33 MB wheel).
for _backend in ("TENSORFLOW", "PYTORCH", "JAX", "CUPY"):
    os.environ.setdefault(f"POT_BACKEND_DISABLE_{_backend}", "1")

MAX_ITERATIONS = 1_000_000
PENALTIES = ("halved", "clipped")
COST_POWERS = (1, 2)


def emd(a, b, cost):
    """The earth mover's distance between two histograms.

    Args:
        a: float [m] non-negative weights (normalized here to sum 1).
        b: float [n] non-negative weights (normalized here to sum 1).
        cost: float [m, n] the cost of moving a unit of mass from i to j.

    Returns:
        min over transport plans T >= 0 with T 1 = a, T^T 1 = b of sum T * cost.
    """
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    a, b = a / a.sum(), b / b.sum()
    cost = np.ascontiguousarray(cost, dtype=np.float64)
    import ot  # noqa: PLC0415  See above.

    return float(ot.emd2(a, b, cost, numItermax=MAX_ITERATIONS))


def importance(x, references, penalty="halved"):
    """The importance penalty rho of each unit against an image's references (Eq. 4).

    Args:
        x: float [k, dim] unit vectors.
        references: one float [n_r, dim] matrix of unit vectors per reference (its content
            words); references without any known word are left out by the caller.
        penalty: "halved" (Eq. 4: (1 - max cos) / 2) or "clipped" (clip(1 - max cos, 0, 1)).

    Returns:
        float [k], in [0, 1]; all ones without references (the plain cost).
    """
    if not references:
        return np.ones(len(x))
    distances = [1.0 - (x @ r.T).max(axis=1) for r in references]  # each [k], in [0, 2]
    if penalty == "halved":
        # Clipping only removes rounding: 1 - cos of unit vectors lies in [0, 2].
        return np.mean([np.clip(d / 2, 0.0, 1.0) for d in distances], axis=0)
    if penalty == "clipped":
        return np.mean([np.clip(d, 0.0, 1.0) for d in distances], axis=0)
    raise ValueError(f"unknown penalty {penalty!r}; known: {', '.join(PENALTIES)}")


def cost_matrix(x_labels, x_caption, rho_labels=None, rho_caption=None, power=2):
    """c(i, j) = ||rho_i x_i - rho_j x_j||_2^power: float [labels, caption units]."""
    a = x_labels if rho_labels is None else rho_labels[:, None] * x_labels
    b = x_caption if rho_caption is None else rho_caption[:, None] * x_caption
    distance = np.linalg.norm(a[:, None, :] - b[None, :, :], axis=-1)
    return distance if power == 1 else distance ** power


def vifidel(label_weights, x_labels, caption_weights, x_caption, rho_labels=None,
            rho_caption=None, power=2):
    """The VIFIDEL score of one caption.

    Args:
        label_weights: float [m] weights of the image's label units.
        x_labels: float [m, dim] their unit vectors.
        caption_weights: float [n] counts of the caption's content words.
        x_caption: float [n, dim] their unit vectors.
        rho_labels, rho_caption: importance penalties ([m], [n]) or None (plain cost).
        power: the cost's exponent p (Eq. 1): 2, or 1 (the authors' script).

    Returns:
        (score, wmd): exp(-WMD) and the WMD; (0.0, inf) for a caption without content words.
    """
    if len(caption_weights) == 0:
        return 0.0, float("inf")
    distance = emd(label_weights, caption_weights,
                   cost_matrix(x_labels, x_caption, rho_labels, rho_caption, power))
    return float(np.exp(-distance)), distance
