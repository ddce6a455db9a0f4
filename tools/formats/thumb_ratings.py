"""THUMB 1.0 ratings (Kasai et al., NAACL 2022): the rubric and its release-layout files.

The rubric, per caption (Kasai et al., Sec. 2): precision P and recall R (integers 1-5) and
three penalties, given as negative numbers:

- fluency Fl: 0.1 for an error a post-processor could fix, 0.5 or more for severe problems
  (duplication, ambiguity, broken sentences), and sums of these: 0 or a negative multiple of
  0.1. The paper sets no largest penalty; this rubric stops at FLUENCY_FLOOR (-5, the top of
  the P and R scale), so that a typo such as -50 is caught;
- conciseness Con: 0 or -0.5;
- inclusive language Inc: 0, -0.5 (a subjective comment on appearance) or -2 (severe);

    total = (P + R) / 2 + Fl + Con + Inc.

A ratings file is in the THUMB 1.0 release layout (`mscoco/mscoco_THumB-1.0.jsonl`): one JSON
object per line and caption, with the fields RELEASE_FIELDS: SYS (the system), seg_id (the
image), set_id (its index in the test split), hyp (the caption), image (its file name), P, R,
Fl, Inc, Con and human_score (the total). A file is one rating round: each (system, image) at
most once. The human-evaluation kit writes one file per round (`file_name`: `thumb.jsonl`, or
`thumb_1.jsonl` ... `thumb_<r>.jsonl`), the THUMB analysis and the meta-evaluation read them;
THUMB's references file (lines {"seg_id", "set_id", "refs"}) is read here too.

`check_rating` and `total` are the rubric, for these files and for the kit's rating form.
"""

import dataclasses
import json
import math
import os

import errors
import files
from data import jsonl

FIELDS = ("P", "R", "Fl", "Con", "Inc")
SCORES = (*FIELDS, "total")
PR_RANGE = (1, 5)
# The fluency penalties a rating form offers (Fl may be any multiple of -0.1 down to the floor).
FLUENCY = (0.0, -0.1, -0.2, -0.3, -0.4, -0.5)
FLUENCY_STEP = 0.1
FLUENCY_FLOOR = -5.0
CONCISENESS = (0.0, -0.5)
INCLUSIVE = (0.0, -0.5, -2.0)
BINARY = CONCISENESS  # The former name of the 0 / -0.5 choices, kept for the rating form.
RELEASE_FIELDS = ("SYS", "seg_id", "set_id", "hyp", "image", "P", "R", "Fl", "Inc", "Con",
                  "human_score")


class ThumbError(errors.InputError):
    """A rating outside the rubric or a malformed file; names the file, line, field and value."""


def file_name(round_number=None):
    """`thumb.jsonl` (the only round), or `thumb_<k>.jsonl` (round k, from 1)."""
    return "thumb.jsonl" if round_number is None else f"thumb_{round_number}.jsonl"


def _number(value, field):
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ThumbError(f"field {field!r}: expected a number, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise ThumbError(f"field {field!r}: expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ThumbError(f"field {field!r}: expected a finite number, got {value!r}")
    return number


def _one_of(number, allowed, field):
    for choice in allowed:
        if abs(number - choice) < 1e-9:
            return choice + 0.0  # + 0.0: no -0.0
    raise ThumbError(f"field {field!r}: {number:g} is not one of "
                     f"{', '.join(f'{a:g}' for a in allowed)}")


def _fluency(number):
    steps = round(number / FLUENCY_STEP)
    if abs(number - steps * FLUENCY_STEP) > 1e-9 or not FLUENCY_FLOOR <= number <= 0:
        raise ThumbError(f"field 'Fl': {number:g} is not 0 or a penalty of 0.1, 0.2, ... down "
                         f"to {FLUENCY_FLOOR:g} (a negative multiple of 0.1)")
    return round(steps * FLUENCY_STEP, 1) + 0.0  # + 0.0: no -0.0


def check_rating(P, R, Fl, Con, Inc):  # noqa: N803 (the rubric's own names)
    """Checks one THUMB rating against the rubric.

    Args:
        P, R: precision and recall, integers 1-5 (integral floats and numeric strings
            accepted).
        Fl: fluency penalty, 0 or a negative multiple of 0.1 down to FLUENCY_FLOOR (-5).
        Con: conciseness penalty, 0 or -0.5.
        Inc: inclusive-language penalty, 0, -0.5 or -2.

    Returns:
        {"P": int, "R": int, "Fl": float, "Con": float, "Inc": float}.

    Raises:
        ThumbError: a value is malformed or outside the rubric (the field and value named).
    """
    out = {}
    for field, value in (("P", P), ("R", R)):
        number = _number(value, field)
        if not number.is_integer():
            raise ThumbError(f"field {field!r}: {value!r} is not an integer")
        low, high = PR_RANGE
        if not low <= number <= high:
            raise ThumbError(f"field {field!r}: {number:g} is outside {low}-{high}")
        out[field] = int(number)
    out["Fl"] = _fluency(_number(Fl, "Fl"))
    out["Con"] = _one_of(_number(Con, "Con"), CONCISENESS, "Con")
    out["Inc"] = _one_of(_number(Inc, "Inc"), INCLUSIVE, "Inc")
    return out


def total(rating):
    """The THUMB score of one checked rating: (P + R) / 2 + Fl + Con + Inc."""
    return (rating["P"] + rating["R"]) / 2 + rating["Fl"] + rating["Con"] + rating["Inc"]


@dataclasses.dataclass(frozen=True)
class Rating:
    """One rated caption of a release-layout file.

    Attributes:
        system: SYS.
        image: seg_id (as a string), the image the caption describes.
        set_id: the image's index in its test split.
        hyp: the caption.
        scores: {"P", "R", "Fl", "Con", "Inc", "total"}.
        where: "file:line".
    """
    system: str
    image: str
    set_id: int
    hyp: str
    scores: dict
    where: str


def _parse(obj, where):
    missing = [f for f in RELEASE_FIELDS if f not in obj]
    if missing:
        raise ThumbError(f"{where}: missing field(s) {', '.join(missing)} (the THUMB 1.0 layout "
                         f"has {', '.join(RELEASE_FIELDS)})")
    for field in ("SYS", "hyp", "image"):
        if not isinstance(obj[field], str) or (field == "SYS" and not obj[field]):
            raise ThumbError(f"{where}: field {field!r} must be a string, got {obj[field]!r}")
    if not isinstance(obj["seg_id"], (str, int)) or isinstance(obj["seg_id"], bool):
        raise ThumbError(f"{where}: field 'seg_id' must be a string, got {obj['seg_id']!r}")
    if not isinstance(obj["set_id"], int) or isinstance(obj["set_id"], bool):
        raise ThumbError(f"{where}: field 'set_id' must be an integer, got {obj['set_id']!r}")
    try:
        scores = check_rating(*(obj[f] for f in FIELDS))
        stated = _number(obj["human_score"], "human_score")
    except ThumbError as e:
        raise ThumbError(f"{where}: {e}") from None
    scores["total"] = total(scores)
    if abs(stated - scores["total"]) > 1e-6:
        raise ThumbError(f"{where}: field 'human_score': {stated:g} is not (P + R) / 2 + Fl + "
                         f"Con + Inc = {scores['total']:g}")
    return Rating(obj["SYS"], str(obj["seg_id"]), obj["set_id"], obj["hyp"], scores, where)


def _round(ratings):
    """The ratings (an iterable, consumed in order) as a list, or a ThumbError for a
    (system, image) rated twice in one round."""
    seen, out = {}, []
    for rating in ratings:
        pair = (rating.system, rating.image)
        if pair in seen:
            raise ThumbError(f"{rating.where}: system {rating.system!r} rated again on image "
                             f"{rating.image!r} (first at {seen[pair]}); a second round belongs "
                             f"in a file of its own")
        seen[pair] = rating.where
        out.append(rating)
    return out


def read(path):
    """Reads one release-layout file (one rating round).

    Returns:
        [Rating] in file order.

    Raises:
        ThumbError: a missing or empty file, a malformed line, a value outside the rubric, a
            human_score that is not the total, or a second rating of the same (system, image)
            (file:line named).
    """
    if not os.path.isfile(path):
        raise ThumbError(f"THUMB ratings not found: {path}")
    ratings = _round(_parse(obj, where)
                     for where, obj in jsonl.read_objects(path, error=ThumbError))
    if not ratings:
        raise ThumbError(f"{path}: no ratings (the file is empty)")
    return ratings


def write(path, rows):
    """Writes one rating round in the release layout; returns `path`.

    Args:
        path: the file to write.
        rows: dicts with the fields RELEASE_FIELDS (others are not written), in file order.

    Raises:
        ThumbError: as `read` would for the file (the entry's index named); nothing is
            written then.
    """
    rows = list(rows)
    _round(_parse(row, f"{path}: entry {i}") for i, row in enumerate(rows))
    with files.replacing(path) as f:
        f.writelines(json.dumps({k: row[k] for k in RELEASE_FIELDS}, ensure_ascii=False) + "\n"
                     for row in rows)
    return path


def read_references(path):
    """Reads THUMB's references file: lines {"seg_id", "set_id", "refs": [...]}.

    Returns:
        {seg_id (str): [reference captions]}.

    Raises:
        ThumbError: a missing file, a malformed line or a seg_id given twice (file:line).
    """
    if not os.path.isfile(path):
        raise ThumbError(f"THUMB references not found: {path}")
    refs = {}
    for where, obj in jsonl.read_objects(path, error=ThumbError):
        seg, captions = obj.get("seg_id"), obj.get("refs")
        if seg is None or not isinstance(captions, list) or not captions or not all(
                isinstance(c, str) for c in captions):
            raise ThumbError(f"{where}: expected {{\"seg_id\", \"set_id\", \"refs\": [strings]}}")
        if str(seg) in refs:
            raise ThumbError(f"{where}: seg_id {seg!r} appears twice")
        refs[str(seg)] = captions
    return refs
