"""Tests of evaluation.report: averages, result files, the paper's baselines, bad input."""

import contextlib
import csv
import json

import numpy as np
import pytest
from PIL import Image

import errors
from data import languages
from evaluation import report
from formats import per_image, scores
from tools import table8


def _scores(langs=languages.XM3600_LANGS, offset=0.0):
    return {lang: round(0.1 + 0.01 * i + offset, 6) for i, lang in enumerate(langs)}


def _write_paper(folder):
    """A cider_per_language.csv in the paper's layout, values known to the test."""
    folder.mkdir(parents=True, exist_ok=True)
    values = {}
    with open(folder / "cider_per_language.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["model", "lang", "cider_xm3600", "cider_coco_dev"])
        for m, model in enumerate(report.BASELINES):
            for i, lang in enumerate(languages.TRAIN_35L_LANGS):
                values[model, lang] = (0.1 * (m + 1) + 0.001 * i, 0.5 + 0.001 * i)
                writer.writerow([model, lang, *values[model, lang]])
    return values


def _table_rows(text):
    """{first cell: [cells]} of the Markdown table rows in text."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| ---"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows.setdefault(cells[0], cells[1:])
    return rows


def test_averages_of_every_language():
    scores = _scores()
    got = report.averages(scores)
    no_quz = [v for lang, v in scores.items() if lang != "quz"]
    assert got["avg_35"] == pytest.approx(sum(no_quz) / 35)
    assert got["avg_36"] == pytest.approx(sum(scores.values()) / 36)
    assert got["missing_35"] == () and got["missing_36"] == ()


def test_the_36_language_average_needs_quz():
    without_quz = report.averages(_scores(languages.TRAIN_35L_LANGS))
    assert without_quz["avg_36"] is None and without_quz["missing_36"] == ("quz",)
    assert without_quz["avg_35"] is not None


def test_averages_of_a_few_languages_are_none_naming_the_missing():
    few = report.averages({"en": 0.5, "de": 0.2})
    assert few["avg_35"] is None and len(few["missing_35"]) == 33
    assert "en" not in few["missing_36"] and "quz" in few["missing_36"]


def test_write_report_files(tmp_path):
    paper = _write_paper(tmp_path / "paper")
    scores = _scores()
    counts = {lang: 3600 - i for i, lang in enumerate(scores)}
    coco = _scores(languages.TRAIN_35L_LANGS, offset=0.5)
    paths = report.write_report(tmp_path / "out", scores, counts, coco_dev_scores=coco,
                                name="mine", step=1200, config="bb.py:smoke",
                                paper_dir=tmp_path / "paper")

    summary = json.loads((tmp_path / "out" / "scores.json").read_text())
    assert summary["metric"] == "cider-d" and summary["step"] == 1200
    assert summary["config"] == "bb.py:smoke"
    assert summary["scores"] == scores and summary["num_images"] == counts
    assert summary["average"] == pytest.approx(sum(scores.values()) / 36)

    with open(paths["csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["lang"] for r in rows] == list(languages.XM3600_LANGS)
    assert float(rows[0]["cider_xm3600"]) == scores["ar"]
    assert float(rows[0]["cider_coco_dev"]) == coco["ar"]
    assert rows[languages.XM3600_LANGS.index("quz")]["cider_coco_dev"] == ""

    text = paths["table"].read_text()
    xm3600, coco_section = text.split("## COCO-dev")
    table = _table_rows(xm3600)
    assert table["lang"] == ["BB+CC", "BB", "Bg", "Lg", "mine", "images"]
    en = [f"{paper[m, 'en'][0]:.3f}" for m in report.BASELINES]
    assert table["en"] == en + [f"{scores['en']:.3f}", str(counts["en"])]
    assert table["quz"][:4] == ["–"] * 4
    avg35 = table["**average, 35 languages (no quz)**"]
    bb_avg = sum(paper["BB", lang][0] for lang in languages.TRAIN_35L_LANGS) / 35
    assert avg35[1] == f"{bb_avg:.3f}"
    assert avg35[4] == f"{report.averages(scores)['avg_35']:.3f}"
    assert table["**average, 36 languages**"][:5] == ["–"] * 4 + [
        f"{sum(scores.values()) / 36:.3f}"]
    coco_table = _table_rows(coco_section)
    assert coco_table["de"][0] == f"{paper['BB+CC', 'de'][1]:.3f}"
    assert coco_table["de"][4] == f"{coco['de']:.3f}"
    assert "**average, 36 languages**" not in coco_table

    with Image.open(paths["bars"]) as image:
        assert image.format == "PNG" and image.size[0] > 800


def test_without_the_papers_file_the_report_says_so(tmp_path):
    paths = report.write_report(tmp_path / "out", {"en": 0.4, "de": 0.2},
                                {"en": 3600, "de": 3600}, paper_dir=tmp_path / "absent")
    text = paths["table"].read_text()
    assert "cider_per_language.csv not found" in text
    assert _table_rows(text)["lang"] == ["this model", "images"]
    assert _table_rows(text)["en"] == ["0.400", "3600"]
    assert "no 35-language average; only 2 language(s) scored" in text
    assert paths["bars"].is_file()


def test_paper_dir_argument(tmp_path):
    _write_paper(tmp_path / "elsewhere")
    assert report.paper_reference_dir(tmp_path / "x") == tmp_path / "x"
    paths = report.write_report(tmp_path / "out", {"en": 0.4}, {"en": 10},
                                paper_dir=tmp_path / "elsewhere")
    assert _table_rows(paths["table"].read_text())["en"][0] == "0.106"


def test_default_paper_dir_holds_the_papers_numbers():
    paper = report.read_paper_scores(report.paper_reference_dir() / "cider_per_language.csv")
    assert paper["xm3600"]["BB+CC"]["en"] == 0.584
    assert set(paper["xm3600"]) == set(report.BASELINES)
    assert all(len(by_lang) == 35 for by_lang in paper["xm3600"].values())


@pytest.mark.parametrize("scores, counts, message", [
    ({"xx": 0.1}, {"xx": 1}, "unknown language in scores 'xx'"),
    ({"en": float("nan")}, {"en": 1}, "scores['en']: expected a finite number"),
    ({"en": "0.3"}, {"en": 1}, "scores['en']: expected a finite number"),
    ({}, {}, "expected a non-empty"),
    ({"en": 0.1, "de": 0.2}, {"en": 1, "fr": 2},
     "without a count: de; without a score: fr"),
    ({"en": 0.1}, {"en": -1}, "num_images['en']: expected a count"),
])
def test_bad_input_is_named(tmp_path, scores, counts, message):
    with pytest.raises(ValueError) as info:
        report.write_report(tmp_path, scores, counts, paper_dir=tmp_path)
    assert message in str(info.value)


def test_malformed_paper_cell_names_file_line_column(tmp_path):
    (tmp_path / "cider_per_language.csv").write_text(
        "model,lang,cider_xm3600,cider_coco_dev\nBB,en,0.3,0.8\nBB,de,high,0.8\n")
    with pytest.raises(ValueError, match=r"cider_per_language.csv:3: column cider_xm3600"):
        report.write_report(tmp_path / "out", {"en": 0.1}, {"en": 1}, paper_dir=tmp_path)


def test_paper_file_without_a_column_is_refused(tmp_path):
    (tmp_path / "cider_per_language.csv").write_text("model,lang,cider\n")
    with pytest.raises(ValueError, match="missing column"):
        report.read_paper_scores(tmp_path / "cider_per_language.csv")


def test_paper_file_repeating_a_row_names_its_first_line(tmp_path):
    (tmp_path / "cider_per_language.csv").write_text(
        "model,lang,cider_xm3600,cider_coco_dev\nBB,en,0.3,0.8\nBB,de,0.2,0.8\nBB,en,0.4,0.8\n")
    with pytest.raises(ValueError, match=r"cider_per_language.csv:4: model 'BB' in 'en' again "
                                         r"\(first at line 2\)"):
        report.read_paper_scores(tmp_path / "cider_per_language.csv")


@pytest.mark.parametrize("cell", ["1_0", " 0.2", "0.2 ", "0x1p-3", "1e999"])
def test_a_paper_cell_that_is_no_plain_number_is_refused(tmp_path, cell):
    _write_paper(tmp_path)
    paper = tmp_path / "cider_per_language.csv"
    paper.write_text(paper.read_text().replace("BB,ar,0.2,", f"BB,ar,{cell},"))
    row = 2 + len(languages.TRAIN_35L_LANGS)
    with pytest.raises(errors.InputError) as info:
        report.read_paper_scores(paper)
    assert str(info.value) == f"{paper}:{row}: column cider_xm3600: not a finite number: {cell!r}"


@pytest.mark.parametrize("left, kept", [(("old", "tmp"), 0.5), (("old",), 0.3), (("tmp",), None)])
@pytest.mark.parametrize("tool", ["report", "evaluate"])
def test_an_interrupted_replacement_is_finished_by_the_next_run(tmp_path, capsys, left, kept, tool):
    """A run killed between moving the old results aside and renaming the new ones in (or
    while writing the new ones) leaves hidden folders; the next report or evaluation (its
    check before the work) renames the whole one in and deletes the others."""
    from evaluation import results_folder

    for kind in left:
        report.write_report(tmp_path / f".eval_step8.{kind}abcde.{kind}",
                            {"en": {"old": 0.3, "tmp": 0.5}[kind]}, {"en": 5}, paper_dir=tmp_path)
    (tmp_path / ".eval_step8.other.tmp").mkdir()  # Not one of files.replacing_folder's.
    out = tmp_path / "eval_step8"
    if tool == "report":
        run = lambda: table8.main([str(out), "--paper-dir", str(tmp_path)])  # noqa: E731
    else:
        run = lambda: results_folder.check_room(out, {}, "--out", tmp_path)  # noqa: E731
    if kept is None:  # The new folder was not whole yet: no folder to restore.
        with contextlib.suppress(errors.Error):
            run()
        assert not out.exists() and capsys.readouterr().err == ""
    else:
        run()
        assert capsys.readouterr().err == f"{out}: an interrupted replacement finished: " + (
            "the new folder, written whole, renamed in\n" if "tmp" in left else
            "the previous folder restored\n")
        assert scores.read(out / "scores.json")["scores"] == {"en": kept}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [
        ".eval_step8.other.tmp"]


def _read_with(reader, folder):
    """{lang: {key: score}} of a results folder as a reader of results folders reads it."""
    from tools.analysis import compare
    from tools.humaneval import results
    if reader == "compare":
        return compare.read_per_image(folder)
    return results.read_results(folder, ["en"]).per_image


@pytest.mark.parametrize("reader", ["compare", "humaneval create"])
def test_every_reader_finishes_an_interrupted_replacement(tmp_path, capsys, reader):
    from tests.tools.humaneval import helpers
    release = tmp_path / "release"
    release.mkdir()
    (release / "captions.jsonl").write_text("".join(
        json.dumps({"image/key": f"k{i}", "image/locale": "en",
                    "en": {"caption": [f"a dog {i}"]}}) + "\n" for i in range(3)))
    for kind, seed in (("old", 1), ("tmp", 2)):
        helpers.write_results(str(tmp_path / f".eval_step8.{kind}abcde.{kind}"), str(release),
                              ["en"], good=0.5, seed=seed, coco_dev=False)
    new = per_image.read(tmp_path / ".eval_step8.tmpabcde.tmp" / "per_image.jsonl")
    out = tmp_path / "eval_step8"
    assert _read_with(reader, str(out)) == new
    assert capsys.readouterr().err == (f"{out}: an interrupted replacement finished: the new "
                                       f"folder, written whole, renamed in\n")


@pytest.mark.parametrize("reader", ["compare", "humaneval create"])
def test_every_reader_says_a_fifo_is_not_a_results_folder(tmp_path, reader):
    import os
    fifo = tmp_path / "results"
    os.mkfifo(fifo)
    with pytest.raises(errors.InputError, match=r"results folder .*results is a FIFO \(named "
                                                r"pipe\), not a folder$"):
        _read_with(reader, str(fifo))


def test_numpy_numbers_are_accepted(tmp_path):
    paths = report.write_report(
        tmp_path / "out", {"en": np.float32(0.5)}, {"en": np.int64(3)}, paper_dir=tmp_path)
    summary = json.loads(paths["json"].read_text())
    assert summary["scores"] == {"en": 0.5} and summary["num_images"] == {"en": 3}
    assert scores.read(paths["json"]) == summary


def test_an_evaluators_own_report(tmp_path):
    coco = _scores(languages.TRAIN_35L_LANGS)
    paths = report.write_metric_report(
        tmp_path, "coco_dev", "cider-d", "CIDEr-D on COCO-dev", coco,
        {lang: 5000 for lang in coco}, name="mine", step=3, with_quz=False,
        extra={"workdir": "/runs/x"})
    assert (paths["json"].name, paths["table"].name) == ("scores_coco_dev.json",
                                                         "table_coco_dev.md")
    summary = scores.read(paths["json"])
    assert summary["scores"] == coco and summary["workdir"] == "/runs/x" and summary["step"] == 3
    text = paths["table"].read_text()
    assert text.startswith("# CIDEr-D on COCO-dev: mine, checkpoint step 3")
    table = _table_rows(text)
    assert table["lang"] == ["mine", "images"] and table["de"] == [f"{coco['de']:.3f}", "5000"]
    avg_35 = report.averages(coco)["avg_35"]
    assert table["**average, 35 languages (no quz)**"][0] == f"{avg_35:.3f}"
    assert "36 languages" not in text
    with pytest.raises(ValueError, match="outputs name"):
        report.write_metric_report(tmp_path, "", "cider-d", "x", coco, {})


@pytest.mark.parametrize("decoding, said", [
    ({"method": "greedy", "beam_size": 4, "alpha": 0.6}, "Captions by greedy decoding."),
    ({"method": "beam", "beam_size": 2, "alpha": 0.6},
     "Captions by beam search (2 beams, length penalty alpha 0.6)."),
])
def test_the_table_says_which_decoding_made_the_captions(tmp_path, decoding, said):
    paths = report.write_report(tmp_path / "x", {"en": 0.4}, {"en": 5}, step=7,
                                paper_dir=tmp_path, extra={"decoding": decoding})
    assert said in paths["table"].read_text()
    other = report.write_metric_report(tmp_path / "y", "length", "chars", "Length", {"en": 3.0},
                                       {"en": 5}, extra={"decoding": decoding})
    assert said in other["table"].read_text()
    # Redrawn from scores.json, the table says it again.
    paths["table"].unlink()
    table8.main([str(tmp_path / "x"), "--paper-dir", str(tmp_path)])
    assert said in paths["table"].read_text()
