"""Fixtures of the human-evaluation tests: a tiny release, two results folders, sessions."""

import os

import pytest

from tests.tools.humaneval import helpers
from tools.humaneval import create

LANGS = ("en", "zh", "ar")


@pytest.fixture(scope="session")
def release(tiny_demo, tmp_path_factory):
    """The tiny demo's XM3600 split (8 images; en, es, hi, zh) plus Arabic captions."""
    out = tmp_path_factory.mktemp("humaneval") / "release"
    return str(helpers.write_release(os.path.join(tiny_demo, "xm3600"), str(out)))


@pytest.fixture(scope="session")
def results_pair(release, tmp_path_factory):
    """Results folders of a weaker base (m1) and a stronger test model (m2) in LANGS."""
    root = tmp_path_factory.mktemp("results")
    base, test = str(root / "base"), str(root / "test")
    helpers.write_results(base, release, LANGS, good=0.3, seed=1)
    helpers.write_results(test, release, LANGS, good=0.8, seed=2)
    return base, test


@pytest.fixture
def make_session(release, results_pair, tmp_path):
    """fn(**Spec overrides, warn=None) -> a new session in tmp_path (sxs over LANGS, 6
    images); `warn` gets create's warnings."""
    counter = iter(range(1000))

    def make(warn=None, **overrides):
        fields = dict(type="sxs", release=release, langs=LANGS,
                      systems=(("base", results_pair[0]), ("test", results_pair[1])),
                      subset_size=6, subset_seed=0, replication=3, gold_share=0.34, seed=0,
                      name="base_vs_test")
        fields.update(overrides)
        return create.create(create.Spec(**fields), str(tmp_path / f"session{next(counter)}"),
                             warn=warn)
    return make
