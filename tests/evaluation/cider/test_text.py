"""Caption normalization: rules, segmentation, batching, errors."""

import functools
import os
import re
import sys
import types
import unicodedata

import hypothesis
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.cider import text


def _fold(s, lang):
    """Rules 1-2: NFKC (Thai and Lao AM put back together), then lowercasing (Turkish I)."""
    s = unicodedata.normalize("NFKC", s).replace("\u0e4d\u0e32", "\u0e33")
    s = s.replace("\u0ecd\u0eb2", "\u0eb3")
    if lang == "tr":
        s = s.replace("I", "ı").replace("İ", "i")
    return s.lower()


def slow_normalize(caption, lang, remove_symbols=False):
    """The documented rules, character by character (no lookup tables, no batching)."""
    s = _fold(caption, lang)
    removed = ("P", "S") if remove_symbols else ("P",)
    s = "".join(" " if unicodedata.category(c)[0] in removed else c for c in s)
    if lang not in text.SEGMENTED_LANGS:
        return s.split()
    out = []
    for word in s.split():
        current, in_script = "", False
        for c in word:
            script = any(lo <= ord(c) <= hi for lo, hi in text._SCRIPT_RANGES)
            mark = unicodedata.category(c)[0] == "M"
            if mark:
                current += c
                continue
            if script or in_script:
                if current:
                    out.append(current)
                current = c
            else:
                current += c
            in_script = script
        if current:
            out.append(current)
    return out


def _class(code_points):
    """A regular-expression character class of sorted code points, as ranges."""
    if not len(code_points):
        return "(?!)"
    breaks = np.flatnonzero(np.diff(code_points) != 1)
    starts = np.concatenate([[code_points[0]], code_points[breaks + 1]])
    ends = np.concatenate([code_points[breaks], [code_points[-1]]])
    return "[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}"
                         for a, b in zip(starts.tolist(), ends.tolist(), strict=True)) + "]"


@functools.cache
def _script_and_marks():
    in_ranges = np.concatenate([np.arange(lo, hi + 1) for lo, hi in text._SCRIPT_RANGES])
    is_mark = np.array([unicodedata.category(chr(c))[0] == "M" for c in range(0x110000)])
    return _class(np.setdiff1d(in_ranges, np.flatnonzero(is_mark))), _class(np.flatnonzero(is_mark))


def rule_batch(captions, lang, remove_symbols=False):
    """The documented rules of `slow_normalize` on a whole batch at once, in C-speed steps
    (str methods, one category look-up per distinct character, one regular expression), so
    that every code point can be checked: a second formulation, independent of text.py's."""
    s = _fold("\n".join(c.replace("\n", " ") for c in captions), lang)
    removed = ("P", "S") if remove_symbols else ("P",)
    s = s.translate({ord(ch): " " for ch in set(s) if unicodedata.category(ch)[0] in removed})
    if lang not in text.SEGMENTED_LANGS:
        return [line.split() for line in s.split("\n")]
    script, marks = _script_and_marks()
    # Tokens: a script character (not a mark) with the marks after it; a run of other
    # non-space characters; the newline between captions.
    script_body = script[1:-1]
    tokens = re.findall(f"{script}{marks}*|[^\\s{script_body}]+|\n", s)
    return [line.split() for line in " ".join(tokens).split("\n")]


# Every code point of the BMP, the SMP and the CJK extension planes (SIP, TIP): alone
# between digits, after a Han character, doubled and before a combining mark.
CODE_POINTS = np.arange(0x40000)


@pytest.mark.parametrize("lang, remove_symbols", [("tr", False), ("zh", False), ("zh", True)])
def test_every_code_point_follows_the_rule(lang, remove_symbols):
    captions = [f"0{c}0 一{c}{c}\u0301" for c in map(chr, CODE_POINTS.tolist())]
    options = text.Options(remove_symbols=remove_symbols)
    fast = text.normalize_batch(captions, lang, options=options).split()
    rule = rule_batch(captions, lang, remove_symbols)
    bad = [i for i, (f, r) in enumerate(zip(fast, rule, strict=True)) if f != r]
    assert not bad, [(f"U+{CODE_POINTS[i]:04X}", fast[i], rule[i]) for i in bad[:5]]


def test_the_batch_rule_is_slow_normalize():
    # The vectorized rule above against the character-by-character one, on the characters
    # of every class (the '0⺀' case: U+2E80 is a radical of category So in a Han range).
    captions = ["0\u2e80", "a\u0e3f1", "ก\u0e4f", "゛か", "ＴＶの前", "İstanbul", "e\u0301x",
                "\u0301", "๐๑ 5", "\U00020000\u3000b", "\ufdfa", "a\u2028b\nc"]
    for lang in ("en", "tr", "ja", "zh", "th"):
        for remove_symbols in (False, True):
            assert rule_batch(captions, lang, remove_symbols) == [
                slow_normalize(c.replace("\n", " "), lang, remove_symbols) for c in captions]


DEFAULT, SYMBOLS = text.DEFAULT_OPTIONS, text.Options(remove_symbols=True)


@pytest.mark.parametrize("caption, lang, options, words", [
    # Lowercase and Unicode punctuation, which separates words (elision and hyphens split).
    ("A Dog, running! On the “beach”…", "en", DEFAULT, ["a", "dog", "running", "on", "the",
                                                        "beach"]),
    ("¿Un perro? ¡Sí! «Hola»", "es", DEFAULT, ["un", "perro", "sí", "hola"]),
    ("कुत्ता। दौड़ रहा है", "hi", DEFAULT, ["कुत्ता", "दौड़", "रहा", "है"]),
    ("l'homme black-and-white", "fr", DEFAULT, ["l", "homme", "black", "and", "white"]),
    # Symbols kept unless asked.
    ("5$ at 3°C 🙂", "en", DEFAULT, ["5$", "at", "3°c", "🙂"]),
    ("5$ at 3°C 🙂", "en", SYMBOLS, ["5", "at", "3", "c"]),
    # NFKC folds compatibility forms.
    ("ＴＶ ﬁne ①", "en", DEFAULT, ["tv", "fine", "1"]),
    ("ＴＶ", "en", text.Options(unicode_form="NFC"), ["ｔｖ"]),
    ("Ｔ", "en", text.Options(unicode_form=None, lowercase=False), ["Ｔ"]),
    # Turkish and Greek case (a final sigma).
    ("Işık İstanbul", "tr", DEFAULT, ["ışık", "istanbul"]),
    ("Işık", "de", DEFAULT, ["işık"]),
    ("ΣΚΥΛΟΣ", "el", DEFAULT, ["σκυλο\u03c2"]),
])
def test_normalize_handles_case_punctuation_symbols_compatibility_forms(caption, lang, options,
                                                                        words):
    assert text.normalize(caption, lang, options=options) == words


def test_character_segmentation():
    assert text.normalize("一只猫在iPhone 12旁边。", "zh") == [
        "一", "只", "猫", "在", "iphone", "12", "旁", "边"]
    assert text.normalize("ＴＶの前に猫がいる", "ja") == [
        "tv", "の", "前", "に", "猫", "が", "い", "る"]
    # Thai marks stay on their consonant; SARA AM stays one character after NFKC.
    assert text.normalize("แมวกำลังนอน", "th") == ["แ", "ม", "ว", "ก", "ำ", "ลั", "ง", "น", "อ", "น"]
    # Languages with spaces keep runs of Han characters as they are.
    assert text.normalize("Tokyo 東京", "en") == ["tokyo", "東京"]


def test_batch_equals_single_captions():
    captions = ["Hello, world", "", "a\nb  c", "...", "Ünïcödé\tTAB", "猫がいる", "ΣΟΦΙΑ"]
    for lang in ("en", "ja", "el"):
        batch = text.normalize_batch(captions, lang)
        assert batch.lengths.dtype == np.int64
        assert batch.split() == [text.normalize(c, lang) for c in captions]
        assert sum(batch.lengths) == len(batch.tokens)
    assert text.normalize_batch([], "en").tokens == []


@settings(max_examples=150, deadline=None)
@given(captions=st.lists(st.text(max_size=40), min_size=1, max_size=6),
       lang=st.sampled_from(["en", "tr", "el", "ar", "hi", "ja", "zh", "th"]),
       remove_symbols=st.booleans())
def test_matches_slow_reference(captions, lang, remove_symbols):
    options = text.Options(remove_symbols=remove_symbols)
    batch = text.normalize_batch(captions, lang, options=options)
    assert batch.split() == [slow_normalize(c, lang, remove_symbols) for c in captions]


@settings(max_examples=50, deadline=None)
@given(captions=st.lists(st.text(alphabet=st.sampled_from(
    list("กขคงจฉชซญดตถทนบปผพฟมยรลวสหอฮะาำิีึืุูเแโใไ่้๊๋็์ ")), max_size=30), max_size=5))
def test_thai_matches_slow_reference(captions):
    assert text.normalize_batch(captions, "th").split() == [
        slow_normalize(c, "th") for c in captions]


def test_word_segmenter_needs_its_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "jieba", None)  # import fails
    monkeypatch.setattr(text, "_load_word_segmenter",  # with a cache of its own
                        functools.cache(text._load_word_segmenter.__wrapped__))
    with pytest.raises(text.NormalizationError, match="needs the Python package 'jieba'"):
        text.normalize("一只猫", "zh", segmenter="word")
    monkeypatch.setitem(sys.modules, "pythainlp", None)
    with pytest.raises(text.NormalizationError, match="'pythainlp'"):
        text.normalize("แมว", "th", segmenter="word")
    monkeypatch.setitem(sys.modules, "fugashi", None)
    with pytest.raises(text.NormalizationError, match="'fugashi'"):
        text.normalize("猫", "ja", segmenter="word")


def test_other_languages_ignore_the_segmenter(monkeypatch):
    monkeypatch.setattr(text, "_load_word_segmenter",  # with a cache of its own
                        functools.cache(text._load_word_segmenter.__wrapped__))
    assert text.normalize("A dog", "en", segmenter="word") == ["a", "dog"]


def test_an_installed_word_segmenter_gets_the_normalized_text(monkeypatch):
    # Installed, it gets the normalized text; whitespace pieces are dropped and split.
    fake = types.ModuleType("jieba")
    fake.lcut = lambda s: ["一只", "猫", " ", "在", "iphone 12"]
    monkeypatch.setitem(sys.modules, "jieba", fake)
    monkeypatch.setattr(text, "_load_word_segmenter",  # with a cache of its own
                        functools.cache(text._load_word_segmenter.__wrapped__))
    assert text.normalize("一只猫，在iPhone 12", "zh", segmenter="word") == [
        "一只", "猫", "在", "iphone", "12"]


def test_bad_settings():
    with pytest.raises(text.NormalizationError, match="unknown language 'xx'"):
        text.normalize("a", "xx")
    with pytest.raises(text.NormalizationError, match="unknown segmenter 'bpe'"):
        text.normalize("a", "en", segmenter="bpe")
    with pytest.raises(text.NormalizationError, match="unicode_form"):
        text.normalize("a", "en", options=text.Options(unicode_form="NFD"))
    with pytest.raises(text.NormalizationError, match="caption 1 is int"):
        text.normalize_batch(["a", 3], "en")


def test_hypothesis_is_derandomized_by_the_suite_profile():
    # tests/conftest.py loads the "ci" profile: the same examples on every run.
    if os.environ.get("HYPOTHESIS_PROFILE", "ci") == "ci":
        assert hypothesis.settings().derandomize and hypothesis.settings().database is None
