"""Fixtures of the captioning tests: one tiny trained run, its captioner and its export.

The run is tests/conftest.py's `four_step_run` (4 steps of tests/tiny.py's config, trained once
per test run and shared between the test processes: read only): checkpoints/2 and /4,
checkpoints_best/2 (its best evaluation), config.json. Its captions are nonsense with varied
tokens, which is what token-for-token comparisons need; `tiny_demo` is the data it was trained
on.
"""

import contextlib
import io
import os

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


@pytest.fixture(scope="session")
def export_cli(caption_run, tmp_path_factory):
    """(path, printed line) of `python -m tools.captioning.export` (in-process) of the latest
    checkpoint with EXPORTED's settings."""
    path = str(tmp_path_factory.mktemp("export") / "tiny_captioner.npz")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        export.main(["--workdir", caption_run, "--out", path, "--beam_size", "3",
                     "--alpha", "0.6", "--temperature", "0.8", "--top_k", "20"])
    return path, printed.getvalue()


@pytest.fixture(scope="session")
def exported(export_cli):
    """The exported file's path."""
    return export_cli[0]


@pytest.fixture(scope="session")
def demo_images(tiny_demo):
    """The tiny demo's XM3600 images (8 JPEGs of 32x32), sorted."""
    folder = os.path.join(str(tiny_demo), "xm3600", "images")
    return sorted(os.path.join(folder, name) for name in os.listdir(folder))
