"""Fixtures shared by the trainer and tool tests, and the suite's settings.

A persistent compilation cache (.cache/jax, or $JAX_COMPILATION_CACHE_DIR) lets every process
after the first load the programs the others compiled. The suite's processes compile with XLA's
CPU backend unoptimized and run without XLA's thread pools (`tiny.SUITE_XLA_FLAGS`): the tests
check numbers and behaviour, not speed (`XLA_FLAGS=--xla_backend_optimization_level=2 make test`
runs them optimized, with the thread pools). Hypothesis runs derandomized (profile "ci");
`HYPOTHESIS_PROFILE=explore` draws new examples on purpose.

The demo data and the tiny trained runs are made once per test run (under pytest-xdist by the
first worker to need them, under a file lock) and only read: a test that changes a run works on
its own copy (`copy_to`). `make test-fast` leaves out the modules marked `slow` here.
"""

import dataclasses
import fcntl
import fnmatch
import functools
import os
import pathlib
import shutil

import hypothesis
import jax
import pytest

from tests import tiny
from tests.training.saved_state import read_saved_state
from tools import demo

if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    # Before the first computation creates the CPU client, which reads XLA_FLAGS once.
    os.environ["XLA_FLAGS"] = " ".join(
        filter(None, [os.environ.get("XLA_FLAGS"), *tiny.SUITE_XLA_FLAGS]))
CACHE_DIR = os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".cache", "jax"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
jax.config.update("jax_compilation_cache_dir", CACHE_DIR)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)

hypothesis.settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
hypothesis.settings.register_profile("explore", derandomize=False)
hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Modules (paths relative to the repository, fnmatch patterns) whose tests are `slow`.
SLOW_MODULES = (
    "tests/test_train*.py",  # train.py end to end, in process and as a command.
    "tests/test_without_tensorflow.py",
    "tests/training/test_distributed.py",
    "tests/training/test_mixed_precision.py",
    "tests/training/test_flops.py",
    "tests/configs/test_baselines.py",
    "tests/benchmarks/test_accelerator_report.py",
    "tests/evaluation/test_evaluate.py",
    "tests/evaluation/evaluators/test_evaluators.py",
    "tests/tools/vifidel/test_evaluator.py",
    "tests/tools/captioning/test_browser.py",
    "tests/tools/humaneval/test_browser*.py",
)
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_collection_modifyitems(config, items):
    del config
    for item in items:
        path = os.path.relpath(str(item.path), _REPO)
        if any(fnmatch.fnmatch(path, pattern) for pattern in SLOW_MODULES):
            item.add_marker(pytest.mark.slow)


# Overrides of tiny.tiny_config for the shared runs.
FOUR_STEPS = {}  # tiny_config as it is: checkpoints 2 and 4, the best at 2 (XM3600 every 2).
TWO_STEPS = {"total_steps": 2, "evals.xm3600.every": 1, "checkpoint.every": 1}


@dataclasses.dataclass(frozen=True)
class TrainedRun:
    """A tiny run trained once per test run and shared by every test that asks for it.

    Attributes:
        workdir: the run's folder (named "run"); read it, never change it.
        data_dir: the demo data it was trained on (`tiny_demo`), shared too.
        overrides: its tiny.tiny_config overrides.
    """
    workdir: str
    data_dir: str
    overrides: dict

    def config(self, **more):
        """The run's config (tiny.tiny_config of data_dir and overrides), with `more` overrides."""
        return tiny.tiny_config(self.data_dir, **{**self.overrides, **more})

    def copy_to(self, folder):
        """Copies the run to `folder` (which must not exist), for a test that changes it;
        returns the copy's path as a str."""
        shutil.copytree(self.workdir, folder)
        return str(folder)

    def state(self, step):
        """The saved state of checkpoint `step`, read once per test process (the run is read
        only)."""
        return _saved_state(self.workdir, step)


@functools.cache
def _saved_state(workdir, step):
    return read_saved_state(workdir, step)[1]


def _shared_root(tmp_path_factory):
    """The folder every process of this test run sees: under pytest-xdist the parent of the
    workers' temporary folders (as pytest-xdist's docs show), else this session's."""
    basetemp = tmp_path_factory.getbasetemp()
    return basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp


def _built_once(path, build):
    """Returns `path`, built by `build(path)` by the first process of the test run to ask.

    An exclusive lock on `path`.lock makes the others wait until it is built; `path`.done
    marks a finished build (a folder left by a build that failed is built again).
    """
    with open(f"{path}.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(f"{path}.done"):
            shutil.rmtree(path, ignore_errors=True)
            build(path)
            open(f"{path}.done", "w", encoding="utf-8").close()
    return path


def _demo_dir(tmp_path_factory):
    """tiny.write_demo's data, written once per test run (the trained runs' data)."""
    return _built_once(str(_shared_root(tmp_path_factory) / "shared_demo"), tiny.write_demo)


def _trained_run(tmp_path_factory, name, overrides):
    """The TrainedRun `<shared root>/<name>/run` of tiny_config(**overrides), trained once
    (in "run": the tools name a run by its folder)."""
    import train  # Here: the tests that need no run don't import the trainer.

    data_dir = _demo_dir(tmp_path_factory)
    folder = _built_once(str(_shared_root(tmp_path_factory) / name),
                         lambda path: train.train_and_evaluate(
                             tiny.tiny_config(data_dir, **overrides), os.path.join(path, "run")))
    return TrainedRun(os.path.join(folder, "run"), data_dir, dict(overrides))


@pytest.fixture(scope="session")
def built_once(tmp_path_factory):
    """`built_once(name, build)`: the folder `<shared root>/<name>` as a str, built by
    `build(path)` once per test run (under pytest-xdist by the first worker to ask; read only)."""
    return lambda name, build: _built_once(str(_shared_root(tmp_path_factory) / name), build)


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory):
    """A small demo dataset (COCO-35L, XM3600 and vocabulary layouts; no TFDS build)."""
    out = tmp_path_factory.mktemp("demo")
    demo.generate(str(out), seed=0, num_train=60, num_restval=20, num_val=12, num_test=4,
                  num_xm3600=16, image_size=32, build_tfds=False)
    return out


@pytest.fixture(scope="session")
def tiny_demo(tmp_path_factory):
    """A small demo dataset in the release layouts, COCO-35L built in tfds/ (written once per
    test run, and the data of the trained runs: read only)."""
    return pathlib.Path(_demo_dir(tmp_path_factory))


@pytest.fixture(scope="session")
def config_file(tiny_demo, tmp_path_factory):
    """A config file of tiny_config on `tiny_demo`, for train.py's command line and the tools."""
    return tiny.write_config_file(tmp_path_factory.mktemp("config") / "tiny_config.py", tiny_demo)


@pytest.fixture(scope="session")
def four_step_run(tmp_path_factory):
    """tiny_config's run as it is: 4 steps, checkpoints/2 and /4, checkpoints_best/2 (its best
    XM3600 evaluation), config.json (shared: read only)."""
    return _trained_run(tmp_path_factory, "four_step_run", FOUR_STEPS)


@pytest.fixture(scope="session")
def two_step_run(tmp_path_factory):
    """A 2-step run with checkpoints and in-loop XM3600 evaluations at steps 1 and 2 (shared:
    read only)."""
    return _trained_run(tmp_path_factory, "two_step_run", TWO_STEPS)


@pytest.fixture(scope="session")
def browser():
    """One headless chromium (1100 x 900) for the browser tests of a test process; they fail,
    never skip, without it (`make test` installs it)."""
    from tests.tools.captioning import page_screenshot

    try:
        launch = page_screenshot.chromium()
        driver = launch.__enter__()
    except RuntimeError as e:
        pytest.fail(str(e))
    yield driver
    launch.__exit__(None, None, None)
