"""The Python API (tools/captioning/predict.py) against an independent pipeline: the trainer's
restore, seqio's vocabulary, greedy decoding and float64 log-probabilities."""

import dataclasses
import os

import jax
import numpy as np
import pytest
from PIL import Image

from data import images as image_lib
from data import prompts as prompt_lib
from data import tokenizer
from model import decode
from tests import tiny
from tests.tools.captioning.conftest import EXPORTED
from tests.training.saved_state import read_saved_state
from tools.captioning import Captioner, Decoding, InputError, restore
from tools.captioning.inputs import to_unit_range


def _independent(tiny_demo, workdir, images, langs, max_len, beam=None):
    """[(tokens, caption, log_prob)] of (image, lang) rows in the API's order, decoded here
    greedily, or by beam search with `beam` = (beam_size, alpha)."""
    config = tiny.tiny_config(str(tiny_demo))
    vocab = tokenizer.get_vocabulary(config.vocab.path)  # seqio
    model, params, _ = tiny.restore_whole_state_params(config, workdir, vocab.vocab_size)
    rows = [(image, lang) for image in images for lang in langs]
    pixels = to_unit_range(np.stack([
        image_lib.read_pixels(image, config.model.image_size) for image, _ in rows]))
    prompts = np.stack([prompt_lib.tokenize_prompt(vocab, lang, "<2{lang}>",
                                                 config.data.max_prompt_len)
                        for _, lang in rows])
    if beam is None:
        tokens = decode.greedy(model, params, pixels, prompts, max_len)
    else:
        tokens, _ = decode.beam_search(model, params, pixels, prompts, max_len, *beam)
    tokens = np.asarray(tokens)
    inputs = np.pad(tokens[:, :-1], ((0, 0), (1, 0)))
    forward = jax.jit(lambda *args: model.apply({"params": params}, *args))  # teacher-forced
    logits = np.asarray(forward(pixels, prompts, inputs), np.float64)
    log_softmax = logits - np.log(np.sum(np.exp(logits - logits.max(-1, keepdims=True)), -1,
                                         keepdims=True)) - logits.max(-1, keepdims=True)
    out = []
    for row, row_log_softmax in zip(tokens, log_softmax, strict=True):
        ids = row.tolist()
        end = ids.index(tokenizer.EOS_ID) + 1 if tokenizer.EOS_ID in ids else len(ids)
        out.append((tuple(ids[:end]), tokenizer.detokenize(vocab, row[None])[0],
                    sum(row_log_softmax[t, ids[t]] for t in range(end))))
    return out


def test_captions_equal_an_independent_decode(captioner, caption_run, tiny_demo, demo_images):
    images = demo_images[:2]
    captions = captioner.caption(images, langs="en,zh", decode="greedy")
    assert [(c.image, c.lang) for c in captions] == [(i, lang) for i in images
                                                     for lang in ("en", "zh")]
    want = _independent(tiny_demo, caption_run, images, ("en", "zh"), captioner.max_len)
    assert [(c.tokens, c.text) for c in captions] == [(ids, text) for ids, text, _ in want]
    np.testing.assert_allclose([c.log_prob for c in captions], [lp for _, _, lp in want], rtol=1e-4)
    assert all(c.text for c in captions)  # nonsense, but not empty: a real comparison
    key = os.path.splitext(os.path.basename(images[0]))[0]  # XM3600's images/<key>.jpg
    assert captions[0].record() == {"image/key": key, "lang": "en",
                                    "caption": captions[0].text, "image": images[0],
                                    "log_prob": round(captions[0].log_prob, 4)}


def test_a_run_gives_the_latest_checkpoint_its_languages_its_caption_length(caption_run,
                                                                            captioner):
    assert captioner.source == f"step 4 of {caption_run}"
    assert captioner.langs == ("en", "es", "hi", "zh")  # data.langs, then the evaluators'
    assert captioner.max_len == 16  # the run's data.max_target_len


def test_the_best_checkpoint_is_read_as_saved(caption_run):
    # The best checkpoint is step 2's (read back here by orbax without a target).
    best = restore.restore(caption_run, "best")
    assert (best.step, best.best) == (2, True)
    _, saved = read_saved_state(caption_run, 2)
    for got, want in zip(jax.tree.leaves(best.params), jax.tree.leaves(saved["params"]),
                         strict=True):
        np.testing.assert_array_equal(got, want)


def test_the_best_checkpoint_captions_otherwise(caption_run, captioner, demo_images):
    by_best = Captioner.from_run(caption_run, step="best")
    assert by_best.source == f"step 2 (best) of {caption_run}"
    images = demo_images[:2]
    assert [c.tokens for c in by_best.caption(images, "en,zh")] != \
        [c.tokens for c in captioner.caption(images, "en,zh")]


def test_a_shorter_caption_length(caption_run, demo_images):
    images = demo_images[:2]
    short = Captioner.from_run(caption_run, step=2, max_len=5)
    assert (short.source, short.max_len) == (f"step 2 of {caption_run}", 5)
    assert all(len(c.tokens) <= 5 for c in short.caption(images[:1], "en"))


def test_check_langs_of_all_or_a_list(captioner):
    # Its languages: the trainer's (sentencepiece's, without TensorFlow).
    assert captioner.check_langs("all") == ("en", "es", "hi", "zh")
    assert captioner.check_langs(["hi", "en"]) == ("hi", "en")


def test_an_unknown_language_is_refused(captioner, demo_images):
    with pytest.raises(InputError, match=r"unknown language 'fr'; known: en, es, hi, zh"):
        captioner.caption(demo_images[:1], langs="en,fr")


def test_the_vocabulary_is_the_trainers_without_tensorflow(captioner):
    # Its vocabulary: the trainer's (sentencepiece's, without TensorFlow).
    assert type(captioner.vocab) is tokenizer.Vocabulary
    assert captioner.vocab.model_proto == tokenizer.get_vocabulary(captioner.vocab.path).model_proto
    assert jax.devices()  # (the API runs on whatever JAX has)


@pytest.mark.parametrize("step, message", [
    (7, r"no checkpoint of step 7 in .*checkpoints; available steps: 2, 4"),
    ("last", r"step 'last': expected a number or 'best'"),
])
def test_bad_steps(caption_run, step, message):
    with pytest.raises(InputError, match=message):
        Captioner.from_run(caption_run, step=step)


def test_runs_that_cannot_caption(caption_run, tmp_path):
    with pytest.raises(InputError, match=r"run folder .*nowhere not found"):
        Captioner.from_run(str(tmp_path / "nowhere"))
    with pytest.raises(InputError, match=r"has no config.json: not a run folder"):
        Captioner.from_run(str(tmp_path))
    untrained = tmp_path / "untrained"
    untrained.mkdir()
    (untrained / "config.json").write_text(open(f"{caption_run}/config.json").read())
    with pytest.raises(InputError, match=r"no checkpoint in .*untrained/checkpoints: train"):
        Captioner.from_run(str(untrained))
    with pytest.raises(InputError, match=r"no checkpoint in .*untrained/checkpoints_best"):
        Captioner.from_run(str(untrained), step="best")


def test_decodings(captioner, caption_run, tiny_demo, demo_images):
    images = demo_images[:2]
    # Beam search with these settings is model/decode's, called here on the same rows.
    beam = captioner.caption(images, "en,es", EXPORTED[1])
    want = _independent(tiny_demo, caption_run, images, ("en", "es"), captioner.max_len,
                        beam=(EXPORTED[1].beam_size, EXPORTED[1].alpha))
    assert [c.tokens for c in beam] == [ids for ids, _, _ in want]
    assert [c.tokens for c in beam] != [c.tokens for c in captioner.caption(images, "en,es")]
    # One seed, one sample; another seed, another.
    first, again = (captioner.caption(images, "en,es", dataclasses.replace(EXPORTED[2], seed=3))
                    for _ in range(2))
    assert [c.tokens for c in first] == [c.tokens for c in again]
    other = captioner.caption(images, "en,es", dataclasses.replace(EXPORTED[2], seed=4))
    assert [c.tokens for c in first] != [c.tokens for c in other]
    with pytest.raises(InputError, match="unknown decoding 'nucleus'"):
        captioner.caption(images, "en", "nucleus")
    with pytest.raises(InputError, match=r"top_k: top-k 100000 exceeds the model's 768 logits"):
        captioner.caption(images, "en", Decoding("sample", top_k=100000))


def test_batches_are_split_with_padding(captioner, demo_images):
    images = demo_images[:3]
    # 3 images x 2 languages in batches of 4 rows: the second batch is padded (repeating
    # its last row), which changes none of its captions.
    split = captioner.caption(images, "en,zh", batch_size=4)
    assert [(c.image, c.lang) for c in split] == [(i, lang) for i in images
                                                  for lang in ("en", "zh")]
    first = captioner.caption(images[:2], "en,zh", batch_size=4)
    last = captioner.caption([images[2], images[2]], "en,zh", batch_size=4)[:2]
    assert [c.tokens for c in split] == [c.tokens for c in first + last]


def test_a_batch_size_of_0_is_refused(captioner, demo_images):
    images = demo_images[:3]
    with pytest.raises(InputError, match="batch size must be an integer >= 1, got 0"):
        captioner.caption(images, "en", batch_size=0)


def test_unreadable_images_stop_or_are_skipped(captioner, demo_images, tmp_path):
    corrupt = tmp_path / "corrupt.jpg"
    corrupt.write_bytes(b"\xff\xd8 not really a JPEG")
    images = [demo_images[0], str(corrupt), demo_images[1]]
    skipped = []
    captions = captioner.caption(images, "en", on_error="skip",
                                 skipped=lambda name, message: skipped.append((name, message)))
    assert [c.image for c in captions] == [demo_images[0], demo_images[1]]
    assert skipped == [(str(corrupt), f"cannot decode image {corrupt}: not an image in a "
                                      f"format PIL reads")]
    # Stop: the captions of the images before it (in the same batch) come first.
    got = []
    with pytest.raises(InputError, match=f"cannot decode image {corrupt}"):
        for caption in captioner.iter_captions(images, "en", batch_size=8):
            got.append(caption.image)
    assert got == [demo_images[0]]
    with pytest.raises(InputError, match="on_error 'ignore'; known: stop, skip"):
        captioner.caption(images, "en", on_error="ignore")


@pytest.mark.parametrize("images, kwargs, message", [
    (5, {}, r"images: expected an image or a list of images .*, got int"),
    (None, {}, r"images: expected an image or a list of images .*, got NoneType"),
    ("demo", {"langs": 5}, r"langs: expected \"all\", \"en,es\" or a sequence of language "
                           r"codes, got int"),
    ("demo", {"langs": [5]}, r"langs: expected \"all\", .* got list"),
    ("demo", {"batch_size": "4"}, r"batch size must be an integer >= 1, got '4'"),
    ("demo", {"batch_size": True}, r"batch size must be an integer >= 1, got True"),
    ("demo", {"batch_size": 2.0}, r"batch size must be an integer >= 1, got 2.0"),
    ("demo", {"on_error": "skip", "skipped": 5}, r"skipped: expected a function "
                                                 r"skipped\(name, message\) or None, got int"),
])
def test_bad_arguments_are_input_errors(captioner, demo_images, images, kwargs, message):
    images = demo_images[:1] if images == "demo" else images
    with pytest.raises(InputError, match=message):
        captioner.caption(images, **kwargs)


def test_a_beam_too_large_for_the_memory_is_an_input_error_before_decoding(captioner,
                                                                          demo_images):
    with pytest.raises(InputError, match=r"^beam_size: 100000000 beams x batch 1 x 16 tokens: "
                                         r"decoding needs about"):
        captioner.caption(demo_images[:1], decode=Decoding("beam", beam_size=100_000_000))


def _by_path(captioner, demo_images):
    by_path, = captioner.caption(demo_images[:1], "en", batch_size=1)
    return by_path


def test_images_as_a_path_or_bytes(captioner, demo_images):
    with open(demo_images[0], "rb") as f:
        data = f.read()
    by_path = _by_path(captioner, demo_images)
    one, = captioner.caption(demo_images[0], "en", batch_size=1)  # a path, not its letters
    raw, named = captioner.caption([data, ("upload.jpg", data)], "en", batch_size=1)
    assert (one.image, raw.image, named.image) == (demo_images[0], "image[0]", "upload.jpg")
    assert one.tokens == raw.tokens == named.tokens == by_path.tokens


def test_images_as_pil_images_or_pixels(captioner, demo_images):
    by_path = _by_path(captioner, demo_images)
    # Decoded pixels (no JPEG draft scaling: the demo's 32x32 images have none to do).
    pixels = np.asarray(Image.open(demo_images[0]).convert("RGB"))
    picture, array = captioner.caption([Image.open(demo_images[0]), pixels], "en", batch_size=1)
    assert picture.tokens == array.tokens == by_path.tokens
    assert array.image == "image[1]"


def test_images_as_a_stack_of_pixels(captioner, demo_images):
    by_path = _by_path(captioner, demo_images)
    pixels = np.asarray(Image.open(demo_images[0]).convert("RGB"))
    stacked = captioner.caption(np.stack([pixels, pixels]), "en", batch_size=2)
    assert [c.tokens for c in stacked] == [by_path.tokens] * 2


def test_images_of_another_type_are_refused(captioner):
    with pytest.raises(InputError, match=r"image\[0\]: expected uint8 pixels .* got float64"):
        captioner.caption([np.zeros((4, 4, 3))], "en")
    with pytest.raises(InputError, match=r"images\[0\]: expected a path, bytes, .* got int"):
        captioner.caption([3], "en")
