"""Tests of training/compilation_cache.py: the default folder, the flag, hit/miss reports, and
an entry cut short (a kill inside jax's write) rewritten by the next compile."""

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


def test_flag_none_turns_the_cache_off(fresh_cache, monkeypatch, tmp_path):
    monkeypatch.setenv(compilation_cache.ENV_DIR, fresh_cache)  # jax read it at import.
    assert compilation_cache.enable_from_flag("none", str(tmp_path)) is None
    assert compilation_cache.current_dir() is None
    with compilation_cache.watch() as report:
        jax.jit(lambda x: x * 5.0 + float(np.random.default_rng().uniform())).lower(
            jnp.ones(3)).compile()
    assert report.hit is None and "not used" in str(report)


def test_flag_empty_uses_the_workdir(fresh_cache, monkeypatch, tmp_path):
    del fresh_cache
    monkeypatch.delenv(compilation_cache.ENV_DIR, raising=False)
    assert compilation_cache.enable_from_flag("", str(tmp_path / "run")) == str(
        tmp_path / "run" / "compilation_cache")


def test_flag_a_folder_uses_it(fresh_cache, monkeypatch, tmp_path):
    del fresh_cache
    monkeypatch.delenv(compilation_cache.ENV_DIR, raising=False)
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


def test_a_hit_beside_a_small_program_that_is_never_written_is_a_hit(fresh_cache):
    """A resumed run: its step loads from the cache, while a small program compiled in the
    same block (below the cache's minimum compile time) misses, as it does every time."""
    del fresh_cache
    constant = float(np.random.default_rng().uniform())
    x = jnp.ones((3, 5))
    jax.jit(lambda x: jnp.cos(x) * constant).lower(x).compile()
    jax.clear_caches()
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1000.0)
    with compilation_cache.watch() as report:
        jax.jit(lambda x: jnp.cos(x) * constant).lower(x).compile()
        jax.jit(lambda x: x + constant).lower(x).compile()
    assert report.hit is True and "hit, loaded from" in str(report)


def test_a_block_without_compiles_or_a_folder_reports_no_cache_use(fresh_cache):
    del fresh_cache
    with compilation_cache.watch() as report:
        pass
    assert report.hit is None and "not used" in str(report) and report.seconds >= 0
    previous = compilation_cache.current_dir()
    jax.config.update("jax_compilation_cache_dir", None)
    try:
        with compilation_cache.watch() as report:
            jax.jit(lambda x: x * 3.0 + float(np.random.default_rng().uniform())).lower(
                jnp.ones(3)).compile()
        assert report.hit is None and "not used" in str(report)
    finally:
        jax.config.update("jax_compilation_cache_dir", previous)


def test_a_folder_that_cannot_be_written_turns_the_cache_off_with_a_warning(fresh_cache, capsys):
    del fresh_cache
    assert compilation_cache.enable_from_flag("/proc/nope") is None
    assert compilation_cache.current_dir() is None
    assert capsys.readouterr().err.splitlines() == [
        "warning: compilation cache /proc/nope: cannot write there (No such file or directory); "
        "the persistent compilation cache is off"]


def test_an_entry_cut_short_is_rewritten_by_the_next_compile(fresh_cache):
    constant = float(np.random.default_rng().uniform())
    x = jnp.ones((2, 7))  # Made before the cache holds anything: one entry follows.
    jax.jit(lambda x: jnp.cos(x) + constant).lower(x).compile()
    entries = [os.path.join(fresh_cache, n) for n in os.listdir(fresh_cache)
               if n.startswith("jit__lambda") and n.endswith("-cache")]
    assert len(entries) == 1
    whole = open(entries[0], "rb").read()  # noqa: SIM115
    os.truncate(entries[0], 5)  # What a kill inside jax's write leaves.
    jax.clear_caches()
    with pytest.warns(UserWarning, match="Error reading persistent compilation cache entry"), \
            compilation_cache.watch() as failed:
        jax.jit(lambda x: jnp.cos(x) + constant).lower(x).compile()
    assert failed.hit is False
    assert abs(os.path.getsize(entries[0]) - len(whole)) < 8  # Written anew (its own time).
    jax.clear_caches()
    with compilation_cache.watch() as again:
        jax.jit(lambda x: jnp.cos(x) + constant).lower(x).compile()
    assert again.hit is True
