"""Tests of data/pipeline/ on the demo data: batches, resumption, sharding, prompts, workers."""

import errno
import os
import shutil
import subprocess
import sys
import textwrap

import ml_collections
import numpy as np
import pytest

from data import images, pipeline, prompts, tokenizer
from data.build import layout
from tests import tiny
from tools import demo_captions


def _config(demo_dir, **overrides):
    config = ml_collections.ConfigDict(dict(
        dataset="coco35l", manual_dir=str(demo_dir / "coco35l"), langs=("en", "es", "hi", "zh"),
        prompt_template="<2{lang}>", max_prompt_len=4, max_target_len=16, num_workers=0))
    config.update(overrides)
    return config


@pytest.fixture(scope="module")
def vocab(demo_dir):
    return tokenizer.get_vocabulary(str(demo_dir / "spm" / "demo.model"))


def _take(config, vocab, steps, **kwargs):
    kwargs = dict(dict(global_batch_size=8, image_size=32, seed=0), **kwargs)
    iterator = pipeline.train_iterator(config, vocab, **kwargs)
    batches = [next(iterator) for _ in range(steps)]
    iterator.close()
    return batches


@pytest.fixture(scope="module")
def straight(built_demo, vocab):
    """The first 5 batches of the demo configuration, from step 0."""
    return _take(_config(built_demo), vocab, 5)


def test_batch_images_are_uint8_pixels_of_the_full_range(straight):
    batch = straight[0]
    assert batch["image"].shape == (8, 32, 32, 3) and batch["image"].dtype == np.uint8
    assert batch["image"].min() < 128 < batch["image"].max()


def test_batch_prompts_are_int32_of_max_prompt_len(straight):
    batch = straight[0]
    assert batch["prompt"].shape == (8, 4) and batch["prompt"].dtype == np.int32


def test_batch_targets_end_with_one_eos(straight):
    batch = straight[0]
    assert batch["targets"].shape == (8, 16) and batch["targets"].dtype == np.int32
    for row in batch["targets"]:
        length = int((row != 0).sum())
        assert row[length - 1] == tokenizer.EOS_ID and not row[length:].any()
        assert tokenizer.EOS_ID not in row[:length - 1]


def test_languages_take_turns_in_the_prompts(built_demo, vocab):
    batches = _take(_config(built_demo), vocab, 3)
    prompts = [vocab.decode([int(t) for t in row if t > 1]) for b in batches for row in b["prompt"]]
    assert sorted(set(prompts)) == ["<2en>", "<2es>", "<2hi>", "<2zh>"]
    assert all(prompts.count(p) == 6 for p in set(prompts))


def test_targets_are_references_in_the_prompted_language(built_demo, vocab):
    captions = {lang: {raw for scene in demo_captions.all_scenes()
                       for raw, _ in demo_captions.captions(scene, lang)}
                for lang in demo_captions.DEMO_LANGS}
    batch = _take(_config(built_demo, max_target_len=24), vocab, 1)[0]
    for prompt, target in zip(batch["prompt"], batch["targets"], strict=True):
        lang = vocab.decode([int(t) for t in prompt if t > 1])[2:-1]
        assert vocab.decode([int(t) for t in target if t > 1]) in captions[lang]


def test_resuming_at_step_k_gives_the_same_batches(built_demo, vocab, straight):
    config = _config(built_demo)
    resumed = _take(config, vocab, 2, start_step=3)
    for a, b in zip(straight[3:], resumed, strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(straight[0]["targets"], straight[1]["targets"])


def test_a_start_from_the_build_alone_gives_the_same_batches(built_demo, vocab, straight,
                                                             tmp_path):
    # A start reads the build, not the release files (an empty release folder here).
    release = tmp_path / "coco35l"
    release.mkdir()
    config = _config(built_demo, manual_dir=str(release), tfds_data_dir=str(built_demo / "tfds"))
    for a, b in zip(_take(config, vocab, 2), straight, strict=False):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])


def test_process_shards_partition_each_batch(built_demo, vocab):
    config = _config(built_demo)
    whole = _take(config, vocab, 2)
    shards = [_take(config, vocab, 2, process_index=p, process_count=2) for p in range(2)]
    for step in range(2):
        for key in whole[step]:
            joined = np.concatenate([shards[0][step][key], shards[1][step][key]])
            np.testing.assert_array_equal(joined, whole[step][key])


def test_long_captions_are_truncated_keeping_eos_prompt_template_is_checked(vocab):
    ids = prompts.tokenize_targets(vocab, ["there is a tiny yellow star in the center of "
                                            "the picture"], 4)
    assert ids.shape == (1, 4) and ids[0, -1] == tokenizer.EOS_ID and (ids[0, :3] > 2).all()
    assert prompts.prompt_text("hi") == "<2hi>"
    assert prompts.prompt_text("hi", "caption {lang}:") == "caption hi:"
    with pytest.raises(ValueError, match="no '{lang}' field"):
        prompts.prompt_text("hi", "caption:")
    with pytest.raises(ValueError, match="more than max_prompt_len=2"):
        prompts.tokenize_prompt(vocab, "hi", "<2{lang}>", 2)


def test_worker_processes_make_the_same_resumed_sharded_batches(built_demo, vocab):
    config = _config(built_demo)
    alone = _take(config, vocab, 6)
    iterator = pipeline.train_iterator(
        _config(built_demo, num_workers=2), vocab, global_batch_size=8,
        image_size=32, seed=0, start_step=3, process_index=1, process_count=2)
    workers = iterator.workers  # Started with the iterator, before any batch is asked for.
    assert len(workers) == 2 and all(worker.is_alive() for worker in workers)
    for whole in alone[3:]:
        part = next(iterator)
        for key in whole:
            np.testing.assert_array_equal(whole[key][4:], part[key])
    iterator.close()
    assert not any(worker.is_alive() for worker in workers)


def test_a_worker_error_reaches_the_trainer_with_its_type(built_demo, vocab, tmp_path):
    """A build whose image records hold bytes that do not decode (changed by hand)."""
    shutil.copytree(built_demo / "tfds", tmp_path / "tfds")
    tiny.spoil_built_images(tmp_path / "tfds")
    config = _config(built_demo, tfds_data_dir=str(tmp_path / "tfds"), num_workers=1)
    with pytest.raises(images.ImageError, match=r"cannot decode image key \d+ \(coco35l "
                                                r"train image \d+\)"):
        _take(config, vocab, 1)


def test_an_unknown_language_is_an_error(built_demo, vocab):
    with pytest.raises(ValueError, match=r"unknown training language 'xx'.*known: ar, bn"):
        _take(_config(built_demo, langs=("en", "xx")), vocab, 1)


def test_languages_not_built_are_named_with_the_build_command(built_demo, vocab):
    config = _config(built_demo, langs=("en", "de", "fr"))
    with pytest.raises(layout.NotBuiltError) as error:
        _take(config, vocab, 1)
    message = str(error.value)
    assert "missing the captions of de, fr (" in message, message
    assert f"python -m tools.build_data coco35l --manual_dir {built_demo / 'coco35l'} --data_dir " \
           f"{built_demo / 'tfds'} --langs de,fr" in message
    assert "--build_data" in message


def test_nothing_built_is_an_error_naming_the_size(built_demo, vocab, tmp_path):
    empty = _config(built_demo, tfds_data_dir=str(tmp_path / "none"))
    with pytest.raises(layout.NotBuiltError, match=r"missing the images and the captions of "
                                                   r"en, es, hi, zh \(about [\d.]+ [KM]B\)"):
        _take(empty, vocab, 1)


def test_build_on_request_checks_free_space_first(demo_dir, vocab, tmp_path, monkeypatch):
    from data.build import builder

    config = _config(demo_dir, tfds_data_dir=str(tmp_path / "built"), langs=("en", "zh"))
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=1000))
    with pytest.raises(builder.NotEnoughSpaceError, match=r"needs about [\d.]+ [KM]B"):
        pipeline.ensure_built(config, build=True)
    assert not (tmp_path / "built" / "coco35l" / "images" / "2.0.0" / "dataset_info.json").exists()
    monkeypatch.setattr(shutil, "disk_usage", real)
    pipeline.ensure_built(config, build=True)
    pipeline.ensure_built(config)  # Built: no error.


def test_reading_imports_no_tensorflow(built_demo, tmp_path):
    """Batches from the built demo in processes (trainer and workers) where TensorFlow can't load.
    """
    (tmp_path / "sitecustomize.py").write_text(
        'import sys\nsys.modules["tensorflow"] = None  # `import tensorflow` fails.\n')
    script = textwrap.dedent(f"""
        import sys
        import ml_collections
        from data import pipeline, tokenizer
        config = ml_collections.ConfigDict(dict(
            dataset="coco35l", manual_dir={str(built_demo / "coco35l")!r}, langs=("en", "zh"),
            max_prompt_len=4, max_target_len=16, num_workers=1))
        vocab = tokenizer.get_vocabulary({str(built_demo / "spm" / "demo.model")!r})
        batches = pipeline.train_iterator(config, vocab, global_batch_size=4, image_size=32,
                                          seed=0)
        batch = next(batches)
        batches.close()
        assert batch["image"].shape == (4, 32, 32, 3), batch["image"].shape
        loaded = sorted(m for m, module in sys.modules.items() if module is not None and
                        m.split(".")[0] in ("tensorflow", "tensorflow_datasets", "seqio"))
        print("loaded:", loaded, sys.modules["tensorflow"])
    """)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                            text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "loaded: [] None", result.stdout


def test_a_full_shared_memory_is_an_error_not_a_short_batch(built_demo, vocab, monkeypatch):
    """A worker writes the pixels into Grain's shared memory by pwrite; a short write (a full
    /dev/shm) is an OSError(ENOSPC) naming it, where stores into the mapping would kill the
    worker with SIGBUS."""
    config = _config(built_demo).to_dict()
    captions, _ = pipeline.open_tables(config)
    sampler = pipeline.sampling.Sampler([len(table) for table in captions], 0)
    batch = pipeline.Batch(config, vocab.path, sampler, image_size=32,
                           global_batch_size=4, process_count=1, shared_memory=True)
    made = batch(0)
    for array in made.values():
        array.unlink_on_del()
    assert made["image"].any()
    write = os.pwrite
    monkeypatch.setattr(os, "pwrite", lambda fd, data, offset: write(fd, data[:7], offset))
    shm = set(os.listdir("/dev/shm"))
    with pytest.raises(OSError, match=r"shared memory is full: 3072 bytes of an image did not "
                                      r"fit in /dev/shm") as error:
        batch(1)
    assert error.value.errno == errno.ENOSPC
    assert set(os.listdir("/dev/shm")) <= shm  # The failed batch's memory is freed.
