"""Tests of the rating scales and the answer checks (tools/humaneval/scales.py)."""

import pytest

from errors import InputError
from tools.formats import thumb_ratings
from tools.humaneval import scales


def test_sxs_answers_are_positional():
    assert scales.check_answer("sxs", {"choice": "-2"}) == {"choice": -2}


def test_sxs_answers_are_turned_to_m2s_side():
    # Left better (-2) is m2 Better (+2) when m2 was on the left, Worse when on the right.
    assert scales.sxs_score(-2, m2_side=0) == 2
    assert scales.sxs_score(-2, m2_side=1) == -2
    assert [scales.SXS_LABELS[scales.sxs_score(c, 1)] for c, _, _ in scales.SXS_CHOICES] == [
        "Much-Worse", "Worse", "Slightly-Worse", "Similar", "Slightly-Better", "Better",
        "Much-Better"]


@pytest.mark.parametrize("fields, message", [
    ({"choice": "4"}, "outside -3..3"),
    ({"choice": "x"}, "expected an integer"),
    ({"choice": "1.5"}, "expected an integer"),
    ({}, "missing: choice"),
    ({"choice": "1", "model": "m2"}, "unknown: model"),
    ({"choice": "-0"}, "expected an integer"),  # not the button's "0"
])
def test_bad_sxs_answers_name_the_field(fields, message):
    with pytest.raises(InputError, match=message):
        scales.check_answer("sxs", fields)


def test_quality_labels_are_checked():
    assert scales.check_answer("quality", {"quality": "Not-Enough-Info"}) == {
        "quality": "Not-Enough-Info"}
    with pytest.raises(InputError, match="unknown label 'Great'"):
        scales.check_answer("quality", {"quality": "Great"})


def test_unknown_session_types_are_refused():
    with pytest.raises(InputError, match="unknown session type"):
        scales.check_answer("ranking", {})


def test_text_directions():
    assert [scales.text_direction(lang) for lang in ("ar", "fa", "he", "en", "zh")] == [
        "rtl", "rtl", "rtl", "ltr", "ltr"]


def test_thumb_rubric_total():
    answer = scales.check_answer("thumb", {"P": "4", "R": "5", "Fl": "-0.3", "Con": "0",
                                           "Inc": "-0.5"})
    assert answer == {"P": 4, "R": 5, "Fl": -0.3, "Con": 0.0, "Inc": -0.5}
    assert thumb_ratings.total(answer) == pytest.approx((4 + 5) / 2 - 0.3 - 0.5)


def test_thumb_rubric_ranges():
    for field, value, message in (("P", "0", "outside 1-5"), ("R", "6", "outside 1-5"),
                                  ("Fl", "-0.25", "multiple of 0.1"), ("Con", "-0.2", "not one of"),
                                  ("Inc", "nan", "one of the form's values"),
                                  ("P", " 4", "one of the form's values")):
        fields = {"P": 3, "R": 3, "Fl": 0, "Con": 0, "Inc": 0, field: value}
        with pytest.raises(InputError, match=f"'{field}'.*{message}"):
            scales.check_answer("thumb", fields)


@pytest.mark.parametrize("value", ["-0", "-0.0", "-0.00"])
def test_a_thumb_penalty_of_minus_zero_is_not_the_forms_value(value):
    fields = {"P": "3", "R": "3", "Fl": value, "Con": "0", "Inc": "0"}
    with pytest.raises(InputError, match=f"field 'Fl': expected one of the form's values, got "
                                         f"'{value}'"):
        scales.check_answer("thumb", fields)
