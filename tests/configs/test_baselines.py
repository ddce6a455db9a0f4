"""Tests of the paper's baseline configs: fields, paper figures, tower sizes and smoke runs."""

import importlib
import math
import os
import re

import jax
import ml_collections
import numpy as np
import pytest

import train
from configs import common
from data import languages
from evaluation import report
from model import captioner
from tests.training.saved_state import read_metrics
from tools import model_summary as summary
from training import state as state_lib

NAMES = ("bb", "bg", "lg", "bb_cc_pretrain", "bb_cc_finetune")
# Table 3 / models.csv: (paper model, text tower, vision tower, lr, constant steps).
PAPER = {
    "bb": ("BB", "mt5-base", "B/16", 1e-4, 10_000),
    "bg": ("Bg", "mt5-base", "g/14", 1e-4, 10_000),
    "lg": ("Lg", "mt5-large", "g/14", 1e-4, 10_000),
    "bb_cc_pretrain": ("BB+CC", "mt5-base", "B/16", 3e-4, 10_000),
    "bb_cc_finetune": ("BB+CC", "mt5-base", "B/16", 3e-5, None),
}
CHIPS = 64  # A 4x4x4 TPU v4 slice.


def _config(name, variant=None):
    return importlib.import_module(f"configs.{name}").get_config(variant)


def test_unknown_variant_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown config variant 'tiny'; known: '', 'smoke'"):
        _config("bb", "tiny")


@pytest.mark.parametrize("name", NAMES)
def test_full_config_follows_the_paper(name):
    config = _config(name)
    _, t5, vit, lr, constant_steps = PAPER[name]
    assert config.model.t5.variant == t5 and config.model.vit.variant == vit
    assert config.lr.base == lr and config.batch_size == 2048
    assert config.vocab.path == "gs://t5-data/vocabs/mc4.250000.100extra/sentencepiece.model"
    assert tuple(config.data.langs) == tuple(languages.TRAIN_35L_LANGS)
    assert len(config.data.langs) == 35
    assert config.model.image_size == 224 and config.model.fusion == "pooled"
    assert config.model.dtype == "bfloat16"
    # Layers under nn.scan (compile time); the g/14 towers also rematerialize (memory).
    assert config.model.scan and config.model.remat == (vit == "g/14")
    assert tuple(config.evals.xm3600.langs) == ("en", "es", "hi", "zh")
    if constant_steps is not None:
        assert config.lr.schedule == "rsqrt" and config.lr.constant_steps == constant_steps
        assert config.total_steps > constant_steps  # The decay phase is reached.
        size = t5.split("-")[1]
        assert config.init.mt5 == (
            f"gs://t5-data/pretrained_models/t5x/mt5_{size}/checkpoint_1000000")
        assert config.init.vit.endswith(".npz") and not config.init.checkpoint
    expected_data = "cc3m35l" if name == "bb_cc_pretrain" else "coco35l"
    assert config.data.dataset == expected_data


def test_finetune_is_one_epoch_at_a_constant_rate_from_the_pretraining_run():
    config = _config("bb_cc_finetune")
    assert config.lr.schedule == "constant" and config.lr.base == 3e-5
    # One pass over COCO-35L's (image, language) pairs: 113,287 images x 35 languages.
    assert config.total_steps == round(113_287 * 35 / 2048) == 1936
    assert config.init.checkpoint and not config.init.mt5 and not config.init.vit
    assert config.model.to_dict() == _config("bb_cc_pretrain").model.to_dict()
    assert config.model.to_dict() == _config("bb").model.to_dict()


@pytest.mark.parametrize("name", ["bb", "bg", "lg"])
def test_mesh_fits_a_64_chip_slice(name):
    config = _config(name)
    model_axis = config.mesh.model
    data_axis = CHIPS // model_axis if config.mesh.data == -1 else config.mesh.data
    assert data_axis * model_axis == CHIPS
    assert config.batch_size % (data_axis * config.grad_accum_steps) == 0
    assert config.evals.xm3600.batch_size % data_axis == 0
    assert config.evals.coco_dev.batch_size % data_axis == 0
    if config.mesh.fsdp:  # The embed axis of both towers is split over the data axis.
        widths = summary.captioner.captioner_config(config.model)
        assert widths.vit.width % data_axis == 0 and widths.t5.emb_dim % data_axis == 0


def _map_head_size(model_config):
    params = captioner.abstract_params(captioner.from_config(model_config), boxed=False)
    head = params["img"].get("MAPHead_0", {})
    return sum(math.prod(x.shape) for x in jax.tree.leaves(head))


@pytest.mark.parametrize("name,vit_paper,t5_expected", [
    ("bb", 86e6, 582e6),     # mT5-base with both vocabulary matrices (tools/model_summary.py)
    ("bg", 1011e6, 582e6),
    ("lg", 1011e6, 1230e6),  # mT5-large: the paper's 1230M
])
def test_full_towers_have_the_papers_sizes(name, vit_paper, t5_expected):
    config = _config(name)
    model_config = ml_collections.ConfigDict(config.model.to_dict())
    model_config.scan = True  # Traces one layer per stack, not each: the same counts.
    counts = summary.count_params(model_config)  # Built abstractly (jax.eval_shape).
    # The paper counts the ViT backbone: without the MAP head a g/14 pools with.
    backbone = counts["vit"] - _map_head_size(model_config)
    assert abs(backbone - vit_paper) < 0.5e6, backbone
    assert abs(counts["t5"] - t5_expected) < 1e6, counts["t5"]
    assert counts["total"] == counts["vit"] + counts["img_proj"] + counts["t5"]


def test_full_training_state_builds_abstractly():
    """Lg's full train state (params + Adafactor) and its FSDP shardings, unallocated."""
    config = _config("lg")
    model = captioner.from_config(config.model, vocab_size=250_100)
    tx, schedule = state_lib.create_optimizer(config)
    mesh = state_lib.make_mesh(config.mesh)
    abstract, shardings = state_lib.state_shardings(model, tx, mesh, state_lib.axis_rules(config))
    embedding = ("params", "t5", "token_embedder", "embedding")
    leaf, sharding = abstract, shardings
    for key in embedding:
        leaf, sharding = leaf[key], sharding[key]
    assert leaf.shape == (250_112, 1024)  # mT5's vocabulary padded to a multiple of 128.
    assert tuple(sharding.spec) == ("model", "data")  # vocab over model, embed over data.
    assert jax.tree.structure(abstract) == jax.tree.structure(shardings)
    assert float(schedule(10_000)) == pytest.approx(1e-4)
    assert float(schedule(40_000)) == pytest.approx(0.5e-4)


def _paper_scores():
    return report.read_paper_scores(report.paper_reference_dir() / report.PAPER_SCORES_FILE)


@pytest.mark.parametrize("name", ["bb", "bg", "lg", "bb_cc_finetune"])
def test_docstring_states_the_papers_averages(name):
    paper = _paper_scores()
    model = PAPER[name][0]
    doc = " ".join(importlib.import_module(f"configs.{name}").__doc__.split())
    xm, dev = paper["xm3600"][model], paper["coco_dev"][model]
    avg_35 = report.averages(xm)["avg_35"]
    core = np.mean([xm[lang] for lang in ("en", "es", "hi", "zh")])
    assert f"35 training languages {avg_35:.3f}" in doc
    assert f"core-four average {core:.3f}" in doc
    assert f"COCO-dev {report.averages(dev)['avg_35']:.3f}" in doc
    for lang in ("en", "es", "hi", "zh"):
        assert f"{lang} {xm[lang]:.3f}" in doc
    assert re.search(r"python train\.py --config configs/" + name + r"\.py", doc)


# ------------------------------------------------------------ smoke runs ----
def _on_tiny_demo(config, data_dir):
    """Points a smoke config's demo_data paths at the tests' tiny demo (a locked dict allows)."""
    assert config.vocab.path == f"{common.DEMO_DIR}/spm/demo.model"
    config.vocab.path = f"{data_dir}/spm/demo.model"
    config.data.manual_dir = f"{data_dir}/coco35l"
    config.evals.xm3600.data_dir = f"{data_dir}/xm3600"
    config.evals.coco_dev.manual_dir = f"{data_dir}/coco35l"
    return config


def _check_smoke_run(workdir, config):
    records = read_metrics(workdir)
    steps = [r for r in records if "train/loss" in r]
    assert [r["step"] for r in steps] == [1, 2, 3, 4]
    assert all(np.isfinite(r["train/loss"]) for r in steps)
    base = config.lr.base
    if config.lr.schedule == "rsqrt":  # Constant for 2 steps, then base * sqrt(2 / step).
        expected = [base, base, base, base * math.sqrt(2 / 3)]
    else:
        expected = [base] * 4
    np.testing.assert_allclose([r["learning_rate"] for r in steps], expected, rtol=1e-6)
    evals = {r["step"]: r for r in records if "eval/cider_d/avg" in r}
    assert sorted(evals) == [0, 2, 4]
    assert {k for k in evals[4] if k.startswith("eval/")} == {
        f"eval/cider_d/{lang}" for lang in ("en", "es", "hi", "zh", "avg")}
    # COCO-dev runs in the loop too, less often (every 4 steps: at 0 and at the end).
    dev = {r["step"]: r for r in records if "eval/coco_dev/cider_d/avg" in r}
    assert sorted(dev) == [0, 4]
    assert {k for k in dev[4] if k.startswith("eval/")} == {
        f"eval/coco_dev/cider_d/{lang}" for lang in ("en", "es", "hi", "zh", "avg")}
    return evals


@pytest.mark.parametrize("name", ["bb", "bg", "lg"])
def test_smoke_variant_trains_on_the_demo_data(name, tiny_demo, tmp_path):
    config = _on_tiny_demo(_config(name, "smoke"), tiny_demo)
    lines = []  # The preflight first: ready, with the step's memory and batch.
    assert train.preflight_check(config, say=lines.append) and lines[-1] == "Ready.", lines
    assert any(line.startswith("  memory ") for line in lines), lines
    train.train_and_evaluate(config, str(tmp_path / name))
    _check_smoke_run(str(tmp_path / name), config)


@pytest.fixture(scope="module")
def pretrain_smoke_run(tiny_demo, built_once):
    """(workdir, config) of bb_cc_pretrain's smoke run, trained once per test run (read only:
    the finetuning starts from it)."""
    config = _on_tiny_demo(_config("bb_cc_pretrain", "smoke"), tiny_demo)
    folder = built_once("bb_cc_pretrain_smoke", lambda path: train.train_and_evaluate(
        config, os.path.join(path, "bb_cc_pretrain")))
    return os.path.join(folder, "bb_cc_pretrain"), config


def test_pretrain_smoke_variant_trains(pretrain_smoke_run):
    workdir, config = pretrain_smoke_run
    _check_smoke_run(workdir, config)


def test_finetune_smoke_starts_from_the_pretraining_checkpoint(pretrain_smoke_run, tiny_demo,
                                                                tmp_path):
    pretrain_dir, pretrain_config = pretrain_smoke_run
    config = _on_tiny_demo(_config("bb_cc_finetune", "smoke"), tiny_demo)
    assert config.init.checkpoint == "runs/bb_cc_pretrain_smoke"
    config.init.checkpoint = pretrain_dir
    workdir = str(tmp_path / "bb_cc_finetune")
    train.train_and_evaluate(config, workdir)
    evals = _check_smoke_run(workdir, config)
    # Before any finetuning step the model is the pretraining run's last one.
    pretrained = _check_smoke_run(pretrain_dir, pretrain_config)[4]
    for key, value in pretrained.items():
        if key.startswith("eval/"):
            assert evals[0][key] == pytest.approx(value, rel=1e-9, abs=1e-12)
