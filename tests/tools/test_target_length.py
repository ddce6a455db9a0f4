"""The target-length tool: lengths as the pipeline sees them, the suggestion, the FLOPs."""

import contextlib
import io
import re

import ml_collections
import numpy as np
import pytest

from data import prompts as prompt_lib
from data import tokenizer
from data.releases import coco35l as coco35l_release
from model import captioner
from tests.data.build import release_files
from tests.tiny import tiny_config
from tools import target_length
from training import flops


def test_smallest_length_is_the_multiple_of_8_holding_the_coverage():
    lengths = np.array([5] * 998 + [17, 40])  # 99.9% of 1000 is 999 captions: up to 17.
    assert target_length.smallest_length(lengths) == 24
    assert target_length.smallest_length(np.array([8] * 10)) == 8
    assert target_length.smallest_length(np.array([9] * 10)) == 16
    assert target_length.cut_share(lengths, 24) == pytest.approx(0.001)
    assert target_length.cut_share(lengths, 40) == 0.0
    assert target_length.length_holding(np.array([3, 1, 2, 4]), 50) == 2
    assert target_length.length_holding(np.array([3, 1, 2, 4]), 50.1) == 3


def test_piece_lengths_are_what_the_pipeline_keeps_of_untruncated_captions(tiny_demo):
    vocab = tokenizer.get_vocabulary(f"{tiny_demo}/spm/demo.model")
    captions = ["a red circle", "un cuadrado azul grande a la izquierda", "x"]
    lengths = target_length.piece_lengths(vocab, captions)
    targets = prompt_lib.tokenize_targets(vocab, captions, 64)
    np.testing.assert_array_equal(lengths, (targets != 0).sum(axis=1))
    # A caption longer than max_target_len is cut to it (EOS kept): the tool's "cut" share.
    short = prompt_lib.tokenize_targets(vocab, captions, 3)
    assert ((short != 0).sum(axis=1) == np.minimum(lengths, 3)).all()


@pytest.fixture(scope="module")
def report(tiny_demo):
    """(config, what the tool printed) of the tool on the demo's 40 captions per language,
    run once for the module."""
    config = tiny_config(tiny_demo, **{"data.max_target_len": 32})
    argv = ["target_length", "--config", "configs/demo.py", "--captions_per_lang", "40",
            f"--config.vocab.path={config.vocab.path}",
            f"--config.data.manual_dir={config.data.manual_dir}",
            "--config.data.max_target_len=32"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert target_length.main(argv) == 0
    return config, printed.getvalue()


def _recounted(config):
    """{lang: piece lengths} of each language's sample, recounted from the release files."""
    examples, _ = coco35l_release.read_split(config.data.manual_dir, "train",
                                             ("en", "es", "hi", "zh"), check_images=False)
    vocab = tokenizer.get_vocabulary(config.vocab.path)
    return {lang: target_length.piece_lengths(
        vocab, target_length.sample([c for e in examples[lang] for c in e.captions], 40))
        for lang in ("en", "es", "hi", "zh")}


def _suggested(config):
    """The suggestion of the pooled recount."""
    return target_length.smallest_length(np.concatenate(list(_recounted(config).values())))


def test_tool_reports_every_language(report):
    config, out = report
    # Recount from the release files: each language's sample, then the pooled row.
    for lang, lengths in _recounted(config).items():
        row = re.search(rf"^{lang}\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", out, re.M)
        assert row, out
        assert int(row[1]) == 40
        assert int(row[2]) == np.sort(lengths)[19]  # 50% of 40 captions fit in the 20th.
        assert int(row[6]) == lengths.max()


def test_tool_suggests_the_smallest_length(report):
    config, out = report
    suggested = _suggested(config)
    assert suggested < 32  # The demo's captions are shorter than 32 pieces.
    assert f"--config.data.max_target_len={suggested}" in out


def test_tool_reports_the_flops_of_its_suggestion(report):
    config, out = report
    suggested = _suggested(config)
    vocab = tokenizer.get_vocabulary(config.vocab.path)
    demo = _demo_config(config)
    model = captioner.from_config(demo.model, vocab.vocab_size)
    at = {n: flops.train_step_flops(model.config, 1, demo.data.max_prompt_len, n)
          for n in (32, suggested)}
    want = (f"{at[32] / 1e9:.4g} GFLOP at 32 target positions, "
            f"{at[suggested] / 1e9:.4g} GFLOP at {suggested}")
    assert want in out, out


def _demo_config(config):
    """configs/demo.py with the tiny run's data fields (the model the tool sizes)."""
    from configs import demo
    c = demo.get_config()
    c.unlock()
    c.vocab.path = config.vocab.path
    c.data.manual_dir = config.data.manual_dir
    return c.lock()


@pytest.mark.parametrize("args,message", [
    ([], "{tmp}/dataset_coco.json"),  # The manual_dir holds no release files.
    (["--captions_per_lang=0"], "--captions_per_lang=0"),
    (["--config.data.max_target_lenn=8"], "max_target_lenn"),
])
def test_bad_input_is_one_error_line(tmp_path, tiny_demo, capsys, args, message):
    argv = ["target_length", "--config", "configs/demo.py",
            f"--config.vocab.path={tiny_demo}/spm/demo.model",
            f"--config.data.manual_dir={tmp_path}", *args]
    assert target_length.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    assert message.format(tmp=tmp_path) in err, err


def test_help_lists_the_flags(capsys):
    assert target_length.main(["target_length", "--help"]) == 0
    out = capsys.readouterr().out
    assert "python -m tools.target_length" in out and "--captions_per_lang" in out


@pytest.mark.parametrize("dataset", ["coco35l", "cc3m35l"])
def test_captions_are_read_from_either_release(tmp_path, dataset):
    """Every caption of the training split, per language, as the release files hold them."""
    getattr(release_files, dataset)(tmp_path / "release", **(
        {"shards": True} if dataset == "cc3m35l" else {}))
    config = ml_collections.ConfigDict(dict(
        dataset=dataset, manual_dir=str(tmp_path / "release"), langs=("en", "zh")))
    captions = target_length.read_captions(config)
    if dataset == "cc3m35l":  # Records 0-4, one English caption each.
        assert captions == {"en": [f"picture {k}" for k in range(5)],
                            "zh": [f"zh picture {k}" for k in range(5)]}
    else:  # The train and restval images 5 and 6, two captions each.
        assert sorted(captions["en"]) == sorted(f"{s} {i}" for i in (5, 6)
                                                for s in ("shape number", "another shape"))
        assert sorted(captions["zh"]) == sorted(f"zh: {e}" for e in captions["en"])
