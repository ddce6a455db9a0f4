"""Ctrl-C and SIGTERM sent to a real `python train.py` (`tiny.start`) at several moments."""

import os
import re
import signal
import subprocess
import time

import pytest

from tests import tiny
from training import checkpointing

STOPPED_BEFORE = "{}: stopped before the first training step (nothing to save)."
ACK = ("Ctrl-C: saving a checkpoint after this step, then exiting (Ctrl-C again to exit now, "
       "without saving).")
# train.py's own lines about signals (training/preemption.py and the loop), and the console's.
SIGNAL_LINE = re.compile(r"^(Ctrl-C|SIGTERM|Second Ctrl-C|Stopped by)[: ]")
CONSOLE_LINE = re.compile(r"^(Starting|Resuming) |^step \d+(/\d+ \||  ?evaluation:)|"
                          r"^(Initialized the parameters|Compiled the train step) in ")
# A run longer than any test, an evaluation at step 0 only, no scheduled saves.
LONG_RUN = ("--config.total_steps=1000000", "--config.log_every=1",
            "--config.evals.xm3600.every=1000000", "--config.checkpoint.every=1000000")
# A batch that makes a step take over a second on a CPU: the loop then waits in
# jax.device_get (a log step's measurements) most of the time.
SLOW_STEPS = ("--config.batch_size=1024", "--config.data.num_workers=2")


def _start(config_file, workdir, *args, **kwargs):
    # The compilation cache of the test session ($JAX_COMPILATION_CACHE_DIR) unless told.
    return tiny.start(*tiny.train_args(config_file, workdir, *LONG_RUN, *args), **kwargs)


def _clean(run):
    """No traceback and no line besides the console's and train.py's signal lines."""
    assert "Traceback" not in run.text and "Exception ignored" not in run.text, run.text
    other = [line for _, line in run.lines if line.strip() and not SIGNAL_LINE.match(line)
             and not CONSOLE_LINE.match(line)]
    assert not other, run.text
    return [line for _, line in run.lines if SIGNAL_LINE.match(line)]


def _catches_sigterm(pid):
    """Whether process `pid` has a handler for SIGTERM (its SigCgt mask in /proc)."""
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        caught = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
    return bool(caught >> (signal.SIGTERM - 1) & 1)


def _time_of(run, text):
    return next(t for t, line in run.lines if line == text)


@pytest.mark.parametrize("after_s,signum", [
    (0.3, signal.SIGINT),   # Importing JAX and the libraries.
    (1.5, signal.SIGINT),   # Flags, data checks, the mesh.
    (0.8, signal.SIGTERM),
])
def test_a_signal_during_start_up_exits_with_one_line(config_file, tmp_path, after_s, signum):
    workdir = tmp_path / "run"
    run = _start(config_file, workdir)
    # Not before train.py's first lines install the handlers: in the interpreter's own
    # start-up (a busy machine can take 0.3 s there) no program can catch a signal.
    deadline = run.start + 30
    while not _catches_sigterm(run.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(max(0.0, after_s - (time.monotonic() - run.start)))
    run.signal(signum)
    code, seconds = run.finish(60)
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
    code, seconds = run.finish(60)
    assert code == 130, run.text
    assert _clean(run) == [STOPPED_BEFORE.format("Ctrl-C")]
    assert "Compiled the train step" not in run.text  # It was stopped inside XLA...
    assert seconds < 2, seconds  # ...which Python's own handler would have waited for.


def test_ctrl_c_in_the_loop_saves_the_step_exiting_0(config_file, tmp_path):
    workdir = tmp_path / "run"
    run = _start(config_file, workdir)
    assert run.wait_for_line(r"^step 3/"), run.text
    run.signal()
    code, _ = run.finish(60)
    assert code == 0, run.text
    said = _clean(run)
    assert said[0] == ACK and len(said) == 2, said
    saved = int(re.match(r"Stopped by Ctrl-C: saved step (\d+) in .*; run the same command "
                         r"to resume\.$", said[1]).group(1))
    assert checkpointing.steps(str(workdir)) == [saved]


def _library_script(tiny_demo, workdir):
    """The arguments of a process that calls train.train_and_evaluate (400 steps)."""
    return tiny.train_script(tiny_demo, workdir, **{
        "total_steps": 400, "evals.xm3600.every": 0, "checkpoint.every": 1000, "log_every": 1})


def test_ctrl_c_to_the_trainer_as_a_library_saves(tiny_demo, tmp_path):
    """train.train_and_evaluate routes the signals itself when its caller has not."""
    workdir = tmp_path / "run"
    run = tiny.start(*_library_script(tiny_demo, workdir))
    assert run.wait_for_line(r"^step \d+/"), run.text
    run.signal()
    code, _ = run.finish(300)
    assert code == 0, run.text[-3000:]
    assert "Exception ignored" not in run.text and "Traceback" not in run.text
    match = re.search(r"Stopped by Ctrl-C: saved step (\d+)", run.text)
    assert match, run.text[-2000:]
    assert checkpointing.steps(str(workdir)) == [int(match.group(1))]


def test_a_second_ctrl_c_to_the_trainer_as_a_library_exits_at_once(tiny_demo, tmp_path):
    # Two Ctrl-Cs: the second exits at once with 130, without a traceback.
    run = tiny.start(*_library_script(tiny_demo, tmp_path / "run"))
    assert run.wait_for_line(r"^step \d+/"), run.text
    run.signal()
    time.sleep(0.05)
    run.signal()
    code, _ = run.finish(300)
    assert code in (0, 130), run.text[-2000:]  # 0 if the save won the race.
    assert "Traceback" not in run.text


def test_ctrl_c_twice_while_the_loop_waits_in_device_get_exits_at_once(config_file, tmp_path):
    run = _start(config_file, tmp_path / "run", *SLOW_STEPS)
    assert run.wait_for_line(r"^step 2/"), run.text
    first = run.signal()
    time.sleep(0.3)
    second = run.signal()
    code, seconds = run.finish(60)
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
    code, _ = run.finish(60)
    assert code == 0, run.text
    said = _clean(run)
    assert said[:2][0] == ACK and said[1].startswith("Stopped by Ctrl-C: saved step"), said
    assert said[2:] in ([], ["Ctrl-C: exiting now (the run's state is saved)."]), said


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
    run = _start(config_file, tmp_path / "run", "--config.data.num_workers=2", new_session=True)
    deadline = time.monotonic() + 120
    while len(_children(run.pid)) < 3 and run.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)  # Until the two workers (and the resource tracker) run.
    os.killpg(run.pid, signal.SIGINT)
    code, _ = run.finish(60)
    assert code == 130, run.text
    lines = [line for _, line in run.lines if line.strip()]
    assert [line for line in lines if not CONSOLE_LINE.match(line)] == [
        STOPPED_BEFORE.format("Ctrl-C")], run.text
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and subprocess.run(  # The workers follow within 0.1 s.
            ["pgrep", "-s", str(run.pid)], capture_output=True).stdout:
        time.sleep(0.1)
    assert not subprocess.run(["pgrep", "-s", str(run.pid)], capture_output=True).stdout
