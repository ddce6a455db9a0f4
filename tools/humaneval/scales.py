"""The rating scales of the three session types, and the checks of one answer against them.

- `sxs`: side by side (Sec. 3.3 of the XM3600 paper). The rater sees two captions, left and
  right, and picks one of seven points. The stored answer is positional, {"choice": c} with c in
  -3..3 (negative: the left caption is better), so nothing the rater's browser sends names a
  model; `sxs_score` turns it into the paper's scale from m2's side, +3 Much-Better ... -3
  Much-Worse, with the item's recorded left/right order.
- `quality`: the paper's 5-level scale for single captions (Sec. 2.3, Table 2): Excellent,
  Good, Medium, Bad, Not-Enough-Info; stored as {"quality": label}.
- `thumb`: the THUMB 1.0 rubric (Kasai et al., NAACL 2022), whose one owner is
  tools/formats/thumb_ratings.py (the rubric of the THUMB files the kit exports): precision P and
  recall R, and the deductions for fluency Fl, conciseness Con and inclusive language Inc;
  total = (P + R) / 2 + Fl + Con + Inc. Stored as {"P", "R", "Fl", "Con", "Inc"}. The rating
  form offers, for each field, values the rubric's own check accepts (`THUMB_CHOICES`, found
  by asking `thumb_ratings.check_rating`; fluency from the owner's list of the penalties a
  form offers), so the kit never keeps a copy of its ranges.
"""

import re

from errors import InputError
from tools.formats import thumb_ratings

SESSION_TYPES = ("sxs", "quality", "thumb")
THUMB_FIELDS = thumb_ratings.FIELDS

# (positional choice, button label, keyboard key), left to right on the page.
SXS_CHOICES = (
    (-3, "Left much better", "1"), (-2, "Left better", "2"), (-1, "Left slightly better", "3"),
    (0, "Similar", "4"),
    (1, "Right slightly better", "5"), (2, "Right better", "6"), (3, "Right much better", "7"),
)
# The paper's names of the seven points, from the test model m2's side.
SXS_LABELS = {3: "Much-Better", 2: "Better", 1: "Slightly-Better", 0: "Similar",
              -1: "Slightly-Worse", -2: "Worse", -3: "Much-Worse"}

# (label, ordinal value or None, keyboard key); Not-Enough-Info has no place on the order.
QUALITY_CHOICES = (
    ("Excellent", 4, "1"), ("Good", 3, "2"), ("Medium", 2, "3"), ("Bad", 1, "4"),
    ("Not-Enough-Info", None, "5"),
)
QUALITY_VALUES = {label: value for label, value, _ in QUALITY_CHOICES}



def _thumb_choices():
    """{field: the values the form offers, best first}: the rubric's own check decides.

    P and R: the integers 0..10 check_rating accepts. Fl: the owner's list of the penalties a
    form offers (thumb_ratings.FLUENCY), those check_rating accepts (the rubric may allow
    sums of penalties beyond them). Con and Inc: the values check_rating accepts on a grid
    from 0 down to -5 in steps of 0.1.
    """
    valid = {"P": 5, "R": 5, "Fl": 0.0, "Con": 0.0, "Inc": 0.0}
    penalties = [round(-step / 10, 1) for step in range(0, 51)]
    grids = {"P": range(10, -1, -1), "R": range(10, -1, -1), "Fl": thumb_ratings.FLUENCY}
    choices = {}
    for field in THUMB_FIELDS:
        accepted = []
        for value in grids.get(field, penalties):
            try:
                thumb_ratings.check_rating(**dict(valid, **{field: value}))
            except thumb_ratings.ThumbError:
                continue
            accepted.append(value)
        choices[field] = tuple(accepted)
    return choices


# {field: values the rating form offers}: P and R from high to low, deductions from 0 down.
THUMB_CHOICES = _thumb_choices()

# Scripts written right to left among the XM3600 languages (Arabic, Persian, Hebrew).
RTL_LANGS = frozenset({"ar", "fa", "he"})


def text_direction(lang):
    """"rtl" for the right-to-left languages, else "ltr" (the `dir` attribute of a caption)."""
    return "rtl" if lang in RTL_LANGS else "ltr"


# A number as the form sends it: ASCII digits, no sign but "-", no space (" 1", "+1" and
# "١" are not the button's value), no minus zero ("-0", "-0.0": the form writes "0", "0.0").
_FORM_NUMBER = re.compile(r"^(?!-0(\.0+)?$)-?(0|[1-9][0-9]*)(\.[0-9]+)?$")


def _exact(value, field):
    """A form's string must be written as the form writes its values."""
    if isinstance(value, str) and not _FORM_NUMBER.match(value):
        raise InputError(f"field {field!r}: expected one of the form's values, got {value!r}")
    return value


def _integer(value, field):
    if isinstance(value, bool):
        raise InputError(f"field {field!r}: expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _FORM_NUMBER.match(value) and "." not in value:
        return int(value)
    raise InputError(f"field {field!r}: expected an integer, got {value!r}")


def check_answer(session_type, fields):
    """Checks one answer (form fields or a stored answer) against its session type's scale.

    Args:
        session_type: one of SESSION_TYPES.
        fields: a mapping of field name -> value (strings from a form, or numbers).

    Returns:
        The answer as stored: {"choice": int} (sxs), {"quality": label} (quality) or the
        dict of `tools.formats.thumb_ratings.check_rating` (thumb).

    Raises:
        InputError: a field is missing, unknown or out of range (named in the message; a
            `tools.formats.thumb_ratings.ThumbError` for the thumb rubric).
    """
    expected = {"sxs": ("choice",), "quality": ("quality",), "thumb": thumb_ratings.FIELDS}
    if session_type not in expected:
        raise InputError(f"unknown session type {session_type!r}; known: "
                         f"{', '.join(SESSION_TYPES)}")
    names = expected[session_type]
    missing = [n for n in names if n not in fields]
    extra = [n for n in fields if n not in names]
    if missing or extra:
        raise InputError(f"a {session_type} answer has the fields {', '.join(names)}; "
                         f"missing: {', '.join(missing) or 'none'}; unknown: "
                         f"{', '.join(map(str, extra)) or 'none'}")
    if session_type == "sxs":
        choice = _integer(fields["choice"], "choice")
        if choice not in SXS_LABELS:
            raise InputError(f"field 'choice': {choice} is outside -3..3")
        return {"choice": choice}
    if session_type == "quality":
        label = fields["quality"]
        if label not in QUALITY_VALUES:
            raise InputError(f"field 'quality': unknown label {label!r}; known: "
                             f"{', '.join(QUALITY_VALUES)}")
        return {"quality": label}
    return thumb_ratings.check_rating(*(_exact(fields[name], name)
                                        for name in thumb_ratings.FIELDS))


def sxs_score(choice, m2_side):
    """The paper's 7-point value from m2's side (+3 Much-Better ... -3 Much-Worse).

    Args:
        choice: the positional answer, -3..3, negative when the left caption is better.
        m2_side: 0 when m2's caption was on the left, 1 when on the right.
    """
    return choice if m2_side == 1 else -choice
