"""python -m tools.table8: a report redrawn from scores.json, any captioner's predictions
scored into a results folder, and their bad input."""

import json

import pytest

import errors
from data import languages
from data.releases import xm3600 as xm3600_release
from evaluation import cider, report
from formats import per_image, predictions, scores
from tests import cli
from tests.evaluation.test_report import _table_rows, _write_paper
from tools import table8


def test_a_paper_table_with_a_nan_cell_is_refused_before_anything_is_written(tmp_path, capsys):
    report.write_report(tmp_path / "run", {"en": 0.4}, {"en": 5}, paper_dir=tmp_path / "none")
    before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir()}
    _write_paper(tmp_path / "paper")
    paper = tmp_path / "paper" / "cider_per_language.csv"
    paper.write_text(paper.read_text().replace("BB,ar,0.2,", "BB,ar,nan,"))
    lines = cli.error_lines(capsys, lambda argv: errors.run_main(table8.main, argv),
                            [str(tmp_path / "run"), "--paper-dir", str(tmp_path / "paper")])
    row = 2 + len(languages.TRAIN_35L_LANGS)
    assert lines == [f"error: {paper}:{row}: column cider_xm3600: not a finite number: 'nan'"]
    assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir()} == before


def test_command_line_redraws_from_scores_json(tmp_path, capsys):
    report.write_report(tmp_path / "run7", {"en": 0.4}, {"en": 5}, step=7,
                        paper_dir=tmp_path / "none")
    (tmp_path / "run7" / "table.md").unlink()
    table8.main([str(tmp_path / "run7"), "--paper-dir", str(tmp_path / "none")])
    text = (tmp_path / "run7" / "table.md").read_text()
    assert "run7" in _table_rows(text)["lang"] and "step 7" in text
    assert "table.md" in capsys.readouterr().out
    lines = cli.error_lines(capsys, lambda argv: errors.run_main(table8.main, argv),
                            [str(tmp_path / "missing")])
    assert lines == [f"error: scores file not found: {tmp_path}/missing/scores.json"]


def _results_list(tmp_path):
    """(references, results list in English) files, as captioning papers' code writes them."""
    from tests.tools.test_cider import PREDS, write_references

    references = write_references(tmp_path / "captions.jsonl")
    results = tmp_path / "results_en.json"  # What captioning papers' code writes.
    results.write_text(json.dumps([{"image_id": f"images/{p['image/key']}.jpg",
                                    "caption": p["caption"]}
                                   for p in PREDS if p["lang"] == "en"]))
    return references, results


def test_any_captioners_results_list_gets_a_results_folder_with_table8(tmp_path, capsys):
    from tests.tools.test_cider import PREDS

    references, results = _results_list(tmp_path)
    out = tmp_path / "mine"
    assert table8.main([str(out), "--predictions", str(results), "--references", references,
                        "--langs", "en", "--paper-dir", str(tmp_path)]) == 0
    assert "table.md" in capsys.readouterr().out
    summary = scores.read(out / "scores.json")
    expected = cider.score_languages(
        xm3600_release.read_references(references),
        {"en": {p["image/key"]: p["caption"] for p in PREDS if p["lang"] == "en"}})["en"]
    assert summary["scores"] == {"en": expected.score} and summary["num_images"] == {"en": 3}
    assert per_image.read(out / "per_image.jsonl") == {
        "en": dict(zip(expected.keys, expected.per_image.tolist(), strict=True))}
    assert predictions.read_language(out / "predictions_en.jsonl", "en") == {
        p["image/key"]: p["caption"] for p in PREDS if p["lang"] == "en"}
    assert "| en |" in (out / "table.md").read_text()


def test_a_folder_of_other_files_is_not_replaced_by_a_report(tmp_path, capsys):
    references, results = _results_list(tmp_path)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    lines = cli.error_lines(capsys, lambda argv: errors.run_main(table8.main, argv), [
        str(tmp_path / "other"), "--predictions", str(results), "--references", references,
        "--langs", "en"])
    assert len(lines) == 1 and "holds other files and no scores.json" in lines[0]
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"


def test_a_report_of_some_images_only_names_them_with_a_command_that_scores_them(tmp_path,
                                                                                capsys):
    from tests.tools.test_cider import PREDS

    references, results = _results_list(tmp_path)
    # Predictions for some images only: the error names the images and a command that exists.
    results.write_text(json.dumps([{"image_id": p["image/key"], "caption": p["caption"]}
                                   for p in PREDS if p["lang"] == "en"][:1]))
    lines = cli.error_lines(capsys, lambda argv: errors.run_main(table8.main, argv), [
        str(tmp_path / "partial"), "--predictions", str(results), "--references", references,
        "--langs", "en"])
    assert lines == [f"error: {results}: 2 of 3 images with 'en' references have no prediction "
                     f"(first: 'img1', 'img2'); a report needs one for every image (python -m "
                     f"tools.cider --references {references} --predictions {results} "
                     f"--langs en --allow-missing scores only the images that have one)"]
    assert not (tmp_path / "partial").exists()


def test_scoring_into_a_full_disk_prints_the_scores_with_one_error_line(tmp_path, capsys):
    from tests.evaluation import full_disk
    from tests.tools.test_cider import PREDS, write_references

    references = write_references(tmp_path / "captions.jsonl")
    results = tmp_path / "results_en.json"
    results.write_text(json.dumps([{"image_id": p["image/key"], "caption": p["caption"]}
                                   for p in PREDS if p["lang"] == "en"]))
    expected = cider.score_languages(
        xm3600_release.read_references(references),
        {"en": {p["image/key"]: p["caption"] for p in PREDS if p["lang"] == "en"}})["en"]
    with full_disk.full_disk(tmp_path / "disk") as disk:
        with pytest.raises(SystemExit) as exit_:
            errors.run_main(table8.main, [str(disk / "mine"), "--predictions", str(results),
                                          "--references", references, "--langs", "en"])
        assert full_disk.listing(disk) == {}  # No half folder.
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"en\tCIDEr-D {expected.score:.6f}\t3 images"]
    assert err.count("\n") == 1 and "No space left on device" in err
    assert "the scores are printed above" in err
