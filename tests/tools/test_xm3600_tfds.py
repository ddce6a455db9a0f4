"""Tests of tools/xm3600_tfds.py, the TFDS builder of XM3600, on fixture files written in the
release layout."""

import io
import json
import tarfile

import numpy as np
import pytest
from PIL import Image

from data import build
from tests.data.build import release_files
from tools import xm3600_tfds


def _split_contents(builder, split, key_feature):
    import tensorflow_datasets as tfds
    source = builder.as_data_source(split, decoders={"image": tfds.decode.SkipDecoding()})
    rows = {}
    for i in range(len(source)):
        row = source[i]
        key = row[key_feature]
        rows[key.decode() if isinstance(key, bytes) else int(key)] = row
    return rows


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
    images = {key: release_files.jpeg(40 * i) for i, key in enumerate(XM_KEYS)}
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


@pytest.fixture(scope="module", params=[False, True], ids=["images", "archive"])
def built(request, tmp_path_factory):
    """(tfds folder, counts) of the XM3600 build of its images or their archive, made once
    for the module."""
    tmp_path = tmp_path_factory.mktemp("xm3600")
    manual = _xm3600_manual(tmp_path / "manual", archive=request.param)
    counts = xm3600_tfds.build(manual_dir=str(manual), data_dir=str(tmp_path / "tfds"),
                               config="core")
    return tmp_path / "tfds", counts


def test_xm3600_counts_each_language(built):
    _, counts = built
    assert counts == {"en": 3, "es": 3, "hi": 3, "zh": 2}


def test_xm3600_splits_have_the_features(built):
    tfds_dir, _ = built
    builder = xm3600_tfds.get_builder(data_dir=str(tfds_dir), config="core")
    rows = _split_contents(builder, "hi", "image/key")
    assert sorted(rows) == list(XM_KEYS)
    row = rows["00bb"]
    assert [c.decode() for c in row["captions"]] == ["hi caption 1 a", "hi caption 1 b"]
    assert [c.decode() for c in row["captions/tokenized"]] == ["HI CAPTION 1 A", "HI CAPTION 1 B"]
    assert row["language"] == b"hi" and row["image/locale"] == b"en"
    decoded = np.asarray(Image.open(io.BytesIO(row["image"])))
    assert decoded.shape == (10, 12, 3) and abs(int(decoded.mean()) - 40) <= 2


def test_xm3600_missing_image_is_named_with_its_path(tmp_path):
    manual = _xm3600_manual(tmp_path / "manual")
    (manual / "images" / "00bb.jpg").unlink()
    with pytest.raises(Exception, match=r"'00bb'.*images/00bb.jpg"):
        xm3600_tfds.build(manual_dir=str(manual), data_dir=str(tmp_path / "tfds"),
                    config="core")


def test_xm3600_corrupt_image_stops_or_is_skipped(tmp_path):
    manual = _xm3600_manual(tmp_path / "manual")
    (manual / "images" / "00cc.jpg").write_bytes(release_files.jpeg(9)[:60])
    with pytest.raises(Exception, match=r"corrupt image '00cc'"):
        xm3600_tfds.build(manual_dir=str(manual), data_dir=str(tmp_path / "a"), config="core")
    counts = xm3600_tfds.build(manual_dir=str(manual), data_dir=str(tmp_path / "b"),
                         config="core", corrupt_images="skip")
    assert counts["en"] == 2


def test_xm3600_missing_files_say_where_they_go(tmp_path):
    manual = _xm3600_manual(tmp_path / "manual")
    (manual / "captions.jsonl").unlink()
    with pytest.raises(Exception, match=r"captions.jsonl.*crossmodal-3600"):
        xm3600_tfds.build(manual_dir=str(manual), data_dir=str(tmp_path / "tfds"),
                    config="core")


def test_an_unknown_builder_config_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="known: all, core"):
        xm3600_tfds.get_builder(data_dir=str(tmp_path), config="most")


def test_an_unknown_dataset_to_build_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="known: coco35l, cc3m35l"):
        build.build("xm3600", manual_dir=str(tmp_path), data_dir=str(tmp_path))


def test_an_unknown_corrupt_image_policy_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="known: stop, skip"):
        xm3600_tfds.get_builder(data_dir=str(tmp_path), corrupt_images="ignore")


def test_image_checker_counts_each_image_once():
    checker = xm3600_tfds.ImageChecker("skip")
    assert checker.ok(release_files.jpeg(1), "good")
    assert not checker.ok(b"garbage", "bad") and not checker.ok(b"garbage", "bad")
    assert checker.skipped == ["bad"]
