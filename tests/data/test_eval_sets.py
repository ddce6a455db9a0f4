"""Tests of data/eval_sets.py: XM3600 and COCO-dev sets, each image decoded once (uint8)."""

import shutil

import numpy as np
import pytest

from data import eval_sets, tokenizer
from data import images as image_lib
from data.releases import coco35l, xm3600


@pytest.fixture(scope="module")
def vocab(demo_dir):
    return tokenizer.get_vocabulary(str(demo_dir / "spm" / "demo.model"))


def _load(folder, langs, vocab, **kwargs):
    return eval_sets.load_xm3600(str(folder), langs, vocab, image_size=32,
                                 prompt_template="<2{lang}>", max_prompt_len=4, **kwargs)


@pytest.fixture(scope="module")
def xm3600_set(demo_dir, vocab):
    """(folder, records, the set of en, zh, hi loaded with 10 images each)."""
    folder = demo_dir / "xm3600"
    return (folder, xm3600.read_captions(str(folder / "captions.jsonl")),
            _load(folder, ["en", "zh", "hi"], vocab, max_images=10))


def test_xm3600_set_stores_each_image_once(xm3600_set):
    _, _, shared = xm3600_set
    assert len(shared.images) == len({k for keys in shared.keys.values() for k in keys})


def test_xm3600_set_has_the_captions_files_keys_with_their_references(xm3600_set):
    _, records, shared = xm3600_set
    for lang in ("en", "zh", "hi"):
        keys, refs = xm3600.references(records, lang)
        assert shared.keys[lang] == keys[:10] and shared.references[lang] == refs[:10]


def test_xm3600_set_rows_are_each_languages_images(xm3600_set):
    folder, records, shared = xm3600_set
    for lang in ("en", "zh", "hi"):
        keys, _ = xm3600.references(records, lang)
        # Each language's rows are its images, decoded independently here.
        expected = np.stack([image_lib.read_pixels(xm3600.image_path(str(folder), key), 32)
                             for key in keys[:10]])
        np.testing.assert_array_equal(shared.images[shared.rows[lang]], expected)


def test_xm3600_set_prompts_are_each_languages(xm3600_set, vocab):
    _, _, shared = xm3600_set
    for lang in ("en", "zh", "hi"):
        assert vocab.decode([int(t) for t in shared.prompts[lang] if t > 1]) == f"<2{lang}>"
        assert shared.prompts[lang].shape == (4,)


def test_xm3600_set_names_missing_languages(demo_dir, vocab):
    with pytest.raises(ValueError, match=r"has no captions in ar, bn; it has en, es, hi, zh"):
        _load(demo_dir / "xm3600", ["en", "ar", "bn"], vocab)


def _copy_with_first_key(demo_dir, tmp_path):
    copy = tmp_path / "xm3600"
    shutil.copytree(demo_dir / "xm3600", copy)
    return copy, sorted(p.stem for p in (copy / "images").iterdir())


def test_xm3600_set_names_a_corrupt_image(demo_dir, vocab, tmp_path):
    copy, keys = _copy_with_first_key(demo_dir, tmp_path)
    (copy / "images" / f"{keys[0]}.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    with pytest.raises(image_lib.ImageError, match=keys[0]):
        _load(copy, ["en"], vocab)


def test_xm3600_set_names_a_missing_image(demo_dir, vocab, tmp_path):
    copy, keys = _copy_with_first_key(demo_dir, tmp_path)
    (copy / "images" / f"{keys[0]}.jpg").unlink()
    with pytest.raises(FileNotFoundError, match=f"images/{keys[0]}.jpg"):
        _load(copy, ["en"], vocab)


def test_coco_dev_set_has_the_translated_dev_references(demo_dir, vocab):
    manual = str(demo_dir / "coco35l")
    dev = eval_sets.load_coco_dev(manual, ["en", "zh"], vocab, image_size=32,
                                  prompt_template="<2{lang}>", max_prompt_len=4)
    examples, _ = coco35l.read_split(manual, "dev", ["en", "zh"])
    for lang in ("en", "zh"):
        assert dev.keys[lang] == [str(e.cocoid) for e in examples[lang]]
        assert dev.references[lang] == [list(e.captions) for e in examples[lang]]
        expected = np.stack([image_lib.read_pixels(e.image_path, 32) for e in examples[lang]])
        np.testing.assert_array_equal(dev.images[dev.rows[lang]], expected)


def test_coco_dev_set_from_the_build_equals_the_one_from_the_release(built_demo, vocab):
    manual = str(built_demo / "coco35l")
    kwargs = dict(image_size=32, prompt_template="<2{lang}>", max_prompt_len=4, max_images=5)
    from_build = eval_sets.load_coco_dev(manual, ["en", "zh", "hi"], vocab, **kwargs)
    assert eval_sets._built_dev(manual, ["en", "zh", "hi"]) is not None
    assert eval_sets._built_dev(manual, ["en", "de"]) is None  # de is not built: the files.
    built_dir = built_demo / "tfds"
    hidden = built_demo / "tfds_hidden"
    built_dir.rename(hidden)
    try:
        from_files = eval_sets.load_coco_dev(manual, ["en", "zh", "hi"], vocab, **kwargs)
    finally:
        hidden.rename(built_dir)
    assert from_build.images.dtype == np.uint8
    for field in ("keys", "references", "prompts", "rows"):
        a, b = getattr(from_build, field), getattr(from_files, field)
        assert a.keys() == b.keys()
        for lang in a:
            np.testing.assert_array_equal(np.asarray(a[lang], dtype=object),
                                          np.asarray(b[lang], dtype=object))
    np.testing.assert_array_equal(from_build.images, from_files.images)
