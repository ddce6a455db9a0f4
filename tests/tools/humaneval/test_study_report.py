"""The study report (tools/humaneval/study_report.py): Table 6 via analysis/correlate, files."""

import csv
import json
import os
import sqlite3

import numpy as np
import pytest

from tests.formats.small_files import read_csv
from tests.tools.humaneval import helpers
from tools.analysis import correlate
from tools.formats import side_by_side
from tools.humaneval import rating_stats, simulate, study_report

CORRELATION_COLUMNS = ("coefficient", "languages", "n_points", "delta_cider_xm600",
                       "delta_cider_xm3600", "delta_cider_coco_dev")  # the paper's layout


@pytest.fixture(scope="module")
def study(release, results_pair, tmp_path_factory):
    """Two simulated sxs evaluations (three models) and a quality session, made once for the
    module's tests (which only read them)."""
    root = tmp_path_factory.mktemp("study")
    third = str(root / "third")
    helpers.write_results(third, release, ("en", "zh", "ar"), good=0.55, seed=9)
    first = helpers.new_session(release, results_pair, str(root / "session0"))
    second = helpers.new_session(release, results_pair, str(root / "session1"),
                                 systems=(("third", third), ("test", results_pair[1])), seed=1)
    quality = helpers.new_session(release, results_pair, str(root / "session2"),
                                  type="quality", systems=(), references=True, langs=("en",),
                                  gold_share=0.2)
    for n, session in enumerate((first, second, quality)):
        simulate.simulate(session, noise=0.6, seed=n, careless={"en-2": 1.0})
    return first, second, quality


@pytest.fixture(scope="module")
def report(study, tmp_path_factory):
    """The paths of the study's report, written once for the module."""
    out = str(tmp_path_factory.mktemp("report") / "report")
    return study_report.write_report(list(study), out, resamples=200, seed=0)


def test_the_report_files_are_written(report):
    paths = report
    for kind in ("markdown", "side_by_side", "correlations", "sxs", "agreement", "raters",
                 "quality", "sxs_png", "correlation_png"):
        assert os.path.getsize(paths[kind]) > 0, kind
    for kind in ("sxs_png", "correlation_png"):
        with open(paths[kind], "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_the_correlations_are_table6_of_correlate(report):
    paths = report
    evaluations, columns = side_by_side.read(paths["side_by_side"])
    assert len(evaluations) == 6  # two pairs x three languages
    expected = correlate.table6(evaluations, columns)
    with open(paths["correlations"], newline="", encoding="utf-8") as f:
        assert tuple(next(csv.reader(f))) == CORRELATION_COLUMNS
    rows = read_csv(paths["correlations"])
    assert len(rows) == 9
    for row in rows:
        cells = expected[row["languages"]]
        assert int(row["n_points"]) == cells["n"]["delta_cider_xm3600"]
        for column in CORRELATION_COLUMNS[3:]:
            value = cells[row["coefficient"]][column]
            # Fewer than MIN_EVALUATIONS evaluations (ext: ar twice) leave the cell empty.
            too_few = cells["n"][column] < 2 * study_report.MIN_EVALUATIONS
            assert (row[column] == "") == (value is None or too_few)
            if row[column]:
                assert float(row[column]) == pytest.approx(value, abs=1e-4)
    assert int(next(r for r in rows if r["languages"] == "all")["n_points"]) == 12


def test_the_markdown_names_the_simulated_ratings_with_table6(report):
    markdown = open(report["markdown"], encoding="utf-8").read()
    assert "**SIMULATED ratings**" in markdown
    assert "the paper's Table 6" in markdown


def test_the_rater_table_flags_only_the_careless_rater(report):
    raters = read_csv(report["raters"])
    assert {r["rater"] for r in raters if r["flagged"] == "True"} <= {"en-2"}


def test_the_sxs_table_has_every_language(report):
    sxs = read_csv(report["sxs"])
    assert {r["lang"] for r in sxs} == {"en", "zh", "ar", "all"} and len(sxs) == 8


def test_one_session_has_too_few_points_for_some_correlations(study, tmp_path):
    # One session has too few points for some correlations.
    paths = study_report.write_report([study[0]], str(tmp_path / "one"), resamples=0)
    rows = read_csv(paths["correlations"])
    # en, zh and ar: three evaluations, enough over all languages only.
    assert all(r["n_points"] == "6" and r["delta_cider_xm3600"] != ""
               for r in rows if r["languages"] == "all")
    core = [r for r in rows if r["languages"] == "core"]
    assert all(r["n_points"] == "4" and r["delta_cider_xm3600"] == "" for r in core)
    ext = [r for r in rows if r["languages"] == "ext"]
    assert all(r["delta_cider_xm3600"] == "" for r in ext)


def test_counts_say_what_was_rated(make_session, tmp_path):
    # Three languages, two of them rated: two evaluations, not three; no Table 6 from them;
    # the "all" row and bar say which languages they average.
    session = make_session(langs=("en", "zh", "ar"))
    simulate.simulate(session, raters={"en-1", "en-2", "en-3", "zh-1", "zh-2", "zh-3"}, seed=1)
    paths = study_report.write_report([session], str(tmp_path / "r"), resamples=0)
    markdown = open(paths["markdown"], encoding="utf-8").read()
    assert "2 side-by-side evaluation(s) with ratings (1 without: test vs base ar)" in markdown
    assert "No Table 6: a correlation needs at least 3 evaluations" in markdown
    assert "correlations" not in paths
    assert not os.path.exists(tmp_path / "r" / "correlations.csv")
    assert "**mean of the 2 rated language(s) of 3 (en, zh)**" in markdown
    (all_row,) = [r for r in read_csv(paths["sxs"]) if r["lang"] == "all"]
    assert all_row["averaged"] == "en zh"
    deltas = [float(r["delta_sxs"]) for r in read_csv(paths["sxs"]) if r["lang"] in ("en", "zh")]
    assert float(all_row["delta_sxs"]) == pytest.approx(sum(deltas) / 2, abs=1e-9)
    evaluations, _ = side_by_side.read(paths["side_by_side"])
    assert [e.delta_sxs is None for e in evaluations] == [False, False, True]


def test_quality_as_the_papers_table2(make_session, tmp_path):
    session = make_session(type="quality", systems=(), references=True, langs=("en",),
                           gold_share=0.0)
    simulate.simulate(session, noise=1.2, seed=5)
    ratings = rating_stats.load_ratings(session)
    # Two captions with a known mix, overwritten in the database by hand.
    tests = [i for i in session.items.values() if not i.is_gold]
    mixes = {tests[0].id: ["Good", "Not-Enough-Info", "Bad"], tests[1].id: ["Not-Enough-Info"] * 3}
    conn = sqlite3.connect(session.db_path)
    for item_id, labels in mixes.items():
        rows = conn.execute("SELECT id FROM ratings WHERE item = ? ORDER BY id",
                            (item_id,)).fetchall()
        for (row_id,), label in zip(rows, labels, strict=True):
            conn.execute("UPDATE ratings SET answer = ? WHERE id = ?",
                         (json.dumps({"quality": label}), row_id))
    conn.commit()
    conn.close()
    ratings = rating_stats.load_ratings(session)
    # Direct computation: the median of each caption's ratings, Not-Enough-Info left out,
    # the lower middle one of an even count.
    order = {"Excellent": 4, "Good": 3, "Medium": 2, "Bad": 1}
    medians = []
    by_item = {}
    for r in ratings:
        by_item.setdefault(r.item.id, []).append(r.answer["quality"])
    for labels in by_item.values():
        values = sorted(order[x] for x in labels if x in order)
        if values:
            medians.append(values[(len(values) - 1) // 2])
    assert rating_stats.quality_level(mixes[tests[0].id]) == "Bad"
    assert rating_stats.quality_level(["Good", "Excellent", "Medium"]) == "Good"
    paths = study_report.write_report([session], str(tmp_path / "q"), resamples=0)
    (row,) = read_csv(paths["quality_table2"])
    assert int(row["captions"]) == len(medians) == len(tests) - 1 and row["nei"] == "1"
    assert float(row["good_plus"]) == pytest.approx(100 * np.mean([m >= 3 for m in medians]))
    assert float(row["med_plus"]) == pytest.approx(100 * np.mean([m >= 2 for m in medians]))
    assert float(row["bad"]) == pytest.approx(100 * np.mean([m == 1 for m in medians]))
    markdown = open(paths["markdown"], encoding="utf-8").read()
    assert "Quality as the paper's Table 2" in markdown
    assert "Each label's share of all ratings" in markdown  # beside the per-rating shares
    (shares,) = read_csv(paths["quality"])
    assert float(shares["Not-Enough-Info"]) == pytest.approx(100 * 4 / len(ratings), abs=0.05)


@pytest.mark.parametrize("cell", ["1_0", " 0.2"])
def test_a_paper_correlation_that_is_no_plain_number_is_refused(tmp_path, cell):
    from errors import InputError
    paper = tmp_path / "correlations.csv"
    paper.write_text("coefficient,languages,delta_cider_xm600,delta_cider_xm3600,"
                     f"delta_cider_coco_dev\npearson,all,0.5,{cell},0.1\n")
    with pytest.raises(InputError, match=rf"correlations.csv:2: column delta_cider_xm3600: not "
                                         rf"a finite number: '{cell}'$"):
        study_report.read_paper_correlations(tmp_path)
