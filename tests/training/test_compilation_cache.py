"""Tests of training/compilation_cache.py: the default folder, and hit/miss reports."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.compilation_cache import compilation_cache as jax_cache

from training import compilation_cache


@pytest.fixture
def fresh_cache(tmp_path):
    """The cache moved to an empty folder for one test, then put back."""
    previous = compilation_cache.current_dir()
    previous_min = jax.config.jax_persistent_cache_min_compile_time_secs
    yield compilation_cache.enable(str(tmp_path / "cache"), min_compile_secs=0)
    jax_cache.reset_cache()
    jax.config.update("jax_compilation_cache_dir", previous)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", previous_min)


def test_default_dir_prefers_the_env_then_the_workdir(monkeypatch, tmp_path):
    monkeypatch.delenv(compilation_cache.ENV_DIR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compilation_cache.default_cache_dir() == str(tmp_path / "xdg" / "xm3600" / "jax")
    assert compilation_cache.default_cache_dir("runs/a") == os.path.join(
        "runs/a", "compilation_cache")
    monkeypatch.setenv(compilation_cache.ENV_DIR, "/shared/jax")
    assert compilation_cache.default_cache_dir("runs/a") == "/shared/jax"


def test_flag_none_leaves_the_cache_as_it_was_and_empty_uses_the_workdir(
        fresh_cache, monkeypatch, tmp_path):
    assert compilation_cache.enable_from_flag("none", str(tmp_path)) is None
    assert compilation_cache.current_dir() == fresh_cache
    monkeypatch.delenv(compilation_cache.ENV_DIR, raising=False)
    assert compilation_cache.enable_from_flag("", str(tmp_path / "run")) == str(
        tmp_path / "run" / "compilation_cache")
    assert compilation_cache.enable_from_flag(str(tmp_path / "mine")) == str(tmp_path / "mine")
    assert compilation_cache.current_dir() == str(tmp_path / "mine")


def test_second_compile_of_a_program_is_a_cache_hit(fresh_cache):
    # A program no other test compiles: a constant drawn for this run.
    constant = float(np.random.default_rng().uniform())
    f = jax.jit(lambda x: jnp.sin(x) * constant)
    x = jnp.ones((3, 5))
    with compilation_cache.watch() as first:
        want = f.lower(x).compile()(x)
    assert first.hit is False and "miss" in str(first)
    assert os.listdir(fresh_cache)  # Written.
    jax.clear_caches()  # Forget the in-memory executables, as a new process would.
    with compilation_cache.watch() as second:
        got = jax.jit(lambda x: jnp.sin(x) * constant).lower(x).compile()(x)
    assert second.hit is True and f"hit, loaded from {fresh_cache}" in str(second)
    np.testing.assert_array_equal(got, want)


def test_a_block_without_compiles_reports_no_cache_use(fresh_cache):
    del fresh_cache
    with compilation_cache.watch() as report:
        pass
    assert report.hit is None and "not used" in str(report) and report.seconds >= 0


def test_without_a_folder_the_cache_is_reported_unused():
    previous = compilation_cache.current_dir()
    jax.config.update("jax_compilation_cache_dir", None)
    try:
        with compilation_cache.watch() as report:
            jax.jit(lambda x: x * 3.0 + float(np.random.default_rng().uniform())).lower(
                jnp.ones(3)).compile()
        assert report.hit is None and "not used" in str(report)
    finally:
        jax.config.update("jax_compilation_cache_dir", previous)
