"""Tests of tools/demo.py and tools/demo_captions.py: layouts, native captions, determinism."""

import bz2
import json
import os
import re

import numpy as np
import pytest
from PIL import Image

from data.releases import xm3600
from tools import demo, demo_captions

DEVANAGARI = re.compile(r"^[\u0900-\u097F ]+$")
HAN = re.compile(r"^[\u4E00-\u9FFF]+$")


def _mt_rows(path):
    with bz2.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_karpathy_file_has_the_release_fields(demo_dir):
    with open(demo_dir / "coco35l" / "dataset_coco.json", encoding="utf-8") as f:
        data = json.load(f)
    assert data["dataset"] == "coco"
    splits = [image["split"] for image in data["images"]]
    assert {s: splits.count(s) for s in set(splits)} == {"train": 60, "restval": 20, "val": 12,
                                                         "test": 4}
    for image in data["images"]:
        assert set(image) == {"filepath", "sentids", "filename", "imgid", "split", "sentences",
                              "cocoid"}
        folder = "train2014" if image["split"] == "train" else "val2014"
        assert image["filepath"] == folder
        assert image["filename"] == f"COCO_{folder}_{image['cocoid']:012d}.jpg"
        assert os.path.exists(demo_dir / "coco35l" / folder / image["filename"])
        assert [s["sentid"] for s in image["sentences"]] == image["sentids"]
        for sentence in image["sentences"]:
            assert sentence["tokens"] == sentence["raw"].lower().rstrip(".").split()


def test_translation_files_cover_every_training_or_dev_image(demo_dir):
    with open(demo_dir / "coco35l" / "dataset_coco.json", encoding="utf-8") as f:
        images = json.load(f)["images"]
    by_split = {}
    for image in images:
        by_split.setdefault(image["split"], set()).add(image["cocoid"])
    for name, splits in (("train", ("train", "restval")), ("dev", ("val",))):
        rows = _mt_rows(demo_dir / "coco35l" / f"coco_mt_{name}.jsonl.bz2")
        assert {r["trg_lang"] for r in rows} == {"es", "hi", "zh"}
        for r in rows:
            assert set(r) == {"image_id", "src_lang", "trg_lang", "caption_tokenized",
                              "translation_tokenized", "backtranslation_tokenized"}
            assert r["src_lang"] == "en"
        ids = {int(r["image_id"].split("_")[0]) for r in rows}
        assert ids == set().union(*(by_split[s] for s in splits))
        # Two references per image and language.
        assert len(rows) == 3 * 2 * len(ids)


def test_xm3600_split_reads_with_two_captions_per_language(demo_dir):
    records = xm3600.read_captions(str(demo_dir / "xm3600" / "captions.jsonl"))
    assert len(records) == 16
    for r in records:
        assert set(r.captions) == set(demo_captions.DEMO_LANGS)
        assert all(len(c) == 2 and c[0] != c[1] for c in r.captions.values())
        assert os.path.exists(xm3600.image_path(str(demo_dir / "xm3600"), r.key))


def test_xm3600_split_is_disjoint_from_training(demo_dir):
    records = xm3600.read_captions(str(demo_dir / "xm3600" / "captions.jsonl"))
    training = {Image.open(p).tobytes() for p in (demo_dir / "coco35l").glob("*/*.jpg")}
    held_out = {Image.open(xm3600.image_path(str(demo_dir / "xm3600"), r.key)).tobytes()
                for r in records}
    assert not training & held_out


def test_captions_are_native_in_each_language():
    star = demo_captions.Scene("red", "star", "small", "left")
    circle = demo_captions.Scene("red", "circle", "small", "left")
    # Spanish: gender agreement of article, colour and size.
    assert demo_captions.captions(star, "es")[0][0] == "una estrella roja pequeña a la izquierda"
    assert demo_captions.captions(circle, "es")[0][0] == "un círculo rojo pequeño a la izquierda"
    # Chinese: measure words, no spaces in the raw form.
    assert demo_captions.captions(star, "zh")[0][0] == "左边有一颗红色的小星星"
    assert demo_captions.captions(circle, "zh")[0][0] == "左边有一个红色的小圆形"
    # Hindi: verb-final second reference, oblique colour before रंग.
    green = demo_captions.Scene("green", "square", "big", "right")
    assert demo_captions.captions(green, "hi")[1][0] == "चित्र में दाईं तरफ़ हरे रंग का एक बड़ा वर्ग है"
    for scene in demo_captions.all_scenes():
        for raw, _ in demo_captions.captions(scene, "hi"):
            assert DEVANAGARI.match(raw)
        for raw, tokenized in demo_captions.captions(scene, "zh"):
            assert HAN.match(raw) and raw == tokenized.replace(" ", "")


def test_every_scene_has_distinct_captions():
    for lang in demo_captions.DEMO_LANGS:
        firsts = [demo_captions.captions(s, lang)[0][0] for s in demo_captions.all_scenes()]
        assert len(set(firsts)) == len(firsts) == 96


def test_rendered_colour_size_position_match_the_scene():
    rng = np.random.default_rng(0)
    for position, centre in (("left", 16), ("center", 32), ("right", 48)):
        areas = {}
        for size in ("big", "small"):
            pixels = demo.render(demo_captions.Scene("blue", "square", size, position), rng, 64)
            blue = (pixels[..., 2].astype(int) - pixels[..., 0]) > 100  # [64, 64]
            assert abs(np.nonzero(blue)[1].mean() - centre) < 5
            areas[size] = blue.sum()
        assert areas["big"] > 2.5 * areas["small"] > 0


def test_labels_name_the_colour_shape_of_each_held_out_image(demo_dir):
    records = xm3600.read_captions(str(demo_dir / "xm3600" / "captions.jsonl"))
    descriptions = demo_dir / "xm3600" / "oidv7-class-descriptions.csv"
    names = dict(line.split(",") for line in descriptions.read_text().splitlines()[1:])
    with open(demo_dir / "xm3600" / "oidv7-demo-annotations-human-imagelabels.csv",
              encoding="utf-8") as f:
        rows = [line.split(",") for line in f.read().splitlines()]
    assert rows[0] == ["ImageID", "Source", "LabelName", "Confidence"]
    positives, negatives = {}, {}
    for key, _, mid, confidence in rows[1:]:
        (positives if confidence == "1" else negatives).setdefault(key, set()).add(
            names[mid].lower())
    assert set(positives) == set(negatives) == {r.key for r in records}
    for r in records:
        english = r.captions["en"][0].lower().split()
        # The colour and the shape, both in the caption; the verified negative is not.
        assert len(positives[r.key]) == 2 and positives[r.key] <= set(english)
        assert not negatives[r.key] & set(english)


def _vectors(path):
    with open(path, encoding="utf-8") as f:
        count, dim = map(int, f.readline().split())
        table = {}
        for line in f:
            word, *values = line.split()
            table[word] = np.array(values, dtype=float)
    assert len(table) == count and {v.size for v in table.values()} == {dim}
    return {w: v / np.linalg.norm(v) for w, v in table.items()}


@pytest.fixture(scope="module")
def vectors(demo_dir):
    """{lang: {word: unit vector}} of the demo's aligned vectors."""
    return {lang: _vectors(demo_dir / "vectors" / f"wiki.{lang}.align.vec")
            for lang in demo_captions.DEMO_LANGS}


def test_vectors_align_translations(vectors):
    pairs = {("en", "red"): [("es", "roja"), ("hi", "लाल"), ("zh", "红色")],
             ("en", "star"): [("es", "estrella"), ("hi", "तारा"), ("zh", "星星")],
             ("en", "large"): [("en", "big"), ("es", "gran"), ("zh", "大")]}
    for (lang, word), translations in pairs.items():
        for other_lang, other in translations:
            assert vectors[lang][word] @ vectors[other_lang][other] > 0.9
    assert abs(vectors["en"]["red"] @ vectors["en"]["star"]) < 0.9


def test_vectors_cover_every_caption_word(vectors):
    for lang in demo_captions.DEMO_LANGS:
        for scene in demo_captions.all_scenes():
            for _, tokenized in demo_captions.captions(scene, lang):
                assert set(tokenized.lower().split()) <= set(vectors[lang])


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """The folder of four small demos, made once for the module: a, c of seed 3, b of seed 3
    without the VIFIDEL files, d of seed 4."""
    root = tmp_path_factory.mktemp("generated")
    kwargs = dict(num_train=8, num_restval=2, num_val=2, num_test=0, num_xm3600=4,
                  image_size=16, build_tfds=False)
    demo.generate(str(root / "a"), seed=3, **kwargs)
    demo.generate(str(root / "b"), seed=3, vifidel=False, **kwargs)
    demo.generate(str(root / "c"), seed=3, **kwargs)
    demo.generate(str(root / "d"), seed=4, **kwargs)
    return root


def _files(folder):
    return {p.relative_to(folder) for p in folder.rglob("*") if p.is_file()}


def test_another_seed_writes_other_data(generated):
    tmp_path = generated
    names = ("coco35l/dataset_coco.json", "xm3600/captions.jsonl")
    assert [(tmp_path / "a" / n).read_bytes() for n in names] != [
        (tmp_path / "d" / n).read_bytes() for n in names]  # another seed, other data


def test_without_vifidel_only_its_files_are_left_out(generated):
    files, without = _files(generated / "a"), _files(generated / "b")
    assert {str(p) for p in set(files) - without} == {
        "xm3600/oidv7-class-descriptions.csv",
        "xm3600/oidv7-demo-annotations-human-imagelabels.csv",
        *(f"vectors/wiki.{lang}.align.vec" for lang in demo_captions.DEMO_LANGS)}


def test_the_same_seed_writes_identical_files(generated):
    for name in sorted(_files(generated / "a")):
        content = (generated / "a" / name).read_bytes()
        assert content == (generated / "c" / name).read_bytes(), name


def test_the_vifidel_files_leave_the_others_alone(generated):
    without = _files(generated / "b")
    for name in sorted(_files(generated / "a")):
        content = (generated / "a" / name).read_bytes()
        if name in without:
            assert content == (generated / "b" / name).read_bytes(), name
