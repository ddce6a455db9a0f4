"""Triplet judgements of the CIDEr paper's protocol (Vedantam et al., CVPR 2015, Sec. 7).

A triplet is (reference A, candidates B and C) of one image: "which of B or C is more similar
to A?". A judgements file holds one JSON object per line and judgement (one person's answer to
one triplet):

    {"image/key": "2008_000032", "reference": A, "b": B, "c": C, "choice": "b" | "c",
     "kind": "HC" (optional), "lang": "en" (optional)}

- the candidates of a pair are the same two captions in every triplet of the pair; their order
  may change from line to line ("b" and "c" name the captions of that line);
- `kind` names the kind of pair (PASCAL-50S: HC two human captions of the image, HI a human
  caption of the image and one of another image, HM human and machine, MM two machines); a
  pair has one kind;
- `lang` is the captions' language (default: the tool's --lang);
- equal lines are two judgements, not a repeated row: a line is one person's answer and names
  no rater, so two people who answer a triplet alike write the same line (the aggregation
  counts the answers). What must be one is checked: a pair's kind.

The protocol's aggregation is tools/analysis/triplets.py. The file name is free
(`file_name()` suggests `triplets.jsonl`).
"""

import dataclasses
import json
import os

import errors
import files
from data import jsonl, languages

FIELDS = ("image/key", "reference", "b", "c", "choice")
OPTIONAL = ("kind", "lang")
CHOICES = ("b", "c")


class TripletError(errors.InputError):
    """A malformed judgements file; the message names the file, line, field and value."""


def file_name():
    """The suggested name of a judgements file."""
    return "triplets.jsonl"


@dataclasses.dataclass(frozen=True)
class Judgement:
    """One person's answer to one triplet.

    Attributes:
        image: the image key.
        reference: the reference caption A.
        b, c: the two candidate captions, as the line gives them.
        choice: the chosen candidate's text.
        kind: the pair's kind, or None.
        lang: the language, or None (the tool's default).
        where: "file:line".
    """
    image: str
    reference: str
    b: str
    c: str
    choice: str
    kind: str | None
    lang: str | None
    where: str


def _parse(obj, where):
    missing = [f for f in FIELDS if f not in obj]
    if missing:
        raise TripletError(f"{where}: missing field(s) {', '.join(missing)} (a judgement has "
                           f"{', '.join(FIELDS)}, and optionally {', '.join(OPTIONAL)})")
    image = obj["image/key"]
    if isinstance(image, bool) or not isinstance(image, (str, int)) or str(image) == "":
        raise TripletError(f"{where}: field 'image/key' must be a non-empty string, got "
                           f"{image!r}")
    for field in ("reference", "b", "c"):
        if not isinstance(obj[field], str) or not obj[field].strip():
            raise TripletError(f"{where}: field {field!r} must be a non-empty caption, got "
                               f"{obj[field]!r}")
    if obj["b"] == obj["c"]:
        raise TripletError(f"{where}: candidates 'b' and 'c' are the same caption")
    if obj["choice"] not in CHOICES:
        raise TripletError(f"{where}: field 'choice': {obj['choice']!r} is not 'b' or 'c'")
    kind, lang = obj.get("kind"), obj.get("lang")
    if kind is not None and (not isinstance(kind, str) or not kind):
        raise TripletError(f"{where}: field 'kind' must be a non-empty string, got {kind!r}")
    if lang is not None and lang not in languages.XM3600_LANGS:
        raise TripletError(f"{where}: field 'lang': unknown language {lang!r}")
    return Judgement(str(image), obj["reference"], obj["b"], obj["c"], obj[obj["choice"]],
                     kind, lang, where)


def _check_kinds(judgements):
    kinds = {}
    for j in judgements:
        pair = (j.image, frozenset((j.b, j.c)))
        first = kinds.setdefault(pair, (j.kind, j.where))
        if first[0] != j.kind:
            raise TripletError(f"{j.where}: the pair of image {j.image!r} is of kind "
                               f"{j.kind!r} here and {first[0]!r} at {first[1]}")


def read(path):
    """Reads a judgements file.

    Returns:
        [Judgement] in file order.

    Raises:
        TripletError: a missing or empty file, a malformed line, a choice other than b or c,
            or a pair given two kinds (file:line named).
    """
    if not os.path.isfile(path):
        raise TripletError(f"triplet judgements not found: {path}")
    judgements = [_parse(obj, where)
                  for where, obj in jsonl.read_objects(path, error=TripletError)]
    if not judgements:
        raise TripletError(f"{path}: no judgements (the file is empty)")
    _check_kinds(judgements)
    return judgements


def write(path, rows):
    """Writes judgements (dicts with FIELDS and optionally OPTIONAL); returns `path`.

    Raises:
        TripletError: as `read` would (the entry's index named); nothing is written then.
    """
    rows = list(rows)
    _check_kinds([_parse(row, f"{path}: entry {i}") for i, row in enumerate(rows)])
    with files.replacing(path) as f:
        f.writelines(json.dumps({k: row[k] for k in (*FIELDS, *OPTIONAL) if k in row},
                                ensure_ascii=False) + "\n" for row in rows)
    return path
