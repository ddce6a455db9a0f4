"""Tests of tools.analysis.compare: reading, pairing, paired bootstrap, command line."""

import json
import time

import numpy as np
import pytest
from PIL import Image

import errors
from tests.evaluation import full_disk
from tools.analysis import compare


def _write_results(folder, scores):
    """Writes per_image.jsonl for {lang: {key: score}}; returns the folder as a string."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "per_image.jsonl", "w") as f:
        f.writelines(json.dumps({"image/key": key, "lang": lang, "score": score}) + "\n"
                     for lang, by_key in scores.items() for key, score in by_key.items())
    return str(folder)


def _paired(deltas, base=None):
    """align() output for one language from per-image deltas (B - A)."""
    deltas = np.asarray(deltas, dtype=float)
    a = np.zeros_like(deltas) if base is None else np.asarray(base, dtype=float)
    return {"en": ([f"k{i}" for i in range(len(deltas))], a, a + deltas)}


def test_read_per_image_reads_what_was_written(tmp_path):
    scores = {"en": {"a": 0.5, "b": 1.25}, "de": {"a": 0.0}}
    folder = _write_results(tmp_path / "r", scores)
    assert compare.read_per_image(folder) == scores


def test_read_per_image_names_a_missing_file(tmp_path):
    with pytest.raises(compare.ResultsError, match=r"r_a: no per_image.jsonl"):
        compare.read_per_image(tmp_path / "r_a")


def _languages_of_two_runs():
    return ({"en": {"x": 1.0}, "quz": {"x": 1.0}, "ar": {"x": 0.5}},
            {"en": {"x": 2.0}, "de": {"x": 1.0}})


def test_align_pairs_the_shared_languages():
    a, b = _languages_of_two_runs()
    assert list(compare.align(a, b, "runA", "runB")) == ["en"]


def test_left_out_names_the_languages_not_shared():
    a, b = _languages_of_two_runs()
    assert compare.left_out(a, b, "runA", "runB") == (
        "note: comparing the languages both have; left out: ar, quz only in runA; de only in "
        "runB")
    assert compare.left_out(a, a) == ""


def test_align_refuses_runs_without_a_shared_language():
    with pytest.raises(compare.ResultsError, match=r"runA and runB have no language in common "
                                                   r"\(runA: en; runB: de\)"):
        compare.align({"en": {"x": 1.0}}, {"de": {"x": 1.0}}, "runA", "runB")


def test_align_pairs_scores_by_key_in_paper_order_or_names_different_images():
    a = {"en": {f"k{i}": 1.0 for i in range(10)}}
    b = {"en": {f"k{i}": 1.0 for i in range(2, 10)}}
    with pytest.raises(compare.ResultsError) as info:
        compare.align(a, b, "runA", "runB")
    message = str(info.value)
    assert "language 'en'" in message and "(10 vs 8)" in message
    assert "2 only in runA (e.g. 'k0', 'k1')" in message and "0 only in runB" in message
    a = {"zh": {"x": 1.0, "y": 2.0}, "en": {"y": 0.0, "x": 5.0}}
    b = {"en": {"x": 6.0, "y": 1.0}, "zh": {"y": 4.0, "x": 1.5}}
    paired = compare.align(a, b)
    assert list(paired) == ["en", "zh"]
    keys, sa, sb = paired["zh"]
    assert keys == ["x", "y"]
    np.testing.assert_array_equal(sb - sa, [0.5, 2.0])


def test_constant_shift_has_a_point_interval():
    rng = np.random.default_rng(0)
    base = rng.random(500)
    result = compare.compare(_paired(np.full(500, 0.05), base), samples=200)
    row = result["languages"]["en"]
    assert row["delta"] == pytest.approx(0.05)
    assert row["ci"] == pytest.approx([0.05, 0.05])
    assert row["significant"]


def test_interval_matches_the_normal_approximation():
    rng = np.random.default_rng(1)
    deltas = rng.normal(0.01, 0.2, size=3000)
    row = compare.compare(_paired(deltas), samples=4000, seed=3)["languages"]["en"]
    se = deltas.std(ddof=1) / np.sqrt(len(deltas))
    # The percentile bounds of 4000 resamples are off by about 0.04 se (Monte Carlo).
    assert row["ci"][0] == pytest.approx(deltas.mean() - 1.96 * se, abs=0.2 * se)
    assert row["ci"][1] == pytest.approx(deltas.mean() + 1.96 * se, abs=0.2 * se)


def test_pairing_removes_the_per_image_variance():
    rng = np.random.default_rng(2)
    a = rng.gamma(1.0, 0.5, size=2000)  # images differ a lot in difficulty
    b = a + 0.01 + rng.normal(0, 0.02, size=2000)  # B is slightly better on each
    row = compare.compare({"en": ([str(i) for i in range(2000)], a, b)})["languages"]["en"]
    unpaired_width = 2 * 1.96 * np.sqrt((a.var() + b.var()) / 2000)
    assert row["significant"] and row["ci"][0] > 0
    assert row["ci"][1] - row["ci"][0] < 0.1 * unpaired_width


def test_intervals_cover_the_true_delta_about_95_percent_of_the_time():
    rng = np.random.default_rng(4)
    covered = 0
    for seed in range(300):
        deltas = rng.exponential(1.0, size=200) - 1.0  # skewed, true mean 0
        row = compare.compare(_paired(deltas), samples=400, seed=seed)["languages"]["en"]
        covered += row["ci"][0] <= 0 <= row["ci"][1]
    # Binomial(300, 0.95) has sd 0.0126; the percentile bootstrap undercovers a little.
    assert 0.88 <= covered / 300 <= 0.99


def test_average_uses_one_draw_of_images_for_all_languages():
    rng = np.random.default_rng(5)
    keys = [str(i) for i in range(1000)]
    deltas = rng.normal(0.0, 0.3, size=1000)
    zeros = np.zeros(1000)
    same = {"en": (keys, zeros, deltas), "de": (keys, zeros, deltas.copy())}
    result = compare.compare(same, samples=500)
    assert result["joint_images"]
    # Identical languages: the average is perfectly correlated with each of them.
    assert result["average"]["ci"] == pytest.approx(result["languages"]["en"]["ci"])
    assert result["average"]["n"] == 2
    # Different image sets: independent draws, the average's interval narrows by ~sqrt(2).
    other = {"en": (keys, zeros, deltas), "de": (keys[:-1] + ["z"], zeros, deltas.copy())}
    result = compare.compare(other, samples=2000)
    assert not result["joint_images"]
    ratio = np.ptp(result["average"]["ci"]) / np.ptp(result["languages"]["en"]["ci"])
    assert ratio == pytest.approx(1 / np.sqrt(2), rel=0.1)


def test_bootstrap_is_fast_enough_for_xm3600():
    rng = np.random.default_rng(6)
    paired = _paired(rng.normal(0, 0.3, 3600), rng.random(3600))
    start = time.perf_counter()
    compare.compare(paired, samples=1000)
    assert time.perf_counter() - start < 1.0


def _two_results(tmp_path, shift):
    rng = np.random.default_rng(7)
    a, b = {}, {}
    for lang, effect in (("en", shift), ("de", 0.0), ("zh", -shift)):
        base = rng.random(300)
        a[lang] = {f"k{i}": float(v) for i, v in enumerate(base)}
        b[lang] = {f"k{i}": float(v + effect + rng.normal(0, 0.01)) for i, v in enumerate(base)}
    return _write_results(tmp_path / "run_a", a), _write_results(tmp_path / "run_b", b)


def test_command_line_prints_the_table_drawing_the_chart(tmp_path, capsys):
    dir_a, dir_b = _two_results(tmp_path, 0.05)
    compare.main([dir_a, dir_b, "--samples", "200"])
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines()}
    assert rows["en"].endswith("*") and rows["zh"].endswith("*")
    assert "+0.050" in rows["en"] and "-0.050" in rows["zh"]
    assert "avg(3)" in rows
    chart = tmp_path / "run_b" / "compare_run_a.png"
    assert chart.is_file()
    with Image.open(chart) as image:
        assert image.format == "PNG" and image.size[0] > 400


def test_command_line_json(tmp_path, capsys):
    dir_a, dir_b = _two_results(tmp_path, 0.05)
    compare.main([dir_a, dir_b, "--samples", "200", "--json", "--out", str(tmp_path / "o")])
    result = json.loads(capsys.readouterr().out)
    assert set(result["languages"]) == {"en", "de", "zh"}
    assert result["languages"]["en"]["delta"] == pytest.approx(0.05, abs=0.002)
    assert result["languages"]["en"]["significant"]
    assert result["average"]["delta"] == pytest.approx(
        np.mean([r["delta"] for r in result["languages"].values()]))
    assert (tmp_path / "o" / "compare_run_a.png").is_file()


def test_command_line_errors_name_the_folders(tmp_path):
    dir_a, dir_b = _two_results(tmp_path, 0.05)  # en, de, zh
    with pytest.raises(compare.ResultsError, match="nowhere: no per_image.jsonl"):
        compare.main([dir_a, str(tmp_path / "nowhere")])
    other = _write_results(tmp_path / "run_c", {"ar": {"k0": 1.0}})
    with pytest.raises(compare.ResultsError, match="no language in common"):
        compare.main([dir_a, other])


def test_command_line_compares_the_shared_languages(tmp_path, capsys):
    dir_a, dir_b = _two_results(tmp_path, 0.05)  # en, de, zh
    # Folders of different languages compare the shared ones.
    fewer = _write_results(tmp_path / "run_d", {
        lang: by_key for lang, by_key in compare.read_per_image(dir_b).items() if lang != "de"})
    compare.main([dir_a, fewer, "--samples", "50", "--json"])
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert list(result["languages"]) == ["en", "zh"]
    assert result["left_out"] == {"a": ["de"], "b": []}
    assert captured.err.strip() == (f"note: comparing the languages both have; left out: de "
                                    f"only in {dir_a}")


def test_a_chart_on_a_full_disk_keeps_the_results_leaving_no_file(tmp_path, capsys):
    dir_a, dir_b = _two_results(tmp_path, 0.05)
    with full_disk.full_disk(tmp_path / "disk") as disk:
        with pytest.raises(errors.Error) as info:
            compare.main([dir_a, dir_b, "--samples", "20", "--out", str(disk)])
        assert full_disk.listing(disk) == {}  # No empty compare_run_a.png.
    assert "avg(3)" in capsys.readouterr().out  # The table came first.
    assert str(info.value) == (f"--out {disk}: cannot write the report (No space left on "
                               f"device); the results are printed above")


def test_predictions_files_are_scored_with_references_or_refused_naming_the_flag(tmp_path, capsys):
    import shlex

    from tests.formats.test_predictions import every_kind
    from tests.tools.test_cider import PREDS, write_references
    from tools import table8
    from tools.humaneval import results as humaneval_results

    refs = write_references(tmp_path / "captions.jsonl")
    kinds = every_kind(tmp_path, {p["image/key"]: p["caption"] for p in PREDS[:3]})
    worse = tmp_path / "worse.jsonl"
    worse.write_text("".join(json.dumps({"image_id": p["image/key"], "caption": "a thing"})
                             + "\n" for p in PREDS[:3]))
    with pytest.raises(compare.ResultsError) as info:
        compare.main([kinds["results.json"], str(worse), "--langs", "en"])
    assert str(info.value) == (
        f"{kinds['results.json']} is a predictions file, not a results folder: give "
        f"--references with XM3600's captions.jsonl to score it here")
    command = humaneval_results.report_command(kinds["results.json"], refs, ["en"])
    assert table8.main(shlex.split(command)[3:]) == 0
    capsys.readouterr()
    # The folder that command writes and every kind of file compare alike.
    results = set()
    for a in [str(tmp_path / "results_results"), *kinds.values()]:
        compare.main([a, str(worse), "--references", refs, "--langs", "en", "--json",
                      "--samples", "50", "--out", str(tmp_path)])
        results.add(json.dumps(json.loads(capsys.readouterr().out)["languages"]))
    assert len(results) == 1 and json.loads(results.pop())["en"]["delta"] < 0
