"""Shared fixtures of the data tests: a tiny demo dataset written (and built) once per session."""

import pytest

from data import build
from tools import demo


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory):
    """A small demo dataset (COCO-35L, XM3600 and vocabulary layouts; no TFDS build)."""
    out = tmp_path_factory.mktemp("demo")
    demo.generate(str(out), seed=0, num_train=60, num_restval=20, num_val=12, num_test=4,
                  num_xm3600=16, image_size=32, build_tfds=False)
    return out


@pytest.fixture(scope="session")
def built_demo(demo_dir):
    """`demo_dir` with its COCO-35L built (en, es, hi, zh) in demo_dir/tfds, in this process."""
    build.build("coco35l", manual_dir=str(demo_dir / "coco35l"), data_dir=str(demo_dir / "tfds"),
                config="core", workers=0)
    return demo_dir
