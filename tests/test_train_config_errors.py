"""Every value given to train.py is checked before any work, and nothing is written first: a bad
value is one `error:` line with exit status 2, and a new workdir is not created."""

import os
import re

import pytest

import errors
import train
from tests import tiny
from tests.tiny import tiny_config
from training import run_config


@pytest.mark.parametrize("args,message", [
    (["--config.model.dropout=1.5"],
     r"config.model.dropout=1.5; expected a finite number in \[0, 1\)"),
    (["--config.lr.base=inf"], r"config.lr.base=inf; expected a finite number > 0"),
    (["--config.model.t5.vocab_size=10"],
     r"config.model.t5.vocab_size=10 is smaller than the vocabulary .*demo.model \(\d+ ids\)"),
    (["--config.mesh.model=3"],
     r"config.mesh data=-1 x model=3 does not cover the 1 devices here \(cpu\)"),
    (["stray"], r"unexpected argument 'stray': train.py takes only flags"),
], ids=["dropout", "lr_inf", "vocab_size", "mesh", "positional"])
def test_bad_value_on_the_command_line_is_one_error_line_leaving_no_workdir(config_file, tmp_path,
                                                                        args, message):
    workdir = tmp_path / "run"
    result = tiny.train_main(config_file, workdir, *args)
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr and "USAGE" not in result.stderr, result.stderr[-2000:]
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and re.match(rf"error: {message}", lines[0]), lines
    assert not workdir.exists()


@pytest.mark.parametrize("field", ["mt5", "vit", "checkpoint"])
def test_an_unreadable_pretrained_checkpoint_is_one_error_line_leaving_no_workdir(config_file,
                                                                            tmp_path, field):
    empty = tmp_path / "empty"
    empty.mkdir()
    workdir = tmp_path / "run"
    result = tiny.train_main(config_file, workdir, f"--config.init.{field}={empty}")
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: init.{field}: "), lines
    assert not workdir.exists()


@pytest.mark.parametrize("contents,cause", [
    (None, r"\[Errno 2\] No such file or directory: '{path}'"),
    ("folder", r"\[Errno 21\] Is a directory: '{path}'"),
    ("def get_config():\n    raise ValueError('boom')\n", r"ValueError: boom"),
], ids=["missing", "folder", "raises"])
def test_a_config_file_that_does_not_load_is_one_line_naming_it(tmp_path, contents, cause):
    path = tmp_path / "config.py"
    if contents == "folder":
        path.mkdir()
    elif contents:
        path.write_text(contents)
    result = tiny.train_main(path, tmp_path / "run")
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert re.fullmatch(rf"error: --config={re.escape(str(path))}: cannot load it: "
                        + cause.format(path=re.escape(str(path))), lines[0]), lines


@pytest.mark.parametrize("overrides,error,message", [
    ({"data.prompt_template": "<2xx>"}, run_config.ConfigError,
     r"config.data.prompt_template='<2xx>': prompt template '<2xx>' has no '\{lang\}' field"),
    ({"data.max_prompt_len": 2}, run_config.ConfigError,
     r"config.data.max_prompt_len=2 is too short for the prompt '<2en>'"),
    ({"data.tfds_data_dir": "/nonexistent/tfds"}, train.TrainingError,
     r"config.data: coco35l is not built for these languages in /nonexistent/tfds"),
    ({"mesh.data": 2}, run_config.ConfigError,
     r"config.mesh data=2 x model=1 does not cover the 1 devices here"),
    ({"vocab.path": "/nonexistent/spm.model"}, errors.InputError,
     r"config.vocab.path: SentencePiece model not found: /nonexistent/spm.model"),
    ({"evals.xm3600.data_dir": "/nonexistent"}, train.TrainingError,
     r"^config.evals.xm3600: XM3600 captions file not found: /nonexistent/captions.jsonl"),
    ({"model.dtype": "float17"}, run_config.ConfigError,
     r"config.model.dtype='float17'; known: float32, bfloat16"),
    ({"evals.xm3600.langs": ("en", "xx")}, run_config.ConfigError,
     r"config.evals.xm3600.langs: unknown language 'xx'; known: ar, bn"),
    ({"data.corrupt_images": "ignore"}, run_config.ConfigError,
     r"config.data.corrupt_images='ignore'; known: stop, skip"),
    ({"checkpoint.best_metric": "eval/bleu"}, run_config.ConfigError,
     r"config.checkpoint.best_metric='eval/bleu' is not logged by the in-loop evaluators"),
    ({"evals.coco_dev.type": "coco_dev_bleu"}, run_config.ConfigError,
     r"config.evals.coco_dev.type='coco_dev_bleu'"),
    ({"batch_size": 0}, run_config.ConfigError, r"config.batch_size=0; expected an integer >= 1"),
    ({"data.max_target_len": 1000000}, run_config.ConfigError,
     r"config.data.max_target_len=1000000; expected an integer in \[1, 1024\]"),
], ids=["prompt_template", "max_prompt_len", "tfds_data_dir", "mesh", "vocab",
        "eval_data", "dtype", "eval_langs", "corrupt_images", "best_metric", "eval_type",
        "batch_size", "max_target_len"])
def test_bad_value_is_refused_before_the_workdir_is_created(tiny_demo, tmp_path, overrides,
                                                            error, message):
    workdir = tmp_path / "new" / "run"
    config = tiny_config(str(tiny_demo), **overrides)
    with pytest.raises(error, match=message):
        train.train_and_evaluate(config, str(workdir))
    assert not (tmp_path / "new").exists()


def test_metrics_file_that_is_a_folder_is_refused_before_any_work(tiny_demo, tmp_path):
    workdir = tmp_path / "run"
    (workdir / "metrics.jsonl").mkdir(parents=True)
    with pytest.raises(train.TrainingError, match=r"run/metrics.jsonl is a folder, not a file"):
        train.train_and_evaluate(tiny_config(str(tiny_demo)), str(workdir))
    assert os.listdir(workdir) == ["metrics.jsonl"]  # Nothing else written.
