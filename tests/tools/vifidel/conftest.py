"""Fixtures of the VIFIDEL tests: tiny vector and label files written in the real formats."""

import numpy as np
import pytest


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
