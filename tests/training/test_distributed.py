"""Training at scale on CPU: sharded meshes, two processes, and a preempted run resumed.

Runs that need several (simulated) devices or processes are subprocesses, because the device count
and jax.distributed are fixed when JAX starts; the single-device references run in this process.
"""

import os
import pathlib
import signal
import socket
import textwrap

import jax
import numpy as np
import pytest

import train
from tests import tiny
from tests.tiny import tiny_config
from tests.training.saved_state import assert_same_params, read_metrics, read_saved_state

# Heads, MLP units and widths divisible by 4 (model axis) and 8 (FSDP over data).
SHARDABLE = {"model.t5.num_heads": 4, "model.t5.head_dim": 8, "model.vit.num_heads": 4,
             "total_steps": 6, "evals.xm3600.every": 0, "checkpoint.every": 3}
# Pure data parallelism (parameters replicated, the batch split on the data axis) is
# test_two_processes_give_the_result_of_one's mesh (the default: data over the 2 processes),
# and the fully sharded mesh splits the batch over all 8 devices as data=8 alone would: a
# separate data=8 mesh here proved nothing those two don't.
MESHES = {
    "data 2 x model 4": {"mesh.data": 2, "mesh.model": 4},
    "fully sharded": {"mesh.data": 8, "mesh.model": 1, "mesh.fsdp": True},
}


def _losses(workdir):
    return [r["train/loss"] for r in read_metrics(str(workdir)) if "train/loss" in r]


def _params(workdir):
    _, state = read_saved_state(str(workdir))
    return state["params"]


@pytest.fixture(scope="module")
def single_device_run(tiny_demo, built_once):
    """The workdir of SHARDABLE trained in a test process on one device: the reference of the
    sharded and the two-process runs (trained once per test run for both; read only)."""
    folder = built_once("single_device_run", lambda path: train.train_and_evaluate(
        tiny_config(tiny_demo, **SHARDABLE), os.path.join(path, "run")))
    return pathlib.Path(folder) / "run"


def test_sharded_training_follows_the_single_device_loss_curve(tiny_demo, tmp_path,
                                                                single_device_run):
    reference = _losses(single_device_run)
    # One process with 8 simulated devices trains each mesh in turn.
    script = textwrap.dedent(f"""
        import os
        os.environ["XLA_FLAGS"] += " --xla_force_host_platform_device_count=8"
        import train
        from tests.tiny import tiny_config
        for name, mesh in {MESHES!r}.items():
            config = tiny_config({str(tiny_demo)!r}, **{SHARDABLE!r}, **mesh)
            train.train_and_evaluate(config, os.path.join({str(tmp_path)!r}, name))
    """)
    result = tiny.run("-c", script)
    assert result.code == 0, result.text[-3000:]
    for name in MESHES:
        losses = _losses(tmp_path / name)
        assert len(losses) == len(reference) == 6, name
        np.testing.assert_allclose(losses, reference, rtol=2e-5, err_msg=name)


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_two_processes_give_the_result_of_one(tiny_demo, tmp_path, single_device_run):
    coordinator = f"localhost:{_free_port()}"
    config_file = tiny.write_config_file(tmp_path / "config.py", tiny_demo, **SHARDABLE)
    procs = [tiny.start(*tiny.train_args(
        config_file, tmp_path / "two", f"--coordinator_address={coordinator}",
        "--num_processes=2", f"--process_id={i}")) for i in range(2)]
    for proc in procs:
        code, _ = proc.finish()
        assert code == 0, proc.text[-3000:]
    np.testing.assert_allclose(_losses(tmp_path / "two"), _losses(single_device_run), rtol=2e-5)
    # Gradients summed across processes in another order: parameters agree to
    # float32 rounding, except that Adafactor's sign-like updates (~3e-6 here)
    # of parameters whose gradient is ~0 may flip.
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4),
                 _params(tmp_path / "two"), _params(single_device_run))


def test_a_preempted_run_resumes_bit_for_bit(four_step_run, tmp_path):
    """SIGTERM (a cluster's preemption) saves the step and exits 0; the same run resumed ends
    with the parameters of the shared four-step run, each step logged once. (SIGKILLs after
    every write of a run: tests/test_train_crash_points.py.)"""
    workdir = tmp_path / "run"
    run = tiny.start(*tiny.train_script(four_step_run.data_dir, workdir))
    assert run.wait_for_line(r"^step \d+/"), run.text
    run.signal(signal.SIGTERM)
    code, _ = run.finish(300)
    out = run.text
    assert code == 0, out[-3000:]
    if "Stopped by SIGTERM" in out:  # Else it finished before the signal landed.
        saved, _ = read_saved_state(str(workdir))
        logged = max(r["step"] for r in read_metrics(str(workdir)) if "train/loss" in r)
        assert saved == logged
    state = train.train_and_evaluate(four_step_run.config(), str(workdir))
    assert_same_params(state, four_step_run.state(4))
    steps = [r["step"] for r in read_metrics(str(workdir)) if "train/loss" in r]
    assert steps == [1, 2, 3, 4]
