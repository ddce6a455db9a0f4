"""The training process runs where TensorFlow cannot be imported (tiny.no_tensorflow_env): the
demo build, train.py, `python -m evaluation.evaluate` and TensorBoard's reading of the events."""

import json
import math

import pytest

from configs import demo as demo_config
from tests import tiny

STEPS = 4

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
with open(sys.argv[2], "w") as f:
    json.dump({tag: [[e.step, e.value] for e in events.Scalars(tag)]
               for tag in events.Tags()["scalars"]}, f)
"""


def _run(*args, env):
    result = tiny.run(*args, env=env)
    assert result.code == 0, result.text[-3000:]
    return result


def _flat(tree, prefix=""):
    return {name: value for key, child in tree.items() for name, value in (
        _flat(child, f"{prefix}{key}.").items() if isinstance(child, dict)
        else [(f"{prefix}{key}", child)])}


def _overrides(data):
    """configs/demo.py shrunk to tests/tiny.tiny_config on `data` as --config flags, but with
    batches made by worker processes (the demo's default) and a training record every 2 steps."""
    demo = _flat(demo_config.get_config().to_dict())
    shrunk = _flat(tiny.tiny_config(str(data), **{"data.num_workers": None, "log_every": 2,
                                                 "total_steps": STEPS}).to_dict())
    return [f"--config.{key}={','.join(value) if isinstance(value, tuple) else value}"
            for key, value in shrunk.items() if value != demo[key]]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    env = tiny.no_tensorflow_env(tmp_path_factory.mktemp("no_tensorflow"))
    result = tiny.run("-c", "import tensorflow", env=env)
    assert "No module named 'tensorflow'" in result.text  # The blocker works.
    return env


@pytest.fixture(scope="module")
def trained(env, tmp_path_factory):
    """(demo data, run folder, train.py's output) of the demo made, then trained on, by
    processes without TensorFlow, once for the module."""
    root = tmp_path_factory.mktemp("without_tensorflow")
    data, workdir = root / "demo", root / "run"
    _run("-m", "tools.demo", "--out", data, "--num_train", "48", "--num_xm3600", "8",
         "--image_size", "32", env=env)
    train = _run("-c", TRAIN_PY, "--config", "configs/demo.py", "--workdir", workdir,
                 *_overrides(data), env=env)
    return data, workdir, train


def _by_step(workdir):
    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    by_step = {}
    for record in records:
        by_step.setdefault(record["step"], {}).update(record)
    return by_step


def test_the_demo_builds_without_tensorflow(trained):
    data, _, _ = trained
    assert (data / "tfds" / "coco35l").is_dir()


def test_training_runs_without_tensorflow(trained):
    _, _, train = trained
    assert f"step {STEPS}/{STEPS}" in train.text
    # Evaluators write no report.
    assert [line for line in train.text.splitlines() if line.startswith("imported:")] == [
        "imported: []"]


def test_training_logs_every_metric_without_tensorflow(trained):
    _, workdir, _ = trained
    by_step = _by_step(workdir)
    train_names = {"train/loss", "train/z_loss", "train/grad_norm", "train/tokens",
                   "learning_rate", "perf/step_time_s", "perf/examples_per_s",
                   "perf/tokens_per_s"}
    for step in (2, 4):
        assert train_names <= set(by_step[step]), by_step[step]
        assert math.isfinite(by_step[step]["train/loss"])
    for step in (0, 2, 4):
        assert {"eval/cider_d/en", "eval/cider_d/zh", "eval/cider_d/avg"} <= set(by_step[step])
    assert "perf/compile_s" in by_step[1]


def test_tensorboard_without_tensorflow_reads_every_scalar(env, trained, tmp_path):
    _, workdir, _ = trained
    by_step = _by_step(workdir)
    # TensorBoard without TensorFlow reads every scalar of metrics.jsonl, with its step.
    _run("-c", READ_EVENTS, workdir, tmp_path / "events.json", env=env)
    events = json.loads((tmp_path / "events.json").read_text())
    expected = {(name, step, value) for step, values in by_step.items()
                for name, value in values.items() if name != "step"}
    found = {(name, step, value) for name, points in events.items() for step, value in points}
    assert {(n, s) for n, s, _ in found} == {(n, s) for n, s, _ in expected}
    for name, step, value in expected:
        assert math.isclose(dict(((n, s), v) for n, s, v in found)[name, step], value,
                            rel_tol=1e-6), (name, step)


def test_the_checkpoint_tool_evaluates_without_tensorflow(env, trained, tmp_path):
    data, workdir, _ = trained
    by_step = _by_step(workdir)
    out = tmp_path / "eval"
    _run("-m", "evaluation.evaluate", "--config", "configs/demo.py", "--workdir", workdir,
         "--evals", "xm3600", "--langs", "config", "--out", out, *_overrides(data), env=env)
    metrics = json.loads((out / "metrics.json").read_text())
    # The last checkpoint, evaluated again: the in-loop evaluation's scores.
    assert metrics["step"] == STEPS
    for lang in ("en", "zh", "avg"):
        name = f"eval/cider_d/{lang}"
        assert math.isclose(metrics[name], by_step[STEPS][name], abs_tol=1e-6), name
