"""Fixtures shared by the trainer and evaluation-tool tests.

XLA compilation dominates the suite's time on a CPU, and the trainer tests
start subprocesses that compile the same programs again; a persistent
compilation cache (in .cache/jax, or $JAX_COMPILATION_CACHE_DIR) lets every
process after the first load them instead.
"""

import os

import jax
import pytest

from tests import tiny

CACHE_DIR = os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".cache", "jax"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
jax.config.update("jax_compilation_cache_dir", CACHE_DIR)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


@pytest.fixture(scope="session")
def tiny_demo(tmp_path_factory):
    """A small demo dataset in the release layouts (written once per test session)."""
    out = tmp_path_factory.mktemp("tiny_demo")
    tiny.write_demo(str(out))
    return out
