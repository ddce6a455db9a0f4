"""Tests of data/releases/coco35l.py on fixture files written in the release layout."""

import bz2
import gzip
import json
import logging

import pytest

from data.jsonl import FormatError
from data.releases import coco35l


def _karpathy_image(cocoid, split, captions):
    folder = "train2014" if split == "train" else "val2014"
    return {"filepath": folder, "filename": f"COCO_{folder}_{cocoid:012d}.jpg", "cocoid": cocoid,
            "split": split, "imgid": cocoid, "sentids": list(range(len(captions))),
            "sentences": [{"tokens": c.split(), "raw": c.capitalize() + ".", "imgid": cocoid,
                           "sentid": i} for i, c in enumerate(captions)]}


def _mt(cocoid, n, lang, text):
    return json.dumps({"image_id": f"{cocoid}_{n}", "src_lang": "en", "trg_lang": lang,
                       "caption_tokenized": "x", "translation_tokenized": text,
                       "backtranslation_tokenized": "x"}, ensure_ascii=False)


@pytest.fixture
def release(tmp_path):
    """A manual dir with 3 train/restval images, 1 val image, 1 test image."""
    images = [_karpathy_image(11, "train", ["a dog", "a brown dog"]),
              _karpathy_image(12, "restval", ["a cat"]),
              _karpathy_image(13, "train", ["a bird"]),
              _karpathy_image(21, "val", ["a car"]),
              _karpathy_image(31, "test", ["a bus"])]
    (tmp_path / "dataset_coco.json").write_text(json.dumps({"images": images, "dataset": "coco"}))
    for folder in ("train2014", "val2014"):
        (tmp_path / folder).mkdir()
    for image in images:
        if image["cocoid"] != 13:  # Image 13 is listed but its file is missing.
            (tmp_path / image["filepath"] / image["filename"]).write_bytes(b"jpeg")
    train = [_mt(11, 1, "de", "ein brauner Hund"), _mt(11, 0, "de", "ein Hund"),
             _mt(11, 0, "hi", "एक कुत्ता"), _mt(12, 0, "de", "eine Katze"),
             _mt(13, 0, "de", "ein Vogel"), _mt(99, 0, "de", "unbekannt"),
             _mt(21, 0, "de", "ein Auto (val image in the train file)")]
    with bz2.open(tmp_path / "coco_mt_train.jsonl.bz2", "wt", encoding="utf-8") as f:
        f.write("\n".join(train) + "\n")
    with gzip.open(tmp_path / "coco_mt_dev.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write(_mt(21, 0, "de", "ein Auto") + "\n")
    return tmp_path


def test_train_split_groups_captions_in_order(release):
    examples, _ = coco35l.read_split(str(release), "train", ["de", "hi", "en"])
    de = {e.cocoid: e.captions for e in examples["de"]}
    assert de == {11: ("ein Hund", "ein brauner Hund"), 12: ("eine Katze",)}
    assert [e.captions for e in examples["hi"]] == [("एक कुत्ता",)]
    # English from the Karpathy tokens; restval belongs to train.
    assert {e.cocoid: e.captions for e in examples["en"]} == {
        11: ("a dog", "a brown dog"), 12: ("a cat",)}
    assert examples["de"][0].image_path.endswith("train2014/COCO_train2014_000000000011.jpg")


def test_train_split_counts_dropped_records(release):
    _, stats = coco35l.read_split(str(release), "train", ["de", "hi", "en"])
    assert (stats.unknown_image, stats.wrong_split, stats.missing_image_file) == (1, 1, 2)


def test_train_split_warns_once_of_dropped_records(release, caplog):
    with caplog.at_level(logging.WARNING):
        coco35l.read_split(str(release), "train", ["de", "hi", "en"])
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "1 caption records name an image that is not in dataset_coco.json" in \
        warnings[0].getMessage()


def test_dev_split_reads_the_gzip_file_of_val_images(release):
    examples, _ = coco35l.read_split(str(release), "dev", ["de", "en"])
    assert [(e.cocoid, e.captions) for e in examples["de"]] == [(21, ("ein Auto",))]
    assert [(e.cocoid, e.captions) for e in examples["en"]] == [(21, ("a car",))]


def test_an_unknown_language_is_refused(release):
    with pytest.raises(ValueError, match=r"unknown COCO-35L language 'quz'.*known: ar, bn"):
        coco35l.read_split(str(release), "train", ["quz"])


def test_a_malformed_line_is_named_by_file_line(release):
    path = release / "coco_mt_dev.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(_mt(21, 0, "de", "ok") + "\n" + '{"image_id": "21_1", oops\n')
    with pytest.raises(FormatError, match=r"coco_mt_dev.jsonl.gz:2: not valid JSON"):
        coco35l.read_split(str(release), "dev", ["de"])


def test_a_malformed_image_id_is_named_by_file_line(release):
    (release / "coco_mt_dev.jsonl.gz").unlink()
    (release / "coco_mt_dev.jsonl").write_text(_mt(21, 0, "de", "ok").replace("21_0", "21-0"))
    with pytest.raises(FormatError, match=r"coco_mt_dev.jsonl:1: image_id '21-0'"):
        coco35l.read_split(str(release), "dev", ["de"])


def test_a_missing_captions_file_says_where_to_get_it(release):
    (release / "coco_mt_dev.jsonl.gz").unlink()
    with pytest.raises(FileNotFoundError, match=r"coco_mt_dev.jsonl .*crossmodal-3600"):
        coco35l.read_split(str(release), "dev", ["de"])


def test_a_missing_karpathy_split_file_says_where_to_get_it(release):
    (release / "dataset_coco.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"Karpathy split file: expected .*dataset_coco"):
        coco35l.read_split(str(release), "train", ["de"])


def test_missing_image_folders_say_where_they_go(release):
    for folder in ("train2014", "val2014"):
        for f in (release / folder).iterdir():
            f.unlink()
        (release / folder).rmdir()
    with pytest.raises(FileNotFoundError, match=r"train2014.zip"):
        coco35l.read_split(str(release), "train", ["de"])
