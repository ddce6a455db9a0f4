"""Tests of tools/release_counts.py: counts of an XM3600 copy against Table 1."""

import csv
import json

import pytest

import errors
from data import languages
from data.releases import xm3600
from tools import release_counts as counts


def _write_copy(folder, drop_last_zh=False):
    folder.mkdir()
    rows = [
        {"image/key": "k1", "image/locale": "en",
         "en": {"caption": ["a red car", "a car on a road today"]},
         "zh": {"caption": ["一辆红色的汽车", "路上的车"]}},
        {"image/key": "k2", "image/locale": "zh",
         "en": {"caption": ["two dogs"]},
         "zh": {"caption": ["两只狗"] if not drop_last_zh else []}},
    ]
    (folder / "captions.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return folder


def _write_reference(folder, rows):
    folder.mkdir()
    with open(folder / "caption_stats.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["lang", "num_captions", "images_with_1", "images_with_2",
                         "images_with_3plus", "avg_words", "avg_chars"])
        for lang in languages.XM3600_LANGS:
            writer.writerow(rows.get(lang, [lang, 0, 0, 0, 0, 0.0, 0.0]))
    return folder


def test_statistics_count_the_captions_whitespace_words_characters(tmp_path):
    stats = counts.caption_stats(xm3600.read_captions(
        str(_write_copy(tmp_path / "copy") / "captions.jsonl")))
    assert stats["en"] == counts.LangStats(2, 3, (3 + 6 + 2) / 3, (9 + 21 + 8) / 3)
    # Unspaced Chinese: one whitespace word per caption, as in Table 1.
    assert stats["zh"] == counts.LangStats(2, 3, 1.0, (7 + 4 + 3) / 3)


def _reference(tmp_path):
    reference = {"en": ["en", 3, 1, 1, 0, 3.7, 12.7], "zh": ["zh", 3, 1, 1, 0, 1.0, 4.7]}
    return _write_reference(tmp_path / "ref", reference)


def test_a_matching_copy_passes(tmp_path, capsys):
    ref_dir = _reference(tmp_path)
    copy = _write_copy(tmp_path / "copy")
    args = ["xm3600", "--data_dir", str(copy), "--reference_dir", str(ref_dir)]
    # Every other language is absent from both the copy and the reference.
    assert counts.main(args) == 1
    out = capsys.readouterr().out
    assert out.count("DIFFERS") == 34 and "\nen " in out and "ok" in out
    # A copy that is not the full release says that its differences are expected.
    assert "Note: the release has 3600 images and this copy 2: a partial copy, or the demo" in out


def test_an_incomplete_copy_is_flagged(tmp_path, capsys):
    ref_dir = _reference(tmp_path)
    incomplete = _write_copy(tmp_path / "incomplete", drop_last_zh=True)
    counts.main(["xm3600", "--data_dir", str(incomplete), "--reference_dir", str(ref_dir)])
    zh_line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("zh "))
    assert "captions 2 != 3" in zh_line and "images 1 != 2" in zh_line


def test_paper_table_is_read_completely():
    paper = counts.read_paper_stats(counts.DEFAULT_REFERENCE_DIR)
    assert set(paper) == set(languages.XM3600_LANGS)
    assert sum(s.captions for s in paper.values()) == 261_375
    assert all(s.images == 3600 for s in paper.values())


def test_missing_files_are_clear_errors(tmp_path, capsys):
    with pytest.raises(errors.Exit) as exit_:
        counts.main(["xm3600", "--data_dir", str(tmp_path)])
    assert exit_.value.code == 2
    assert "captions.jsonl" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match="--reference_dir"):
        counts.read_paper_stats(str(tmp_path))
