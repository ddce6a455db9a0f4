"""Tests of tools/formats/thumb_ratings.py: the THUMB rubric and its release-layout files."""

import json

import pytest

from tests.formats.small_files import write_lines as _write
from tests.tools.formats.thumb_files import row as _row
from tools.formats import thumb_ratings


def test_check_rating_accepts_the_papers_rubric():
    # Fluency: 0.1 per fixable error, 0.5 or more for severe problems; inclusive language:
    # 0.5 or 2 (Kasai et al., Sec. 2).
    assert thumb_ratings.check_rating(4, 3, -0.6, 0, -2) == {
        "P": 4, "R": 3, "Fl": -0.6, "Con": 0.0, "Inc": -2.0}
    for fl in (-0.0, -0.1, -0.5, -1.0, -1.7, -5):
        assert thumb_ratings.check_rating(4, 3, fl, 0, 0)["Fl"] == pytest.approx(fl)
    assert thumb_ratings.check_rating(4, 3, -0.0, -0.0, -0.0) == {
        "P": 4, "R": 3, "Fl": 0.0, "Con": 0.0, "Inc": 0.0}
    assert str(thumb_ratings.check_rating(4, 3, -0.0, 0, 0)["Fl"]) == "0.0"  # not -0.0
    assert thumb_ratings.check_rating("4", 3.0, -0.1, 0, "-0.5") == {
        "P": 4, "R": 3, "Fl": -0.1, "Con": 0.0, "Inc": -0.5}
    assert thumb_ratings.total({"P": 4, "R": 3, "Fl": -0.1, "Con": 0.0, "Inc": -0.5}) \
        == pytest.approx(3.5 - 0.6)


def test_check_rating_names_what_is_wrong():
    for args, message in [((6, 3, 0, 0, 0), "field 'P': 6 is outside 1-5"),
                          ((4, 0, 0, 0, 0), "field 'R': 0 is outside 1-5"),
                          ((4, 3.5, 0, 0, 0), "field 'R': 3.5 is not an integer"),
                          ((4, 3, -0.25, 0, 0), "field 'Fl': -0.25 is not 0 or a penalty"),
                          ((4, 3, 0.1, 0, 0), "field 'Fl': 0.1 is not 0 or a penalty"),
                          ((4, 3, -5.1, 0, 0), "field 'Fl': -5.1 is not 0 or a penalty"),
                          ((4, 3, 0, 0, -1), "field 'Inc': -1 is not one of 0, -0.5, -2"),
                          ((4, 3, 0, -0.1, 0), "field 'Con': -0.1 is not one of 0, -0.5"),
                          ((4, 3, 0, 0, True), "field 'Inc': expected a number, got True"),
                          ((4, 3, 0, 0, "x"), "field 'Inc': expected a number, got 'x'")]:
        with pytest.raises(thumb_ratings.ThumbError, match=message):
            thumb_ratings.check_rating(*args)


@pytest.mark.parametrize("row, message", [
    (_row("A", "1", 6, 3, 0, 0, 0), r"t.jsonl:2: field 'P': 6 is outside 1-5"),
    (_row("A", "1", 4, 3, 0, 0, 0, human_score=4.0),
     r"t.jsonl:2: field 'human_score': 4 is not \(P \+ R\) / 2"),
    ({"SYS": "A", "seg_id": "1"}, r"t.jsonl:2: missing field\(s\) set_id, hyp, image"),
    (_row("A", "1", 4, 3, 0, 0, 0, set_id="1"), r"t.jsonl:2: field 'set_id' must be an integer"),
    (_row("B", "9", 4, 3, 0, 0, 0), None),
])
def test_bad_files_name_the_line_field_value(tmp_path, row, message):
    rows = [_row("B", "9", 4, 3, 0, 0, 0), row]
    path = _write(tmp_path / "t.jsonl", rows)
    with pytest.raises(thumb_ratings.ThumbError,
                       match=message or r"t.jsonl:2: system 'B' rated again"):
        thumb_ratings.read(path)


def test_write_reads_back_in_the_release_layout(tmp_path):
    rows = [_row("A", "1", 4, 3, -0.1, 0, 0, extra="not written"), _row("B", "1", 2, 5, 0, 0, 0)]
    path = thumb_ratings.write(tmp_path / thumb_ratings.file_name(), rows)
    first = json.loads(path.read_text().splitlines()[0])
    assert tuple(first) == thumb_ratings.RELEASE_FIELDS
    ratings = thumb_ratings.read(path)
    assert [(r.system, r.image, r.scores["total"]) for r in ratings] == [
        ("A", "1", pytest.approx(3.4)), ("B", "1", 3.5)]
    assert thumb_ratings.file_name(2) == "thumb_2.jsonl"


def test_write_refuses_what_read_would_writing_nothing(tmp_path):
    for rows, message in [
        ([_row("A", "1", 4, 3, 0, 0, 0, human_score=9)], r"entry 0: field 'human_score'"),
        ([_row("A", "1", 4, 3, 0, 0, 0)] * 2, r"entry 1: system 'A' rated again on image '1'"),
    ]:
        with pytest.raises(thumb_ratings.ThumbError, match=message):
            thumb_ratings.write(tmp_path / "thumb.jsonl", rows)
        assert not (tmp_path / "thumb.jsonl").exists()


def test_references_file(tmp_path):
    path = tmp_path / "refs.jsonl"
    path.write_text('{"seg_id": 1, "set_id": 0, "refs": ["a", "b"]}\n'
                    '{"seg_id": "1", "set_id": 0, "refs": ["c"]}\n')
    with pytest.raises(thumb_ratings.ThumbError, match=r"refs.jsonl:2: seg_id '1' appears twice"):
        thumb_ratings.read_references(path)
    path.write_text('{"seg_id": 1, "set_id": 0, "refs": ["a", "b"]}\n')
    assert thumb_ratings.read_references(path) == {"1": ["a", "b"]}
