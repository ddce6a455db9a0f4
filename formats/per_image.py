"""Per-image scores: `per_image.jsonl`, one metric score per image and language.

Each line is {"image/key": str (not empty), "lang": an XM3600 code, "score": a finite number},
at most one line per (image, language). An image whose score is undefined (VIFIDEL's images
without a known label: NaN) has no line. The checkpoint tool writes one file per evaluator
into a results folder (`file_name`: `per_image.jsonl` for XM3600's CIDEr-D,
`per_image_<evaluator>.jsonl` for the others), and so do `python -m evaluation.cider
--per-image` and `python -m tools.vifidel --per-image`; the comparison of two
checkpoints (tools/analysis/compare.py) and the human-evaluation kit read them.
"""

import json
import math
import numbers
import os

import errors
import files
from data import jsonl, languages

FIELDS = ("image/key", "lang", "score")


class PerImageError(errors.InputError):
    """A per-image scores file (or what is to be written to one) is malformed; names where."""


def file_name(outputs=""):
    """The name of an evaluator's per-image file in a results folder ("": XM3600's)."""
    return f"per_image{'_' + outputs if outputs else ''}.jsonl"


def _is_number(value):
    # numbers.Real also admits numpy scalars, which evaluation code hands over.
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check(obj, where):
    for field in ("image/key", "lang"):
        if not isinstance(obj.get(field), str) or not obj[field]:
            raise PerImageError(f"{where}: missing or empty string field {field!r}")
    if obj["lang"] not in languages.XM3600_LANGS:
        raise PerImageError(f"{where}: unknown language {obj['lang']!r}")
    score = obj.get("score")
    if not _is_number(score) or not math.isfinite(score):
        raise PerImageError(f"{where}: field 'score' is not a finite number: {score!r}")
    return obj["image/key"], obj["lang"], float(score)


def read(path):
    """Reads and checks a per-image scores file.

    Args:
        path: the file.

    Returns:
        {lang: {image key: score}}, languages and keys in file order.

    Raises:
        PerImageError: a missing or empty file, a line that is not UTF-8 or JSON, a missing
            or malformed field, an unknown language, a score that is not a finite number, or
            an (image, language) pair given twice; the message names the file and line.
    """
    if not os.path.isfile(path):
        raise PerImageError(f"per-image scores not found: {path}")
    scores = {}
    for where, obj in jsonl.read_objects(path, error=PerImageError):
        key, lang, score = _check(obj, where)
        by_key = scores.setdefault(lang, {})
        if key in by_key:
            raise PerImageError(f"{where}: image {key!r} in language {lang!r} appears twice")
        by_key[key] = score
    if not scores:
        raise PerImageError(f"{path}: no scores (the file is empty)")
    return scores


def _rows(per_image):
    """{lang: {key: score}} or an iterable of {"image/key", "lang", "score"} dicts, checked,
    as a list of row dicts (NaN scores left out)."""
    if isinstance(per_image, dict):
        for lang, by_key in per_image.items():
            if not isinstance(by_key, dict):
                raise PerImageError(f"per_image[{lang!r}]: expected a {{image key: score}} dict")
        rows = [{"image/key": key, "lang": lang, "score": score}
                for lang, by_key in per_image.items() for key, score in by_key.items()]
    else:
        rows = list(per_image)
    out, seen = [], set()
    for i, row in enumerate(rows):
        where = f"per_image entry {i}"
        if not isinstance(row, dict) or set(row) != set(FIELDS):
            raise PerImageError(f"{where}: expected keys image/key, lang, score, got {row!r}")
        score = row["score"]
        if not _is_number(score) or math.isinf(score):
            raise PerImageError(f"{where}: score is not a finite number: {row!r}")
        if math.isnan(score):
            continue  # An undefined score: the image has no line.
        key, lang, score = _check(row, where)
        if (key, lang) in seen:
            raise PerImageError(f"{where}: image {key!r} in language {lang!r} appears twice")
        seen.add((key, lang))
        out.append({"image/key": key, "lang": lang, "score": score})
    return out


def check(per_image):
    """Checks scores before anything is written.

    Args:
        per_image: {lang: {image key: score}} or an iterable of {"image/key", "lang", "score"}
            dicts; a NaN score (undefined) gets no line.

    Returns:
        The rows `write` writes: {"image/key", "lang", "score"} dicts.

    Raises:
        PerImageError: a malformed entry (its index named), an unknown language, a score that
            is neither a finite number nor NaN, or an (image, language) pair given twice.
    """
    return _rows(per_image)


def write(path, per_image):
    """Writes per-image scores (as `check` takes them); returns `path`.

    Raises:
        PerImageError: as `check`; nothing is written then.
    """
    rows = _rows(per_image)
    with files.replacing(path) as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return path
