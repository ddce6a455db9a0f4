"""Tests of the preflight, `train.py --check` (training/preflight.py)."""

import os
import re
import subprocess
import sys

from absl import flags
from ml_collections import config_flags

import train
from model import captioner
from tests import tiny
from training import preflight, run_config


def _check(config):
    lines = []
    ready = train.preflight_check(config, say=lines.append)
    return ready, "\n".join(lines)


def test_a_run_with_its_inputs_is_ready_and_an_absent_init_checkpoint_named(four_step_run,
                                                                           tmp_path):
    ready, text = _check(four_step_run.config())
    assert ready and text.endswith("Ready."), text
    assert "MISSING" not in text
    assert re.search(r"batch +8 global = 1 data device\(s\) x 8 per device, in 1 "
                     r"micro-batch\(es\) of 8", text), text
    assert re.search(r"memory +\d+\.\d\d GiB per device \(an estimate: XLA's analysis", text)
    assert os.listdir(tmp_path) == []  # Nothing written (it takes no workdir at all).
    config = four_step_run.config(**{"init.checkpoint": f"{tmp_path}/nothing"})
    ready, text = _check(config)
    assert not ready and "MISSING  pretrained config.init.checkpoint" in text


def test_every_missing_input_is_listed_in_one_run_with_its_fix(four_step_run, tmp_path):
    config = four_step_run.config(**{
        "vocab.path": f"{tmp_path}/absent.model",
        "data.manual_dir": f"{tmp_path}/coco35l", "data.tfds_data_dir": f"{tmp_path}/tfds",
        "init.vit": f"{tmp_path}/vit.npz", "init.mt5": f"{tmp_path}/mt5/checkpoint_1",
        "evals.xm3600.data_dir": f"{tmp_path}/xm3600"})
    ready, text = _check(config)
    assert not ready
    missing = [line for line in text.splitlines() if line.startswith("  MISSING  ")]
    expected = [f"vocabulary {tmp_path}/absent.model: ", "training data ",
                "pretrained config.init.mt5: ", "pretrained config.init.vit: ",
                "evaluation data of config.evals.xm3600: "]
    assert len(missing) == len(expected), text
    for line, start in zip(missing, expected, strict=True):
        assert line.startswith(f"  MISSING  {start}"), line
    assert "python -m data.build coco35l" in missing[1]
    assert "docs/files.md" in missing[1] and "README" not in missing[1]  # A page that exists.
    assert "--config.init.mt5=" in missing[2] and "--config.init.vit=" in missing[3]
    assert "--config.evals.xm3600.data_dir=" in missing[4]
    assert "GiB" not in text  # Compiled only once every input is there.


def test_a_step_too_big_for_the_device_gets_the_smallest_setting_that_fits(
        four_step_run, monkeypatch):
    config = four_step_run.config()
    model = captioner.from_config(config.model, 656)
    mesh = train.state_lib.make_mesh(config.mesh)
    compile_step = train.compile_for_preflight
    full = preflight.step_memory(config, model, mesh, compile_step)
    accum2 = preflight.step_memory(
        preflight.replaced(config, grad_accum_steps=2), model, mesh, compile_step)
    assert accum2 < full
    monkeypatch.setattr(preflight, "device_capacity", lambda: (full + accum2) / 2)
    ready, text = _check(config)
    assert not ready and text.endswith("Not ready: the step does not fit the devices."), text
    assert "the smallest change that does: --config.grad_accum_steps=2 " in text


def _launches():
    """{devices: [command, ...]} of docs/baselines.md's one-GPU and 8-GPU sections."""
    text = open(os.path.join(tiny.REPO, "docs", "baselines.md"), encoding="utf-8").read()
    section = text.split("## One GPU or one 8-GPU host", 1)[1].split("\n## ", 1)[0]
    one, eight = section.split("One host with 8 GPUs", 1)
    commands = lambda part: re.findall(r"^    (python train\.py .*)$", part, re.M)  # noqa: E731
    return {1: commands(one), 8: commands(eight)}


def test_languages_given_as_a_list_flag_are_checked_as_that_list(config_file):
    argv = ["train.py", "--config", config_file, "--config.data.langs=en,es"]
    values = flags.FlagValues()
    config_flags.DEFINE_config_file("config", None, "", flag_values=values, lock_config=True,
                                    sys_argv=argv)
    run_config.parse_flags(values, argv)
    _, text = _check(values.config)
    assert "training data coco35l, built for its 2 languages" in text, text


def _parse(command):
    """The config a documented train.py command line runs."""
    argv = command.split()[1:]
    values = flags.FlagValues()
    # Override flags are defined from the command line they will parse (ml_collections).
    config_flags.DEFINE_config_file("config", None, "", flag_values=values, lock_config=True,
                                    sys_argv=argv)
    flags.DEFINE_string("workdir", None, "", flag_values=values)
    run_config.parse_flags(values, argv)
    return values.config


def test_every_baseline_has_a_one_gpu_and_an_eight_gpu_launch_at_the_paper_batch():
    launches = _launches()
    for devices, commands in launches.items():
        names = [re.search(r"configs/(\w+)\.py", c).group(1) for c in commands]
        assert names == ["bb", "bg", "lg", "bb_cc_pretrain", "bb_cc_finetune"], commands
        for command in commands:
            config = _parse(command)
            run_config.check(config)
            assert config.batch_size == 2048 and config.mesh.data == -1, command
            per_device = config.batch_size // devices
            assert per_device % config.grad_accum_steps == 0, command
            assert per_device // config.grad_accum_steps == 256, command
            assert config.model.remat, command  # What the measured 256 needs on 80 GB.


def test_a_baseline_offline_lists_its_vocabulary_data_and_checkpoints():
    """The one-GPU launch of BB from docs/baselines.md, checked here, where gs:// is out of
    reach and /data/xm3600 absent: everything it lacks, at once, exit status 2."""
    command = _launches()[1][0].split()
    result = subprocess.run([sys.executable, *command[1:], "--check"], cwd=tiny.REPO,
                            capture_output=True, text=True, timeout=600, env=tiny.cli_env())
    assert result.returncode == 2, result.stderr[-2000:]
    missing = [line for line in result.stdout.splitlines() if line.startswith("  MISSING  ")]
    assert len(missing) == 6, result.stdout
    vocab, data, mt5, vit = missing[:4]
    assert "is remote and cannot be read here" in vocab and "--config.vocab.path=" in vocab
    assert "python -m data.build coco35l" in data
    assert "--config.init.mt5=" in mt5 and "--config.init.vit=" in vit
