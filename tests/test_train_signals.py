"""Ctrl-C and SIGTERM sent to `python train.py` at several moments of a run.

Before the first step: one line, exit 130 (143 for SIGTERM), nothing saved,
promptly even while XLA compiles. In the loop: a save and exit 0; a second
Ctrl-C exits at once with 130, even while the main thread waits in
jax.device_get; a Ctrl-C after the save has finished keeps exit 0. Each run is
a real train.py process on the tiny config (tests/ctrl_c_experiment.py starts
it with SIGINT and SIGTERM at their defaults, whatever this process has).
"""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests import ctrl_c_experiment as experiment
from tests import tiny
from training import checkpointing

STOPPED_BEFORE = "{}: stopped before the first training step (nothing to save)."
ACK = ("Ctrl-C: saving a checkpoint after this step, then exiting (Ctrl-C again to exit now, "
       "without saving).")
# A batch that makes a step take over a second on a CPU: the loop then waits in
# jax.device_get (a log step's measurements) most of the time.
SLOW_STEPS = ("--config.batch_size=1024", "--config.data.num_workers=2")


@pytest.fixture(scope="module")
def config_file(tiny_demo, tmp_path_factory):
    path = tmp_path_factory.mktemp("signals") / "tiny_config.py"
    tiny.write_config_file(path, tiny_demo)
    return str(path)


def _start(config_file, workdir, *args, env=None):
    # The compilation cache of the test session ($JAX_COMPILATION_CACHE_DIR) unless told.
    flags = [a for a in experiment.run_args("none") if not a.startswith("--compilation_cache")]
    return experiment.launch(config_file, workdir, *flags, *args, env=env)


def _clean(run):
    """No traceback and no line besides the console's and train.py's signal lines."""
    assert "Traceback" not in run.text and "Exception ignored" not in run.text, run.text
    other = [line for _, line in run.lines if line.strip()
             and not experiment.SIGNAL_LINE.match(line)
             and not experiment.CONSOLE_LINE.match(line)]
    assert not other, run.text
    return [line for _, line in run.lines if experiment.SIGNAL_LINE.match(line)]


def _time_of(run, text):
    return next(t for t, line in run.lines if line == text)


@pytest.mark.parametrize("after_s,signum", [
    (0.3, signal.SIGINT),   # Importing JAX and the libraries.
    (1.5, signal.SIGINT),   # Flags, data checks, the mesh.
    (0.8, signal.SIGTERM),
])
def test_a_signal_during_start_up_is_one_line_and_an_exit(config_file, tmp_path, after_s,
                                                          signum):
    workdir = tmp_path / "run"
    run = _start(config_file, workdir)
    time.sleep(after_s)
    run.signal(signum)
    code, seconds = run.finish()
    name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
    assert code == 128 + signum, run.text
    assert _clean(run) == [STOPPED_BEFORE.format(name)]
    assert not workdir.exists() or not checkpointing.steps(str(workdir))
    assert seconds < 5, seconds


def test_ctrl_c_while_compiling_exits_at_once(config_file, tmp_path):
    # Nothing between init and compiling; an empty compilation cache and XLA's default
    # (optimizing) backend, not the suite's quicker one: the train step's compile, begun with
    # the initialization, still has seconds to go when the parameters are initialized.
    run = _start(config_file, tmp_path / "run", "--config.evals.xm3600.every=0",
                 env={"JAX_COMPILATION_CACHE_DIR": str(tmp_path / "cold"), "XLA_FLAGS": ""})
    assert run.wait_for_line(r"^Initialized the parameters"), run.text
    time.sleep(0.5)  # Of the ~3.5 s of compiling left on a quiet machine.
    run.signal()
    code, seconds = run.finish()
    assert code == 130, run.text
    assert _clean(run) == [STOPPED_BEFORE.format("Ctrl-C")]
    assert "Compiled the train step" not in run.text  # It was stopped inside XLA...
    assert seconds < 2, seconds  # ...which Python's own handler would have waited for.


def test_ctrl_c_in_the_loop_saves_the_step_and_exits_0(config_file, tmp_path):
    workdir = tmp_path / "run"
    run = _start(config_file, workdir)
    assert run.wait_for_line(r"^step 3/"), run.text
    run.signal()
    code, _ = run.finish()
    assert code == 0, run.text
    said = _clean(run)
    assert said[0] == ACK and len(said) == 2, said
    saved = int(re.match(r"Stopped by Ctrl-C: saved step (\d+) in .*; run the same command "
                         r"to resume\.$", said[1]).group(1))
    assert checkpointing.steps(str(workdir)) == [saved]


def test_ctrl_c_twice_while_the_loop_waits_in_device_get_exits_at_once(config_file, tmp_path):
    run = _start(config_file, tmp_path / "run", *SLOW_STEPS)
    assert run.wait_for_line(r"^step 2/"), run.text
    first = run.signal()
    time.sleep(0.3)
    second = run.signal()
    code, seconds = run.finish()
    assert code == 130, run.text
    assert _clean(run) == [ACK, "Second Ctrl-C: exiting now, without saving."]
    # Both landed while the main thread waited for a step of over a second: each was
    # answered at once, not when the step ended.
    assert _time_of(run, ACK) - first < 0.3, run.lines
    assert seconds < 1, seconds
    assert second - first < 1


def test_ctrl_c_after_the_save_finished_keeps_exit_0(config_file, tmp_path):
    workdir = tmp_path / "run"
    run = _start(config_file, workdir)
    assert run.wait_for_line(r"^step 2/"), run.text
    run.signal()
    assert run.wait_for_line(r"^Stopped by Ctrl-C: saved step"), run.text
    run.signal()  # While the run winds up (or after it ended: then it is not sent).
    code, _ = run.finish()
    assert code == 0, run.text
    said = _clean(run)
    assert said[:2][0] == ACK and said[1].startswith("Stopped by Ctrl-C: saved step"), said
    assert said[2:] in ([], ["Ctrl-C: exiting now (the run's state is saved)."]), said


def test_the_ctrl_c_experiment_runs(tmp_path):
    """tests/ctrl_c_experiment.py (minutes, not in the suite) with two tries, so that it
    keeps working."""
    # The tries load their programs from the suite's compilation cache (the tests above run
    # the same ones) instead of compiling them into a new cache of their own.
    results = experiment.experiment(starts=1, loops=1, doubles=0, ends=0, seed=0,
                                    folder=str(tmp_path), log=lambda *a: None,
                                    first_step_s=3.0,
                                    cache=os.environ["JAX_COMPILATION_CACHE_DIR"])
    assert [row["ok"] for rows in results.values() for row in rows] == [True, True], results
    assert "swallowed" in experiment.table(results)
    assert os.path.exists(tmp_path / "tiny_config.py")


def _children(pid):
    """The pids of the processes whose parent is `pid` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, ValueError):
                continue
    return found


def test_ctrl_c_to_the_process_group_while_the_input_workers_start(config_file, tmp_path):
    """A terminal's Ctrl-C reaches the whole group: the input workers, which train.py starts
    before it initializes the model, add nothing to its line (data/worker_processes.py)."""
    flags = [a for a in experiment.run_args("none") if not a.startswith("--compilation_cache")]
    proc = subprocess.Popen(
        [sys.executable, "-c", experiment._EXEC_WITH_DEFAULT_SIGNALS, "train.py", "--config",
         config_file, "--workdir", str(tmp_path / "run"), *flags, "--config.data.num_workers=2"],
        cwd=tiny.REPO, env={**os.environ, "JAX_PLATFORMS": "cpu"}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while len(_children(proc.pid)) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)  # Until the two workers (and the resource tracker) run.
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert [line for line in lines if not experiment.CONSOLE_LINE.match(line)] == [
        STOPPED_BEFORE.format("Ctrl-C")], out
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and subprocess.run(  # The workers follow within 0.1 s.
            ["pgrep", "-s", str(proc.pid)], capture_output=True).stdout:
        time.sleep(0.1)
    assert not subprocess.run(["pgrep", "-s", str(proc.pid)], capture_output=True).stdout
