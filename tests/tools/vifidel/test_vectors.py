"""Tests of tools/vifidel/vectors.py: the three formats, keys, the cache, and bad files."""

import os

import numpy as np
import pytest

from errors import InputError
from tests.tools.vifidel.conftest import write_bin, write_vec
from tools.vifidel import vectors

WORDS = ["Dog", "dog", "New_York", ",", "红色", "zero"]
MATRIX = [[3.0, 4.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0],
          [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]]


def _check_keys(v, lang):
    # "Dog" and "dog" share a key: the first (most frequent) wins; "," has no token; the zero
    # vector is dropped; rows are unit length.
    assert v.info == {"words": 6, "kept": 3, "no_token": 1, "zero": 1, "duplicate": 1}
    np.testing.assert_allclose(v.rows(["dog"]), [[0.6, 0.8, 0.0]], atol=1e-6)
    assert "new york" in v and v.max_key_tokens == 2
    assert ("红 色" if lang == "zh" else "红色") in v


@pytest.mark.parametrize("header, trailing", [(True, True), (False, False)])
def test_text_formats_with_or_without_header(tmp_path, header, trailing):
    path = write_vec(tmp_path / "v.vec", WORDS, MATRIX, header=header, trailing_space=trailing)
    _check_keys(vectors.load_vectors(path, "en"), "en")


def test_binary_format_zh_keys(tmp_path):
    binary = write_bin(tmp_path / "v.bin", WORDS, MATRIX)
    _check_keys(vectors.load_vectors(binary, "zh"), "zh")


def test_max_words_reads_the_most_frequent_only(tmp_path):
    binary = write_bin(tmp_path / "v.bin", WORDS, MATRIX)
    path = write_vec(tmp_path / "v.vec", WORDS, MATRIX)
    assert list(vectors.load_vectors(path, "en", max_words=2).keys) == ["dog"]
    assert list(vectors.load_vectors(binary, "en", max_words=1).keys) == ["dog"]


def test_second_load_reads_the_memory_mapped_cache(tmp_path, vector_cache, monkeypatch):
    path = write_vec(tmp_path / "v.vec", WORDS, MATRIX)
    first = vectors.load_vectors(path, "en")
    assert vectors.load_vectors(path, "en") is first
    assert sorted(p.suffix for p in vector_cache.iterdir()) == [".json", ".keys", ".npy"]
    monkeypatch.setattr(vectors, "_LOADED", {})
    monkeypatch.setattr(vectors, "read_text", None)  # a re-parse would fail
    again = vectors.load_vectors(path, "en")
    assert isinstance(again.matrix, np.memmap)
    np.testing.assert_array_equal(again.matrix, first.matrix)
    assert again.keys == first.keys
    # A changed file is parsed anew.
    monkeypatch.undo()
    os.utime(path, ns=(1, 1))
    assert vectors.load_vectors(path, "en") is not first


@pytest.mark.parametrize("content, message", [
    ("3 2\na 1 2\nb 1\nc 1 2\n", "v.vec:3: word 'b' has 1 values; the file's vectors have 2"),
    ("3 2\na 1 2\nb 1 x\nc 1 2\n", "v.vec:3: word 'b': value 'x' is not a number"),
    ("a 1 2\nb 1 2 3\n", "v.vec:2: word 'b' has 3 values; the file's vectors have 2 .first"),
    ("3 2\na 1 2\n", "the header announces 3 words, the file has 1"),
    ("", "empty vector file"),
])
def test_malformed_text_files_are_named_by_file_line(tmp_path, content, message):
    path = tmp_path / "v.vec"
    path.write_text(content)
    with pytest.raises(InputError, match=message):
        vectors.load_vectors(str(path), "en")


def test_wrong_encoding_is_named(tmp_path):
    path = tmp_path / "v.vec"
    path.write_bytes(b"2 2\na 1 2\n\xff\xfe 1 2\n")
    with pytest.raises(InputError, match=r"v.vec:3: not UTF-8 .* format 'binary'"):
        vectors.load_vectors(str(path), "en")


def test_a_wrong_binary_dimension_is_named(tmp_path):
    bad = write_bin(tmp_path / "v.bin", ["dog", "cat"], [[1, 2, 3], [4, 5, 6]], dim=4)
    with pytest.raises(InputError, match=r"v.bin: .*is the header's dimension 4 right\?"):
        vectors.load_vectors(bad, "en")


def test_a_binary_file_read_as_text_is_named(tmp_path):
    binary_as_text = write_bin(tmp_path / "w.vec", ["dog"], [[1.5, -2.25, 3.0]])
    with pytest.raises(InputError, match=r"w.vec:2: not UTF-8|w.vec:2: word"):
        vectors.load_vectors(binary_as_text, "en")


def test_languages_need_files_of_one_dimension(tmp_path):
    write_vec(tmp_path / "wiki.en.vec", ["dog"], [[1.0, 0.0]])
    write_vec(tmp_path / "wiki.es.vec", ["perro"], [[1.0, 0.0, 0.0]])
    pattern = str(tmp_path / "wiki.{lang}.vec")
    with pytest.raises(InputError, match=r"no word vectors for 'hi': .*wiki.hi.vec not found"):
        vectors.load_languages([pattern], ["en", "hi"])
    with pytest.raises(InputError, match=r"must share a dimension: .*wiki.es.vec \(es\) has 3"):
        vectors.load_languages([pattern], ["en", "es"])
    loaded = vectors.load_languages([pattern, f"es={tmp_path / 'wiki.en.vec'}"], ["en", "es"])
    assert loaded["es"].path.endswith("wiki.en.vec")
    with pytest.raises(InputError, match=r"expected LANG=PATH"):
        vectors.vector_paths(["vectors.vec"], ["en"])
