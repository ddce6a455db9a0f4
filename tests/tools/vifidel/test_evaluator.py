"""The `vifidel` evaluator: in the training loop on the tiny demo data, its files through the
checkpoint tool, and its config errors."""

import ml_collections
import numpy as np
import pytest

import train
from data import tokenizer
from evaluation import evaluate
from evaluation import evaluators as evaluators_lib
from evaluation.evaluators import caption_evaluator
from formats import per_image as per_image_format
from formats import predictions as predictions_format
from formats import scores as scores_format
from model import captioner
from tests.tiny import tiny_config
from tests.training.saved_state import read_metrics
from tools.vifidel import evaluator as vifidel_evaluator


def _vifidel(data_dir, **fields):
    return ml_collections.ConfigDict({
        "type": "tools.vifidel.evaluator:Xm3600Vifidel",
        "every": 2, "data_dir": f"{data_dir}/xm3600", "langs": ("en", "zh"),
        "batch_size": 4, "max_decode_len": 8,
        "vectors": f"{data_dir}/vectors/wiki.{{lang}}.align.vec", **fields})


def _config(data_dir, **fields):
    # Two steps, VIFIDEL at steps 0 and 2, the XM3600 CIDEr-D evaluator off (fast), the best
    # checkpoint by VIFIDEL.
    config = tiny_config(str(data_dir), **{"total_steps": 2, "evals.xm3600.every": 0,
                                           "checkpoint.best_metric": "eval/vifidel/avg"})
    config.unlock()
    config.evals.vifidel = _vifidel(data_dir, **fields)
    return config.lock()


@pytest.fixture(scope="module")
def vifidel_run(tiny_demo, tmp_path_factory):
    """(config, workdir) of the two-step run with VIFIDEL in the loop, trained once for the
    module."""
    workdir = str(tmp_path_factory.mktemp("vifidel") / "run")
    config = _config(tiny_demo)
    train.train_and_evaluate(config, workdir)
    return config, workdir


def _logged(workdir):
    return {r["step"]: r for r in read_metrics(workdir) if "eval/vifidel/avg" in r}


def test_vifidel_runs_in_the_loop(vifidel_run):
    _, workdir = vifidel_run
    logged = _logged(workdir)
    assert sorted(logged) == [0, 2]
    for record in logged.values():
        scores = [record[f"eval/vifidel/{lang}"] for lang in ("en", "zh")]
        assert all(0 <= s <= 1 for s in scores)
        assert record["eval/vifidel/avg"] == pytest.approx(sum(scores) / 2)


def test_vifidel_writes_its_files_through_the_tool(vifidel_run, tmp_path):
    config, workdir = vifidel_run
    logged = _logged(workdir)
    # The checkpoint tool: predictions and a report by the evaluator contract's defaults.
    out = tmp_path / "results"
    evaluate.evaluate_checkpoint(config, workdir, names=["vifidel"], langs="config", out=str(out))
    summary = scores_format.read(out / "scores_vifidel.json")
    per_caption = per_image_format.read(out / "per_image_vifidel.jsonl")
    assert summary["metric"] == "vifidel" and summary["step"] == 2
    for lang in ("en", "zh"):
        captions = predictions_format.read_language(out / f"predictions_vifidel_{lang}.jsonl", lang)
        assert len(captions) == 8 and set(per_caption[lang]) <= set(captions)
        assert summary["num_images"][lang] == len(per_caption[lang])
        assert summary["scores"][lang] == pytest.approx(np.mean(list(per_caption[lang].values())))
        assert summary["scores"][lang] == pytest.approx(logged[2][f"eval/vifidel/{lang}"])
    assert "| en |" in (out / "table_vifidel.md").read_text()
    assert not (out / "scores.json").exists()  # XM3600's report is XM3600's.


def _setup(config):
    vocab = tokenizer.get_vocabulary(config.vocab.path)
    model = captioner.from_config(config.model, vocab.vocab_size)
    return caption_evaluator.Setup(model, vocab, config.data, config.model.image_size)


@pytest.mark.parametrize("fields, message", [
    ({"vectors": ""}, r"config.evals.vifidel.vectors is required"),
    ({"vectors": ("en={data}/vectors/wiki.en.align.vec",)},
     r"config.evals.vifidel: no word vectors for 'zh'"),
    ({"labels": "{data}/coco35l/dataset_coco.json"},
     r"config.evals.vifidel: .*dataset_coco.json: missing column\(s\) ImageID"),
    ({"penalty": "half"}, r"config.evals.vifidel: unknown VIFIDEL penalty 'half'"),
])
def test_bad_vifidel_configs_name_the_field(tiny_demo, fields, message):
    fields = {k: v.format(data=tiny_demo) if isinstance(v, str) else
              tuple(x.format(data=tiny_demo) for x in v) for k, v in fields.items()}
    config = _config(tiny_demo, **fields)
    with pytest.raises(ValueError, match=message):
        evaluators_lib.build(config.evals, _setup(config), names=["vifidel"])


def test_settings_from_config_has_the_command_lines_options():
    config = ml_collections.ConfigDict({"data_dir": "d", "vectors": "v/{lang}.vec"})
    default = vifidel_evaluator.settings_from_config("vifidel", config)
    assert (default.penalty, default.cost_power, default.stopwords, default.label_weights) == (
        "halved", 2, "function", "instances")  # the paper's setting
    config.update({"penalty": "clipped", "cost_power": 1, "stopwords": "none",
                   "label_weights": "binary", "min_confidence": 0.5})
    chosen = vifidel_evaluator.settings_from_config("vifidel", config)
    assert (chosen.penalty, chosen.cost_power, chosen.stopwords, chosen.label_weights,
            chosen.min_confidence) == ("clipped", 1, "none", "binary", 0.5)
