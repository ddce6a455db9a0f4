"""Tests of data/tasks.py: seqio tasks and mixtures over the demo's TFDS builds."""

import collections

import numpy as np
import pytest

from data import build, demo_captions, tasks, tokenizer

LANGS = ("en", "es", "hi", "zh")
LENGTHS = {"inputs": 8, "targets": 32}


@pytest.fixture(scope="module")
def setup(demo_dir):
    tfds_dir = str(demo_dir / "tfds")
    build.build("coco35l", manual_dir=str(demo_dir / "coco35l"), data_dir=tfds_dir,
                config="core")
    build.build("xm3600", manual_dir=str(demo_dir / "xm3600"), data_dir=tfds_dir,
                config="core")
    vocab_path = str(demo_dir / "spm" / "demo.model")
    return tfds_dir, vocab_path, tokenizer.get_vocabulary(vocab_path)


def _decode(vocab, ids):
    return vocab.decode([int(t) for t in ids if t > 1])


def test_task_examples_have_prompt_caption_and_image(setup):
    import seqio
    tfds_dir, vocab_path, vocab = setup
    names = tasks.register_tasks("coco35l", tfds_data_dir=tfds_dir, vocab_path=vocab_path,
                                 langs=LANGS, image_size=32)
    assert names == ["coco35l_en", "coco35l_es", "coco35l_hi", "coco35l_zh"]
    task = seqio.get_mixture_or_task("coco35l_hi")
    assert task.num_input_examples("train") == 80 and task.num_input_examples("validation") == 12
    hindi = {raw for s in demo_captions.all_scenes() for raw, _ in demo_captions.captions(s, "hi")}
    for ex in task.get_dataset(LENGTHS, split="train", shuffle=False).take(4).as_numpy_iterator():
        assert _decode(vocab, ex["inputs"]) == "<2hi>" and ex["inputs"][-1] == 1
        assert _decode(vocab, ex["targets"]) in hindi and ex["targets"][-1] == 1
        assert _decode(vocab, ex["targets"]) in {c.decode() for c in ex["captions"]}
        assert ex["image"].shape == (32, 32, 3) and -1 <= ex["image"].min() < ex["image"].max() <= 1


def test_training_targets_sample_every_reference(setup):
    import seqio
    tfds_dir, vocab_path, vocab = setup
    tasks.register_tasks("coco35l", tfds_data_dir=tfds_dir, vocab_path=vocab_path,
                         langs=["en"], image_size=16)
    task = seqio.get_mixture_or_task("coco35l_en")
    chosen = collections.Counter()
    for ex in task.get_dataset(LENGTHS, split="train", shuffle=False, seed=3).as_numpy_iterator():
        refs = [c.decode() for c in ex["captions"]]
        chosen[refs.index(_decode(vocab, ex["targets"]))] += 1
    assert sum(chosen.values()) == 80 and min(chosen[0], chosen[1]) > 20


def test_xm3600_tasks_keep_all_references(setup):
    import seqio
    tfds_dir, vocab_path, vocab = setup
    tasks.register_tasks("xm3600", tfds_data_dir=tfds_dir, vocab_path=vocab_path,
                         langs=["zh"], image_size=16, prompt_template="caption in {lang}")
    task = seqio.get_mixture_or_task("xm3600_zh")
    examples = list(task.get_dataset(LENGTHS, split="test", shuffle=False).as_numpy_iterator())
    assert len(examples) == 16
    for ex in examples:
        refs = [c.decode() for c in ex["captions"]]
        assert len(refs) == 2 and _decode(vocab, ex["targets"]) == refs[0]
        assert ex["inputs_pretokenized"].decode() == "caption in zh"


@pytest.mark.parametrize("rates,expected", [({"en": 3, "es": 1, "hi": 0, "zh": 0},
                                             {"<2en>": 0.75, "<2es>": 0.25}),
                                            ("uniform", {f"<2{l}>": 0.25 for l in LANGS})])
def test_mixture_rates(setup, rates, expected):
    tfds_dir, vocab_path, vocab = setup
    tasks.register_tasks("coco35l", tfds_data_dir=tfds_dir, vocab_path=vocab_path,
                         langs=LANGS, image_size=8)
    mixture = tasks.register_mixture("test_mix", "coco35l", LANGS, rates)
    ds = mixture.get_dataset(LENGTHS, split="train", shuffle=True, seed=0).take(240)
    counts = collections.Counter(_decode(vocab, ex["inputs"]) for ex in ds.as_numpy_iterator())
    for prompt, share in expected.items():
        assert counts[prompt] / 240 == pytest.approx(share, abs=0.1)
    assert set(counts) == set(expected)


def test_proportional_mixture_uses_example_counts(setup):
    import seqio
    tfds_dir, vocab_path, _ = setup
    tasks.register_tasks("coco35l", tfds_data_dir=tfds_dir, vocab_path=vocab_path,
                         langs=LANGS, image_size=8)
    mixture = tasks.register_mixture("test_prop", "coco35l", LANGS, "proportional")
    rates = [mixture.get_rate(seqio.get_mixture_or_task(f"coco35l_{l}")) for l in LANGS]
    np.testing.assert_allclose(rates, [80.0] * 4)


def test_bad_arguments_are_clear_errors(setup, tmp_path):
    tfds_dir, vocab_path, _ = setup
    with pytest.raises(ValueError, match="unknown coco35l language 'quz'"):
        tasks.register_tasks("coco35l", tfds_data_dir=tfds_dir, vocab_path=vocab_path,
                             langs=["quz"])
    with pytest.raises(FileNotFoundError, match="python -m data.build cc3m35l"):
        tasks.register_tasks("cc3m35l", tfds_data_dir=str(tmp_path), vocab_path=vocab_path,
                             langs=["en"])
    with pytest.raises(ValueError, match="lack languages hi"):
        tasks.register_mixture("bad", "coco35l", ["en", "hi"], {"en": 1.0})
