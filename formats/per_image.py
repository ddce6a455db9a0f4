"""Per-image scores: `per_image.jsonl`, one metric score per image and language.

Each line is {"image/key": non-empty str, "lang": an XM3600 code, "score": a finite number},
at most one per (image, language); an undefined score (VIFIDEL's NaN) has no line.
"""

import json
import math
import numbers
import os

import errors
import files
import formats
from data import jsonl, languages


class PerImageError(errors.InputError):
    """A per-image scores file (or what is to be written to one) is malformed; names where."""


def file_name(outputs=""):
    """The name of an evaluator's per-image file in a results folder ("": XM3600's)."""
    return f"per_image{'_' + outputs if outputs else ''}.jsonl"


def _check(obj, where, seen):
    """(key, lang, score) of a row, checked; `seen`: the (key, lang) of the rows before it."""
    for field in ("image/key", "lang"):
        if not isinstance(obj.get(field), str) or not obj[field]:
            raise PerImageError(f"{where}: missing or empty string field {field!r}")
    if obj["lang"] not in languages.XM3600_LANGS:
        raise PerImageError(f"{where}: unknown language {obj['lang']!r}")
    score = formats.finite(obj.get("score"), f"{where}: field 'score'", PerImageError)
    if (obj["image/key"], obj["lang"]) in seen:
        raise PerImageError(f"{where}: image {obj['image/key']!r} in language {obj['lang']!r} "
                            f"appears twice")
    seen.add((obj["image/key"], obj["lang"]))
    return obj["image/key"], obj["lang"], score


def read(path):
    """{lang: {image key: score}} of a per-image file, in file order (PerImageError: file:line)."""
    if not os.path.isfile(path):
        raise PerImageError(f"per-image scores not found: {path}")
    scores, seen = {}, set()
    for where, obj in jsonl.read_objects(path, error=PerImageError):
        key, lang, score = _check(obj, where, seen)
        scores.setdefault(lang, {})[key] = score
    if not scores:
        raise PerImageError(f"{path}: no scores (the file is empty)")
    return scores


def check(per_image):
    """The rows `write` writes of {lang: {image key: score}}, checked (PerImageError); NaN
    scores are left out."""
    for lang, by_key in per_image.items():
        if not isinstance(by_key, dict):
            raise PerImageError(f"per_image[{lang!r}]: expected a {{image key: score}} dict")
    rows = [{"image/key": key, "lang": lang, "score": score}
            for lang, by_key in per_image.items() for key, score in by_key.items()]
    out, seen = [], set()
    for i, row in enumerate(rows):
        score = row["score"]
        # numbers.Real also admits numpy scalars, which evaluation code hands over.
        if isinstance(score, bool) or not isinstance(score, numbers.Real) or math.isinf(score):
            raise PerImageError(f"per_image entry {i}: score is not a finite number: {row!r}")
        if not math.isnan(score):  # An undefined score: the image has no line.
            key, lang, score = _check(row, f"per_image entry {i}", seen)
            out.append({"image/key": key, "lang": lang, "score": score})
    return out


def write(path, per_image):
    """Writes {lang: {image key: score}} (`check`; nothing on error); returns `path`."""
    rows = check(per_image)
    with files.replacing(path) as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return path
