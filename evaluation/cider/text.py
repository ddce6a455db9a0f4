"""Multilingual caption normalization and tokenization for CIDEr.

Predictions and references go through the same steps: Unicode normalization (NFKC by
default); `str.lower` with Turkish i rules; punctuation (P*) becomes a space, symbols (S*)
stay unless `remove_symbols`; ja, th, zh are segmented ("char": every Han, kana and Thai
character a token; "word": jieba, fugashi or pythainlp); tokens are `str.split`'s pieces.
`normalize_spans` does this for a whole batch with a numpy lookup table, returning token
boundaries; `normalize_batch` returns the tokens, `normalize` those of one caption.
"""

import dataclasses
import functools
import importlib
import unicodedata

import numpy as np

import errors
from data import languages

SEGMENTED_LANGS = ("ja", "th", "zh")
SEGMENTERS = ("char", "word")
UNICODE_FORMS = ("NFKC", "NFC", None)

# Character classes, as bit flags in a lookup table indexed by code point.
_SPACE, _PUNCT, _SYMBOL, _MARK, _SCRIPT, _UNKNOWN = 1, 2, 4, 8, 16, 128
# Code point ranges of the scripts written without spaces between words: Han (radicals, iteration
# marks, CJK ideographs and their extensions), kana, Bopomofo and Thai.
_SCRIPT_RANGES = (
    (0x0E00, 0x0E7F), (0x2E80, 0x2FDF), (0x3005, 0x3007), (0x3021, 0x3029),
    (0x3038, 0x303B), (0x3040, 0x30FF), (0x3100, 0x312F), (0x31A0, 0x31BF),
    (0x31F0, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF),
    (0xFF66, 0xFF9F), (0x20000, 0x3FFFF),
)
# Filled lazily: classifying all 1.1M code points up front would cost half a
# second, while a corpus uses a few thousand distinct characters.
_FLAGS = np.full(0x110000, _UNKNOWN, dtype=np.uint8)
_SEPARATOR = "\n"


class NormalizationError(errors.InputError):
    """Bad normalization settings (language, segmenter, missing package)."""


@dataclasses.dataclass(frozen=True)
class Options:
    """Settings other than the segmenter: `unicode_form`, `lowercase`, `remove_punctuation`, ..."""
    unicode_form: str | None = "NFKC"
    lowercase: bool = True
    remove_punctuation: bool = True
    remove_symbols: bool = False

    def describe(self, segmenter):
        """A short string naming these settings, stored with saved statistics."""
        return ",".join([self.unicode_form or "no-unicode-form",
                         "lower" if self.lowercase else "cased",
                         "no-punct" if self.remove_punctuation else "punct",
                         "no-symbols" if self.remove_symbols else "symbols",
                         f"segmenter={segmenter}"])


DEFAULT_OPTIONS = Options()


@dataclasses.dataclass(frozen=True)
class TokenizedBatch:
    """Tokens of a batch of captions, caption after caption, and int64 `lengths` per caption."""
    tokens: list
    lengths: np.ndarray

    def split(self):
        """Returns the tokens as one list per caption."""
        ends = np.cumsum(self.lengths)
        return [self.tokens[e - n:e] for e, n in zip(ends.tolist(), self.lengths.tolist(),
                                                         strict=True)]


def _classify(code_points):
    """Fills `_FLAGS` for `code_points` (uint32 [n])."""
    space = np.array([chr(cp).isspace() for cp in code_points.tolist()], dtype=bool)
    major = np.array([unicodedata.category(chr(cp))[0] for cp in code_points.tolist()], dtype="<U1")
    mark = (major == "M") & ~space
    in_script = np.zeros(code_points.size, dtype=bool)
    for lo, hi in _SCRIPT_RANGES:
        in_script |= (code_points >= lo) & (code_points <= hi)
    flags = np.where(space, _SPACE, 0) | np.where(mark, _MARK, 0)
    rest = ~space & ~mark
    flags |= np.where(rest & (major == "P"), _PUNCT, 0)
    flags |= np.where(rest & (major == "S"), _SYMBOL, 0)
    # A character of a no-space script is a token of its own whatever its category:
    # radicals and Kangxi radicals (So), the Thai baht sign (Sc), kana voicing marks (Sk),
    # Thai punctuation kept with remove_punctuation=False; only its marks stay attached.
    flags |= np.where(rest & in_script, _SCRIPT, 0)
    _FLAGS[code_points] = flags.astype(np.uint8)


def _char_flags(code_points):
    """Returns the class flags of each code point, classifying new ones."""
    flags = _FLAGS[code_points]
    if (flags & _UNKNOWN).any():
        _classify(np.unique(code_points[(flags & _UNKNOWN) != 0]))
        flags = _FLAGS[code_points]
    return flags


def _to_code_points(text):
    # surrogatepass: a caption may hold a lone surrogate; keep it as a character.
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).copy()


def _check(lang, segmenter, options):
    for what, value, known in (("language", lang, languages.XM3600_LANGS),
                               ("segmenter", segmenter, SEGMENTERS),
                               ("unicode_form", options.unicode_form, UNICODE_FORMS)):
        if value not in known:
            raise NormalizationError(f"unknown {what} {value!r}; expected one of "
                                     f"{', '.join(map(str, known))}")


def _segment_characters(code_points, flags):
    """Makes each no-space-script character a token, with the combining marks (M*) after it."""
    marks = (flags & _MARK) != 0
    script = (flags & _SCRIPT) != 0
    positions = np.arange(code_points.size)
    # Index of the character each mark attaches to (the last non-mark).
    base = np.maximum.accumulate(np.where(marks, 0, positions))
    in_script_cluster = script[base]
    ends_cluster = np.concatenate([[False], in_script_cluster[:-1]]) & ~marks
    breaks = np.flatnonzero(script | ends_cluster)
    return np.insert(code_points, breaks, ord(" "))


def _normalized_text(captions, lang, options, segment_chars):
    """Steps 1-4 on the batch joined by newlines; returns (text, code points)."""
    try:
        text = _SEPARATOR.join(captions)
    except TypeError:
        bad = next(i for i, c in enumerate(captions) if not isinstance(c, str))
        raise NormalizationError(f"caption {bad} is {type(captions[bad]).__name__}, expected "
                                 f"str: {captions[bad]!r}") from None
    if text.count(_SEPARATOR) != len(captions) - 1:
        # A caption holds a newline; it is whitespace anyway, so it can go.
        text = _SEPARATOR.join(c.replace(_SEPARATOR, " ") for c in captions)
    # NFKC and lowercasing act within characters or across cased letters
    # only, so a newline between captions keeps them independent.
    if options.unicode_form:
        text = unicodedata.normalize(options.unicode_form, text)
        if options.unicode_form == "NFKC":
            # NFKC splits Thai SARA AM and Lao AM into NIKHAHIT + AA; put the
            # vowel back so that it stays one character, as it is written.
            text = text.replace("\u0e4d\u0e32", "\u0e33").replace("\u0ecd\u0eb2", "\u0eb3")
    if options.lowercase:
        if lang == "tr":
            text = text.replace("I", "ı").replace("İ", "i")
        text = text.lower()
    code_points = _to_code_points(text)
    remove = (_PUNCT if options.remove_punctuation else 0) | (
        _SYMBOL if options.remove_symbols else 0)
    changed = segment_chars
    if remove:
        removed = (_char_flags(code_points) & remove) != 0
        if removed.any():
            code_points[removed] = ord(" ")
            changed = True
    if segment_chars:
        code_points = _segment_characters(code_points, _char_flags(code_points))
    if changed:
        text = code_points.tobytes().decode("utf-32-le", "surrogatepass")
    return text, code_points


@dataclasses.dataclass(frozen=True)
class Spans:
    """Tokens of a batch as [start, end) in one normalized `text`, `lengths` tokens per caption."""
    text: str
    code_points: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    lengths: np.ndarray


def _spans(text, code_points, num_captions):
    """Whitespace-separated tokens (as `str.split` finds them) of newline-joined captions."""
    word = (_char_flags(code_points) & _SPACE) == 0
    edges = np.flatnonzero(np.diff(np.concatenate([[False], word, [False]]).view(np.int8)))
    # Contiguous copies: the compiled lookups take one array layout.
    starts, ends = np.ascontiguousarray(edges[0::2]), np.ascontiguousarray(edges[1::2])
    # Tokens per caption: where each separator falls among the sorted token
    # starts (a binary search per caption, not a pass over every character).
    separators = np.flatnonzero(code_points == ord(_SEPARATOR))
    if separators.size != num_captions - 1:
        raise AssertionError("a caption holds a separator")
    bounds = np.concatenate([[0], np.searchsorted(starts, separators), [starts.size]])
    lengths = np.diff(bounds).astype(np.int64)
    return Spans(text, code_points, starts, ends, lengths)


@functools.cache
def _load_word_segmenter(lang):
    """Returns a function str -> list of words for `lang` (cached), or raises naming the package."""
    needs = {"zh": ("jieba",), "ja": ("fugashi", "unidic_lite"), "th": ("pythainlp",)}[lang]
    for name in needs:
        try:
            importlib.import_module(name)
        except ImportError:
            raise NormalizationError(
                f"segmenter='word' for {lang!r} needs the Python package "
                f"{name.replace('_', '-')!r}, which is not installed (pip install "
                f"{' '.join(n.replace('_', '-') for n in needs)}); or use segmenter='char'") \
                from None
    if lang == "zh":
        return importlib.import_module("jieba").lcut
    if lang == "th":
        return functools.partial(importlib.import_module("pythainlp.tokenize").word_tokenize,
                                 engine="newmm")
    tagger = importlib.import_module("fugashi").Tagger()
    return lambda text: [word.surface for word in tagger(text)]


def normalize_spans(captions, lang, segmenter="char", options=DEFAULT_OPTIONS):
    """The tokens of captions of one XM3600 language as `Spans` (NormalizationError for bad
    input)."""
    _check(lang, segmenter, options)
    captions = list(captions)
    if not captions:
        empty = np.zeros(0, np.int64)
        return Spans("", np.zeros(0, np.uint32), empty, empty, empty)
    segmented = lang in SEGMENTED_LANGS
    text, code_points = _normalized_text(
        captions, lang, options, segment_chars=segmented and segmenter == "char")
    if segmented and segmenter == "word":
        # The words, a space between them, make the text whose spans are the tokens.
        segment = _load_word_segmenter(lang)
        text = _SEPARATOR.join(" ".join(segment(line)) for line in text.split(_SEPARATOR))
        code_points = _to_code_points(text)
    return _spans(text, code_points, len(captions))


def normalize_batch(captions, lang, segmenter="char", options=DEFAULT_OPTIONS):
    """A `TokenizedBatch` of captions of one XM3600 language (NormalizationError for bad input)."""
    spans = normalize_spans(captions, lang, segmenter, options)
    tokens = spans.text.split()
    if spans.lengths.sum() != len(tokens):
        raise AssertionError("token count mismatch between numpy and str.split")
    return TokenizedBatch(tokens, spans.lengths)


def normalize(caption, lang, segmenter="char", options=DEFAULT_OPTIONS):
    """The tokens of one caption (see `normalize_batch`)."""
    return normalize_batch([caption], lang, segmenter, options).tokens
