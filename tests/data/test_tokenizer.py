"""Tests of data/tokenizer.py: T5 special ids, determinism, non-Latin scripts."""

import hashlib
import pathlib

import pytest
from etils import epath

import errors
from data import tokenizer
from tools.demo import train_sentencepiece

TEXTS = ["a big red circle on the left", "una estrella roja pequeña a la derecha",
         "बाईं ओर एक बड़ा लाल गोला", "左边有一个红色的大圆形"] * 20


def _digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture(scope="module")
def sp_model(tmp_path_factory):
    """The path of a unigram model of TEXTS, trained once for the module."""
    return train_sentencepiece(TEXTS, str(tmp_path_factory.mktemp("sp") / "sp"), 80)


def test_special_ids_follow_t5(sp_model):
    vocab = tokenizer.get_vocabulary(sp_model)
    processor = vocab.tokenizer
    assert (processor.pad_id(), processor.eos_id(), processor.unk_id()) == (0, 1, 2)
    assert processor.bos_id() == -1
    assert processor.id_to_piece(0) == "<pad>" and processor.id_to_piece(1) == "</s>"
    # No text id may collide with the special ids.
    for text in TEXTS[:4]:
        assert min(vocab.encode(text)) > 2


def test_training_is_deterministic(sp_model, tmp_path):
    path = sp_model
    assert _digest(path) == _digest(train_sentencepiece(list(TEXTS), str(tmp_path / "b"), 80))


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_devanagari_han_texts_round_trip_without_unk(tmp_path, model_type):
    path = train_sentencepiece(TEXTS, str(tmp_path / "sp"), 80, model_type=model_type)
    vocab = tokenizer.get_vocabulary(path)
    for text in TEXTS[:4]:
        ids = vocab.encode(text)
        assert tokenizer.UNK_ID not in ids
        assert vocab.decode(ids) == text


def test_user_defined_symbols_are_single_pieces(tmp_path):
    path = train_sentencepiece(TEXTS, str(tmp_path / "sp"), 80,
                                         user_defined_symbols=["<2hi>"])
    processor = tokenizer.get_vocabulary(path).tokenizer
    assert "<2hi>" in processor.encode("<2hi>", out_type=str)


def test_pretokenization_delimiter_keeps_pieces_inside_words(tmp_path):
    texts = ["左边|有|一|个|红色|的|大|圆形"] * 50 + ["右边|有|一|个|蓝色|的|小|圆形"] * 50
    path = train_sentencepiece(texts, str(tmp_path / "sp"), 100, model_type="bpe",
                                         pretokenization_delimiter="|")
    pieces = tokenizer.get_vocabulary(path).tokenizer.encode("左边有一个红色的大圆形", out_type=str)
    words = {"左边", "有", "一", "个", "红色", "的", "大", "圆形"}
    assert all(p.lstrip("▁") in words for p in pieces if p != "▁"), pieces


def test_a_missing_model_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.model"):
        tokenizer.get_vocabulary(str(tmp_path / "nope.model"))


def test_a_bad_model_file_is_named(tmp_path):
    bad = tmp_path / "bad.model"
    bad.write_bytes(b"this is not a protobuf")
    with pytest.raises(ValueError, match="bad.model"):
        tokenizer.get_vocabulary(str(bad))


def test_training_on_empty_texts_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no non-empty"):
        train_sentencepiece(["", "  "], str(tmp_path / "sp"), 80)


def test_a_url_reads_as_its_file(sp_model):
    path = sp_model
    from_url = tokenizer.get_vocabulary(f"file://{path}")
    assert from_url.path == f"file://{path}"
    assert from_url.model_proto == tokenizer.get_vocabulary(path).model_proto


def test_an_unreadable_remote_file_says_what_to_do():

    class Offline(pathlib.PurePosixPath):  # A file system whose reads fail, as offline.
        def read_bytes(self):
            raise ConnectionError("Could not resolve host: offline.example\nmore lines")

    epath.register_path_cls("offline://")(Offline)
    with pytest.raises(errors.InputError) as error:
        tokenizer.get_vocabulary("offline://bucket/vocab.model")
    assert str(error.value) == (
        "offline://bucket/vocab.model is remote and cannot be read here (Could not resolve "
        "host: offline.example); copy it to this machine and pass "
        "--config.vocab.path=/local/copy.model")
