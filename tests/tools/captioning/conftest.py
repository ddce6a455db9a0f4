"""Fixtures of the captioning tests: one tiny trained run (tests/conftest.py's `four_step_run`,
read only), its captioner and its export."""

import contextlib
import io
import os
import signal

import pytest

from tools.captioning import Captioner, Decoding, export

# The programs the session's export holds.
EXPORTED = (Decoding("greedy"), Decoding("beam", beam_size=3, alpha=0.6),
            Decoding("sample", temperature=0.8, top_k=20))


@pytest.fixture(scope="session")
def caption_run(four_step_run):
    """The tiny run's folder (shared: read only)."""
    return four_step_run.workdir


@pytest.fixture(scope="session")
def captioner(caption_run):
    """The run's latest checkpoint as a Captioner (one per session: compilations shared)."""
    return Captioner.from_run(caption_run)


SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def own_process_signals():
    """For a command run in-process as its own process: yields a list that gets the SIGINT and
    SIGTERM handlers left when the block ends, after a Ctrl-C sent then (a late one); the test
    process's handlers are put back."""
    handlers = {signum: signal.getsignal(signum) for signum in SIGNALS}
    left = []
    try:
        yield left
        left += [signal.getsignal(signum) for signum in SIGNALS]
        os.kill(os.getpid(), signal.SIGINT)  # Ignored: else a KeyboardInterrupt here.
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


@pytest.fixture(scope="session")
def export_cli(caption_run, tmp_path_factory):
    """(path, printed line, signal handlers left) of `python -m tools.captioning.export`
    (in-process, as its own process) of the latest checkpoint with EXPORTED's settings."""
    path = str(tmp_path_factory.mktemp("export") / "tiny_captioner.npz")
    printed = io.StringIO()
    with own_process_signals() as left, contextlib.redirect_stdout(printed):
        export.main(["--workdir", caption_run, "--out", path, "--beam_size", "3",
                     "--alpha", "0.6", "--temperature", "0.8", "--top_k", "20"], True)
    return path, printed.getvalue(), left


@pytest.fixture(scope="session")
def exported(export_cli):
    """The exported file's path."""
    return export_cli[0]


@pytest.fixture(scope="session")
def demo_images(tiny_demo):
    """The tiny demo's XM3600 images (8 JPEGs of 32x32), sorted."""
    folder = os.path.join(str(tiny_demo), "xm3600", "images")
    return sorted(os.path.join(folder, name) for name in os.listdir(folder))
