"""COCO-35L built from miniature release files: every image once, captions per language."""

import json
import logging
import os

import numpy as np
import pytest

from data import build
from data.build import layout
from data.jsonl import FormatError
from tests.data.build import release_files


def _build(manual, data_dir, **kwargs):
    return build.build("coco35l", manual_dir=str(manual), data_dir=str(data_dir),
                       **{"config": "core", "workers": 0, **kwargs})


@pytest.fixture(scope="module")
def core_build(tmp_path_factory):
    """(release folder, build folder, counts) of the core build of the release files."""
    root = tmp_path_factory.mktemp("core_build")
    manual = release_files.coco35l(root / "manual")
    return manual, root / "built", _build(manual, root / "built")


def test_the_build_counts_images_once_captions_per_language(core_build):
    _, _, counts = core_build
    assert counts == {"images/train": 2, "images/dev": 1,
                      **{f"captions/{s}_{l}": 2 if s == "train" else 1
                         for s in ("train", "dev") for l in ("en", "es", "hi", "zh")}}


def test_captions_are_stored_per_language(core_build):
    _, built_dir, _ = core_build
    built = layout.Built(str(built_dir), "coco35l")
    assert built.langs("train") == ["en", "es", "hi", "zh"]
    assert [built.captions("train", "zh")[i] for i in (1, 0)] == [
        (1, 6, ("zh: shape number 6", "zh: another shape 6")),
        (0, 5, ("zh: shape number 5", "zh: another shape 5"))]
    assert [built.captions("dev", "en")[0]] == [(0, 7, ("shape number 7", "another shape 7"))]


def _release_jpegs(manual):
    return [(manual / "train2014" / "COCO_train2014_000000000005.jpg").read_bytes(),
            (manual / "val2014" / "COCO_val2014_000000000006.jpg").read_bytes()]


def test_the_stored_images_are_the_releases_jpegs_in_cocoid_order(core_build):
    manual, built_dir, _ = core_build
    built = layout.Built(str(built_dir), "coco35l")
    # The stored images are the release's JPEG bytes, in cocoid order.
    jpegs = _release_jpegs(manual)
    assert [built.images("train")[i] for i in (0, 1, 0)] == [(5, jpegs[0]), (6, jpegs[1]),
                                                      (5, jpegs[0])]
    assert built.metadata()["max_side"] is None


def test_each_image_is_one_record_whatever_the_languages(core_build):
    manual, built_dir, _ = core_build
    jpegs = _release_jpegs(manual)
    # One record per image whatever the languages: the JPEG plus a few bytes of framing.
    with open(os.path.join(layout.images_dir(str(built_dir), "coco35l"),
                           "dataset_info.json"), encoding="utf-8") as f:
        splits = {s["name"]: s for s in json.load(f)["splits"]}
    assert splits["train"]["shardLengths"] == ["2"]
    assert 0 < int(splits["train"]["numBytes"]) - sum(map(len, jpegs)) <= 2 * 64


def test_tfds_reads_the_build(tmp_path):
    import tensorflow_datasets as tfds

    manual = release_files.coco35l(tmp_path / "manual")
    _build(manual, tmp_path / "built", langs=["hi"])
    images = tfds.builder_from_directory(layout.images_dir(str(tmp_path / "built"), "coco35l"))
    source = images.as_data_source("train", decoders={"image": tfds.decode.SkipDecoding()})
    assert [int(source[i]["key"]) for i in range(len(source))] == [5, 6]
    assert source[1]["image"] == (manual / "val2014" / "COCO_val2014_000000000006.jpg").read_bytes()
    captions = tfds.builder("coco35l/captions", data_dir=str(tmp_path / "built"))
    row = captions.as_data_source("train_hi")[1]
    assert int(row["image_index"]) == 1 and int(row["key"]) == 6
    assert [c.decode() for c in row["captions"]] == ["hi: shape number 6", "hi: another shape 6"]


def test_languages_added_later_leave_the_images_alone(tmp_path):
    manual = release_files.coco35l(tmp_path / "manual")
    _build(manual, tmp_path / "built", langs=["en"])
    folder = layout.images_dir(str(tmp_path / "built"), "coco35l")
    before = {name: os.stat(os.path.join(folder, name)).st_mtime_ns for name in os.listdir(folder)}
    counts = _build(manual, tmp_path / "built", langs=["es", "zh"])
    after = {name: os.stat(os.path.join(folder, name)).st_mtime_ns for name in os.listdir(folder)}
    assert {k: v for k, v in after.items() if ".array_record" in k} == \
        {k: v for k, v in before.items() if ".array_record" in k}
    assert sorted(k for k in counts if k.startswith("captions/train")) == [
        "captions/train_en", "captions/train_es", "captions/train_zh"]
    assert layout.Built(str(tmp_path / "built"), "coco35l").captions("train", "es")[0][2] == (
        "es: shape number 5", "es: another shape 5")


def test_missing_jpegs_stray_lines_are_left_out_with_warnings(tmp_path, caplog):
    manual = release_files.coco35l(tmp_path / "manual")
    (manual / "val2014" / "COCO_val2014_000000000006.jpg").unlink()
    import bz2
    with bz2.open(manual / "coco_mt_train.jsonl.bz2", "at", encoding="utf-8") as f:
        f.write('{"image_id": "7_0", "trg_lang": "es", "translation_tokenized": "dev image"}\n'
                '{"image_id": "99_0", "trg_lang": "es", "translation_tokenized": "unknown"}\n')
    with caplog.at_level(logging.WARNING):
        counts = _build(manual, tmp_path / "built")
    assert counts["images/train"] == 1 and counts["captions/train_es"] == 1
    text = caplog.text
    assert "1 images of dataset_coco.json have no JPEG and are left out" in text
    assert "1 caption lines naming an image that is not in dataset_coco.json" in text
    assert "1 caption lines naming an image of another Karpathy split" in text


def test_a_malformed_image_id_is_named_by_file_line(tmp_path):
    manual = release_files.coco35l(tmp_path / "manual")
    import bz2
    with bz2.open(manual / "coco_mt_dev.jsonl.bz2", "wt", encoding="utf-8") as f:
        f.write('{"image_id": "7_0", "trg_lang": "es", "translation_tokenized": "ok"}\n'
                '{"image_id": "7-1", "trg_lang": "es", "translation_tokenized": "bad id"}\n')
    with pytest.raises(FormatError, match=r"coco_mt_dev.jsonl.bz2:2: image_id '7-1' is not"):
        _build(manual, tmp_path / "built")


def test_a_line_missing_a_field_is_named_by_file_line(tmp_path):
    manual = release_files.coco35l(tmp_path / "manual")
    import bz2
    with bz2.open(manual / "coco_mt_dev.jsonl.bz2", "wt", encoding="utf-8") as f:
        f.write('{"image_id": "7_0", "trg_lang": "es"}\n')
    with pytest.raises(FormatError, match=r"coco_mt_dev.jsonl.bz2:1: expected an object with "
                                          r"string fields image_id, trg_lang, translation"):
        _build(manual, tmp_path / "built")


def test_a_language_the_release_lacks_is_an_error_naming_the_file(tmp_path):
    manual = release_files.coco35l(tmp_path / "manual")
    with pytest.raises(ValueError, match=r"coco_mt_train.jsonl.bz2 has no train captions in "
                                         r"'de', which the build needs"):
        _build(manual, tmp_path / "built", langs=["en", "de"])


def test_a_missing_release_file_is_an_error_before_any_work(tmp_path):
    manual = release_files.coco35l(tmp_path / "manual")
    (manual / "coco_mt_dev.jsonl.bz2").unlink()
    with pytest.raises(FileNotFoundError, match=r"coco_mt_dev.jsonl .*crossmodal-3600"):
        _build(manual, tmp_path / "built")
    # Nothing was written: the inputs are checked before any work starts.
    assert not (tmp_path / "built" / "coco35l" / "images" / "2.0.0" / "dataset_info.json").exists()


def test_a_missing_manual_directory_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"manual directory of coco35l not found"):
        _build(tmp_path / "nowhere", tmp_path / "built")


def test_estimate_is_the_order_of_what_is_written(tmp_path):
    from data import build
    from data.build import builder

    manual = release_files.coco35l(tmp_path / "manual")
    coco35l = build.release("coco35l", str(manual))
    jpeg_bytes = sum(p.stat().st_size for p in manual.glob("*2014/*.jpg"))
    assert builder.estimate_bytes(coco35l, ["en"], images=True) == jpeg_bytes
    assert 0 < builder.estimate_bytes(coco35l, ["es", "hi"], images=False) < 2000
    assert np.isclose(builder.estimate_bytes(coco35l, ["es"], images=False) * 2,
                      builder.estimate_bytes(coco35l, ["es", "hi"], images=False), rtol=0.1)
