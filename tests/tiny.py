"""Tiny demo data and configs for tests that run the trainer (in-process or as subprocesses)."""

import contextlib
import os
import subprocess
import sys

import pytest

from configs import demo as demo_config
from data import demo


def write_demo(out_dir):
    """Writes a small demo dataset (release layouts and vocabulary, no TFDS build)."""
    demo.generate(str(out_dir), seed=0, num_train=48, num_restval=16, num_val=8, num_test=4,
                  num_xm3600=8, image_size=32, build_tfds=False)


def tiny_config(data_dir, **overrides):
    """configs/demo.py shrunk to a model and run that take seconds on a CPU."""
    c = demo_config.get_config()
    c.unlock()
    c.update_from_flattened_dict({
        "total_steps": 4, "batch_size": 8, "log_every": 1,
        "vocab.path": f"{data_dir}/spm/demo.model",
        "data.manual_dir": f"{data_dir}/coco35l",
        "data.reader": "files",
        "data.max_target_len": 16,
        "model.image_size": 32,
        "model.vit.width": 32, "model.vit.depth": 1, "model.vit.mlp_dim": 64,
        "model.vit.num_heads": 2,
        "model.t5.emb_dim": 32, "model.t5.num_heads": 2, "model.t5.head_dim": 16,
        "model.t5.mlp_dim": 64, "model.t5.num_encoder_layers": 1,
        "model.t5.num_decoder_layers": 1,
        "evals.xm3600.data_dir": f"{data_dir}/xm3600",
        "evals.xm3600.langs": ("en", "zh"),
        "evals.xm3600.every": 2, "evals.xm3600.batch_size": 4,
        "evals.xm3600.max_decode_len": 8,
        "evals.coco_dev.manual_dir": f"{data_dir}/coco35l",
        "evals.coco_dev.every": 0,  # Off: tests that want it turn it on.
        "evals.coco_dev.batch_size": 4, "evals.coco_dev.max_decode_len": 8,
        "checkpoint.every": 2,
        **overrides,
    })
    return c.lock()


def start_until_first_step(cmd, cwd, env):
    """Starts a training command and reads its output until its first progress line.

    Returns (process, the output lines read so far); the caller sends its signal
    once the process has trained a step, and reads the rest with communicate().
    """
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("step "):
            break
    return proc, lines


# A sitecustomize module that makes TensorFlow absent, as on a machine without it: `import
# tensorflow` raises ModuleNotFoundError and importlib.util.find_spec("tensorflow") is None
# (libraries that probe for TensorFlow take their TF-less path).
_NO_TENSORFLOW = """\
import importlib.machinery

_find_spec = importlib.machinery.PathFinder.find_spec.__func__


def find_spec(cls, name, path=None, target=None):
    if name == "tensorflow" or name.startswith("tensorflow."):
        return None
    return _find_spec(cls, name, path, target)


importlib.machinery.PathFinder.find_spec = classmethod(find_spec)
"""


def write_config_file(path, data_dir, **overrides):
    """Writes a config file for `train.py --config` (and the tools) returning
    `tiny_config(data_dir, **overrides)`; returns its path as a str."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"from tests import tiny\n\n\ndef get_config():\n"
                f"    return tiny.tiny_config({str(data_dir)!r}, **{overrides!r})\n")
    return str(path)


def train_cli(config_file, workdir, *args):
    """Runs `python train.py --config <config_file> --workdir <workdir> <args>` as a user would
    (the repository as the current folder, `cli_env`); returns the CompletedProcess."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return subprocess.run(
        [sys.executable, "train.py", "--config", str(config_file), "--workdir", str(workdir),
         *args], cwd=repo, capture_output=True, text=True, timeout=600, env=cli_env())


def cli_env(**extra):
    """os.environ for a train.py subprocess whose numbers no test compares with another
    process's: on the CPU, XLA's backend without LLVM's optimizations (such tests show what
    happens, not how fast; programs compile in ~60% of the time)."""
    xla_flags = " ".join(filter(None, [os.environ.get("XLA_FLAGS"),
                                       "--xla_backend_optimization_level=0",
                                       "--xla_llvm_disable_expensive_passes=true"]))
    return {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1",
            "XLA_FLAGS": xla_flags, **extra}


def no_tensorflow_env(folder):
    """os.environ for a subprocess in which TensorFlow cannot be imported (a sitecustomize
    module written to `folder`, first on PYTHONPATH).

    XLA's CPU backend runs without LLVM's optimizations there: such processes show
    that things run, not how fast, and compile in ~60% of the time.
    """
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "sitecustomize.py"), "w", encoding="utf-8") as f:
        f.write(_NO_TENSORFLOW)
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH")) if p)
    return cli_env(PYTHONPATH=path)


@contextlib.contextmanager
def small_tmpfs(folder, size):
    """Mounts a tmpfs of `size` ("4m", "64k") on the new folder `folder` for the block: a real
    disk that fills up. Mounting needs root; elsewhere the test is skipped."""
    os.makedirs(folder)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                              str(folder)], capture_output=True, text=True, check=False)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=False)
