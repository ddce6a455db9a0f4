"""Tests of tools/analysis/meta.py: THUMB, side-by-side and pairwise meta-evaluation, errors"""

import contextlib
import io
import json
import re

import numpy as np
import pytest

from evaluation import cider
from tests.evaluation import full_disk
from tests.formats.small_files import write_lines as _write_jsonl
from tools.analysis import coefficients, correlate, meta, thumb
from tools.formats import side_by_side
from tools.vifidel import options as vifidel_options

REFS = {
    "1": ["a dog runs on the grass", "a brown dog running in a field", "dog on grass"],
    "2": ["two people ride bikes on a road", "cyclists on a country road", "people cycling"],
    "3": ["a plate of pasta with tomato sauce", "pasta on a white plate", "a bowl of pasta"],
    "4": ["a red bus in the street", "a double decker bus on a city street", "a red bus"],
}
# system -> image -> (caption, P, R)
CAPTIONS = {
    "Human": {"1": ("a brown dog running on grass", 5, 5), "2": ("two cyclists on a road", 5, 4),
              "3": ("pasta with tomato sauce on a plate", 5, 5), "4": ("a red bus on a street",
                                                                   5, 4)},
    "A": {"1": ("a dog on the grass", 5, 3), "2": ("people on a road", 4, 3),
          "3": ("a plate of food", 4, 2), "4": ("a bus in the street", 5, 3)},
    "B": {"1": ("a cat on a sofa", 1, 1), "2": ("a man riding a horse", 2, 2),
          "3": ("a plate of pasta", 5, 3), "4": ("a car on a road", 2, 2)},
}


def _write_files(folder):
    """{"thumb": THUMB ratings of CAPTIONS, "refs": REFS} files in `folder`."""
    ratings = [{"SYS": s, "seg_id": i, "set_id": int(i), "hyp": c, "image": f"{i}.jpg",
                "P": p, "R": r, "Fl": 0, "Inc": 0, "Con": 0, "human_score": (p + r) / 2}
               for s, by in CAPTIONS.items() for i, (c, p, r) in by.items()]
    return {"thumb": _write_jsonl(folder / "thumb.jsonl", ratings),
            "refs": _write_jsonl(folder / "refs.jsonl", [
                {"seg_id": i, "set_id": int(i), "refs": r} for i, r in REFS.items()])}


@pytest.fixture
def files(tmp_path):
    return _write_files(tmp_path)


def _run(argv, capsys):
    status = meta.main(argv)
    captured = capsys.readouterr()
    return status, captured


def _rows(argv, capsys):
    status, captured = _run([*argv, "--json"], capsys)
    assert status == 0, captured.err
    return json.loads(captured.out)["rows"]


@pytest.fixture(scope="module")
def thumb_rows(tmp_path_factory):
    """The rows of meta-evaluation of the THUMB ratings with CIDEr-D computed here, run once
    for the module's tests."""
    files = _write_files(tmp_path_factory.mktemp("thumb"))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = meta.main(["--thumb", files["thumb"], "--references", files["refs"],
                            "--metric", "cider-d", "--without", "Human", "--samples", "30",
                            "--json"])
    assert status == 0
    return json.loads(printed.getvalue())["rows"]


def _metric_and_total():
    """([systems, images] CIDEr-D computed here, [systems, images] THUMB totals)."""
    scorer = cider.CiderScorer([REFS[i] for i in "1234"], "en")
    metric = np.array([scorer.score([CAPTIONS[s][i][0] for i in "1234"]).per_image
                       for s in CAPTIONS])  # [systems, images]
    total = np.array([[(CAPTIONS[s][i][1] + CAPTIONS[s][i][2]) / 2 for i in "1234"]
                      for s in CAPTIONS])
    return metric, total


def _by_key(rows):
    return {(r["subset"], r["level"], r["target"]): r for r in rows}


def test_thumb_instance_level_with_computed_cider_d(thumb_rows):
    metric, total = _metric_and_total()
    instance = _by_key(thumb_rows)[("all systems", "instance", "total")]
    assert instance["n"] == 12
    assert instance["pearson"] == pytest.approx(np.corrcoef(total.ravel(), metric.ravel())[0, 1])
    assert instance["kendall_c"] == pytest.approx(
        coefficients.coefficients(total.ravel(), metric.ravel())["kendall_c"])
    low, high = instance["ci"]["pearson"]
    assert low <= instance["pearson"] <= high


def test_thumb_system_level_with_computed_cider_d(thumb_rows):
    metric, total = _metric_and_total()
    rows = thumb_rows
    system = _by_key(rows)[("all systems", "system", "total")]
    assert system["n"] == 3 and system["spearman"] == pytest.approx(
        coefficients.coefficients(total.mean(1), metric.mean(1))["spearman"])
    # No interval below ten systems.
    assert all(r["n"] == (3 if r["subset"] == "all systems" else 2) and r["ci"]["pearson"] is None
               for r in rows if r["level"] == "system")


def test_thumb_without_a_system_leaves_it_out(thumb_rows):
    without = _by_key(thumb_rows)[("without Human", "instance", "P")]
    assert without["n"] == 8


def test_thumb_pairwise_accuracy_with_computed_cider_d(thumb_rows):
    metric, total = _metric_and_total()
    instance = _by_key(thumb_rows)[("all systems", "instance", "total")]
    # Pairwise accuracy: pairs of systems on an image rated differently (total).
    h = [(np.sign(total[a, i] - total[b, i]), metric[a, i] - metric[b, i])
         for a, b in ((0, 1), (0, 2), (1, 2)) for i in range(4) if total[a, i] != total[b, i]]
    assert instance["pairs"] == len(h)
    assert instance["accuracy"] == pytest.approx(np.mean([np.sign(d) == s for s, d in h]))


def test_thumb_with_given_scores_of_captions_or_systems(files, tmp_path, capsys):
    scores = [{"system": s, "image/key": i, "score": float(len(c))}
              for s, by in CAPTIONS.items() for i, (c, _, _) in by.items()]
    caption_file = _write_jsonl(tmp_path / "scores.jsonl", scores)
    system_file = tmp_path / "systems.csv"
    system_file.write_text("system,score\nHuman,0.9\nA,0.5\nB,0.1\n")
    rows = _rows(["--thumb", files["thumb"], "--scores", f"length={caption_file}",
                  "--system-scores", f"judge={system_file}", "--samples", "0"], capsys)
    judge = [r for r in rows if r["metric"] == "judge"]
    assert {r["level"] for r in judge} == {"system"} and len(judge) == 3
    assert all(r["spearman"] == pytest.approx(1.0) for r in judge)
    assert {r["metric"] for r in rows} == {"length", "judge"}


def test_side_by_side_is_table6_plus_tau_c_with_intervals(tmp_path, capsys):
    path = tmp_path / "sxs.csv"
    path.write_text("m2,m1,lang,set,delta_sxs,delta_cider_xm3600\n"
                    "A,B,en,core,-10,-0.1\nA,C,es,core,-5,-0.03\nB,C,hi,core,2,0\n"
                    "A,B,de,ext,-3,-0.02\nB,C,fr,ext,4,0.02\nA,C,ja,ext,-1,-0.01\n")
    rows = _rows(["--side-by-side", str(path), "--samples", "40"], capsys)
    evaluations, columns = side_by_side.read(str(path))
    expected = correlate.table6(evaluations, columns)
    for r in rows:
        assert r["pearson"] == pytest.approx(expected[r["subset"]]["pearson"][r["metric"]])
        assert r["kendall_b"] == pytest.approx(expected[r["subset"]]["kendall"][r["metric"]])
        assert r["kendall_c"] is not None and r["n"] == expected[r["subset"]]["n"][r["metric"]]
    assert len(rows) == 3 and rows[0]["ci"]["spearman"] is not None


def test_pairwise_accuracy_with_subsampled_references(files, tmp_path, capsys):
    prefs = [{"image/key": i, "a": CAPTIONS["Human"][i][0], "b": CAPTIONS["B"][i][0],
              "preference": "a"} for i in "1234"] + [
        {"image/key": "1", "a": "x", "b": "y", "preference": "tie"}]
    path = _write_jsonl(tmp_path / "prefs.jsonl", prefs)
    out = tmp_path / "report"
    rows = _rows(["--pairwise", path, "--references", files["refs"], "--metric", "cider-d",
                  "--metric", "cider", "--num-refs", "2", "--draws", "4", "--samples", "20",
                  "--out", str(out)], capsys)
    assert [r["metric"] for r in rows] == ["cider-d", "cider"]
    scorer = cider.CiderScorer([REFS[i] for i in "1234"], "en")
    human = scorer.score([CAPTIONS["Human"][i][0] for i in "1234"]).per_image
    other = scorer.score([CAPTIONS["B"][i][0] for i in "1234"]).per_image
    assert (human != other).all()  # no metric tie with all references
    for r in rows:
        assert r["n"] == 4 and r["draws"] == 4 and 0 <= r["accuracy_min"] <= r["accuracy"] <= 1
    assert {p.name for p in out.iterdir()} == {"meta.md", "meta.csv", "meta.png"}
    assert "1 of 5 pairs are human ties, left out" in (out / "meta.md").read_text()
    full = _rows(["--pairwise", path, "--references", files["refs"], "--metric", "cider-d",
                  "--draws", "2", "--samples", "0"], capsys)
    # All references in every draw: the accuracy is the direct comparison's, every draw.
    assert full[0]["accuracy"] == full[0]["accuracy_min"] == np.mean(human > other) == 0.75


@pytest.mark.parametrize("make, message", [
    (lambda t, f: ["--scores", "len=" + _write_jsonl(t / "s.jsonl", [
        {"system": "Z", "image/key": "1", "score": 1.0}])],
     r"s.jsonl:1: system 'Z' is not in the ratings \(they have Human, A, B\)"),
    (lambda t, f: ["--scores", "len=" + _write_jsonl(t / "s.jsonl", [
        {"system": "A", "image/key": "1", "score": 1.0}])],
     r"s.jsonl: no score for system 'Human' on image '1', rated at .*thumb.jsonl:1"),
    (lambda t, f: ["--scores", "len=" + _write_jsonl(t / "s.jsonl", [
        {"system": "A", "image/key": "9", "score": 1.0}])],
     r"s.jsonl:1: image '9' is not in the ratings"),
    (lambda t, f: ["--system-scores", "j=" + str(
        (t / "s.csv").write_text("system,score\nA,1\n") and t / "s.csv")],
     r"s.csv: no score for the rated system\(s\) Human, B"),
    (lambda t, f: ["--metric", "cider-d"], r"--metric needs --references"),
    (lambda t, f: ["--metric", "cider-d", "--references", _write_jsonl(t / "r.jsonl", [
        {"seg_id": "1", "set_id": 1, "refs": ["x"]}])], r"r.jsonl: no references for image '2'"),
    (lambda t, f: ["--metric", "cider-d", "--references", f["refs"], "--without", "Nobody"],
     r"--without 'Nobody': no such system"),
])
def test_mismatched_inputs_are_one_error_line(files, tmp_path, capsys, make, message):
    status, captured = _run(["--thumb", files["thumb"], *make(tmp_path, files)], capsys)
    lines = captured.err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert re.search(message, lines[0]), lines[0]


def test_a_bad_rating_is_one_error_line(tmp_path, capsys):
    bad = _write_jsonl(tmp_path / "bad.jsonl", [
        {"SYS": "A", "seg_id": "1", "set_id": 1, "hyp": "x", "image": "1.jpg", "P": 7, "R": 3,
         "Fl": 0, "Inc": 0, "Con": 0, "human_score": 5}])
    status, captured = _run(["--thumb", bad, "--system-scores", "x=y"], capsys)
    assert status == 2 and "bad.jsonl:1: field 'P': 7 is outside 1-5" in captured.err


def test_a_bad_preference_is_one_error_line(tmp_path, capsys, files):
    prefs = _write_jsonl(tmp_path / "p.jsonl", [{"image/key": "1", "a": "x", "b": "y",
                                                 "preference": "left"}])
    status, captured = _run(["--pairwise", prefs, "--references", files["refs"], "--metric",
                             "cider"], capsys)
    assert status == 2 and "p.jsonl:1: field 'preference': 'left' is not a, b or tie" in (
        captured.err)


def test_a_missing_ratings_file_is_an_error(tmp_path):
    assert thumb.main([str(tmp_path / "none.jsonl")]) == 2


def test_a_pair_judged_again_is_kept_with_a_note(tmp_path, capsys, files):
    # The same pair again (in either order) is another judgement of it, kept and noted.
    prefs = _write_jsonl(tmp_path / "twice.jsonl", [
        {"image/key": "1", "a": "x", "b": "y", "preference": "a"},
        {"image/key": "2", "a": "x", "b": "y", "preference": "a"},
        {"image/key": "1", "a": "y", "b": "x", "preference": "b"}])
    status, captured = _run(["--pairwise", prefs, "--references", files["refs"], "--metric",
                             "cider", "--samples", "0", "--json"], capsys)
    assert status == 0, captured.err
    out = json.loads(captured.out)
    assert out["rows"][0]["pairs"] == 3 and out["source"].startswith(
        f"{prefs} (1 pair repeats an earlier pair of its image, each kept as a separate "
        f"judgement)")


def test_a_system_score_given_twice_is_one_error_line(tmp_path, capsys, files):
    scores = tmp_path / "systems.csv"
    scores.write_text("system,score\nA,0.5\nB,0.4\nA,0.6\n")
    status, captured = _run(["--thumb", files["thumb"], "--system-scores", f"x={scores}"], capsys)
    assert status == 2 and captured.err.strip().endswith(
        f"systems.csv:4: system 'A' appears twice (first at {scores}:2)")


def test_system_level_rows_say_how_few_systems(files, capsys):
    status, captured = _run(["--thumb", files["thumb"], "--references", files["refs"],
                             "--metric", "cider-d", "--samples", "20"], capsys)
    assert status == 0
    assert ("system level: correlations of 3 per-system means (n = the number of systems); "
            "intervals resample systems and images, none below 10 systems") in captured.out


def test_system_intervals_resample_systems_with_images():
    rng = np.random.default_rng(3)
    human = rng.normal(size=(12, 30)) + np.arange(12)[:, None] / 4  # [systems, images]
    metric = human + rng.normal(size=(12, 30))
    row = meta._system_row("all systems", "total", "m", human, metric, 200, 5, 0.9)
    draws = np.random.default_rng(5)
    values = []
    for _ in range(200):
        systems, images = draws.integers(0, 12, 12), draws.integers(0, 30, 30)
        values.append(np.corrcoef(human[systems][:, images].mean(1),
                                  metric[systems][:, images].mean(1))[0, 1])
    assert row["n"] == 12
    assert row["ci"]["pearson"] == pytest.approx(list(np.percentile(values, [5, 95])))


@pytest.mark.parametrize("argv, message", [
    (["--lang", "xx"], r"^error: --lang: unknown language 'xx'; known: ar, bn, .* en, .* zh$"),
    (["--out", "/proc/x"], r"^error: --out /proc/x: cannot write there"),
    (["--num-refs", "2"], r"^error: --num-refs: for pairs only"),
    (["--seed", "-1"], r"argument --seed: expected an integer >= 0, got -1"),
    (["--samples", "100000000000"], r"argument --samples: expected an integer in 0\.\.100000"),
    (["--confidence", "nan"], r"argument --confidence: expected a number in \(0, 1\), got nan"),
    (["--confidence", "1"], r"argument --confidence: expected a number in \(0, 1\), got 1"),
    (["stray"], r"unrecognized arguments: stray"),
])
def test_a_bad_flag_is_one_error_line_before_any_work(tmp_path, capsys, argv, message):
    # The ratings file does not exist: the flags are checked before it is read.
    try:
        status = meta.main([*argv, "--thumb", str(tmp_path / "none.jsonl")])
    except SystemExit as e:  # argparse's own errors
        status = e.code
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and lines[0].startswith("error: ") and re.search(
        message, lines[0]), lines


def test_a_report_on_a_full_disk_keeps_the_results_leaving_no_file(files, tmp_path, capsys):
    with full_disk.full_disk(tmp_path / "disk") as disk:
        out = disk / "report"
        status = meta.main(["--thumb", files["thumb"], "--references", files["refs"],
                            "--metric", "cider-d", "--samples", "10", "--out", str(out)])
        assert full_disk.listing(out) == {}  # No empty meta.md, nor any other file.
    captured = capsys.readouterr()
    assert status == 2
    assert "cider-d" in captured.out  # The correlations were printed first.
    assert captured.err.strip().splitlines() == [
        f"error: --out {out}: cannot write the report (No space left on device); the results "
        f"are printed above"]


def test_meta_offers_the_vifidel_command_lines_settings():
    from tools.vifidel import __main__ as vifidel_cli

    def options(parser):
        return {s for action in parser._actions for s in action.option_strings}

    own = {"--references", "--predictions", "--langs", "--allow-missing", "--control",
           "--per-image", "--json", "-h", "--help"}
    assert options(vifidel_cli._parser()) - own <= options(meta._parser())
    args = meta._parser().parse_args(["--pairwise", "p", "--metric", "vifidel", "--labels", "l",
                                      "--vectors", "v", "--penalty", "clipped",
                                      "--cost-power", "1", "--stopwords", "none",
                                      "--label-weights", "binary"])
    settings = vifidel_options.settings(args)
    assert (settings.penalty, settings.cost_power, settings.stopwords,
            settings.label_weights) == ("clipped", 1, "none", "binary")
