"""Tests of tools/vifidel/stopwords.py: the stopwordsiso lists per XM3600 language."""

import pytest
import stopwordsiso

from data import languages
from errors import InputError
from tools.vifidel import stopwords


def test_the_package_covers_33_of_36_languages_with_keys_normalized_as_captions_are():
    assert stopwords.missing_iso(languages.XM3600_LANGS) == ["mi", "quz", "te"]
    te = stopwords.load("iso", "te")
    assert te.missing and not te.keys and "has no 'te' list: every word kept" in te.origin
    # Filipino takes the Tagalog list.
    fil = stopwords.load("iso", "fil")
    assert not fil.missing and "via 'tl'" in fil.origin
    assert {"ang", "mga", "sa"} <= fil.keys and len(fil.keys) == len(stopwordsiso.stopwords("tl"))
    # Keys are normalized as captions are.
    en = stopwords.load("iso", "en")
    assert {"the", "a", "on"} <= en.keys and "dog" not in en.keys
    # ja / zh words become the keys that bags.match joins character runs into.
    assert "あ の" in stopwords.load("iso", "ja").keys
    assert "一 个" in stopwords.load("iso", "zh").keys


def test_none_source_is_empty():
    assert stopwords.load("none", "en").keys == frozenset()


def test_a_folder_source(tmp_path):
    (tmp_path / "en.txt").write_text("The  # a comment\nOn\n\n")
    assert stopwords.load(str(tmp_path), "en").keys == {"the", "on"}


def test_a_folder_without_the_language_says_so(tmp_path):
    (tmp_path / "en.txt").write_text("The  # a comment\nOn\n\n")
    es = stopwords.load(str(tmp_path), "es")
    assert es.missing and "has no es.txt" in es.origin


def test_an_unknown_source_is_refused(tmp_path):
    with pytest.raises(InputError, match="expected 'function', 'iso', 'none' or a folder"):
        stopwords.load(str(tmp_path / "nowhere"), "en")


def test_a_list_not_utf8_is_named(tmp_path):
    (tmp_path / "fr.txt").write_bytes(b"\xff\n")
    with pytest.raises(InputError, match="fr.txt: not UTF-8"):
        stopwords.load(str(tmp_path), "fr")
