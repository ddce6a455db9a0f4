"""The rating page in a real headless browser (Debian's chromium through chromedriver).

A rater opens their link, rates by mouse and by keyboard, reloads mid-session and resumes;
the ratings land in the database; a second rater's token neither shows nor changes the first
rater's items; Arabic captions are laid out right to left. The browser is required: `make test`
installs chromium and chromium-driver when missing, and this test fails (never skips) without
them.
"""

import shutil
import tempfile
import threading

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from errors import InputError
from humaneval import screenshot, server, store


@pytest.fixture(scope="module")
def browser():
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver_path:
        pytest.fail("chromium and chromedriver are required: `make test` installs them "
                    "(apt-get install chromium chromium-driver)")
    profile = tempfile.mkdtemp(prefix="humaneval-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    flags = (*screenshot.CHROMIUM_FLAGS, "--window-size=1100,900", f"--user-data-dir={profile}")
    for flag in flags:
        options.add_argument(flag)
    # An explicit driver path: selenium never tries to download one.
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def serve():
    """fn(session) -> base URL of the session served by waitress in a thread (until teardown)."""
    running = []

    def start(session):
        httpd, _ = server.make_server(session.folder, port=0)
        thread = threading.Thread(target=httpd.run, daemon=True)
        thread.start()
        running.append((httpd, thread))
        return f"http://127.0.0.1:{httpd.effective_port}"
    yield start
    for httpd, thread in running:
        server.stop(httpd)
        thread.join(timeout=10)
        assert not thread.is_alive()


@pytest.fixture
def served(make_session, results_pair, serve):
    """An sxs session (en: 3 raters at replication 2, ar: 2) and its base URL."""
    session = make_session(langs=("en", "ar"), replication=2,
                           raters=("en=ann,bob,cyd", "ar=dina,emad"),
                           systems=(("alpha", results_pair[0]), ("beta", results_pair[1])))
    return session, serve(session)


def _wait_for_url(driver, ending):
    WebDriverWait(driver, 20).until(lambda d: d.current_url.endswith(ending))


def _captions(driver):
    return tuple(e.text for e in driver.find_elements(By.CSS_SELECTOR, "p.caption"))


def _stored(session, rater):
    with store.Store(session.db_path) as db:
        return [(r["item"], r["answer"]["choice"]) for r in db.ratings() if r["rater"] == rater]


def test_rating_in_a_browser(browser, served):
    session, base = served
    ann, bob = session.by_name["ann"], session.by_name["bob"]
    mine = session.assignments["ann"]

    browser.get(f"{base}/r/{ann.token}")
    _wait_for_url(browser, f"/r/{ann.token}/item/1")
    assert browser.find_element(By.ID, "progress").text == f"Item 1 of {len(mine)}"
    assert _captions(browser) == session.items[mine[0]].texts
    assert "min" in browser.find_element(By.ID, "total-time").text  # the clock runs

    # By mouse: "Left better" (-2).
    browser.find_element(By.CSS_SELECTOR, 'button[name="choice"][value="-2"]').click()
    _wait_for_url(browser, f"/r/{ann.token}/item/2")
    # By keyboard: 6 is "Right better" (+2).
    ActionChains(browser).send_keys("6").perform()
    _wait_for_url(browser, f"/r/{ann.token}/item/3")
    assert _stored(session, "ann") == [(mine[0], -2), (mine[1], 2)]

    # A reload, and opening the link afresh, both come back to the first unrated item.
    browser.refresh()
    _wait_for_url(browser, f"/r/{ann.token}/item/3")
    browser.get(f"{base}/r/{ann.token}")
    _wait_for_url(browser, f"/r/{ann.token}/item/3")
    assert browser.find_element(By.ID, "rated").text == "2 rated"
    ActionChains(browser).send_keys("4").perform()
    _wait_for_url(browser, f"/r/{ann.token}/item/4")
    assert _stored(session, "ann") == [(mine[0], -2), (mine[1], 2), (mine[2], 0)]

    # Bob's link shows bob's own first item, and his ratings leave ann's alone.
    browser.get(f"{base}/r/{bob.token}")
    _wait_for_url(browser, f"/r/{bob.token}/item/1")
    assert _captions(browser) == session.items[session.assignments["bob"][0]].texts
    ActionChains(browser).send_keys("1").perform()
    _wait_for_url(browser, f"/r/{bob.token}/item/2")
    assert _stored(session, "bob") == [(session.assignments["bob"][0], -3)]
    assert _stored(session, "ann") == [(mine[0], -2), (mine[1], 2), (mine[2], 0)]
    # No place under bob's token goes beyond bob's items; a made-up token reaches nothing.
    browser.get(f"{base}/r/{bob.token}/item/{len(session.assignments['bob']) + 1}")
    assert "no item" in browser.find_element(By.ID, "message").text
    browser.get(f"{base}/r/{'0' * 32}")
    assert "unknown rater token" in browser.find_element(By.ID, "message").text


def test_arabic_captions_run_right_to_left(browser, served):
    session, base = served
    browser.get(f"{base}/r/{session.by_name['dina'].token}")
    _wait_for_url(browser, "/item/1")
    for element in browser.find_elements(By.CSS_SELECTOR, "p.caption"):
        assert element.get_attribute("lang") == "ar"
        assert browser.execute_script("return getComputedStyle(arguments[0]).direction",
                                      element) == "rtl"


def test_keyboard_scales_of_quality_and_thumb(browser, make_session, serve):
    quality = make_session(type="quality", systems=(), references=True, langs=("en",),
                           replication=1, gold_share=0.0)
    browser.get(f"{serve(quality)}/r/{quality.raters[0].token}")
    _wait_for_url(browser, "/item/1")
    ActionChains(browser).send_keys("2").perform()  # Good
    _wait_for_url(browser, "/item/2")

    thumb = make_session(type="thumb", systems=(), references=True, langs=("zh",),
                         replication=1, gold_share=0.0)
    browser.get(f"{serve(thumb)}/r/{thumb.raters[0].token}")
    _wait_for_url(browser, "/item/1")
    # Precision 4, recall 3, fluency two steps down, conciseness penalty, then submit.
    ActionChains(browser).send_keys("4", "3", "f", "f", "c", Keys.ENTER).perform()
    _wait_for_url(browser, "/item/2")
    for session, expected in ((quality, {"quality": "Good"}),
                              (thumb, {"P": 4, "R": 3, "Fl": -0.2, "Con": -0.5, "Inc": 0.0})):
        with store.Store(session.db_path) as db:
            assert [r["answer"] for r in db.ratings()] == [expected]


def test_screenshot_of_a_raters_page(served, tmp_path):
    session, _ = served
    out = screenshot.take(session.folder, "ann", str(tmp_path / "page.png"), size=(800, 600))
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(InputError, match="no rater 'nobody'"):
        screenshot.take(session.folder, "nobody", str(tmp_path / "x.png"))
