"""The evaluator contract: the name table and module paths, in-loop XM3600 and COCO-dev
runs, the best metric.

`test_demo_model_in_loop_scores_are_pinned` trains the demo config's model on the tiny demo data
for 60 steps and pins the in-loop XM3600 CIDEr-D at steps 0, 30 and 60 (the same run evaluates
COCO-dev every 30 steps and keeps the best checkpoint by it, which the other tests of the run
check: neither changes the training numerics): first the values of the code before eval/ was
split into evaluation/cider/ and evaluation/evaluators/, measured again after the "rbg" key, the
fused loss and jax.nn.dot_product_attention changed the training numerics. XLA's CPU numerics
are deterministic on this repository's machines.
"""

import json
import os

import ml_collections
import pytest

import train
from configs import demo as demo_config
from data import tokenizer
from evaluation import evaluate
from evaluation import evaluators as evaluators_lib
from evaluation.evaluators import caption_evaluator
from model import captioner
from tests.tiny import tiny_config
from tests.training.saved_state import read_metrics
from training import checkpointing

# eval/cider_d/<lang> at steps 0, 30, 60 of `_pinned_config` (see the module docstring).
PINNED = {
    0: {"en": 0.0, "es": 0.0, "hi": 0.05051478834410204, "zh": 0.05083231587752469,
        "avg": 0.025336776055406685},
    30: {"en": 0.005714811743564889, "es": 0.8265305404908743, "hi": 0.33676673114621536,
         "zh": 0.03426574848134607, "avg": 0.30081945796550014},
    60: {"en": 1.3643818728054409, "es": 0.6891167926650696, "hi": 0.8117559254824239,
         "zh": 0.4539593661211953, "avg": 0.8298034892685324},
}


BEST_METRIC = "eval/coco_dev/cider_d/avg"


def _pinned_config(data_dir):
    """configs/demo.py's model and evaluators, on the tiny demo data, 60 steps; the best
    checkpoint by COCO-dev."""
    c = demo_config.get_config()
    c.unlock()
    c.update_from_flattened_dict({
        "total_steps": 60, "batch_size": 16, "log_every": 30, "lr.constant_steps": 1000,
        "vocab.path": f"{data_dir}/spm/demo.model", "data.manual_dir": f"{data_dir}/coco35l",
        "model.image_size": 32, "checkpoint.every": 30,
        "evals.xm3600.data_dir": f"{data_dir}/xm3600", "evals.xm3600.every": 30,
        "evals.xm3600.batch_size": 8,
        "evals.coco_dev.manual_dir": f"{data_dir}/coco35l", "evals.coco_dev.every": 30,
        "evals.coco_dev.batch_size": 8, "checkpoint.best_metric": BEST_METRIC})
    return c.lock()


@pytest.fixture(scope="module")
def pinned_run(tiny_demo, built_once):
    """(workdir, config) of `_pinned_config`, trained once per test run (read only)."""
    config = _pinned_config(tiny_demo)
    folder = built_once("pinned_run", lambda path: train.train_and_evaluate(
        config, os.path.join(path, "run")))
    return os.path.join(folder, "run"), config


def test_demo_model_in_loop_scores_are_pinned(pinned_run):
    workdir, _ = pinned_run
    logged = {r["step"]: r for r in read_metrics(workdir) if "eval/cider_d/avg" in r}
    assert sorted(logged) == sorted(PINNED)
    for step, scores in PINNED.items():
        for lang, value in scores.items():
            assert logged[step][f"eval/cider_d/{lang}"] == pytest.approx(value, rel=1e-9,
                                                                         abs=1e-12), (step, lang)


def _coco_dev_logged(workdir):
    return {r["step"]: r for r in read_metrics(workdir) if "eval/coco_dev/cider_d/avg" in r}


def test_coco_dev_runs_in_the_loop(pinned_run):
    workdir, _ = pinned_run
    assert sorted(_coco_dev_logged(workdir)) == [0, 30, 60]  # Every 30 steps, from step 0.


@pytest.fixture(scope="module")
def coco_dev_tool(pinned_run, tmp_path_factory):
    """The results folder of the checkpoint tool run on step 60 with the COCO-dev evaluator
    only."""
    workdir, config = pinned_run
    out = tmp_path_factory.mktemp("coco_dev") / "tool"
    evaluate.evaluate_checkpoint(config, workdir, step=60, names=["coco_dev"], langs="config",
                                 out=str(out))
    return out


def test_coco_dev_in_the_loop_equals_the_tool(pinned_run, coco_dev_tool):
    workdir, _ = pinned_run
    dev = _coco_dev_logged(workdir)
    with open(coco_dev_tool / "metrics.json", encoding="utf-8") as f:
        tool = json.load(f)
    for lang in ("en", "es", "hi", "zh", "avg"):
        key = f"eval/coco_dev/cider_d/{lang}"
        assert tool[key] == dev[60][key]  # The same evaluator code: bit for bit.


def test_coco_dev_alone_writes_no_xm3600_report(coco_dev_tool):
    # No XM3600 evaluator ran: no XM3600 report, only predictions and metrics.
    assert not (coco_dev_tool / "table.md").exists()
    assert (coco_dev_tool / "predictions_coco_dev_hi.jsonl").exists()


def _setup(config):
    vocab = tokenizer.get_vocabulary(config.vocab.path)
    model = captioner.from_config(config.model, vocab.vocab_size)
    return caption_evaluator.Setup(model, vocab, config.data, config.model.image_size)


@pytest.fixture(scope="module")
def tiny_setup(tiny_demo):
    """(config, evaluator setup) of the tiny configuration."""
    config = tiny_config(str(tiny_demo))
    return config, _setup(config)


def test_unknown_type_is_a_clear_error(tiny_setup):
    config, setup = tiny_setup
    evals = ml_collections.ConfigDict(config.evals.to_dict())
    evals.xm3600.type = "xm3600_bleu"
    with pytest.raises(ValueError, match=r"config.evals.xm3600.type='xm3600_bleu'; known: "
                                         r"xm3600_cider, coco_dev_cider, or a 'module:Class'"):
        evaluators_lib.build(evals, setup)


def test_a_type_by_module_path_must_import(tiny_setup):
    config, setup = tiny_setup
    evals = ml_collections.ConfigDict(config.evals.to_dict())
    # Any other evaluator is named by its module path, which must import.
    evals.xm3600.type = "evaluation.evaluators.caption_evaluator:NoSuchEvaluator"
    with pytest.raises(ValueError, match=r"config.evals.xm3600.type='evaluation.evaluators"
                                         r".caption_evaluator:NoSuchEvaluator': .*NoSuchEv"):
        evaluators_lib.build(evals, setup)
    evals.xm3600.type = "evaluation.no_such_module:Evaluator"
    with pytest.raises(ValueError, match=r"type='evaluation.no_such_module:Evaluator': No "
                                         r"module named 'evaluation.no_such_module'"):
        evaluators_lib.build(evals, setup)


def test_a_type_by_module_path_builds_as_the_tables_entry(tiny_setup):
    config, setup = tiny_setup
    evals = ml_collections.ConfigDict(config.evals.to_dict())
    evals.xm3600.type = "evaluation.evaluators.xm3600_cider:Xm3600Cider"  # The table's entry.
    assert set(evaluators_lib.build(evals, setup, names=["xm3600"])) == {"xm3600"}


def test_unknown_name_is_a_clear_error(tiny_setup):
    config, setup = tiny_setup
    with pytest.raises(ValueError, match=r"no evaluator 'xm' in config.evals; it has "
                                         r"coco_dev, xm3600"):
        evaluators_lib.build(config.evals, setup, names=["xm"])


def test_clashing_metrics_are_a_clear_error(tiny_setup):
    config, setup = tiny_setup
    evals = ml_collections.ConfigDict(config.evals.to_dict())
    evals.again = config.evals.xm3600.to_dict()
    with pytest.raises(ValueError, match=r"config.evals.xm3600 and config.evals.again both log "
                                         r"eval/cider_d/en"):
        evaluators_lib.build(evals, setup)


def test_coco_dev_languages_outside_coco35l_are_refused(tiny_demo):
    config = tiny_config(str(tiny_demo), **{"evals.coco_dev.langs": ("en", "quz")})
    with pytest.raises(ValueError, match=r"config.evals.coco_dev.langs: unknown language 'quz'; "
                                         r"known: ar, bn, cs"):
        evaluators_lib.build(config.evals, _setup(config), names=["coco_dev"])


def test_best_checkpoint_follows_the_configured_metric(pinned_run):
    workdir, _ = pinned_run
    dev = {r["step"]: r[BEST_METRIC] for r in read_metrics(workdir) if BEST_METRIC in r}
    (kept,) = checkpointing.best_manager(workdir, BEST_METRIC).all_steps()
    assert kept in (30, 60) and dev[kept] == max(dev[30], dev[60])


def test_a_best_metric_no_evaluator_logs_is_refused(tiny_demo, tmp_path):
    config = tiny_config(str(tiny_demo), **{"checkpoint.best_metric": "eval/bleu/avg"})
    with pytest.raises(ValueError, match=r"best_metric='eval/bleu/avg' is not logged by the "
                                         r"in-loop evaluators; they log eval/cider_d/en"):
        train.train_and_evaluate(config, str(tmp_path / "run"))
    assert not checkpointing.steps(str(tmp_path / "run"))
