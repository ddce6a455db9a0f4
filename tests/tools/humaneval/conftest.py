"""Fixtures of the human-evaluation tests: a tiny release, two results folders, sessions, and
the browser and servers of the browser tests."""

import os

import pytest

from tests.tools.humaneval import helpers, pages
from tools.humaneval import server

LANGS = helpers.LANGS


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
        return helpers.new_session(release, results_pair,
                                   str(tmp_path / f"session{next(counter)}"), warn=warn,
                                   **overrides)
    return make


@pytest.fixture
def consent(tmp_path):
    """A consent text file (two paragraphs), as `create --consent` takes it."""
    path = tmp_path / "consent.txt"
    path.write_text("We study captions.\n\nYou may stop at any time.", encoding="utf-8")
    return str(path)


@pytest.fixture
def browser_tab(browser):
    """The module's browser with one tab, at the desktop size, after the test too."""
    yield browser
    for handle in browser.window_handles[1:]:
        browser.switch_to.window(handle)
        browser.close()
    browser.switch_to.window(browser.window_handles[0])
    browser.set_window_size(*pages.WINDOW)


@pytest.fixture
def serve():
    """fn(session, **app options) -> base URL of the session served by waitress in a thread
    (until teardown)."""
    running = []

    def start(session, **options):
        httpd, thread, _, base = server.serve_in_thread(session.folder, port=0, **options)
        running.append((httpd, thread))
        return base
    yield start
    for httpd, thread in running:
        server.stop(httpd)
        thread.join(timeout=10)
        assert not thread.is_alive()


@pytest.fixture
def served(make_session, results_pair, serve):
    """An sxs session (en: 3 raters at replication 2, ar: 2) past the introduction, and its
    base URL."""
    session = make_session(langs=("en", "ar"), replication=2,
                           raters=("en=ann,bob,cyd", "ar=dina,emad"),
                           systems=(("alpha", results_pair[0]), ("beta", results_pair[1])))
    helpers.pass_introduction(session)
    return session, serve(session)
