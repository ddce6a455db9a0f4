"""Image subsets of a session: XM600 and any seeded subset, reproducible without numpy.

The paper rates XM600, "a fixed random subset of 600 XM3600 images", but does not list it. Here
a subset of size n with seed s is, by definition, the n images whose

    sha256(f"{s}/{image key}") (hex digest)

are the smallest; XM600 is the subset of size 600 with seed 600. The choice depends on nothing
but the image keys (no random-number library, no file order), so anyone can recompute it, and a
larger subset with the same seed contains every smaller one.
"""

import hashlib

from errors import InputError

XM600_SIZE = 600
XM600_SEED = 600


def rank(seed, key):
    """The sort key of one image in the subset of `seed` (a hex digest)."""
    return hashlib.sha256(f"{seed}/{key}".encode()).hexdigest()


def select(keys, size, seed):
    """The `size` images of `keys` with the smallest rank under `seed`.

    Args:
        keys: image keys (the release's, in its order).
        size: how many to keep, 1 <= size <= len(keys).
        seed: an integer.

    Returns:
        The chosen keys, in the order of `keys`.

    Raises:
        InputError: `size` is out of range, or a key repeats.
    """
    keys = list(keys)
    if len(set(keys)) != len(keys):
        raise InputError("image keys repeat; a subset needs distinct keys")
    if not 1 <= size <= len(keys):
        raise InputError(f"subset size {size} is outside 1..{len(keys)} (the images "
                         f"available)")
    chosen = set(sorted(keys, key=lambda k: rank(seed, k))[:size])
    return [k for k in keys if k in chosen]


def xm600(keys):
    """XM600: the 600 images of seed 600 (see the module docstring).

    Raises:
        InputError: fewer than 600 keys (a demo release: pass a size instead).
    """
    keys = list(keys)
    if len(keys) < XM600_SIZE:
        raise InputError(f"XM600 needs {XM600_SIZE} images but the release has {len(keys)}; "
                         f"choose a smaller subset with --subset-size N")
    return select(keys, XM600_SIZE, XM600_SEED)
