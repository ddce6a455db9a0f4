"""Predictions files: one caption per image and language, in any of the kinds captioners write.

`read` takes, told apart by their first line: JSON Lines of {"image/key", "lang", "caption"};
JSON Lines of {"image_id", "caption"} or a pycocoevalcap results list; one JSON object
{image key: caption}. An `image_id` is the image's key, an integer id, or its file's name or
path (`images/000411001ff7dd4f.jpg` -> `000411001ff7dd4f`). An entry without "lang" is in
the language given for the file.
"""

import functools
import json
import os
import typing

import msgspec

import errors
import files
import formats
from data import jsonl, languages

FIELDS = ("image/key", "lang", "caption")
# What `image_id` may end with: the image file's extension, not the key's.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff")


class PredictionsError(errors.InputError):
    """A predictions file is missing or malformed; names the file and line."""


def file_name(lang, outputs=""):
    """A results folder's predictions file of `lang` (`outputs`: the evaluator's, "" XM3600's)."""
    return f"predictions_{outputs + '_' if outputs else ''}{lang}.jsonl"


def is_file_name(name):
    """Whether `name` is a results folder's predictions file (of any evaluator and language)."""
    return name.startswith("predictions_") and name.endswith(".jsonl")


class Predictions(dict):
    """lang -> {image key -> caption} of the file `path`; `find_lines` gives lines for errors."""

    def __init__(self, path, find_lines=dict):
        super().__init__()
        self.path = path
        self._find_lines = find_lines

    @functools.cached_property
    def lines(self):
        """(lang, image key) -> "file:line" of its prediction."""
        return self._find_lines()

    def where(self, lang, key):
        """"file:line" of the prediction for (lang, key), or the file name."""
        return self.lines.get((lang, key), str(self.path))


class _Line(msgspec.Struct, gc=False, rename={"key": "image/key"}):
    """A line that passes every check of `_check` (other fields ignored)."""
    key: typing.Annotated[str, msgspec.Meta(min_length=1)]
    lang: typing.Literal[languages.XM3600_LANGS]
    caption: str


_DECODER = msgspec.json.Decoder(_Line)


def _check(obj, where):
    if missing := [k for k in FIELDS if k not in obj]:
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


def _record(obj, where, lang):
    """(key, lang, caption) of an entry: "image/key" or "image_id"; "lang", else `lang`."""
    if not isinstance(obj, dict):
        raise PredictionsError(f"{where}: expected an object with \"image_id\" and "
                               f"\"caption\", got {type(obj).__name__}")
    if "image/key" not in obj and "image_id" in obj:
        obj = {**obj, "image/key": image_key(obj["image_id"], where)}
    if "lang" not in obj:
        if lang is None:
            raise PredictionsError(f"{where}: no \"lang\", and no language was given for the "
                                   f"file (name one, e.g. --langs en)")
        obj = {**obj, "lang": lang}
    return _check(obj, where)


def line(key, lang, caption, **extra):
    """One line of a predictions file with its newline, checked; readers ignore `extra` fields."""
    obj = {"image/key": key, "lang": lang, "caption": caption, **extra}
    _check(obj, "prediction")
    return json.dumps(obj, ensure_ascii=False) + "\n"


def read(path, lang=None):
    """Reads and checks a predictions file of any kind (module docstring) into `Predictions`.
    `lang`: the language of entries without a "lang" field. Raises PredictionsError (file:line)."""
    if not os.path.isfile(path):
        raise PredictionsError(files.not_a_file(path, "predictions file")
                               or f"predictions file not found: {path}")
    with open(path, "rb") as f:
        first = next((raw for raw in f if raw.strip()), b"")
    if not first:
        raise PredictionsError(f"{path}: no predictions (the file is empty)")
    if not _is_line(first):
        return _read_json(path, lang)
    # All of XM3600 is 129,600 lines: decoded in bulk (each line type-checked in C), and read
    # again line by line only to name the first bad line.
    # count_keys: for `jsonl.decode_lines`' check of repeated keys, three a line.
    decoded = jsonl.decode_lines(path, _DECODER, count_keys=lambda lines: len(FIELDS) * len(lines))
    if decoded:
        predictions = Predictions(path, lambda: {
            (p.lang, p.key): f"{path}:{lineno}"
            for p, lineno in zip(decoded, decoded.linenos, strict=True)})
        for p in decoded:
            predictions.setdefault(p.lang, {})[p.key] = p.caption
        if sum(map(len, predictions.values())) == len(decoded):
            return predictions
    predictions = Predictions(path)
    for where, obj in jsonl.read_objects(path, error=PredictionsError):
        _add(predictions, *_record(obj, where, lang), where)
    return predictions


def _is_line(first):
    """Whether a file's first line is a JSON Lines entry (not a list or a {key: caption})."""
    if first.lstrip().startswith(b"["):
        return False
    try:
        obj = json.loads(first)
    except (ValueError, RecursionError):  # Not a line: the whole file's reader says why.
        return False
    return isinstance(obj, dict) and any(k in obj for k in (*FIELDS, "image_id"))


def read_files(paths, langs=None):
    """Reads several predictions files (`read`) as one; `langs`: the command line's --langs."""
    lang = langs[0] if langs and len(langs) == 1 else None
    parts = [read(path, lang) for path in paths]
    if len(parts) == 1:
        return parts[0]
    merged = Predictions(", ".join(map(str, paths)))
    for part in parts:
        for code, by_key in part.items():
            for key, caption in by_key.items():
                _add(merged, key, code, caption, part.where(code, key))
    return merged


def _add(predictions, key, lang, caption, where):
    """Adds one prediction, or a PredictionsError for a second one of (image, language)."""
    if (lang, key) in predictions.lines:
        raise PredictionsError(f"{where}: second prediction for image {key!r} in {lang!r} "
                               f"(the first is at {predictions.lines[(lang, key)]})")
    predictions.setdefault(lang, {})[key] = caption
    predictions.lines[(lang, key)] = where


def image_key(image_id, where):
    """The XM3600 key of an `image_id` (module docstring)."""
    if isinstance(image_id, int) and not isinstance(image_id, bool) and image_id >= 0:
        return str(image_id)
    if not isinstance(image_id, str) or not image_id.strip():
        raise PredictionsError(f"{where}: \"image_id\" must be an image key or file name (a "
                               f"non-empty string) or an integer id >= 0, got {image_id!r}")
    name = image_id.replace("\\", "/").rsplit("/", 1)[-1]
    stem, extension = os.path.splitext(name)
    key = stem if extension.lower() in IMAGE_EXTENSIONS else name
    if not key:
        raise PredictionsError(f"{where}: \"image_id\" {image_id!r} names no image")
    return key


def _read_json(path, lang):
    """A results list or a {key: caption} object as `Predictions`."""
    text = formats.read_text(path, PredictionsError, "predictions file")
    entries = jsonl.loads(text, path, PredictionsError)
    predictions = Predictions(path)
    if isinstance(entries, dict):
        for key, caption in entries.items():
            _add(predictions, *_record({"image_id": key, "caption": caption}, path, lang), path)
    elif isinstance(entries, list):
        for entry, lineno in zip(entries, _entry_lines(text), strict=True):
            where = f"{path}:{lineno}"
            _add(predictions, *_record(entry, where, lang), where)
    else:
        raise PredictionsError(f"{path}: expected a JSON list of {{\"image_id\", \"caption\"}} "
                               f"objects or an object {{image key: caption}}, got "
                               f"{type(entries).__name__}")
    if not predictions:
        raise PredictionsError(f"{path}: no predictions (the {type(entries).__name__} is "
                               f"empty)")
    return predictions


def _entry_lines(text):
    """The line on which each entry of the JSON list `text` (valid JSON) starts."""
    decoder, lines = json.JSONDecoder(), []
    pos, line, counted = text.index("[") + 1, 1, 0
    while True:
        while text[pos] in " \t\r\n,":
            pos += 1
        if text[pos] == "]":
            return lines
        line += text.count("\n", counted, pos)
        counted = pos
        lines.append(line)
        _, pos = decoder.raw_decode(text, pos)


def read_language(path, lang):
    """{image key: caption} of a predictions file of one language (PredictionsError otherwise)."""
    predictions = read(path)
    for other, by_key in predictions.items():
        if other != lang:
            raise PredictionsError(
                f"{predictions.where(other, next(iter(by_key)))}: field 'lang' is {other!r}, "
                f"expected {lang!r} (the file's name says {lang})")
    return predictions[lang]


def write(path, predictions):
    """Writes {lang: {image key: caption}}, each in its keys' order; returns `path`.
    Raises PredictionsError (the entry named) before writing anything."""
    rows = [{"image/key": key, "lang": lang, "caption": caption}
            for lang, by_key in predictions.items() for key, caption in by_key.items()]
    for i, row in enumerate(rows):
        _check(row, f"{path}: entry {i}")
    with files.replacing(path) as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return path
