"""The training process runs where TensorFlow is not installed (as on the GPU machines).

In subprocesses whose `import tensorflow` fails (tests/tiny.no_tensorflow_env),
the demo is built with the normal command (`python -m data.demo`, TFDS files
included), `train.py` trains a tiny model on it through the TFDS reader, with an
in-loop evaluation and checkpoints (and at its exit has imported no plotting library,
web framework or optimal-transport solver: matplotlib, flask, ot),
`python -m evaluation.evaluate` evaluates its last checkpoint again (the same scores),
and TensorBoard (as installed without TensorFlow) reads every scalar of metrics.jsonl from the
run's event files. The benchmarks run without TensorFlow in
tests/benchmarks/test_accelerator_report.py.
"""

import json
import math
import os
import subprocess
import sys

import pytest

from tests import tiny

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 4

# configs/demo.py shrunk as tests/tiny.tiny_config, reading the TFDS build (the default).
TINY = {
    "total_steps": STEPS, "batch_size": 8, "log_every": 2, "checkpoint.every": 2,
    "model.image_size": 32, "model.vit.width": 32, "model.vit.depth": 1,
    "model.vit.mlp_dim": 64, "model.vit.num_heads": 2, "model.t5.emb_dim": 32,
    "model.t5.num_heads": 2, "model.t5.head_dim": 16, "model.t5.mlp_dim": 64,
    "model.t5.num_encoder_layers": 1, "model.t5.num_decoder_layers": 1,
    "evals.xm3600.langs": "('en','zh')", "evals.xm3600.every": 2,
    "evals.xm3600.batch_size": 4, "evals.xm3600.max_decode_len": 8,
    "evals.coco_dev.every": 0,
}

# `python train.py ARGS`, then the libraries the training process imported of LIBRARIES.
LIBRARIES = ("matplotlib", "flask", "ot")
TRAIN_PY = f"""
import atexit, runpy, sys
atexit.register(lambda: print("imported:", sorted(
    name for name in {LIBRARIES!r} if name in sys.modules)))
sys.argv[0] = "train.py"
runpy.run_path("train.py", run_name="__main__")
"""

READ_EVENTS = """
import json, sys
from tensorboard.backend.event_processing import event_accumulator
assert "tensorflow" not in sys.modules
events = event_accumulator.EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
events.Reload()
print(json.dumps({tag: [[e.step, e.value] for e in events.Scalars(tag)]
                  for tag in events.Tags()["scalars"]}))
"""


def _run(args, env, **kwargs):
    result = subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=600, **kwargs)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    env = tiny.no_tensorflow_env(tmp_path_factory.mktemp("no_tensorflow"))
    result = subprocess.run([sys.executable, "-c", "import tensorflow"], env=env,
                            capture_output=True, text=True)
    assert "No module named 'tensorflow'" in result.stderr  # The blocker works.
    return env


def test_train_and_evaluate_without_tensorflow(env, tmp_path):
    data, workdir = tmp_path / "demo", tmp_path / "run"
    _run(["-m", "data.demo", "--out", str(data), "--num_train", "48", "--num_xm3600", "8",
          "--image_size", "32"], env)
    assert (data / "tfds" / "coco35l").is_dir()
    paths = {"vocab.path": data / "spm" / "demo.model", "data.manual_dir": data / "coco35l",
             "evals.xm3600.data_dir": data / "xm3600", "evals.coco_dev.manual_dir":
             data / "coco35l"}
    overrides = [f"--config.{k}={v}" for k, v in {**TINY, **paths}.items()]
    train = _run(["-c", TRAIN_PY, "--config", "configs/demo.py", "--workdir", str(workdir),
                  *overrides], env)
    assert f"step {STEPS}/{STEPS}" in train.stdout
    assert train.stdout.splitlines()[-1] == "imported: []"  # Evaluators write no report.

    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    by_step = {}
    for record in records:
        by_step.setdefault(record["step"], {}).update(record)
    train_names = {"train/loss", "train/z_loss", "train/grad_norm", "train/tokens",
                   "learning_rate", "perf/step_time_s", "perf/examples_per_s",
                   "perf/tokens_per_s"}
    for step in (2, 4):
        assert train_names <= set(by_step[step]), by_step[step]
        assert math.isfinite(by_step[step]["train/loss"])
    for step in (0, 2, 4):
        assert {"eval/cider_d/en", "eval/cider_d/zh", "eval/cider_d/avg"} <= set(by_step[step])
    assert "perf/compile_s" in by_step[1]

    # TensorBoard without TensorFlow reads every scalar of metrics.jsonl, with its step.
    events = json.loads(_run(["-c", READ_EVENTS, str(workdir)], env).stdout)
    expected = {(name, step, value) for step, values in by_step.items()
                for name, value in values.items() if name != "step"}
    found = {(name, step, value) for name, points in events.items() for step, value in points}
    assert {(n, s) for n, s, _ in found} == {(n, s) for n, s, _ in expected}
    for name, step, value in expected:
        assert math.isclose(dict(((n, s), v) for n, s, v in found)[name, step], value,
                            rel_tol=1e-6), (name, step)

    out = tmp_path / "eval"
    _run(["-m", "evaluation.evaluate", "--config", "configs/demo.py", "--workdir",
          str(workdir), "--evals", "xm3600", "--langs", "config", "--out", str(out),
          *overrides], env)
    metrics = json.loads((out / "metrics.json").read_text())
    # The last checkpoint, evaluated again: the in-loop evaluation's scores.
    assert metrics["step"] == STEPS
    for lang in ("en", "zh", "avg"):
        name = f"eval/cider_d/{lang}"
        assert math.isclose(metrics[name], by_step[STEPS][name], abs_tol=1e-6), name
