"""Tests of the preflight, `train.py --check` (training/preflight.py)."""

import fcntl
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
from absl import flags
from ml_collections import config_flags

import train
from model import captioner
from tests import tiny
from training import preflight, run_config
from training import state as state_lib


def _check(config):
    lines = []
    ready = train.preflight_check(config, say=lines.append)
    return ready, "\n".join(lines)


def test_a_run_with_its_inputs_is_ready(four_step_run, tmp_path):
    ready, text = _check(four_step_run.config())
    assert ready and text.endswith("Ready."), text
    assert "MISSING" not in text
    assert re.search(r"batch +8 global = 1 data device\(s\) x 8 per device, in 1 "
                     r"micro-batch\(es\) of 8", text), text
    assert re.search(r"memory +\d+\.\d\d GiB per device \(an estimate: XLA's analysis", text)
    assert os.listdir(tmp_path) == []  # Nothing written (it takes no workdir at all).


def test_an_absent_init_checkpoint_is_named(four_step_run, tmp_path):
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
    assert "python -m tools.build_data coco35l" in missing[1]
    assert "docs/files.md" in missing[1] and "README" not in missing[1]  # A page that exists.
    assert "--config.init.mt5=" in missing[2] and "--config.init.vit=" in missing[3]
    assert "--config.evals.xm3600.data_dir=" in missing[4]
    assert "GiB" not in text  # Compiled only once every input is there.


def test_a_step_too_big_for_the_device_gets_the_smallest_setting_that_fits(
        four_step_run, monkeypatch):
    config = four_step_run.config()
    model = captioner.from_config(config.model, 656)
    mesh = state_lib.make_mesh(config.mesh)
    lower_step = train.lower_train_step
    full = preflight.step_memory(config, model, mesh, lower_step)
    accum2 = preflight.step_memory(
        preflight.replaced(config, grad_accum_steps=2), model, mesh, lower_step)
    assert accum2 < full
    monkeypatch.setattr(preflight, "device_capacity", lambda: (full + accum2) / 2)
    ready, text = _check(config)
    assert not ready and text.endswith("Not ready: the step does not fit the devices."), text
    assert text.splitlines()[-2] == "  the smallest change that fits: --config.grad_accum_steps=2"


def test_sized_for_other_devices_the_fit_is_computed_without_the_inputs(four_step_run, tmp_path):
    config = four_step_run.config(**{"vocab.path": f"{tmp_path}/absent.model",
                                     "data.manual_dir": f"{tmp_path}/coco35l"})
    lines = []
    ready = train.preflight_check(config, say=lines.append, device_memory_gib=1000)
    assert not ready and lines[-1] == "Not ready: fix the MISSING inputs above.", lines
    assert any(line.startswith("  fits     ") for line in lines), lines


def test_a_gpu_sized_on_the_cpu_is_counted_from_the_steps_values(four_step_run):
    config = four_step_run.config()
    model = captioner.from_config(config.model, 656)
    mesh = state_lib.make_mesh(config.mesh)
    count = preflight.gpu_step_memory(config, model, mesh) / preflight.GIB
    lines = []
    assert train.preflight_check(config, say=lines.append, device_memory_gib=1000)
    fits = next(line for line in lines if line.startswith("  fits     "))
    assert fits == (f"  fits     {count:.2f} GiB per device of 1000.0 GiB given (a GPU's, "
                    f"counted from the step's values: docs/baselines.md)"), fits


def test_a_gpu_is_sized_without_compiling_the_step(four_step_run):
    config = four_step_run.config()
    model = captioner.from_config(config.model, 656)

    def compile_step(*args):
        raise AssertionError("compiled")

    lines = []
    assert preflight.fit(config, model, state_lib.make_mesh(config.mesh), compile_step,
                         lines.append, device_memory_gib=1000)
    assert lines[-1].startswith("  fits     "), lines


def test_saved_bytes_are_what_the_backward_pass_keeps_beyond_the_arguments():
    x, w = jax.ShapeDtypeStruct((4, 3), jnp.float32), jax.ShapeDtypeStruct((3, 2), jnp.float32)
    saved = preflight.saved_bytes(lambda x, w: jnp.sum(jnp.sin(x @ w)), x, w)
    assert saved == 4 * 2 * 4  # cos(x @ w), float32 [4, 2]; x and w are the arguments.


def test_check_with_devices_compiles_for_that_many_simulated_devices(config_file):
    process = tiny.run("train.py", "--config", str(config_file), "--check", "--devices", "2",
                       "--device_memory", "1000")
    assert process.code == 0, process.text
    assert "Preflight of 2 cpu device(s) sized for 2 device(s) of 1000 GiB:" in process.text
    assert "= 2 data device(s) x 4 per device" in process.text, process.text


def test_devices_without_check_is_refused_in_one_line(config_file, tmp_path):
    result = tiny.train_main(config_file, tmp_path / "w", "--devices", "2")
    assert result.returncode == 2
    assert result.stderr == "error: --devices and --device_memory size a run for --check only\n"
    assert not (tmp_path / "w").exists()


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


def test_every_baseline_has_launches_of_1_8_gpus_at_the_paper_batch():
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


@pytest.fixture(scope="module")
def baseline_offline_check():
    """The one-GPU launch of BB from docs/baselines.md with `--check`, run here, where gs:// is
    out of reach and /data/xm3600 absent."""
    command = _launches()[1][0].split()
    return subprocess.run([sys.executable, *command[1:], "--check"], cwd=tiny.REPO,
                          capture_output=True, text=True, timeout=600, env=tiny.cli_env())


def test_a_baseline_offline_lists_every_input_it_lacks(baseline_offline_check):
    """Everything the launch lacks, at once, exit status 2."""
    result = baseline_offline_check
    assert result.returncode == 2, result.stderr[-2000:]
    missing = [line for line in result.stdout.splitlines() if line.startswith("  MISSING  ")]
    assert len(missing) == 6, result.stdout
    vocab, data, mt5, vit = missing[:4]
    assert "is remote and cannot be read here" in vocab and "--config.vocab.path=" in vocab
    assert "python -m tools.build_data coco35l" in data
    assert "--config.init.mt5=" in mt5 and "--config.init.vit=" in vit


def test_a_baseline_offline_check_prints_only_the_preflight(baseline_offline_check):
    """No library log line (TensorFlow's CUDA probe, its cloud credentials) around the
    preflight's own lines, although reading gs:// paths loads TensorFlow."""
    result = baseline_offline_check
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Preflight of ") and lines[-1].startswith("Not ready: ")
    assert all(line.startswith("  ") for line in lines[1:-1]), result.stdout


def test_a_missing_g14_says_the_papers_is_not_public():
    """Bg's `init.vit` absent: the fix says that no public g/14 exists to fetch."""
    from configs import bg

    items = preflight._pretrained(bg.get_config(), abstract_params=None)  # noqa: SLF001
    vit = next(item for item in items if item.what.startswith("pretrained config.init.vit"))
    assert "--config.init.vit=" in vit.problem and "is not public" in vit.problem


def _workdir_line(config, workdir, **kwargs):
    lines = []
    ready = train.preflight_check(config, say=lines.append, workdir=str(workdir), **kwargs)
    return ready, next(line for line in lines if f"workdir {workdir}" in line)


def test_check_refuses_a_workdir_that_is_a_file_as_the_trainer_does(four_step_run, tmp_path):
    workdir = tmp_path / "run"
    workdir.write_text("")
    ready, line = _workdir_line(four_step_run.config(), workdir)
    assert not ready
    with pytest.raises(train.TrainingError) as refused:
        train.train_and_evaluate(four_step_run.config(), str(workdir))
    assert line == f"  MISSING  workdir {workdir}: {refused.value}"


def test_check_refuses_a_resume_with_a_changed_guarded_field(four_step_run):
    ready, line = _workdir_line(four_step_run.config(seed=7), four_step_run.workdir)
    assert not ready
    assert "holds checkpoints of a run with another config; changed fields: seed" in line


def test_check_accepts_a_resume_of_the_same_config(four_step_run):
    ready, line = _workdir_line(four_step_run.config(), four_step_run.workdir)
    assert line == f"  ok       workdir {four_step_run.workdir}"


def test_check_refuses_a_workdir_whose_config_json_is_a_folder(four_step_run, tmp_path):
    workdir = tmp_path / "run"
    (workdir / "config.json").mkdir(parents=True)
    ready, line = _workdir_line(four_step_run.config(), workdir, allow_change=True)
    assert not ready
    assert line.endswith("run/config.json is a folder, not a file; move it away"), line


def test_check_refuses_a_workdir_held_by_a_live_trainer(four_step_run, tmp_path):
    from training import workdir as workdir_lib

    workdir = tmp_path / "run"
    workdir.mkdir()
    with open(workdir / workdir_lib.LOCK_FILE, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        ready, line = _workdir_line(four_step_run.config(), workdir)
    assert not ready and "is in use by another trainer" in line, line
