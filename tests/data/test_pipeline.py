"""Tests of data/pipeline.py on the demo data: batches, resumption, sharding, prompts."""


import ml_collections
import numpy as np
import pytest

from data import demo_captions, pipeline, tokenizer


def _config(demo_dir, **overrides):
    config = ml_collections.ConfigDict(dict(
        dataset="coco35l", manual_dir=str(demo_dir / "coco35l"), langs=("en", "es", "hi", "zh"),
        mixture="uniform", prompt_template="<2{lang}>", max_prompt_len=4, max_target_len=16,
        augment=True, num_threads=2))
    config.update(overrides)
    return config


@pytest.fixture(scope="module", params=["files", "tfds"])
def reader(request):
    """Each reader; "tfds" builds the demo's TFDS copy on first use."""
    return request.param


@pytest.fixture(scope="module")
def vocab(demo_dir):
    return tokenizer.get_vocabulary(str(demo_dir / "spm" / "demo.model"))


def _take(config, vocab, steps, **kwargs):
    kwargs = dict(dict(global_batch_size=8, image_size=32, seed=0), **kwargs)
    iterator = pipeline.train_iterator(config, vocab, **kwargs)
    batches = [next(iterator) for _ in range(steps)]
    iterator.close()
    return batches


def test_batch_shapes_dtypes_and_ranges(demo_dir, vocab, reader):
    batch = _take(_config(demo_dir, reader=reader), vocab, 1)[0]
    assert batch["image"].shape == (8, 32, 32, 3) and batch["image"].dtype == np.float32
    assert -1.0 <= batch["image"].min() < 0.0 < batch["image"].max() <= 1.0
    assert batch["prompt"].shape == (8, 4) and batch["prompt"].dtype == np.int32
    assert batch["targets"].shape == (8, 16) and batch["targets"].dtype == np.int32
    for row in batch["targets"]:
        length = int((row != 0).sum())
        assert row[length - 1] == tokenizer.EOS_ID and not row[length:].any()
        assert tokenizer.EOS_ID not in row[:length - 1]


def test_uniform_mixture_prompts_each_language_equally(demo_dir, vocab, reader):
    batches = _take(_config(demo_dir, reader=reader), vocab, 3)
    prompts = [vocab.decode([int(t) for t in row if t > 1])
               for b in batches for row in b["prompt"]]
    assert sorted(set(prompts)) == ["<2en>", "<2es>", "<2hi>", "<2zh>"]
    assert all(prompts.count(p) == 6 for p in set(prompts))


def test_targets_are_references_in_the_prompted_language(demo_dir, vocab, reader):
    captions = {lang: {raw for scene in demo_captions.all_scenes()
                       for raw, _ in demo_captions.captions(scene, lang)}
                for lang in demo_captions.DEMO_LANGS}
    batch = _take(_config(demo_dir, reader=reader, max_target_len=24), vocab, 1)[0]
    for prompt, target in zip(batch["prompt"], batch["targets"], strict=True):
        lang = vocab.decode([int(t) for t in prompt if t > 1])[2:-1]
        assert vocab.decode([int(t) for t in target if t > 1]) in captions[lang]


def test_resuming_at_step_k_gives_the_same_batches(demo_dir, vocab, reader):
    config = _config(demo_dir, reader=reader, mixture="proportional")
    straight = _take(config, vocab, 5)
    resumed = _take(config, vocab, 2, start_step=3)
    for a, b in zip(straight[3:], resumed, strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(straight[0]["targets"], straight[1]["targets"])


def test_process_shards_are_disjoint_and_complete(demo_dir, vocab, reader):
    config = _config(demo_dir, reader=reader)
    whole = _take(config, vocab, 2)
    shards = [_take(config, vocab, 2, process_index=p, process_count=2) for p in range(2)]
    for step in range(2):
        for key in whole[step]:
            joined = np.concatenate([shards[0][step][key], shards[1][step][key]])
            np.testing.assert_array_equal(joined, whole[step][key])


def test_long_captions_are_truncated_keeping_eos(vocab):
    ids = pipeline.tokenize_targets(vocab, ["there is a tiny yellow star in the center of "
                                            "the picture"], 4)
    assert ids.shape == (1, 4) and ids[0, -1] == tokenizer.EOS_ID and (ids[0, :3] > 2).all()


def test_prompt_template_is_configurable_and_checked(vocab):
    assert pipeline.prompt_text("hi") == "<2hi>"
    assert pipeline.prompt_text("hi", "caption {lang}:") == "caption hi:"
    with pytest.raises(ValueError, match="no '{lang}' field"):
        pipeline.prompt_text("hi", "caption:")
    with pytest.raises(ValueError, match="more than max_prompt_len=2"):
        pipeline.tokenize_prompt(vocab, "hi", "<2{lang}>", 2)


def test_unknown_language_lists_known_ones(demo_dir, vocab):
    with pytest.raises(ValueError, match=r"unknown training language 'xx'.*known: ar, bn"):
        _take(_config(demo_dir, langs=("en", "xx")), vocab, 1)
