"""Tests of the study report (humaneval/study_report.py): Table 6 via analysis/correlate, files."""

import csv
import os

import pytest

from evaluation.analysis import correlate
from formats import side_by_side
from humaneval import simulate, study_report
from tests.humaneval import helpers

CORRELATION_COLUMNS = ("coefficient", "languages", "n_points", "delta_cider_xm600",
                       "delta_cider_xm3600", "delta_cider_coco_dev")  # the paper's layout


@pytest.fixture
def study(make_session, release, results_pair, tmp_path):
    """Two simulated sxs evaluations (three models) and a quality session."""
    third = str(tmp_path / "third")
    helpers.write_results(third, release, ("en", "zh", "ar"), good=0.55, seed=9)
    first = make_session()
    second = make_session(systems=(("third", third), ("test", results_pair[1])), seed=1)
    quality = make_session(type="quality", systems=(), references=True, langs=("en",),
                           gold_share=0.2)
    for n, session in enumerate((first, second, quality)):
        simulate.simulate(session, noise=0.6, seed=n, careless={"en-2": 1.0})
    return first, second, quality


def _read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_report_files_and_table6(study, tmp_path):
    out = str(tmp_path / "report")
    paths = study_report.write_report(list(study), out, resamples=200, seed=0)
    for kind in ("markdown", "side_by_side", "correlations", "sxs", "agreement", "raters",
                 "quality", "sxs_png", "correlation_png"):
        assert os.path.getsize(paths[kind]) > 0, kind
    for kind in ("sxs_png", "correlation_png"):
        with open(paths[kind], "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"

    evaluations, columns = side_by_side.read(paths["side_by_side"])
    assert len(evaluations) == 6  # two pairs x three languages
    expected = correlate.table6(evaluations, columns)
    with open(paths["correlations"], newline="", encoding="utf-8") as f:
        assert tuple(next(csv.reader(f))) == CORRELATION_COLUMNS
    rows = _read_csv(paths["correlations"])
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

    markdown = open(paths["markdown"], encoding="utf-8").read()
    assert "**SIMULATED ratings**" in markdown
    assert "the paper's Table 6" in markdown
    raters = _read_csv(paths["raters"])
    assert {r["rater"] for r in raters if r["flagged"] == "True"} <= {"en-2"}
    sxs = _read_csv(paths["sxs"])
    assert {r["lang"] for r in sxs} == {"en", "zh", "ar", "all"} and len(sxs) == 8


def test_one_session_has_too_few_points_for_correlations(study, tmp_path):
    paths = study_report.write_report([study[0]], str(tmp_path / "one"), resamples=0)
    rows = _read_csv(paths["correlations"])
    core = [r for r in rows if r["languages"] == "core"]
    # en and zh are core: two evaluations, four points on two lines through the origin.
    assert all(r["n_points"] == "4" for r in core)
    ext = [r for r in rows if r["languages"] == "ext"]
    assert all(r["delta_cider_xm3600"] == "" for r in ext)  # one evaluation: undefined
