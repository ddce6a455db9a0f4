"""Stop words for VIFIDEL: the paper keeps a caption's content words only (Sec. 3.1).

Where the lists come from (`source`):

- "function" (default): the function words of each language (articles, demonstratives,
  adpositions, pronouns, conjunctions, auxiliaries, particles), derived from a Universal
  Dependencies treebank of it by tools/vifidel/derive_function_words.py (its docstring states
  the rule) and kept in the repository (tools/vifidel/function_lists/<lang>.txt, each file
  naming its treebank and rule). Numerals, quantifiers ("many", "all", "each"), nouns and
  adjectives are not on them, nor is a word that the treebank also tags a noun, adjective or
  numeral often enough ("can" of "trash can", Spanish "bajo"), so they stay in a caption.
  33 of XM3600's 36 languages have a list (Filipino from the Tagalog treebanks); Maori (mi),
  Cusco Quechua (quz) and Swahili (sw) have no UD treebank with text and keep every word
  (`missing` names them; the command lines say so).
- "iso": the Stopwords ISO lists of the `stopwordsiso` package (pinned in requirements.txt),
  the lists used before: a union of many lists that also holds content words (en: man, men,
  big, small, large, top, side, front, group, two). It has 32 of XM3600's 36 languages;
  Filipino (fil) takes its Tagalog list (tl: Filipino is standardized Tagalog, and ISO 639-1
  has no code of its own for it); Maori (mi), Cusco Quechua (quz) and Telugu (te) have no
  list there and keep every word (`missing_iso` names them).
- "none": every word is kept (the plain bag of words).
- any other value is a folder of `<lang>.txt` files, one word per line (`#` starts a comment);
  a language without a file keeps every word.

A list's words are normalized as captions are (evaluation/cider/text.py) and become vector keys
("一个" -> "一 个"), so they match the words that `bags.match` joins back in ja, th and zh.
"""

import dataclasses
import functools
import importlib.metadata
import os

from errors import InputError
from evaluation.cider import text

SOURCES = ("function", "iso", "none")
DEFAULT = "function"
FUNCTION_LISTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "function_lists")
ISO_PACKAGE = "stopwordsiso"
# XM3600 codes that the package knows under another code.
ISO_ALIASES = {"fil": "tl"}


@dataclasses.dataclass(frozen=True)
class StopWords:
    """The stop words of one language.

    Attributes:
        lang: the language.
        keys: vector keys to drop.
        origin: where they come from, for reports ("stopwordsiso 0.7.1 (en, 1298 words)").
        missing: True where the source has no list for the language (every word kept).
    """
    lang: str
    keys: frozenset
    origin: str
    missing: bool = False


def _keys(words, lang):
    words = [w.strip() for w in words if w.strip()]
    return frozenset(" ".join(t) for t in text.normalize_batch(words, lang).split() if t)


def read_file(path, lang):
    """Reads a stop-word list (one word per line, `#` comments) as vector keys of `lang`.

    Raises:
        InputError: the file is missing or not UTF-8.
    """
    if not os.path.isfile(path):
        raise InputError(f"stop-word file for {lang!r} not found: {path}")
    try:
        with open(path, encoding="utf-8") as f:
            words = [line.split("#", 1)[0] for line in f]
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 ({e.reason})") from None
    return _keys(words, lang)


def _iso_version():
    return importlib.metadata.version(ISO_PACKAGE)


def iso_code(lang):
    """The package's code of an XM3600 language, or None where it has no list."""
    import stopwordsiso  # noqa: PLC0415 (a 200 kB JSON file, read on first use only)
    code = ISO_ALIASES.get(lang, lang)
    return code if stopwordsiso.has_lang(code) else None


def missing_iso(langs):
    """The languages of `langs` that the package has no list for."""
    return [lang for lang in langs if iso_code(lang) is None]


@functools.cache
def _iso(lang):
    import stopwordsiso  # noqa: PLC0415
    code = iso_code(lang)
    name = f"{ISO_PACKAGE} {_iso_version()}"
    if code is None:
        return StopWords(lang, frozenset(), f"{name} has no {lang!r} list: every word kept",
                         missing=True)
    words = sorted(stopwordsiso.stopwords(code))
    via = f" via {code!r}" if code != lang else ""
    return StopWords(lang, _keys(words, lang), f"{name} ({lang}{via}, {len(words)} words)")


def missing(langs):
    """The languages of `langs` without a function-word list (they keep every word)."""
    return [lang for lang in langs
            if not os.path.isfile(os.path.join(FUNCTION_LISTS, f"{lang}.txt"))]


@functools.cache
def _function(lang):
    path = os.path.join(FUNCTION_LISTS, f"{lang}.txt")
    if not os.path.isfile(path):
        return StopWords(lang, frozenset(), f"no function-word list for {lang!r} (no "
                         f"Universal Dependencies treebank): every word kept", missing=True)
    keys = read_file(path, lang)
    return StopWords(lang, keys, f"function words of {lang} ({len(keys)}, from Universal "
                                 f"Dependencies)")


def load(source, lang):
    """The stop words of `lang` from `source` ("function", "iso", "none" or a folder; module
    docstring).

    Raises:
        InputError: a folder that does not exist, or a list that is not UTF-8.
    """
    if source is None or source == "none":
        return StopWords(lang, frozenset(), "none: every word kept")
    if source == "function":
        return _function(lang)
    if source == "iso":
        return _iso(lang)
    if not os.path.isdir(source):
        raise InputError(f"stop words {source!r}: expected 'function', 'iso', 'none' or a "
                         f"folder of <lang>.txt files; no such folder")
    path = os.path.join(source, f"{lang}.txt")
    if not os.path.isfile(path):
        return StopWords(lang, frozenset(), f"{source} has no {lang}.txt: every word kept",
                         missing=True)
    keys = read_file(path, lang)
    return StopWords(lang, keys, f"{path} ({len(keys)} words)")
