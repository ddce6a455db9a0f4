"""Tests of tools/analysis/thumb.py: system scores, rounds, the CLI (the rubric and the
files: tests/tools/formats/test_thumb_ratings.py)."""

import json
import re

import numpy as np
import pytest

from tests.formats.small_files import write_lines as _write
from tests.tools.formats.thumb_files import row as _row
from tools.analysis import thumb
from tools.formats import thumb_ratings

# (system, image, P, R, Fl, Con, Inc): 3 systems x 3 images.
RATINGS = [
    ("Human", "1", 5, 5, 0, 0, 0), ("A", "1", 4, 3, 0, 0, 0), ("B", "1", 3, 2, -0.1, 0, 0),
    ("Human", "2", 5, 4, 0, -0.5, 0), ("A", "2", 5, 4, 0, 0, 0), ("B", "2", 2, 5, 0, 0, 0),
    ("Human", "3", 4, 4, 0, 0, -0.5), ("A", "3", 2, 2, -0.5, 0, 0), ("B", "3", 3, 3, 0, 0, 0),
]


def _table(tmp_path):
    return thumb.table([thumb_ratings.read(_write(tmp_path / "t.jsonl",
                                                  [_row(*r) for r in RATINGS]))])


def test_system_scores_are_the_means(tmp_path):
    tab = _table(tmp_path)
    assert tab.systems == ["Human", "A", "B"] and tab.images == ["1", "2", "3"]
    scores = thumb.system_scores(tab, samples=200, seed=1)
    assert scores["Human"]["P"]["mean"] == pytest.approx(14 / 3)
    assert scores["Human"]["total"]["mean"] == pytest.approx((5 + 4.0 + 3.5) / 3)
    assert scores["B"]["Fl"]["mean"] == pytest.approx(-0.1 / 3)


def test_system_score_intervals_share_one_draw_of_images(tmp_path):
    tab = _table(tmp_path)
    scores = thumb.system_scores(tab, samples=200, seed=1)
    # The interval is the 5th-95th percentile of the means over one shared draw of images.
    index = np.random.default_rng(1).integers(0, 3, size=(200, 3))
    totals = tab.scores["total"][1][index].mean(axis=1)
    assert scores["A"]["total"]["low"] == pytest.approx(np.percentile(totals, 5))
    assert scores["A"]["total"]["high"] == pytest.approx(np.percentile(totals, 95))


def test_best_worst_counts(tmp_path):
    counts, compared, all_tied = thumb.best_worst(_table(tmp_path))
    # Image 1: Human best and B worst in both; image 2: P and R disagree (Human ties A in P
    # and R, but B's R is higher); image 3: Human best, A worst.
    assert compared == 3 and all_tied == 0
    assert counts == {"Human": {"best": 2, "worst": 0}, "A": {"best": 0, "worst": 1},
                      "B": {"best": 0, "worst": 1}}


def test_best_worst_ties_count_as_in_table3(tmp_path):
    # Ties count as in the paper's Table 3.
    rows = [("Human", "1", 5, 5), ("A", "1", 5, 5), ("B", "1", 3, 4),   # two best, B worst
            ("Human", "2", 4, 4), ("A", "2", 4, 4), ("B", "2", 4, 4),   # all tie: all both
            ("Human", "3", 5, 3), ("A", "3", 4, 4), ("B", "3", 4, 3)]   # no best; B worst
    tab = thumb.table([thumb_ratings.read(_write(tmp_path / "ties.jsonl", [
        _row(s, i, p, r, 0, 0, 0) for s, i, p, r in rows]))])
    counts, compared, all_tied = thumb.best_worst(tab)
    assert (compared, all_tied) == (3, 1)
    assert counts == {"Human": {"best": 2, "worst": 1}, "A": {"best": 2, "worst": 1},
                      "B": {"best": 1, "worst": 3}}


def test_one_system_is_neither_best_nor_worst(tmp_path, capsys):
    path = _write(tmp_path / "t.jsonl", [_row("A", i, 4, 3, 0, 0, 0) for i in "123"])
    counts, compared, _ = thumb.best_worst(thumb.table([thumb_ratings.read(path)]))
    assert counts is None and compared == 3
    assert thumb.main([path, "--samples", "20"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[-2:] == ["–", "–"] and "1 system, nothing to compare" in out[-1]


def test_rounds_are_averaged_per_caption(tmp_path):
    first = _write(tmp_path / "thumb_1.jsonl", [_row("A", "1", 4, 3, 0, 0, 0),
                                                _row("B", "1", 2, 2, 0, 0, 0)])
    second = _write(tmp_path / "thumb_2.jsonl", [_row("A", "1", 5, 4, -0.1, 0, 0)])
    tab = thumb.table([thumb_ratings.read(first), thumb_ratings.read(second)])
    assert tab.rounds == 2
    assert tab.scores["P"][0, 0] == 4.5 and tab.scores["total"][0, 0] == pytest.approx(3.95)
    assert tab.scores["P"][1, 0] == 2
    other = _write(tmp_path / "thumb_3.jsonl", [_row("A", "1", 5, 4, 0, 0, 0, hyp="other")])
    with pytest.raises(thumb_ratings.ThumbError,
                       match=r"thumb_3.jsonl:1: system 'A' on image '1' has another caption"):
        thumb.table([thumb_ratings.read(first), thumb_ratings.read(other)])
    # The second round covers only A: said (partial_rounds), not refused.
    assert tab.partial_rounds == [(second, 1, 2)]


def test_a_round_of_other_images_is_refused_naming_them(tmp_path, capsys):
    first = _write(tmp_path / "thumb_1.jsonl", [_row("A", i, 4, 3, 0, 0, 0) for i in "12"])
    second = _write(tmp_path / "thumb_2.jsonl", [_row("A", i, 4, 3, 0, 0, 0) for i in "2378"])
    assert thumb.main([first, second]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {second}: a later round rates images 3, 7, 8, which the first round "
                   f"({first}) does not; rounds are re-ratings of the same captions (analyse "
                   f"other images in a run of their own)"]
    other_system = _write(tmp_path / "thumb_3.jsonl", [_row("B", "1", 4, 3, 0, 0, 0)])
    with pytest.raises(thumb_ratings.ThumbError, match=r"rates systems B, which the first"):
        thumb.table([thumb_ratings.read(first), thumb_ratings.read(other_system)])


def test_command_line_report(tmp_path, capsys):
    path = _write(tmp_path / "thumb.jsonl", [_row(*r) for r in RATINGS])
    out = tmp_path / "report"
    assert thumb.main([path, "--out", str(out), "--samples", "50"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["system", "n", "P"] and lines[1].split()[:2] == ["Human", "3"]
    assert {p.name for p in out.iterdir()} == {"thumb.md", "thumb.csv", "thumb.png"}
    assert "| Human | 3 | 4.67 [" in (out / "thumb.md").read_text()


def test_command_line_json(tmp_path, capsys):
    path = _write(tmp_path / "thumb.jsonl", [_row(*r) for r in RATINGS])
    assert thumb.main([path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["best_worst"]["Human"] == {"best": 2, "worst": 0}


def test_command_line_names_a_bad_rating(tmp_path, capsys):
    bad = _write(tmp_path / "bad.jsonl", [_row("A", "1", 4, 3, -0.75, 0, 0)])
    assert thumb.main([bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {bad}:1: field 'Fl': -0.75 is not 0 or a penalty of 0.1, 0.2, ... "
                   f"down to -5 (a negative multiple of 0.1)"]


def test_command_line_names_a_missing_file(tmp_path, capsys):
    assert thumb.main([str(tmp_path / "missing.jsonl")]) == 2
    assert "THUMB ratings not found" in capsys.readouterr().err


@pytest.mark.parametrize("make_out, message", [
    (lambda t: t / "a_file", r"--out .*a_file is a file; the report goes in a folder"),
    (lambda t: "/proc/x", r"--out /proc/x: cannot write there"),
])
def test_a_bad_out_is_one_error_line_before_any_work(tmp_path, capsys, make_out, message):
    (tmp_path / "a_file").write_text("keep me")
    # The ratings do not even exist: --out is checked first.
    assert thumb.main([str(tmp_path / "missing.jsonl"), "--out", str(make_out(tmp_path))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.match(f"error: {message}", err[0]), err
    assert (tmp_path / "a_file").read_text() == "keep me"
