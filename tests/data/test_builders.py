"""Tests of the TFDS builders on fixture files written in the release layouts."""

import bz2
import io
import json
import tarfile

import numpy as np
import pytest
from PIL import Image

from data import build
from data.builders import common


def _jpeg(value, size=(12, 10)):
    buffer = io.BytesIO()
    Image.fromarray(np.full((size[1], size[0], 3), value, np.uint8)).save(buffer, "JPEG")
    return buffer.getvalue()


def _split_contents(builder, split, key_feature):
    import tensorflow_datasets as tfds
    source = builder.as_data_source(split, decoders={"image": tfds.decode.SkipDecoding()})
    rows = {}
    for i in range(len(source)):
        row = source[i]
        key = row[key_feature]
        rows[key.decode() if isinstance(key, bytes) else int(key)] = row
    return rows


# --- XM3600 --------------------------------------------------------------------------------

XM_KEYS = ("00aa", "00bb", "00cc")


def _xm3600_manual(root, *, archive=False):
    root.mkdir()
    lines = []
    for i, key in enumerate(XM_KEYS):
        row = {"image/key": key, "image/locale": "en"}
        for lang in ("en", "es", "hi", "zh"):
            if lang == "zh" and key == "00cc":
                continue  # One image without Chinese captions.
            caps = [f"{lang} caption {i} a", f"{lang} caption {i} b"]
            row[lang] = {"caption": caps, "caption/tokenized": [c.upper() for c in caps],
                         "caption/tokenized/lowercase": caps}
        lines.append(json.dumps(row))
    (root / "captions.jsonl").write_text("\n".join(lines) + "\n")
    images = {key: _jpeg(40 * i) for i, key in enumerate(XM_KEYS)}
    if archive:
        with tarfile.open(root / "images.tgz", "w:gz") as tar:
            for key, data in images.items():
                info = tarfile.TarInfo(f"images/{key}.jpg")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    else:
        (root / "images").mkdir()
        for key, data in images.items():
            (root / "images" / f"{key}.jpg").write_bytes(data)
    return root


@pytest.mark.parametrize("archive", [False, True])
def test_xm3600_splits_features_and_counts(tmp_path, archive):
    manual = _xm3600_manual(tmp_path / "manual", archive=archive)
    builder = build.build("xm3600", manual_dir=str(manual), data_dir=str(tmp_path / "tfds"),
                          config="core")
    splits = builder.info.splits
    assert {name: splits[name].num_examples for name in splits} == {
        "en": 3, "es": 3, "hi": 3, "zh": 2}
    rows = _split_contents(builder, "hi", "image/key")
    assert sorted(rows) == list(XM_KEYS)
    row = rows["00bb"]
    assert [c.decode() for c in row["captions"]] == ["hi caption 1 a", "hi caption 1 b"]
    assert [c.decode() for c in row["captions/tokenized"]] == ["HI CAPTION 1 A", "HI CAPTION 1 B"]
    assert row["language"] == b"hi" and row["image/locale"] == b"en"
    decoded = np.asarray(Image.open(io.BytesIO(row["image"])))
    assert decoded.shape == (10, 12, 3) and abs(int(decoded.mean()) - 40) <= 2


def test_xm3600_missing_image_names_key_and_path(tmp_path):
    manual = _xm3600_manual(tmp_path / "manual")
    (manual / "images" / "00bb.jpg").unlink()
    with pytest.raises(Exception, match=r"'00bb'.*images/00bb.jpg"):
        build.build("xm3600", manual_dir=str(manual), data_dir=str(tmp_path / "tfds"),
                    config="core")


def test_xm3600_corrupt_image_stops_or_is_skipped(tmp_path):
    manual = _xm3600_manual(tmp_path / "manual")
    (manual / "images" / "00cc.jpg").write_bytes(_jpeg(9)[:60])
    with pytest.raises(Exception, match=r"corrupt image '00cc'"):
        build.build("xm3600", manual_dir=str(manual), data_dir=str(tmp_path / "a"),
                    config="core")
    builder = build.build("xm3600", manual_dir=str(manual), data_dir=str(tmp_path / "b"),
                          config="core", corrupt_images="skip")
    assert builder.info.splits["en"].num_examples == 2


def test_xm3600_missing_files_say_where_they_go(tmp_path):
    manual = _xm3600_manual(tmp_path / "manual")
    (manual / "captions.jsonl").unlink()
    with pytest.raises(Exception, match=r"captions.jsonl.*crossmodal-3600"):
        build.build("xm3600", manual_dir=str(manual), data_dir=str(tmp_path / "tfds"),
                    config="core")


def test_unknown_builder_config_and_policy_are_errors(tmp_path):
    with pytest.raises(ValueError, match="known: all, core"):
        build.get_builder("xm3600", data_dir=str(tmp_path), config="most")
    with pytest.raises(ValueError, match="known: xm3600, coco35l, cc3m35l"):
        build.get_builder("flickr", data_dir=str(tmp_path))
    with pytest.raises(ValueError, match="known: stop, skip"):
        build.get_builder("xm3600", data_dir=str(tmp_path), corrupt_images="ignore")


def test_image_checker_counts_each_image_once():
    checker = common.ImageChecker("skip")
    assert checker.ok(_jpeg(1), "good")
    assert not checker.ok(b"garbage", "bad") and not checker.ok(b"garbage", "bad")
    assert checker.skipped == ["bad"]


# --- COCO-35L ------------------------------------------------------------------------------

def _coco35l_manual(root):
    root.mkdir()
    images, mt = [], {"train": [], "dev": []}
    for i, (cocoid, split) in enumerate(((5, "train"), (6, "restval"), (7, "val"))):
        folder = "train2014" if split == "train" else "val2014"
        name = f"COCO_{folder}_{cocoid:012d}.jpg"
        (root / folder).mkdir(exist_ok=True)
        (root / folder / name).write_bytes(_jpeg(60 * i))
        english = [f"shape number {cocoid}", f"another shape {cocoid}"]
        images.append({"filepath": folder, "filename": name, "cocoid": cocoid, "split": split,
                       "imgid": i, "sentids": [0, 1],
                       "sentences": [{"tokens": e.split(), "raw": e, "imgid": i, "sentid": n}
                                     for n, e in enumerate(english)]})
        for lang in ("es", "hi", "zh"):
            for n, e in enumerate(english):
                mt["dev" if split == "val" else "train"].append(json.dumps({
                    "image_id": f"{cocoid}_{n}", "src_lang": "en", "trg_lang": lang,
                    "caption_tokenized": e, "translation_tokenized": f"{lang}: {e}",
                    "backtranslation_tokenized": e}))
    (root / "dataset_coco.json").write_text(json.dumps({"images": images, "dataset": "coco"}))
    for split, lines in mt.items():
        with bz2.open(root / f"coco_mt_{split}.jsonl.bz2", "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return root


def test_coco35l_splits_features_and_counts(tmp_path):
    manual = _coco35l_manual(tmp_path / "manual")
    builder = build.build("coco35l", manual_dir=str(manual), data_dir=str(tmp_path / "tfds"),
                          config="core")
    counts = {name: info.num_examples for name, info in builder.info.splits.items()}
    assert counts == {f"{s}_{l}": (2 if s == "train" else 1)
                      for s in ("train", "dev") for l in ("en", "es", "hi", "zh")}
    rows = _split_contents(builder, "train_zh", "image/id")
    assert sorted(rows) == ["5_zh", "6_zh"]
    assert [c.decode() for c in rows["6_zh"]["captions"]] == ["zh: shape number 6",
                                                               "zh: another shape 6"]
    assert rows["6_zh"]["cocoid"] == 6 and rows["6_zh"]["language"] == b"zh"
    english = _split_contents(builder, "dev_en", "image/id")
    assert [c.decode() for c in english["7_en"]["captions"]] == ["shape number 7",
                                                                 "another shape 7"]


# --- CC3M-35L ------------------------------------------------------------------------------

def _cc3m35l_manual(root, *, shards):
    root.mkdir()
    for split, keys in (("train", range(0, 5)), ("dev", range(0, 2))):
        lines = []
        for key in keys:
            for lang in ("es", "hi", "zh"):
                lines.append(json.dumps({
                    "image_id": str(key), "src_lang": "en", "trg_lang": lang,
                    "caption_tokenized": f"picture {key}",
                    "translation_tokenized": f"{lang} picture {key}",
                    "backtranslation_tokenized": f"picture {key}"}))
        with bz2.open(root / f"cc3m_mt_{split}.jsonl.bz2", "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        folder = root / split
        folder.mkdir()
        # Image 3 of train failed to download, as CC3M URLs do.
        present = [k for k in keys if not (split == "train" and k == 3)]
        if shards:
            for shard, chunk in enumerate((present[:2], present[2:])):
                with tarfile.open(folder / f"{shard:05d}.tar", "w") as tar:
                    for key in chunk:
                        for ext, data in ((".jpg", _jpeg(10 * key)),
                                          (".txt", f"picture {key}".encode()),
                                          (".json", json.dumps({"key": f"{key:09d}"}).encode())):
                            info = tarfile.TarInfo(f"{key:09d}{ext}")
                            info.size = len(data)
                            tar.addfile(info, io.BytesIO(data))
        else:
            (folder / "00000").mkdir()
            for key in present:
                (folder / "00000" / f"{key:09d}.jpg").write_bytes(_jpeg(10 * key))
    return root


@pytest.mark.parametrize("shards", [True, False])
def test_cc3m35l_splits_features_and_missing_images(tmp_path, shards, caplog):
    manual = _cc3m35l_manual(tmp_path / "manual", shards=shards)
    builder = build.build("cc3m35l", manual_dir=str(manual), data_dir=str(tmp_path / "tfds"),
                          config="core")
    counts = {name: info.num_examples for name, info in builder.info.splits.items()}
    assert counts == {f"{s}_{l}": (4 if s == "train" else 2)
                      for s in ("train", "dev") for l in ("en", "es", "hi", "zh")}
    rows = _split_contents(builder, "train_hi", "key")
    assert sorted(rows) == [0, 1, 2, 4]
    assert [c.decode() for c in rows[4]["captions"]] == ["hi picture 4"]
    assert [c.decode() for c in _split_contents(builder, "dev_en", "key")[1]["captions"]] == [
        "picture 1"]
    assert "captioned records have no image" in caplog.text


def test_cc3m35l_malformed_line_names_file_and_line(tmp_path):
    manual = _cc3m35l_manual(tmp_path / "manual", shards=False)
    with bz2.open(manual / "cc3m_mt_dev.jsonl.bz2", "wt", encoding="utf-8") as f:
        f.write('{"image_id": "0", "trg_lang": "es"}\n')
    with pytest.raises(Exception, match=r"cc3m_mt_dev.jsonl.bz2:1: expected an object"):
        build.build("cc3m35l", manual_dir=str(manual), data_dir=str(tmp_path / "tfds"),
                    config="core")


def test_cc3m35l_missing_image_folder_says_where_it_goes(tmp_path):
    manual = _cc3m35l_manual(tmp_path / "manual", shards=False)
    import shutil
    shutil.rmtree(manual / "dev")
    with pytest.raises(Exception, match=r"missing CC3M dev images: expected the folder"):
        build.build("cc3m35l", manual_dir=str(manual), data_dir=str(tmp_path / "tfds"),
                    config="core")
