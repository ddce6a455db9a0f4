"""Tests of evaluation/analysis/thumb.py: rubric, release-layout files, system scores, the CLI."""

import json

import numpy as np
import pytest

from evaluation.analysis import thumb

# (system, image, P, R, Fl, Con, Inc): 3 systems x 3 images.
RATINGS = [
    ("Human", "1", 5, 5, 0, 0, 0), ("A", "1", 4, 3, 0, 0, 0), ("B", "1", 3, 2, -0.1, 0, 0),
    ("Human", "2", 5, 4, 0, -0.5, 0), ("A", "2", 5, 4, 0, 0, 0), ("B", "2", 2, 5, 0, 0, 0),
    ("Human", "3", 4, 4, 0, 0, -0.5), ("A", "3", 2, 2, -0.5, 0, 0), ("B", "3", 3, 3, 0, 0, 0),
]


def _row(system, image, p, r, fl, con, inc, **overrides):
    row = {"SYS": system, "seg_id": image, "set_id": int(image), "hyp": f"{system} on {image}",
           "image": f"COCO_val2014_{int(image):012d}.jpg", "P": float(p), "R": float(r),
           "Fl": fl, "Inc": inc, "Con": con, "human_score": (p + r) / 2 + fl + con + inc}
    row.update(overrides)
    return row


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_check_rating_accepts_the_rubric_and_names_what_is_wrong():
    assert thumb.check_rating("4", 3.0, -0.1, 0, "-0.5") == {
        "P": 4, "R": 3, "Fl": -0.1, "Con": 0.0, "Inc": -0.5}
    assert thumb.total({"P": 4, "R": 3, "Fl": -0.1, "Con": 0.0, "Inc": -0.5}) == pytest.approx(
        3.5 - 0.6)
    for args, message in [((6, 3, 0, 0, 0), "field 'P': 6 is outside 1-5"),
                          ((4, 0, 0, 0, 0), "field 'R': 0 is outside 1-5"),
                          ((4, 3.5, 0, 0, 0), "field 'R': 3.5 is not an integer"),
                          ((4, 3, -0.25, 0, 0), "field 'Fl': -0.25 is not one of 0, -0.1"),
                          ((4, 3, 0, -0.1, 0), "field 'Con': -0.1 is not one of 0, -0.5"),
                          ((4, 3, 0, 0, True), "field 'Inc': expected a number, got True"),
                          ((4, 3, 0, 0, "x"), "field 'Inc': expected a number, got 'x'")]:
        with pytest.raises(thumb.ThumbError, match=message):
            thumb.check_rating(*args)


def test_system_scores_best_worst_and_intervals(tmp_path):
    tab = thumb.table([thumb.read_ratings(_write(tmp_path / "t.jsonl",
                                                 [_row(*r) for r in RATINGS]))])
    assert tab.systems == ["Human", "A", "B"] and tab.images == ["1", "2", "3"]
    scores = thumb.system_scores(tab, samples=200, seed=1)
    assert scores["Human"]["P"]["mean"] == pytest.approx(14 / 3)
    assert scores["Human"]["total"]["mean"] == pytest.approx((5 + 4.0 + 3.5) / 3)
    assert scores["B"]["Fl"]["mean"] == pytest.approx(-0.1 / 3)
    # The interval is the 5th-95th percentile of the means over one shared draw of images.
    index = np.random.default_rng(1).integers(0, 3, size=(200, 3))
    totals = tab.scores["total"][1][index].mean(axis=1)
    assert scores["A"]["total"]["low"] == pytest.approx(np.percentile(totals, 5))
    assert scores["A"]["total"]["high"] == pytest.approx(np.percentile(totals, 95))
    counts, compared = thumb.best_worst(tab)
    # Image 1: Human best and B worst in both; image 2: P and R disagree (and Human ties A
    # in P); image 3: Human best, A worst.
    assert compared == 3
    assert counts == {"Human": {"best": 2, "worst": 0}, "A": {"best": 0, "worst": 1},
                      "B": {"best": 0, "worst": 1}}


def test_rounds_are_averaged_per_caption(tmp_path):
    first = _write(tmp_path / "thumb_1.jsonl", [_row("A", "1", 4, 3, 0, 0, 0),
                                                _row("B", "1", 2, 2, 0, 0, 0)])
    second = _write(tmp_path / "thumb_2.jsonl", [_row("A", "1", 5, 4, -0.1, 0, 0)])
    tab = thumb.table([thumb.read_ratings(first), thumb.read_ratings(second)])
    assert tab.rounds == 2
    assert tab.scores["P"][0, 0] == 4.5 and tab.scores["total"][0, 0] == pytest.approx(3.95)
    assert tab.scores["P"][1, 0] == 2
    other = _write(tmp_path / "thumb_3.jsonl", [_row("A", "1", 5, 4, 0, 0, 0, hyp="other")])
    with pytest.raises(thumb.ThumbError, match=r"thumb_3.jsonl:1: system 'A' on image '1' has "
                                               r"another caption"):
        thumb.table([thumb.read_ratings(first), thumb.read_ratings(other)])


@pytest.mark.parametrize("row, message", [
    (_row("A", "1", 6, 3, 0, 0, 0), r"t.jsonl:2: field 'P': 6 is outside 1-5"),
    (_row("A", "1", 4, 3, 0, 0, 0, human_score=4.0),
     r"t.jsonl:2: field 'human_score': 4 is not \(P \+ R\) / 2"),
    ({"SYS": "A", "seg_id": "1"}, r"t.jsonl:2: missing field\(s\) set_id, hyp, image"),
    (_row("A", "1", 4, 3, 0, 0, 0, set_id="1"), r"t.jsonl:2: field 'set_id' must be an integer"),
    (_row("B", "9", 4, 3, 0, 0, 0), None),
])
def test_bad_files_name_file_line_field_and_value(tmp_path, row, message):
    rows = [_row("B", "9", 4, 3, 0, 0, 0), row]
    path = _write(tmp_path / "t.jsonl", rows)
    with pytest.raises(thumb.ThumbError, match=message or r"t.jsonl:2: system 'B' rated again"):
        thumb.read_ratings(path)


def test_command_line_report_and_errors(tmp_path, capsys):
    path = _write(tmp_path / "thumb.jsonl", [_row(*r) for r in RATINGS])
    out = tmp_path / "report"
    assert thumb.main([path, "--out", str(out), "--samples", "50"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["system", "n", "P"] and lines[1].split()[:2] == ["Human",
                                                                                     "3"]
    assert {p.name for p in out.iterdir()} == {"thumb.md", "thumb.csv", "thumb.png"}
    assert "| Human | 3 | 4.67 [" in (out / "thumb.md").read_text()
    assert thumb.main([path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["best_worst"]["Human"] == {"best": 2, "worst": 0}
    bad = _write(tmp_path / "bad.jsonl", [_row("A", "1", 4, 3, -0.7, 0, 0)])
    assert thumb.main([bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {bad}:1: field 'Fl': -0.7 is not one of 0, -0.1, -0.2, -0.3, -0.4, "
                   f"-0.5"]
    assert thumb.main([str(tmp_path / "missing.jsonl")]) == 2
    assert "THUMB ratings not found" in capsys.readouterr().err
