"""JAX's persistent compilation cache: where it lives, and whether a compile hit it.

The key covers the program, devices and jax / XLA versions; process 0 writes, every process
reads, so a folder all hosts see serves the whole job. The cache is trusted code: never point
it at a folder others can write.
"""

import collections
import contextlib
import dataclasses
import functools
import os
import sys
import threading
import time

import jax
from jax._src import lru_cache
from jax.experimental.compilation_cache import compilation_cache as jax_cache

ENV_DIR = "JAX_COMPILATION_CACHE_DIR"  # jax's own variable; wins when set
_EVENTS = {"/jax/compilation_cache/compile_requests_use_cache": "requests",
           "/jax/compilation_cache/cache_hits": "hits"}
# (thread, event) -> count: jax reports a compile in the thread that asked for it, so a watch
# in one thread is not fooled by a compile in another (train.py compiles two at once).
_counts = collections.Counter()


def default_cache_dir(workdir=None):
    """$JAX_COMPILATION_CACHE_DIR, else under `workdir` (seen by every host), else the user's
    ~/.cache/xm3600/jax."""
    if os.environ.get(ENV_DIR):
        return os.environ[ENV_DIR]
    if workdir:
        return os.path.join(workdir, "compilation_cache")
    user_cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache")
    return os.path.join(user_cache, "xm3600", "jax")


def _count(event, **kwargs):
    del kwargs
    if event in _EVENTS:
        _counts[threading.get_ident(), _EVENTS[event]] += 1


@functools.cache  # Once per process.
def _listen():
    """Counts the cache's monitoring events from now on, and makes jax rewrite an entry that
    failed to load (cut short by a kill in its non-atomic write), which it would keep: it
    writes only after a miss or a failed load, and skips a file there."""
    jax.monitoring.register_event_listener(_count)
    put = lru_cache.LRUCache.put

    def replacing_put(self, key, value):
        with contextlib.suppress(OSError):
            (self.path / f"{key}{lru_cache._CACHE_SUFFIX}").unlink()  # noqa: SLF001
        put(self, key, value)

    lru_cache.LRUCache.put = replacing_put


def current_dir():
    """The cache directory jax uses now, or None."""
    return jax.config.jax_compilation_cache_dir


def enable(cache_dir, min_compile_secs=1.0):
    """Turns the persistent cache on (before the first compile) for programs compiling in
    `min_compile_secs` or more; returns its directory, or None (a warning: the cache is off)
    when it cannot be written."""
    try:
        if "://" not in cache_dir:  # A local folder (jax also takes gs:// and the like).
            os.makedirs(cache_dir, exist_ok=True)
            if not os.access(cache_dir, os.W_OK | os.X_OK):
                raise PermissionError(13, os.strerror(13))
    except OSError as e:
        print(f"warning: compilation cache {cache_dir}: cannot write there ({e.strerror}); the "
              f"persistent compilation cache is off", file=sys.stderr, flush=True)
        return enable_from_flag("none")
    if current_dir() not in (None, cache_dir):
        jax_cache.reset_cache()  # Another folder was in use: open the new one.
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_secs))
    _listen()
    return cache_dir


@dataclasses.dataclass
class CompileReport:
    """What `watch` saw: wall `seconds`, and `hit` (True: a program loaded from the cache,
    False: none, None: the cache not consulted)."""
    seconds: float = 0.0
    hit: bool | None = None
    cache_dir: str | None = None

    def __str__(self):
        where = {None: "not used", True: f"hit, loaded from {self.cache_dir}",
                 False: f"miss, written to {self.cache_dir}"}[self.hit]
        return f"{self.seconds:.1f} s (persistent cache: {where})"


def enable_from_flag(value, workdir=None):
    """Applies a `--compilation_cache` flag ("none": off, $JAX_COMPILATION_CACHE_DIR too; empty
    or None: `default_cache_dir`; else the directory); returns the directory or None."""
    if value == "none":
        if current_dir() is not None:
            jax_cache.reset_cache()
            jax.config.update("jax_compilation_cache_dir", None)
        return None
    return enable(value or default_cache_dir(workdir))


@contextlib.contextmanager
def watch():
    """Times a block that compiles; yields a CompileReport filled in when it ends."""
    _listen()  # Also when the cache was turned on elsewhere (e.g. $JAX_COMPILATION_CACHE_DIR).
    thread = threading.get_ident()
    before = {name: _counts[thread, name] for name in _EVENTS.values()}
    report = CompileReport(cache_dir=current_dir())
    start = time.perf_counter()
    try:
        yield report
    finally:
        report.seconds = time.perf_counter() - start
        delta = {name: _counts[thread, name] - before[name] for name in before}
        if delta["requests"] and report.cache_dir:  # jax asks even with no folder set.
            # A hit is the block's program loaded; small programs compiled beside it (faster
            # than the cache's minimum) miss every time, as they are never written.
            report.hit = delta["hits"] > 0
