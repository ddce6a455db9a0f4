"""Predictions files: `predictions_<lang>.jsonl`, one caption per image and language.

Each line is {"image/key": str (not empty), "lang": an XM3600 code, "caption": str}; other
fields are the writer's own and readers ignore them (the captioning tool adds "image", the
file it read, and "log_prob"). `line` makes one line, `write` a whole file. The checkpoint
tool writes one file per evaluator and language into a results folder (`file_name`:
`predictions_<lang>.jsonl` for XM3600, `predictions_<evaluator>_<lang>.jsonl` for the
others), `python -m tools.captioning --format jsonl` writes its lines with `line`; the metric
command lines (`python -m evaluation.cider`, `python -m tools.vifidel`) and the
human-evaluation kit read them, with any mix of languages in one file.

`read` also takes a pycocoevalcap results file, the JSON list that captioning papers' code
writes, `[{"image_id": ..., "caption": ...}, ...]`, so that any captioner's output can be
scored on XM3600: `image_id` is the image's key (a string, or an integer: COCO's ids, the
keys of COCO-dev), or the name or path of its image file, whose base name without an image
extension is the key (`images/000411001ff7dd4f.jpg` -> `000411001ff7dd4f`, as in an XM3600
release). An entry's language is its own "lang" field when it has one, else the one
language given for the file (`read(path, lang)`; the command lines take it from `--langs`
when that names one language). The first character of the file decides: `[` a results list,
anything else JSON Lines.

A file of all of XM3600 has 129,600 lines, so `read` decodes it in bulk first
(`data.jsonl.decode_lines`, every line type-checked in C); only a file that fails there is
read again line by line, to name the first bad line.
"""

import json
import os
import typing

import msgspec

import errors
import files
from data import jsonl, languages

FIELDS = ("image/key", "lang", "caption")
# What `image_id` may end with in a results list: the image file's extension, not the key's.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff")


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
        find_lines: None, or a function returning what `lines` holds, called when an error
            message first needs it (the fast paths).
    """

    def __init__(self, path, find_lines=None):
        super().__init__()
        self.path = path
        self._find_lines = find_lines
        self._lines = {} if find_lines is None else None

    @property
    def lines(self):
        """(lang, image key) -> "file:line" of its prediction."""
        if self._lines is None:
            self._lines = self._find_lines()
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


def line(key, lang, caption, **extra):
    """One line of a predictions file, checked, with its newline.

    Args:
        key: the image's key.
        lang: the caption's language (an XM3600 code).
        caption: the caption.
        **extra: the writer's own fields (JSON values), after the three; readers ignore them.

    Raises:
        PredictionsError: an empty key, an unknown language, a caption that is not a string.
    """
    obj = {"image/key": key, "lang": lang, "caption": caption, **extra}
    _check(obj, "prediction")
    return json.dumps(obj, ensure_ascii=False) + "\n"


def read(path, lang=None):
    """Reads and checks a predictions file, or a pycocoevalcap results list (module docstring).

    Args:
        path: the file.
        lang: the language of a results list's entries that have no "lang" field.

    Returns:
        `Predictions`: a dict lang -> {image key -> caption}.

    Raises:
        PredictionsError: a missing or empty file, a line that is not UTF-8 or JSON, a missing
            or malformed field, an unknown language, or a second prediction for one (image,
            language); the message names the file and line.
    """
    if not os.path.isfile(path):
        raise PredictionsError(f"predictions file not found: {path}")
    with open(path, "rb") as f:
        start = f.read(64).lstrip()
    if start.startswith(b"["):
        return _read_results_list(path, lang)
    decoded = jsonl.decode_lines(path, _DECODER, count_keys=_count_keys)
    if decoded:
        predictions = Predictions(path, lambda: {
            (p.lang, p.key): f"{path}:{lineno}"
            for p, lineno in zip(decoded, decoded.linenos, strict=True)})
        for p in decoded:
            predictions.setdefault(p.lang, {})[p.key] = p.caption
        if sum(map(len, predictions.values())) == len(decoded):
            return predictions
    # Something is wrong (or the JSON is of a kind only `json` reads, such as NaN or a lone
    # surrogate): line by line, to name the first bad line.
    predictions = Predictions(path)
    for where, obj in jsonl.read_objects(path, error=PredictionsError):
        _add(predictions, *_check(obj, where), where)
    if not predictions:
        raise PredictionsError(f"{path}: no predictions (the file is empty)")
    return predictions


def _add(predictions, key, lang, caption, where):
    """Adds one prediction, or a PredictionsError for a second one of (image, language)."""
    if (lang, key) in predictions.lines:
        raise PredictionsError(f"{where}: second prediction for image {key!r} in {lang!r} "
                               f"(the first is at {predictions.lines[(lang, key)]})")
    predictions.setdefault(lang, {})[key] = caption
    predictions.lines[(lang, key)] = where


def image_key(image_id, where):
    """The XM3600 key of a results list's `image_id` (module docstring)."""
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


def _read_results_list(path, lang):
    """A pycocoevalcap results list as `Predictions` (module docstring)."""
    text = _text(path)
    try:
        entries = json.loads(text, object_pairs_hook=jsonl.unique_keys)
    except jsonl.DuplicateKeyError as e:
        raise PredictionsError(f"{path}: {e} (a reader would keep only the last value)") \
            from None
    except json.JSONDecodeError as e:
        raise PredictionsError(f"{path}:{e.lineno}: not valid JSON ({jsonl.json_problem(e)})") \
            from None
    if not isinstance(entries, list):
        raise PredictionsError(f"{path}: expected a JSON list of {{\"image_id\", \"caption\"}} "
                               f"objects, got {type(entries).__name__}")
    entry_lines = _entry_lines(text)
    predictions = Predictions(path)
    for i, entry in enumerate(entries):
        where = f"{path}:{entry_lines[i]}"
        if not isinstance(entry, dict) or "image_id" not in entry or "caption" not in entry:
            raise PredictionsError(f"{where}: entry {i}: expected an object with \"image_id\" "
                                   f"and \"caption\" (a pycocoevalcap results list)")
        entry_lang = entry.get("lang", lang)
        if entry_lang is None:
            raise PredictionsError(f"{where}: entry {i} has no \"lang\", and no language was "
                                   f"given for the file (name one, e.g. --langs en)")
        key = image_key(entry["image_id"], where)
        _add(predictions, *_check({"image/key": key, "lang": entry_lang,
                                   "caption": entry["caption"]}, where), where)
    if not predictions:
        raise PredictionsError(f"{path}: no predictions (the list is empty)")
    return predictions


def _text(path):
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise PredictionsError(f"{path}:{line}: not UTF-8 ({e.reason})") from None


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
            try:
                lines.append(line(key, lang, caption))
            except PredictionsError as e:
                raise PredictionsError(f"{path}: entry {i}{str(e).removeprefix('prediction')}") \
                    from None
            i += 1
    with files.replacing(path) as f:
        f.writelines(lines)
    return path
