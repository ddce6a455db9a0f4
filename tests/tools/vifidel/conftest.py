"""Fixtures of the VIFIDEL tests: tiny vector and label files written in the real formats."""

import numpy as np
import pytest
from scipy import optimize


@pytest.fixture(autouse=True)
def vector_cache(tmp_path, monkeypatch):
    """Each test caches parsed vectors in its own folder, never in the user's cache."""
    folder = tmp_path / "vector_cache"
    monkeypatch.setenv("VIFIDEL_CACHE_DIR", str(folder))
    return folder


def write_vec(path, words, matrix, header=True, trailing_space=True):
    """Writes word vectors in the word2vec / fastText text format."""
    matrix = np.asarray(matrix, dtype=float)
    with open(path, "w", encoding="utf-8") as f:
        if header:
            f.write(f"{len(words)} {matrix.shape[1]}\n")
        for word, row in zip(words, matrix, strict=True):
            f.write(word + " " + " ".join(repr(float(v)) for v in row)
                    + (" \n" if trailing_space else "\n"))
    return str(path)


def write_bin(path, words, matrix, dim=None):
    """Writes word vectors in the word2vec binary format (header dimension overridable)."""
    matrix = np.asarray(matrix, dtype="<f4")
    with open(path, "wb") as f:
        f.write(f"{len(words)} {dim or matrix.shape[1]}\n".encode())
        for word, row in zip(words, matrix, strict=True):
            f.write(word.encode("utf-8") + b" " + row.tobytes() + b"\n")
    return str(path)


def emd_lp(a, b, cost):
    """The paper's Eq. 2 as a plain linear program (scipy's HiGHS): min <T, C> over T >= 0 with
    T 1 = a, T^T 1 = b (a, b normalized)."""
    a, b = a / a.sum(), b / b.sum()
    m, n = cost.shape
    a_eq = np.vstack([np.kron(np.eye(m), np.ones(n)), np.kron(np.ones(m), np.eye(n))])
    result = optimize.linprog(cost.ravel(), A_eq=a_eq, b_eq=np.concatenate([a, b]),
                              bounds=(0, None), method="highs")
    assert result.status == 0
    return result.fun
