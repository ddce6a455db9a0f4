"""Tests of XM600 and the seeded image subsets (tools/humaneval/subsets.py)."""

import hashlib

import pytest

from errors import InputError
from tools.humaneval import subsets

KEYS = [hashlib.md5(str(i).encode()).hexdigest()[:16] for i in range(3600)]


def test_xm600_is_the_documented_hash_ranking():
    chosen = subsets.xm600(KEYS)
    assert len(chosen) == 600 and len(set(chosen)) == 600
    # The definition in the module docstring, computed here directly.
    by_digest = sorted(KEYS, key=lambda k: hashlib.sha256(f"600/{k}".encode()).hexdigest())
    assert set(chosen) == set(by_digest[:600])
    # Release order is kept, and file order does not change the choice.
    assert chosen == [k for k in KEYS if k in set(chosen)]
    assert set(subsets.xm600(list(reversed(KEYS)))) == set(chosen)


def test_seeded_subsets_nest():
    small, large = subsets.select(KEYS, 50, 7), subsets.select(KEYS, 200, 7)
    assert set(small) <= set(large)


def test_seeded_subsets_depend_on_the_seed():
    small = subsets.select(KEYS, 50, 7)
    assert set(subsets.select(KEYS, 50, 8)) != set(small)


def test_bad_sizes_are_refused():
    for size in (0, 3601):
        with pytest.raises(InputError, match="outside 1..3600"):
            subsets.select(KEYS, size, 0)


def test_xm600_of_a_small_release_is_refused():
    with pytest.raises(InputError, match="--subset-size"):
        subsets.xm600(KEYS[:100])
