"""Sends Ctrl-C at random moments to real `train.py` runs on the tiny config and counts outcomes.

    python -m tests.ctrl_c_experiment --starts 20 --loops 10 --doubles 5 --ends 5 --seed 1

Four kinds of tries, each a fresh `python train.py` (CPU, the tiny test config):

- start: one Ctrl-C at a random moment between 0.1 s after the launch and the
  first step (imports, flags, data checks, initialization, the step-0
  evaluation, compiling: every 4th try has no compilation cache, so that
  compiling takes seconds). Expected: exit 130 and the one "stopped before the
  first training step" line, or, if the first step won the race, a save and 0.
- loop: one Ctrl-C at a random moment after a random step. Expected: exit 0,
  "Stopped by Ctrl-C: saved step N" and checkpoint N.
- double: two Ctrl-Cs 0 to 0.7 s apart in the loop. Expected: exit 130 at once
  after the second (or 0 if the save finished first).
- end: a Ctrl-C 0 to 1 s after the "Stopped by" line (the save has finished:
  the run winds up and exits). Expected: exit 0.

A try is "swallowed" when the run is still going 60 s after its last signal
(it is then killed) or exits 0 having said nothing about the signal; a
"traceback" is any "Traceback" or "Exception ignored" in its output; "ended
first" counts tries whose last signal found the run already gone (an end
try's exit can beat it). The
first ~40 ms of a process are Python's own start-up, before train.py's first
line can route the signal; tries start at 0.1 s.

Not part of the test suite (minutes); tests/test_train_signals.py runs it
with two tries so that it keeps working, and reuses `launch`.
"""

import argparse
import collections
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# train.py's own lines about signals (training/preemption.py and the loop).
SIGNAL_LINE = re.compile(r"^(Ctrl-C|SIGTERM|Second Ctrl-C|Stopped by)[: ]")
# The console lines of a run (tests/test_train_faults.py's console test).
CONSOLE_LINE = re.compile(r"^(Starting|Resuming) |^step \d+(/\d+ \||  ?evaluation:)|"
                          r"^(Initialized the parameters|Compiled the train step) in ")
# Run with SIGINT and SIGTERM at their defaults and unblocked, whatever the parent has (a
# pytest-xdist worker may ignore SIGINT; children inherit that): set here, then exec.
_EXEC_WITH_DEFAULT_SIGNALS = (
    "import os, signal, sys\n"
    "for s in (signal.SIGINT, signal.SIGTERM):\n"
    "    signal.signal(s, signal.SIG_DFL)\n"
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM))\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n")


class Run:
    """A `python train.py` process whose output lines are read (with their times) by a thread."""

    def __init__(self, args, env=None):
        env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1", **(env or {})}
        self.start = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _EXEC_WITH_DEFAULT_SIGNALS, "train.py", *args], cwd=REPO,
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        self.lines = []  # (seconds since the start, line)
        self.missed = 0  # Signals not sent: the run had ended.
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self._changed:
                self.lines.append((time.monotonic() - self.start, line.rstrip("\n")))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for_line(self, pattern, timeout=300):
        """The first line matching `pattern` (waiting for it); None if the process ended."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for _, line in self.lines:
                    if regex.search(line):
                        return line
                if not self._reader.is_alive() or time.monotonic() > deadline:
                    return None
                self._changed.wait(0.05)

    def signal(self, signum=signal.SIGINT):
        """Sends `signum` unless the run has ended (then counts it in `missed`); returns the
        time it was sent (seconds since the start)."""
        if self.proc.poll() is not None:
            self.missed += 1
            return None
        self.proc.send_signal(signum)
        return time.monotonic() - self.start

    def finish(self, timeout=60):
        """Waits for the exit: (exit status or None if killed after `timeout`, seconds taken)."""
        sent = time.monotonic()
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            code = None
        self._reader.join(10)
        return code, time.monotonic() - sent

    @property
    def text(self):
        return "\n".join(line for _, line in self.lines)


def launch(config_file, workdir, *args, env=None):
    """Starts `train.py --config config_file --workdir workdir *args` (see `Run`)."""
    return Run(["--config", config_file, "--workdir", str(workdir), *args], env=env)


def write_setup(folder):
    """Writes the tiny demo data and a config file for it under `folder`; returns the file."""
    from tests import tiny

    data = os.path.join(folder, "data")
    if not os.path.isdir(data):
        tiny.write_demo(data)
    return tiny.write_config_file(os.path.join(folder, "tiny_config.py"), data)


def run_args(cache_dir):
    """The flags of every try: a run longer than any try, an evaluation at step 0 only, no
    scheduled saves."""
    return ["--config.total_steps=1000000", "--config.log_every=1",
            "--config.evals.xm3600.every=1000000", "--config.checkpoint.every=1000000",
            f"--compilation_cache={cache_dir}"]


def outcome(run, code, latency, *, expect):
    """The try's row: exit status, signal lines, other lines, swallowed, traceback, verdict."""
    lines = [line for _, line in run.lines if line.strip()]
    said = [line for line in lines if SIGNAL_LINE.match(line)]
    other = [line for line in lines if not SIGNAL_LINE.match(line)
             and not CONSOLE_LINE.match(line)]
    traceback = "Traceback" in run.text or "Exception ignored" in run.text
    swallowed = code is None or (code == 0 and not said)
    return {"code": code, "signal_lines": len(said), "other_lines": len(other),
            "missed": run.missed,
            "swallowed": swallowed, "traceback": traceback, "latency": latency,
            "ok": (not swallowed and not traceback and not other and expect(code, said)),
            "output": run.text}


def _saved(code, said):
    return code == 0 and any(line.startswith("Stopped by Ctrl-C: saved step") for line in said)


def _start_ok(code, said):
    return ((code == 130 and said == ["Ctrl-C: stopped before the first training step "
                                      "(nothing to save)."]) or _saved(code, said))


def _double_ok(code, said):
    return (code == 130 and said[-1] == "Second Ctrl-C: exiting now, without saving.") or \
        (code == 0 and _saved(code, said[:2]))


def try_start(config_file, folder, cache, rng, first_step_s, i):
    run = launch(config_file, os.path.join(folder, f"start{i}"),
                 *run_args("none" if i % 4 == 3 else cache))
    time.sleep(max(0.0, 0.1 + rng.random() * (first_step_s - 0.1) - (time.monotonic()
                                                                        - run.start)))
    run.signal()
    code, latency = run.finish()
    return outcome(run, code, latency, expect=_start_ok)


def try_loop(config_file, folder, cache, rng, i):
    run = launch(config_file, os.path.join(folder, f"loop{i}"), *run_args(cache))
    run.wait_for_line(rf"^step {rng.randint(1, 20)}/")
    time.sleep(rng.uniform(0, 0.3))
    run.signal()
    code, latency = run.finish()
    return outcome(run, code, latency, expect=lambda code, said: _saved(code, said))


def try_double(config_file, folder, cache, rng, i):
    run = launch(config_file, os.path.join(folder, f"double{i}"), *run_args(cache))
    run.wait_for_line(rf"^step {rng.randint(1, 20)}/")
    run.signal()
    time.sleep(rng.uniform(0, 0.7))
    run.signal()
    code, latency = run.finish()
    return outcome(run, code, latency, expect=_double_ok)


def try_end(config_file, folder, cache, rng, i):
    run = launch(config_file, os.path.join(folder, f"end{i}"), *run_args(cache))
    run.wait_for_line(rf"^step {rng.randint(1, 10)}/")
    run.signal()
    run.wait_for_line(r"^Stopped by Ctrl-C: saved step", timeout=120)
    time.sleep(rng.uniform(0, 1.0))  # While it winds up, exits, or after.
    run.signal()
    code, latency = run.finish()
    return outcome(run, code, latency, expect=lambda code, said: _saved(code, said))


def first_step_seconds(config_file, folder, cache):
    """Seconds from the launch to the first step with a warm compilation cache (the second
    of two runs; the first fills the cache)."""
    for i in range(2):
        run = launch(config_file, os.path.join(folder, f"calibration{i}"), *run_args(cache))
        if run.wait_for_line(r"^step 1/") is None:
            raise RuntimeError(f"the calibration run did not reach step 1:\n{run.text[-3000:]}")
        seconds = time.monotonic() - run.start
        run.signal()
        run.finish()
    return seconds


def experiment(starts, loops, doubles, ends, seed, folder, log=print, first_step_s=None,
               cache=None):
    """Runs the tries; returns {kind: [outcome rows]}.

    Args:
        first_step_s: the start tries' range (default: measured, two runs).
        cache: the tries' compilation cache (default: a new one in `folder`, filled by
            the first try that compiles; every 4th start try has none).
    """
    rng = random.Random(seed)
    config_file = write_setup(folder)  # The data is reused...
    folder = tempfile.mkdtemp(prefix="runs_", dir=folder)  # ...the workdirs are new.
    cache = cache or os.path.join(folder, "cache")
    if first_step_s is None:
        first_step_s = first_step_seconds(config_file, folder, cache)
        log(f"first step after {first_step_s:.1f} s (warm compilation cache)")
    results = collections.defaultdict(list)
    plan = ([("start", i) for i in range(starts)] + [("loop", i) for i in range(loops)]
            + [("double", i) for i in range(doubles)] + [("end", i) for i in range(ends)])
    for kind, i in plan:
        if kind == "start":
            row = try_start(config_file, folder, cache, rng, first_step_s, i)
        else:
            row = {"loop": try_loop, "double": try_double, "end": try_end}[kind](
                config_file, folder, cache, rng, i)
        results[kind].append(row)
        if not row["ok"]:
            log(f"{kind} {i}: unexpected outcome (exit {row['code']}):\n{row['output'][-2000:]}")
    return results


def table(results):
    """The counts of each kind of try, one row per kind."""
    head = (f"{'kind':8} {'tries':>5} {'ok':>4} {'exit 0':>6} {'exit 130':>8} {'other':>5} "
            f"{'swallowed':>9} {'traceback':>9} {'max lines':>9} {'max exit s':>10} "
            f"{'ended first':>11}")
    rows = [head]
    for kind, tries in results.items():
        codes = collections.Counter(row["code"] for row in tries)
        rows.append(
            f"{kind:8} {len(tries):5d} {sum(r['ok'] for r in tries):4d} {codes[0]:6d} "
            f"{codes[130]:8d} {len(tries) - codes[0] - codes[130]:5d} "
            f"{sum(r['swallowed'] for r in tries):9d} {sum(r['traceback'] for r in tries):9d} "
            f"{max(r['signal_lines'] + r['other_lines'] for r in tries):9d} "
            f"{max(r['latency'] for r in tries):10.2f} {sum(r['missed'] > 0 for r in tries):11d}")
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--loops", type=int, default=10)
    parser.add_argument("--doubles", type=int, default=5)
    parser.add_argument("--ends", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--folder", default=None, help="work folder (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctrl_c_") as tmp:
        results = experiment(args.starts, args.loops, args.doubles, args.ends, args.seed,
                             args.folder or tmp)
    print(table(results))
    sys.exit(0 if all(r["ok"] for tries in results.values() for r in tries) else 1)


if __name__ == "__main__":
    main()
