"""Tiny demo data and configs, and the two ways the tests run the trainer.

`train_main` runs train.py's command line in the test process, as `python train.py` would run
it but without a new interpreter's imports and compilations. `start` (and `run`) start a real
process, for what needs one: signals, locks, kills, simulated devices, several processes."""

import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
import warnings

import pytest

from configs import common
from configs import demo as demo_config
from tools import demo

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The suite's XLA flags (tests/conftest.py, unless XLA_FLAGS sets the optimization level). XLA's
# CPU backend without LLVM's optimizations of the machine code and with its older loop emitters
# for fusions (the HLO passes are the same): programs compile with about half the CPU. And no
# thread pools of XLA's own, for the matmuls and for the machine code: a test process and the
# processes it starts run side by side on few cores, and the tiny programs gain nothing from
# threads but their switching (18% less CPU on the crash-point and fault tests, same results).
SUITE_XLA_FLAGS = ("--xla_backend_optimization_level=0",
                   "--xla_llvm_disable_expensive_passes=true",
                   "--xla_cpu_use_fusion_emitters=false",
                   "--xla_cpu_multi_thread_eigen=false",
                   "--xla_cpu_parallel_codegen_split_count=1")


def write_demo(out_dir):
    """Writes a small demo dataset (release layouts, vocabulary, COCO-35L built in tfds/)."""
    demo.generate(str(out_dir), seed=0, num_train=48, num_restval=16, num_val=8, num_test=4,
                  num_xm3600=8, image_size=32)


def spoil_built_images(tfds_dir, dataset="coco35l"):
    """Rewrites every training image record of a build with bytes that do not decode (as a
    build changed by hand or a bad disk would leave it; the build checks what it writes)."""
    from array_record.python import array_record_module

    from data.build import layout, records

    folder = layout.images_dir(str(tfds_dir), dataset)
    for name in os.listdir(folder):
        if name.startswith(f"{dataset}-train.array_record"):
            path = os.path.join(folder, name)
            reader = array_record_module.ArrayRecordReader(path)
            keys = [records.decode(record)["key"][0] for record in reader.read_all()]
            reader.close()
            writer = array_record_module.ArrayRecordWriter(path, layout.IMAGE_OPTIONS)
            for key in keys:
                writer.write(records.encode({"key": key, "image": b"\xff\xd8 not a jpeg"}))
            writer.close()


def tiny_config(data_dir, **overrides):
    """configs/demo.py shrunk as the baselines' smoke variants are (configs/common.smoke), with
    data in `data_dir`: a model and run that take seconds on a CPU."""
    c = demo_config.get_config()
    c.unlock()
    common.smoke(c, image_size=32, data_dir=data_dir)
    c.update_from_flattened_dict({
        "lr.constant_steps": 500,  # The demo's.
        # Batches made in the test process: no worker start-up per run (tests/data/pipeline/
        # shows that worker processes make the same batches; the signal tests start them).
        "data.num_workers": 0,
        "evals.xm3600.langs": ("en", "zh"), "evals.xm3600.batch_size": 4,
        "evals.coco_dev.every": 0,  # Off: tests that want it turn it on.
        "evals.coco_dev.batch_size": 4, "evals.coco_dev.max_images": None,
        **overrides,
    })
    return c.lock()


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


def train_main(config_file, workdir, *args):
    """Runs `train.py --config <config_file> --workdir <workdir> <args>` in this process as a
    fresh `python train.py` would (absl's log handler, default warning filters and hooks; fds 1
    and 2 captured); returns a CompletedProcess. Flags, logging and signals are put back."""
    # Imported here (the tests that only need data and configs do not load the trainer), and
    # before the flags are set aside: its flags stay defined.
    import train

    argv = ["train.py", "--config", str(config_file), "--workdir", str(workdir), *args]
    # The flags put back before the logging levels (setting absl's --verbosity sets those).
    with _console() as console, contextlib.chdir(REPO), _fresh_logging(), _fresh_flags(argv), \
            _fresh_warnings_and_hooks():
        returncode = _run_train_main(train, argv)
    return subprocess.CompletedProcess(argv, returncode, console.stdout, console.stderr)


def _run_train_main(train, argv):
    """train.py's `__main__` on `argv`; returns the exit status."""
    from absl import flags

    from training import preemption

    installed = preemption.install()
    try:
        # What `app.run` does before main (its once-per-process set-up aside).
        flags.mark_flag_as_required("config")
        rest = train.parse_flags(argv)
        if flags.FLAGS["verbosity"].using_default_value:
            flags.FLAGS.verbosity = 0
        sys.exit(train.main(rest))
    except SystemExit as e:
        return _exit_status(e.code)
    except Exception:  # noqa: BLE001  What the interpreter does with an uncaught exception.
        traceback.print_exc()
        return 1
    finally:
        if installed:
            preemption.uninstall()
        else:
            preemption.reset()


def _exit_status(code):
    """The exit status of a process that raised SystemExit(code), printing what Python would."""
    if code is None or isinstance(code, int):
        return int(code or 0)
    print(code, file=sys.stderr)
    return 1


@contextlib.contextmanager
def _console():
    """Captures file descriptors 1 and 2 (sys.stdout and sys.stderr line-buffered on them, as
    train.py's `__main__` sets them); yields what has `stdout` and `stderr` after the block."""
    console = types.SimpleNamespace(stdout="", stderr="")
    saved_streams = sys.stdout, sys.stderr
    for stream in saved_streams:
        stream.flush()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        saved_fds = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        sys.stdout = open(1, "w", encoding="utf-8", buffering=1, closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace",
                          buffering=1, closefd=False)
        try:
            yield console
        finally:
            for stream in (sys.stdout, sys.stderr):
                stream.close()
            sys.stdout, sys.stderr = saved_streams
            for fd, saved in zip((1, 2), saved_fds, strict=True):
                os.dup2(saved, fd)
                os.close(saved)
            for file, name in ((out, "stdout"), (err, "stderr")):
                file.seek(0)
                setattr(console, name, file.read().decode("utf-8", errors="replace"))


@contextlib.contextmanager
def _fresh_flags(argv):
    """sys.argv = `argv` (ml_collections reads the overrides there), absl's flags unparsed; then
    every flag as it was (absl's flagsaver), those that parsing defined gone."""
    from absl import app, flags
    from absl.testing import flagsaver

    app.define_help_flags()  # --help and the like, defined once per process (by app.run).
    saved, was_parsed = flagsaver.save_flag_values(), flags.FLAGS.is_parsed()
    saved_argv, sys.argv = sys.argv, list(argv)
    flags.FLAGS.unparse_flags()
    try:
        yield
    finally:
        sys.argv = saved_argv
        flagsaver.restore_flag_values(saved)
        if was_parsed:
            flags.FLAGS.mark_as_parsed()
        else:
            flags.FLAGS.unparse_flags()


# Loggers that training/checkpointing.py's `quiet_library_logs` filters, once per process.
_QUIETED_LOGGERS = ("absl", "asyncio")


@contextlib.contextmanager
def _fresh_logging():
    """Logging as in a new train.py process: absl's handler on the root logger (as `app.run`
    puts it) on the current sys.stderr, the library logs not yet quieted; put back after."""
    from absl import logging as absl_logging

    from training import checkpointing

    root = logging.getLogger()
    loggers = [root, *map(logging.getLogger, _QUIETED_LOGGERS)]
    saved = [(logger, logger.level, list(logger.handlers), list(logger.filters))
             for logger in loggers]
    python_handler = absl_logging.get_absl_handler().python_handler
    saved_stream, saved_quiet = python_handler.stream, dict(checkpointing._QUIET)
    for name in _QUIETED_LOGGERS:
        logging.getLogger(name).filters.clear()
    checkpointing._QUIET["installed"] = False
    python_handler.setStream(sys.stderr)
    absl_logging.use_absl_handler()
    try:
        yield
    finally:
        python_handler.setStream(saved_stream)
        checkpointing._QUIET.update(saved_quiet)
        for logger, level, handlers, filters in saved:
            logger.setLevel(level)  # --verbosity and `main` set them.
            logger.handlers[:], logger.filters[:] = handlers, filters


# The warning filters of a fresh interpreter (Python's defaults, no -W options).
_DEFAULT_WARNING_FILTERS = (("default", DeprecationWarning, "__main__"),
                            ("ignore", DeprecationWarning, ""),
                            ("ignore", PendingDeprecationWarning, ""),
                            ("ignore", ImportWarning, ""),
                            ("ignore", ResourceWarning, ""))


def _print_warning(message, category, filename, lineno, file=None, line=None):
    """Python's own way of showing a warning, on the current sys.stderr."""
    del file
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


@contextlib.contextmanager
def _fresh_warnings_and_hooks():
    """Python's default warning filters and hooks for uncaught exceptions (pytest's would record
    them), less orbax's reports of reads an earlier run in this process abandoned (a damaged
    checkpoint's), which a fresh process cannot have (training/checkpointing.py)."""
    from training import checkpointing

    def fresh_unraisable_hook(unraisable):
        if not checkpointing._is_library_noise(unraisable.exc_value, unraisable.exc_traceback):
            sys.__unraisablehook__(unraisable)

    saved_hooks = sys.unraisablehook, threading.excepthook
    sys.unraisablehook, threading.excepthook = fresh_unraisable_hook, threading.__excepthook__
    try:
        with warnings.catch_warnings():
            warnings.resetwarnings()
            for action, category, module in _DEFAULT_WARNING_FILTERS:
                warnings.filterwarnings(action, category=category, module=module, append=True)
            warnings.showwarning = _print_warning
            yield
    finally:
        sys.unraisablehook, threading.excepthook = saved_hooks


# Run with SIGINT and SIGTERM at their defaults and unblocked, whatever the parent has (a
# pytest-xdist worker may ignore SIGINT; children inherit that): set here, then exec.
_EXEC_WITH_DEFAULT_SIGNALS = (
    "import os, signal, sys\n"
    "for s in (signal.SIGINT, signal.SIGTERM):\n"
    "    signal.signal(s, signal.SIG_DFL)\n"
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGTERM))\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n")


class Process:
    """`python ARGS` started in the repository as a user would (`cli_env`), with SIGINT and
    SIGTERM at their defaults; a thread reads its output (stdout and stderr together) into
    `lines`, (seconds since the start, line)."""

    def __init__(self, *args, env=None, new_session=False):
        self.start = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _EXEC_WITH_DEFAULT_SIGNALS, *map(str, args)], cwd=REPO,
            env=cli_env(**(env or {})), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=new_session)
        self.pid, self.lines, self.code = self.proc.pid, [], None
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
        """Sends `signum` unless the process has ended; returns when (seconds since the start)."""
        if self.proc.poll() is not None:
            return None
        self.proc.send_signal(signum)
        return time.monotonic() - self.start

    def finish(self, timeout=600):
        """Waits for the exit and the end of the output (which children it started may hold):
        (exit status, or None if killed after `timeout`; seconds waited)."""
        waited = time.monotonic()
        try:
            self.code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(max(10.0, timeout - (time.monotonic() - waited)))
        return self.code, time.monotonic() - waited

    @property
    def text(self):
        return "\n".join(line for _, line in self.lines)


def start(*args, **kwargs):
    """Starts `python ARGS` (see `Process`)."""
    return Process(*args, **kwargs)


def run(*args, **kwargs):
    """Runs `python ARGS` to its end (see `Process`); returns the finished Process."""
    process = Process(*args, **kwargs)
    process.finish()
    return process


def train_args(config_file, workdir, *args):
    """The arguments of `python train.py --config <config_file> --workdir <workdir> <args>`."""
    return ("train.py", "--config", str(config_file), "--workdir", str(workdir), *args)


def train_script(data_dir, workdir, **overrides):
    """The arguments of `python -c <a program calling train.train_and_evaluate>` on
    tiny_config(data_dir, **overrides): the trainer as a library, not through train.py (its
    output lines written whole, as train.py writes them)."""
    return ("-c", "import sys\nimport train\nfrom tests import tiny\n"
                  "for stream in (sys.stdout, sys.stderr):\n"
                  "    stream.reconfigure(line_buffering=True, write_through=False)\n"
                  f"train.train_and_evaluate(tiny.tiny_config({str(data_dir)!r}, **{overrides!r}),"
                  f" {str(workdir)!r})\n")


def cli_env(**extra):
    """os.environ for a train.py subprocess: the CPU, output unbuffered, and XLA's flags of the test
    process (tests/conftest.py: its backend without LLVM's optimizations, so that the subprocess
    loads what the test process compiled from the compilation cache and the other way round)."""
    return {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1", **extra}


def no_tensorflow_env(folder):
    """`cli_env` for a subprocess in which TensorFlow cannot be imported (a sitecustomize
    module written to `folder`, first on PYTHONPATH)."""
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


def restore_whole_state_params(config, workdir, vocab_size, step=None):
    """(model, params, step) of a run's checkpoint (the newest, or `step`) read the trainer's
    way: the whole state, optimizer included (an independent reference for the
    parameters-only restore of what does not train)."""
    from model import captioner  # noqa: PLC0415  (jax: only the tests that restore import it)
    from training import checkpointing  # noqa: PLC0415
    from training import state as state_lib  # noqa: PLC0415

    model = captioner.from_config(config.model, vocab_size)
    tx, _ = state_lib.create_optimizer(config)
    abstract, _ = state_lib.state_shardings(model, tx, state_lib.make_mesh(config.mesh),
                                            state_lib.axis_rules(config))
    state, _ = checkpointing.restore(workdir, abstract, step)
    return model, state["params"], int(state["step"])
