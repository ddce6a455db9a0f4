"""Fixtures shared by the trainer and evaluation-tool tests.

XLA compilation dominates the suite's time on a CPU, and the trainer tests
start subprocesses that compile the same programs again; a persistent
compilation cache (in .cache/jax, or $JAX_COMPILATION_CACHE_DIR) lets every
process after the first load them instead.

Hypothesis runs derandomized (profile "ci", the default): every run of the suite draws the same
examples, so a test passes or fails the same way on every run and on every machine; a failure
prints the example and the blob that replays it. `HYPOTHESIS_PROFILE=explore` draws new random
examples (and keeps Hypothesis's example database) to look for new failures on purpose.

`make test-fast` (the edit loop) leaves out the tests marked `slow` here: those that train
through train.py or in subprocesses, shard over simulated devices, drive a browser, or compile
XLA programs for cost analysis. `make test` (CI) runs everything.
"""

import fnmatch
import os

import hypothesis
import jax
import pytest

from tests import tiny

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
    "tests/evaluation/evaluators/test_vifidel.py",
    "tests/captioning/test_browser.py",
    "tests/humaneval/test_browser.py",
)
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_collection_modifyitems(config, items):
    del config
    for item in items:
        path = os.path.relpath(str(item.path), _REPO)
        if any(fnmatch.fnmatch(path, pattern) for pattern in SLOW_MODULES):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def tiny_demo(tmp_path_factory):
    """A small demo dataset in the release layouts (written once per test session)."""
    out = tmp_path_factory.mktemp("tiny_demo")
    tiny.write_demo(str(out))
    return out
