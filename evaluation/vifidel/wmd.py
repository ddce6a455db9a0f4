"""The Word Mover's Distance and the VIFIDEL score of one caption (Madhyastha et al., ACL 2019).

    VIFIDEL(I, S) = exp(-WMD(d^I, d^S))

d^I is the normalized bag of the image's object labels, d^S the normalized bag of the
caption's content words, the cost of moving mass from unit i to unit j the Euclidean distance
of their unit vectors (p = 2), and WMD the earth mover's distance between the two bags, solved
exactly by POT's network simplex (`ot.emd2`).

With references (the paper's Sec. 3.3) every unit k, label or caption word, gets an importance
penalty, its cosine distance to the most similar content word of each reference, clipped to
[0, 1] and averaged over the references:

    rho_k = mean_r clip(1 - max_{w in r} cos(x_k, x_w), 0, 1)

near 0 for what the references mention, near 1 for what they do not; it scales the vectors in
the cost, as in the authors' scorer:

    c(i, j) = || rho_i x_i - rho_j x_j ||_2

so moving mass between things the references mention is nearly free, while a caption word no
reference supports pays its full distance. rho = 1 everywhere is the plain cost. Where the
authors' script differs: its penalty is (1 - cos) / 2 clipped at 0 rather than 1 - cos clipped
to [0, 1]; it returns the WMD itself rather than exp(-WMD), and infinity when every cost is 0.
"""

import os

import numpy as np

# POT imports every array library it finds (TensorFlow alone takes seconds) to offer it as a
# backend; VIFIDEL hands it numpy arrays only. It is imported on first use: the trainer imports
# this module with its evaluators, and the GPU machines have no POT (a 33 MB wheel).
for _backend in ("TENSORFLOW", "PYTORCH", "JAX", "CUPY"):
    os.environ.setdefault(f"POT_BACKEND_DISABLE_{_backend}", "1")

MAX_ITERATIONS = 1_000_000


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


def importance(x, references):
    """The importance penalty rho of each unit against an image's references.

    Args:
        x: float [k, dim] unit vectors.
        references: one float [n_r, dim] matrix of unit vectors per reference (its content
            words); references without any known word are left out by the caller.

    Returns:
        float [k], in [0, 1]; all ones without references (the plain cost).
    """
    if not references:
        return np.ones(len(x))
    penalties = [np.clip(1.0 - (x @ r.T).max(axis=1), 0.0, 1.0) for r in references]
    return np.mean(penalties, axis=0)


def cost_matrix(x_labels, x_caption, rho_labels=None, rho_caption=None):
    """c(i, j) = ||rho_i x_i - rho_j x_j||_2: float [labels, caption units]."""
    a = x_labels if rho_labels is None else rho_labels[:, None] * x_labels
    b = x_caption if rho_caption is None else rho_caption[:, None] * x_caption
    return np.linalg.norm(a[:, None, :] - b[None, :, :], axis=-1)


def vifidel(label_weights, x_labels, caption_weights, x_caption, rho_labels=None,
            rho_caption=None):
    """The VIFIDEL score of one caption.

    Args:
        label_weights: float [m] weights of the image's label units.
        x_labels: float [m, dim] their unit vectors.
        caption_weights: float [n] counts of the caption's content words.
        x_caption: float [n, dim] their unit vectors.
        rho_labels, rho_caption: importance penalties ([m], [n]) or None (plain cost).

    Returns:
        (score, wmd): exp(-WMD) and the WMD; (0.0, inf) for a caption without content words.
    """
    if len(caption_weights) == 0:
        return 0.0, float("inf")
    distance = emd(label_weights, caption_weights,
                   cost_matrix(x_labels, x_caption, rho_labels, rho_caption))
    return float(np.exp(-distance)), distance
