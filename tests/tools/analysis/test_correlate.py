"""Tests of tools.analysis.correlate: Table 6, the coefficients, pairwise deletion, errors."""

import csv
import itertools
import json
import math

import numpy as np
import pytest

import paper_tables
from tests.formats.small_files import write_text as _write
from tools.analysis import correlate
from tools.formats import side_by_side

PAPER_DIR = paper_tables.FOLDER
HEADER = "m2,m1,lang,set,delta_sxs,delta_cider_xm600,delta_cider_xm3600,delta_cider_coco_dev\n"
ROWS = [
    "A,B,en,core,-10.0,-0.10,-0.12,0.01",
    "A,C,es,core,-5.0,-0.02,-0.03,0.02",
    "B,C,hi,core,2.0,0.01,0.00,-0.05",
    "A,B,de,ext,-3.0,-0.01,-0.02,0.03",
    "B,C,fr,ext,4.0,0.03,0.02,-0.01",
    "A,C,ja,ext,-1.0,0.00,-0.01,0.00",
]


def test_reproduces_every_value_of_the_papers_table6():
    evaluations, columns = side_by_side.read(PAPER_DIR / "side_by_side.csv")
    result = correlate.table6(evaluations, columns)
    with open(PAPER_DIR / "correlations.csv", newline="") as f:
        expected = list(csv.DictReader(f))
    assert len(expected) == 9
    for row in expected:
        got = result[row["languages"]]
        for column in columns:
            assert got["n"][column] == int(row["n_points"])
            value = got[row["coefficient"]][column]
            assert abs(value - float(row[column])) <= 0.01, (row, column, value)


def _average_ranks(values):
    # 1-based ranks, ties sharing the mean of the positions they occupy.
    order = sorted(values)
    return np.array([np.mean([i + 1 for i, v in enumerate(order) if v == x]) for x in values])


def _tau_b(x, y):
    concordant = discordant = ties_x = ties_y = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        sx, sy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        if sx == 0 and sy == 0:
            continue  # tied in both: counted in neither tau-b denominator factor
        if sx == 0:
            ties_x += 1
        elif sy == 0:
            ties_y += 1
        elif sx == sy:
            concordant += 1
        else:
            discordant += 1
    pairs = concordant + discordant
    return (concordant - discordant) / math.sqrt((pairs + ties_x) * (pairs + ties_y))


def test_coefficients_match_textbook_formulas_with_ties_or_are_undefined():
    x = np.array([3.0, 1.0, 1.0, -2.0, 0.5, 3.0, -1.0, 2.0])
    y = np.array([0.2, 0.1, 0.3, -0.1, 0.1, 0.2, 0.0, 0.1])
    got = correlate.correlations(x, y)
    pearson = np.sum((x - x.mean()) * (y - y.mean())) / math.sqrt(
        np.sum((x - x.mean()) ** 2) * np.sum((y - y.mean()) ** 2))
    rx, ry = _average_ranks(x), _average_ranks(y)
    spearman = np.corrcoef(rx, ry)[0, 1]
    assert got["pearson"] == pytest.approx(pearson, abs=1e-12)
    assert got["spearman"] == pytest.approx(spearman, abs=1e-12)
    assert got["kendall"] == pytest.approx(_tau_b(x, y), abs=1e-12)
    # Undefined correlations are None.
    assert correlate.correlations(np.array([1.0, -1.0]), np.array([2.0, -2.0])) == {
        "pearson": None, "spearman": None, "kendall": None}
    constant = correlate.correlations(np.zeros(6), np.arange(6.0))
    assert constant == {"pearson": None, "spearman": None, "kendall": None}


def test_each_evaluation_counts_twice_flipped(tmp_path):
    evaluations, _ = side_by_side.read(_write(tmp_path, HEADER + "\n".join(ROWS)))
    x, y = correlate.flipped_points(evaluations, "delta_cider_xm3600")
    np.testing.assert_array_equal(x, [-10, -5, 2, -3, 4, -1, 10, 5, -2, 3, -4, 1])
    np.testing.assert_array_equal(y[:6], -y[6:])
    result = correlate.table6(evaluations, ("delta_cider_xm3600",))
    assert result["all"]["n"] == {"delta_cider_xm3600": 12}
    assert result["core"]["n"] == {"delta_cider_xm3600": 6}
    # Flipping one evaluation's orientation (swapping m1 and m2) changes nothing.
    swapped = ROWS[:1] + ["C,A,es,core,5.0,0.02,0.03,-0.02"] + ROWS[2:]
    evaluations2, _ = side_by_side.read(
        _write(tmp_path, HEADER + "\n".join(swapped), "swapped.csv"))
    assert correlate.table6(evaluations2, ("delta_cider_xm3600",)) == result


def test_missing_values_are_dropped_pairwise(tmp_path):
    rows = list(ROWS)
    rows[3] = "A,B,de,ext,-3.0,-0.01,-0.02,NA"
    rows[4] = "B,C,fr,ext,4.0,,0.02,-0.01"
    evaluations, columns = side_by_side.read(_write(tmp_path, HEADER + "\n".join(rows)))
    result = correlate.table6(evaluations, columns)
    assert result["all"]["n"] == {"delta_cider_xm600": 10, "delta_cider_xm3600": 12,
                                  "delta_cider_coco_dev": 10}
    # The coco_dev column equals the correlation computed without row 3 at all.
    without, _ = side_by_side.read(
        _write(tmp_path, HEADER + "\n".join(rows[:3] + rows[4:]), "without.csv"))
    assert result["all"]["kendall"]["delta_cider_coco_dev"] == pytest.approx(
        correlate.table6(without, columns)["all"]["kendall"]["delta_cider_coco_dev"])
    assert "(n=10)" in correlate.format_table(result, columns)


def test_an_empty_subset_gives_none_shown_as_a_dash(tmp_path):
    evaluations, columns = side_by_side.read(_write(tmp_path, HEADER + "\n".join(ROWS[:3])))
    result = correlate.table6(evaluations, columns)
    assert result["ext"]["n"]["delta_cider_xm3600"] == 0
    assert result["ext"]["pearson"]["delta_cider_xm3600"] is None
    assert result["core"]["pearson"]["delta_cider_xm3600"] is not None
    assert "–" in correlate.format_table(result, columns)


def test_command_line_json(tmp_path, capsys):
    path = _write(tmp_path, HEADER + "\n".join(ROWS))
    correlate.main(["--side-by-side", str(path), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"all", "ext", "core"}
    assert set(result["all"]) == {"pearson", "spearman", "kendall", "n"}
    assert set(result["core"]["kendall"]) == {
        "delta_cider_xm600", "delta_cider_xm3600", "delta_cider_coco_dev"}


def test_command_line_table(tmp_path, capsys):
    path = _write(tmp_path, HEADER + "\n".join(ROWS))
    correlate.main(["--side-by-side", str(path)])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 + 9
    assert lines[2].split()[:3] == ["pearson", "all", "12"]


def test_command_line_names_a_missing_file(tmp_path):
    with pytest.raises(SystemExit, match="not found"):
        correlate.main(["--side-by-side", str(tmp_path / "nope.csv")])


def test_command_line_names_a_bad_line(tmp_path):
    with pytest.raises(SystemExit, match="sxs.csv:2: column set"):
        correlate.main(["--side-by-side", str(_write(tmp_path, HEADER + "A,B,de,new,1,1,1,1\n"))])
