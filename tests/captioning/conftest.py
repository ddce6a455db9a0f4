"""Fixtures of the captioning tests: one tiny trained run, its captioner and its export.

The run is trained once per session, in this process (4 steps of tests/tiny.py's config):
checkpoints/2 and /4, checkpoints_best/2 (its best evaluation), config.json. Its captions are
nonsense with varied tokens, which is what token-for-token comparisons need.
"""

import contextlib
import io
import os

import pytest

import train
from captioning import Captioner, Decoding, export
from tests import tiny

# The programs the session's export holds.
EXPORTED = (Decoding("greedy"), Decoding("beam", beam_size=3, alpha=0.6),
            Decoding("sample", temperature=0.8, top_k=20))


@pytest.fixture(scope="session")
def caption_run(tiny_demo, tmp_path_factory):
    """The tiny run's folder."""
    workdir = str(tmp_path_factory.mktemp("captioning") / "run")
    train.train_and_evaluate(tiny.tiny_config(str(tiny_demo)), workdir)
    return workdir


@pytest.fixture(scope="session")
def captioner(caption_run):
    """The run's latest checkpoint as a Captioner (one per session: compilations shared)."""
    return Captioner.from_run(caption_run)


@pytest.fixture(scope="session")
def export_cli(caption_run, tmp_path_factory):
    """(path, printed line) of `python -m captioning.export` (in-process) of the latest
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
