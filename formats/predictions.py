"""Predictions files: `predictions_<lang>.jsonl`, one caption per image and language.

Each line is {"image/key": str (not empty), "lang": an XM3600 code, "caption": str} (other
fields are ignored). The checkpoint tool writes one file per evaluator and language into a
results folder (`file_name`: `predictions_<lang>.jsonl` for XM3600,
`predictions_<evaluator>_<lang>.jsonl` for the others); the metric command lines
(`python -m evaluation.cider`, `python -m tools.vifidel`) and the human-evaluation kit
read them, with any mix of languages in one file.

A file of all of XM3600 has 129,600 lines, so `read` decodes it in bulk first
(`data.jsonl.decode_lines`, every line type-checked in C); only a file that fails there is
read again line by line, to name the first bad line.
"""

import json
import os
import typing

import msgspec

import errors
from data import jsonl, languages

FIELDS = ("image/key", "lang", "caption")


class PredictionsError(errors.InputError):
    """A predictions file is missing or malformed; names the file and line."""


def file_name(lang, outputs=""):
    """The name of a predictions file in a results folder.

    Args:
        lang: the language code.
        outputs: the evaluator's outputs name ("" for XM3600's files).
    """
    return f"predictions_{outputs + '_' if outputs else ''}{lang}.jsonl"


class Predictions(dict):
    """lang -> {image key -> caption}, remembering the file and line of each prediction.

    Args:
        path: the file.
        decoded: the fast path's `jsonl.Lines` of `_Line`s, from which `lines` is built when
            an error message first needs it.
    """

    def __init__(self, path, decoded=None):
        super().__init__()
        self.path = path
        self._decoded = decoded
        self._lines = {} if decoded is None else None

    @property
    def lines(self):
        """(lang, image key) -> "file:line" of its prediction."""
        if self._lines is None:
            self._lines = {(p.lang, p.key): f"{self.path}:{lineno}"
                           for p, lineno in zip(self._decoded, self._decoded.linenos,
                                                strict=True)}
        return self._lines

    def where(self, lang, key):
        """"file:line" of the prediction for (lang, key), or the file name."""
        return self.lines.get((lang, key), str(self.path))


class _Line(msgspec.Struct, gc=False, rename={"key": "image/key"}):
    """A line that passes every check of `_check` (other fields ignored)."""
    key: typing.Annotated[str, msgspec.Meta(min_length=1)]
    lang: typing.Literal[languages.XM3600_LANGS]
    caption: str


_DECODER = msgspec.json.Decoder(_Line)


def _count_keys(lines):
    """The keys of decoded lines (`jsonl.decode_lines` checks for repeated ones): three each."""
    return len(FIELDS) * len(lines)


def _check(obj, where):
    missing = [k for k in FIELDS if k not in obj]
    if missing:
        raise PredictionsError(f"{where}: missing field {', '.join(map(repr, missing))}")
    key, lang, caption = obj["image/key"], obj["lang"], obj["caption"]
    if not isinstance(key, str) or not key:
        raise PredictionsError(f"{where}: \"image/key\" must be a non-empty string, got "
                               f"{key!r}")
    if lang not in languages.XM3600_LANGS:
        raise PredictionsError(f"{where}: image {key!r}: unknown language {lang!r}; known: "
                               f"{', '.join(languages.XM3600_LANGS)}")
    if not isinstance(caption, str):
        raise PredictionsError(f"{where}: image {key!r}: \"caption\" must be a string, got "
                               f"{type(caption).__name__}")
    return key, lang, caption


def read(path):
    """Reads and checks a predictions file.

    Args:
        path: the file.

    Returns:
        `Predictions`: a dict lang -> {image key -> caption}.

    Raises:
        PredictionsError: a missing or empty file, a line that is not UTF-8 or JSON, a missing
            or malformed field, an unknown language, or a second prediction for one (image,
            language); the message names the file and line.
    """
    if not os.path.exists(path):
        raise PredictionsError(f"predictions file not found: {path}")
    decoded = jsonl.decode_lines(path, _DECODER, count_keys=_count_keys)
    if decoded:
        predictions = Predictions(path, decoded)
        for p in decoded:
            predictions.setdefault(p.lang, {})[p.key] = p.caption
        if sum(map(len, predictions.values())) == len(decoded):
            return predictions
    # Something is wrong (or the JSON is of a kind only `json` reads, such as NaN or a lone
    # surrogate): line by line, to name the first bad line.
    predictions = Predictions(path)
    for where, obj in jsonl.read_objects(path, error=PredictionsError):
        key, lang, caption = _check(obj, where)
        if (lang, key) in predictions.lines:
            raise PredictionsError(f"{where}: second prediction for image {key!r} in {lang!r} "
                                   f"(the first is at {predictions.lines[(lang, key)]})")
        predictions.setdefault(lang, {})[key] = caption
        predictions.lines[(lang, key)] = where
    if not predictions:
        raise PredictionsError(f"{path}: no predictions (the file is empty)")
    return predictions


def read_language(path, lang):
    """Reads a predictions file of one language (a results folder's `file_name(lang)`).

    Returns:
        {image key: caption}.

    Raises:
        PredictionsError: as `read`, or a line of another language than the file's.
    """
    predictions = read(path)
    for other, by_key in predictions.items():
        if other != lang:
            raise PredictionsError(
                f"{predictions.where(other, next(iter(by_key)))}: field 'lang' is {other!r}, "
                f"expected {lang!r} (the file's name says {lang})")
    return predictions[lang]


def write(path, predictions):
    """Writes predictions, language by language, each in the order of its keys.

    Args:
        path: the file to write.
        predictions: {lang: {image key: caption}}, as `read` returns them (one language for a
            results folder's file, `file_name(lang)`).

    Returns:
        `path`.

    Raises:
        PredictionsError: an unknown language, an empty key, a caption that is not a string
            (the entry named); nothing is written then.
    """
    lines, i = [], 0
    for lang, by_key in predictions.items():
        for key, caption in by_key.items():
            line = {"image/key": key, "lang": lang, "caption": caption}
            _check(line, f"{path}: entry {i}")
            lines.append(json.dumps(line, ensure_ascii=False) + "\n")
            i += 1
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)
    return path
