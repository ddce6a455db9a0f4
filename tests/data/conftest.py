"""Shared fixtures of the data tests: a tiny demo dataset written (and built) once per session."""

import pytest

from data import build


@pytest.fixture(scope="session")
def built_demo(demo_dir):
    """`demo_dir` with its COCO-35L built (en, es, hi, zh) in demo_dir/tfds, in this process."""
    build.build("coco35l", manual_dir=str(demo_dir / "coco35l"), data_dir=str(demo_dir / "tfds"),
                config="core", workers=0)
    return demo_dir
