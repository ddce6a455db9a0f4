"""The rating pages in a real headless browser (Debian's chromium through chromedriver).

One browser serves the whole module (each test opens its own session on its own server, in a
thread, stopped at once). Covered: rating by mouse and keyboard, reloads and resuming; crowd
participants enrolling through the open link, through consent, guidelines and practice to
the completion code, and coming back to their own slot; Back, reload, a second tab and a
killed server never leaving a rater on a page that ignores them; the owner's dashboard
updating live; the layout on a phone and with over-long captions; the active-time clock; the
keyboard of the three scales. The browser is required: `make test` installs chromium and
chromium-driver when missing, and this test fails (never skips) without them.
"""

import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from errors import InputError
from formats import predictions
from tests import tiny
from tests.tools.humaneval import helpers
from tools.humaneval import screenshot, server, store

REPO = tiny.REPO
WINDOW = (1100, 900)


@pytest.fixture(scope="module")
def browser():
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver_path:
        pytest.fail("chromium and chromedriver are required: `make test` installs them "
                    "(apt-get install chromium chromium-driver)")
    profile = tempfile.mkdtemp(prefix="humaneval-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    flags = (*screenshot.CHROMIUM_FLAGS, f"--window-size={WINDOW[0]},{WINDOW[1]}",
             f"--user-data-dir={profile}")
    for flag in flags:
        options.add_argument(flag)
    # An explicit driver path: selenium never tries to download one.
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def browser_tab(browser):
    """The module's browser with one tab, at the desktop size, after the test too."""
    yield browser
    for handle in browser.window_handles[1:]:
        browser.switch_to.window(handle)
        browser.close()
    browser.switch_to.window(browser.window_handles[0])
    browser.set_window_size(*WINDOW)


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


def _wait_for_url(driver, ending):
    WebDriverWait(driver, 20).until(lambda d: d.current_url.endswith(ending))


def _wait_for(driver, css):
    return WebDriverWait(driver, 20).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, css) and d.find_element(By.CSS_SELECTOR,
                                                                           css))


def _press(driver, *keys):
    ActionChains(driver).send_keys(*keys).perform()


def _captions(driver):
    return tuple(e.text for e in driver.find_elements(By.CSS_SELECTOR, "p.caption"))


def _stored(session, rater):
    with store.Store(session.db_path) as db:
        return [(r["item"], r["answer"]["choice"]) for r in db.ratings() if r["rater"] == rater]


def _status(driver):
    box = driver.find_element(By.ID, "status")
    return box.text if box.is_displayed() else ""


def test_rating_in_a_browser(browser_tab, served):
    browser = browser_tab
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
    _press(browser, "6")
    _wait_for_url(browser, f"/r/{ann.token}/item/3")
    assert _stored(session, "ann") == [(mine[0], -2), (mine[1], 2)]

    # A reload, and opening the link afresh, both come back to the first unrated item.
    browser.refresh()
    _wait_for_url(browser, f"/r/{ann.token}/item/3")
    browser.get(f"{base}/r/{ann.token}")
    _wait_for_url(browser, f"/r/{ann.token}/item/3")
    assert browser.find_element(By.ID, "rated").text == "2 rated"
    _press(browser, "4")
    _wait_for_url(browser, f"/r/{ann.token}/item/4")
    assert _stored(session, "ann") == [(mine[0], -2), (mine[1], 2), (mine[2], 0)]

    # Bob's link shows bob's own first item, and his ratings leave ann's alone.
    browser.get(f"{base}/r/{bob.token}")
    _wait_for_url(browser, f"/r/{bob.token}/item/1")
    assert _captions(browser) == session.items[session.assignments["bob"][0]].texts
    _press(browser, "1")
    _wait_for_url(browser, f"/r/{bob.token}/item/2")
    assert _stored(session, "bob") == [(session.assignments["bob"][0], -3)]
    assert _stored(session, "ann") == [(mine[0], -2), (mine[1], 2), (mine[2], 0)]
    # No place under bob's token goes beyond bob's items; a made-up token reaches nothing.
    browser.get(f"{base}/r/{bob.token}/item/{len(session.assignments['bob']) + 1}")
    assert "no such item" in browser.find_element(By.ID, "message").text
    browser.find_element(By.ID, "forward").click()  # the way back to where bob is
    _wait_for_url(browser, f"/r/{bob.token}/item/2")
    browser.get(f"{base}/r/{'0' * 32}")
    assert "This link is not known" in browser.find_element(By.ID, "message").text


def test_arabic_captions_run_right_to_left(browser_tab, served):
    session, base = served
    browser_tab.get(f"{base}/r/{session.by_name['dina'].token}")
    _wait_for_url(browser_tab, "/item/1")
    for element in browser_tab.find_elements(By.CSS_SELECTOR, "p.caption"):
        assert element.get_attribute("lang") == "ar"
        assert browser_tab.execute_script("return getComputedStyle(arguments[0]).direction",
                                          element) == "rtl"


def test_crowd_participants_enrol_and_complete(browser_tab, make_session, serve, tmp_path):
    # One language, two images at replication 2 and a quota of 2 items: two slots.
    consent = tmp_path / "consent.txt"
    consent.write_text("We study captions.\n\nYou may stop at any time.", encoding="utf-8")
    session = make_session(langs=("en",), subset_size=2, gold_share=0.0, replication=2,
                           quota=2, crowd=True, consent=str(consent),
                           completion_code="C0DE42")
    assert [r.name for r in session.raters] == ["en-1", "en-2"]
    base = serve(session)
    browser = browser_tab
    join = f"{base}/join/{session.crowd['enrol_token']}/en"
    tokens = {}
    for pid in ("pidA", "pidB"):
        browser.get(f"{join}?PROLIFIC_PID={pid}&STUDY_ID=study1&SESSION_ID=sess-{pid}")
        _wait_for_url(browser, "/consent")
        tokens[pid] = browser.current_url.split("/r/")[1].split("/")[0]
        assert "You may stop at any time." in browser.find_element(By.ID, "consent-text").text
        browser.find_element(By.ID, "agree").click()
        _wait_for_url(browser, "/guidelines")
        assert "Much better" in browser.find_element(By.ID, "guidelines").text
        image = browser.find_element(By.ID, "example-image")
        assert browser.execute_script("return arguments[0].naturalWidth", image) > 0
        browser.find_element(By.ID, "guidelines-continue").click()
        # Practice: the own caption on the left (1 is right), identical captions (4 is
        # right), the own caption on the right (1 is wrong: feedback says so).
        for n, key, verdict in ((1, "1", "Well done"), (2, "4", "Well done"),
                                (3, "1", "Not quite")):
            _wait_for_url(browser, f"/practice/{n}")
            assert browser.find_element(By.ID, "practice-note").is_displayed()
            _press(browser, key)
            _wait_for(browser, "#verdict")
            assert verdict in browser.find_element(By.ID, "verdict").text
            if verdict == "Not quite":
                assert "Right much better" in browser.find_element(By.ID, "expected").text
            browser.find_element(By.ID, "next").click()
        for n in (1, 2):
            _wait_for_url(browser, f"/item/{n}")
            _press(browser, "5")
        code = _wait_for(browser, "#completion-code").text
        link = browser.find_element(By.ID, "completion-link").get_attribute("href")
        browser.get("about:blank")  # before the page sends us to Prolific
        assert code == "C0DE42"
        assert link == "https://app.prolific.com/submissions/complete?cc=C0DE42"
    assert tokens["pidA"] != tokens["pidB"]
    # Coming back: the same slot, done, with the code again; no second slot taken.
    browser.get(f"{join}?PROLIFIC_PID=pidA&STUDY_ID=study1&SESSION_ID=again")
    assert _wait_for(browser, "#completion-code").text == "C0DE42"
    assert tokens["pidA"] in browser.current_url
    browser.get("about:blank")
    # A third participant finds the study full.
    browser.get(f"{join}?PROLIFIC_PID=pidC&STUDY_ID=study1&SESSION_ID=c")
    assert "full" in browser.find_element(By.TAG_NAME, "h1").text
    state = store.read_state(session.db_path, session.digest)
    with store.Store(session.db_path) as db:
        slots = {pid: db.rater_of_token(token) for pid, token in tokens.items()}
    assert {r: (p["participant"], p["details"]["SESSION_ID"])
            for r, p in state["participants"].items()} == {
        slots["pidA"]: ("pidA", "sess-pidA"), slots["pidB"]: ("pidB", "sess-pidB")}
    # Practice answers are no ratings: every rating is of a session item.
    with store.Store(session.db_path) as db:
        rows = db.ratings()
    assert len(rows) == 4 and all(r["item"] in session.items for r in rows)


def test_back_reload_and_two_tabs_never_leave_a_silent_page(browser_tab, served):
    browser = browser_tab
    session, base = served
    cyd = session.by_name["cyd"]
    mine = session.assignments["cyd"]
    browser.get(f"{base}/r/{cyd.token}")
    _wait_for_url(browser, "/item/1")
    _press(browser, "1")
    _wait_for_url(browser, "/item/2")
    # Back: the rated page is not shown again from the cache; the server sends the rater on,
    # and the keys work.
    browser.back()
    _wait_for_url(browser, "/item/2")
    assert browser.find_element(By.ID, "rated").text == "1 rated"
    _press(browser, "7")
    _wait_for_url(browser, "/item/3")
    browser.refresh()
    _wait_for_url(browser, "/item/3")
    # A second tab rates item 3; the first, still showing item 3, says so and leads on.
    first = browser.current_window_handle
    browser.switch_to.new_window("tab")
    browser.get(f"{base}/r/{cyd.token}")
    _wait_for_url(browser, "/item/3")
    _press(browser, "4")
    _wait_for_url(browser, "/item/4")
    browser.switch_to.window(first)
    _press(browser, "6")
    WebDriverWait(browser, 20).until(lambda d: "first answer is kept" in _status(d))
    browser.find_element(By.ID, "status-next").click()
    _wait_for_url(browser, "/item/4")
    assert _stored(session, "cyd") == [(mine[0], -3), (mine[1], 3), (mine[2], 0)]


def _start_server(session, port=0):
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.humaneval", "serve", "--session", session.folder,
         "--port", str(port)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    line = proc.stdout.readline()
    assert line.startswith("serving http://127.0.0.1:"), line + proc.stdout.read()
    return proc, int(line.rsplit(":", 1)[1])


def test_a_killed_server_is_said_and_the_rating_goes_through_after(browser_tab, make_session):
    browser = browser_tab
    session = make_session(langs=("en",), replication=1, gold_share=0.0)
    helpers.pass_introduction(session)
    rater = session.raters[0]
    proc, port = _start_server(session)
    try:
        browser.get(f"http://127.0.0.1:{port}/r/{rater.token}")
        _wait_for_url(browser, "/item/1")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    _press(browser, "2")
    WebDriverWait(browser, 20).until(lambda d: "NOT saved" in _status(d))
    assert browser.find_element(By.CSS_SELECTOR, 'button[value="-2"]').is_enabled()
    assert _stored(session, rater.name) == []
    proc, _ = _start_server(session, port)  # back on the same port
    try:
        _press(browser, "2")
        _wait_for_url(browser, "/item/2")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    assert _stored(session, rater.name) == [(session.assignments[rater.name][0], -2)]


def _text(driver, css):
    """The text of the element `css` selects, read in one step (the dashboard replaces its
    panel every half second, so a found element may be gone the next moment)."""
    return driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;", css)


def test_the_dashboard_updates_live(browser_tab, served, serve):
    browser = browser_tab
    session, _ = served
    base = serve(session, dashboard_refresh=0.5)
    browser.get(f"{base}/dashboard/{session.owner_token}")
    assert browser.execute_script(
        "return [...document.querySelectorAll('#raters tbody tr')].map(r => r.dataset.rater)"
    ) == [r.name for r in session.raters]
    for plot in ("plot-progress", "plot-times"):
        WebDriverWait(browser, 20).until(lambda d, plot=plot: d.execute_script(
            "const i = document.getElementById(arguments[0]);"
            "return i !== null && i.complete && i.naturalWidth > 0;", plot))
    ann = session.by_name["ann"]
    cell = "#raters tr[data-rater='ann'] td.rated"
    assert _text(browser, cell).startswith("0 / ")
    with store.Store(session.db_path) as db:  # a rating arrives while the page is open
        item = session.assignments["ann"][0]
        db.mark_shown(ann.name, item, now=time.time() - 8)
        db.add_rating(ann.name, item, 1, {"choice": 1}, active_seconds=5.0)
    WebDriverWait(browser, 20).until(lambda d: (_text(d, cell) or "").startswith("1 / "))
    assert "updated" in _text(browser, "#updated")
    en = _text(browser, "#langs tr[data-lang='en']")
    assert "1 / " in en and "5.0" in en  # one rating; its active seconds
    browser.get(f"{base}/dashboard/{'0' * 32}")
    assert "This link is not known" in browser.find_element(By.ID, "message").text


def _long_caption_results(results_pair, release, tmp_path, key):
    """Copies of the two results folders whose English captions of `key` are 600 characters
    without a space (m1) and 8,000 characters of words (m2)."""
    folders = []
    for n, (source, caption) in enumerate(((results_pair[0], "x" * 600),
                                           (results_pair[1], "word " * 1600))):
        folder = tmp_path / f"long{n}"
        shutil.copytree(source, folder)
        path = str(folder / predictions.file_name("en"))
        captions = predictions.read_language(path, "en")
        captions[key] = caption
        predictions.write(path, {"en": captions})
        folders.append(str(folder))
    return folders


def _box(driver, element):
    return driver.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return [r.left, r.top + window.scrollY, r.width, r.height];", element)


def test_phone_layout_and_over_long_captions(browser_tab, make_session, results_pair,
                                             release, serve, tmp_path):
    browser = browser_tab
    key = helpers.release_records(release)[0][0]
    folders = _long_caption_results(results_pair, release, tmp_path, key)
    warnings = []
    session = make_session(langs=("en",), subset_size=8, replication=1, gold_share=0.0,
                           systems=(("a", folders[0]), ("b", folders[1])),
                           warn=warnings.append)
    assert any("1 caption(s) longer than" in w for w in warnings)
    assert any("1 with more than" in w for w in warnings)
    helpers.pass_introduction(session)
    rater = session.raters[0]
    n = next(n for n, item_id in enumerate(session.assignments[rater.name], start=1)
             if session.items[item_id].image == key)
    base = serve(session)
    for width, height in ((WINDOW[0], WINDOW[1]), (390, 844)):
        browser.set_window_size(width, height)
        browser.get(f"{base}/r/{rater.token}/item/{n}")
        inner = browser.execute_script("return window.innerWidth")
        assert browser.execute_script("return document.documentElement.scrollWidth") <= inner
        buttons = {int(b.get_attribute("value")): _box(browser, b)
                   for b in browser.find_elements(By.CSS_SELECTOR, "button[name=choice]")}
        # The buttons stay within reach: below the captions, not thousands of pixels down,
        # and on the phone on the first screen, each one clickable where it shows.
        assert max(top for _, top, _, _ in buttons.values()) < 2.5 * height
        if width == 390:
            inner = browser.execute_script("return window.innerHeight")
            assert max(top + h for _, top, _, h in buttons.values()) <= inner
            for button in browser.find_elements(By.CSS_SELECTOR, "button[name=choice]"):
                assert browser.execute_script(
                    "const r = arguments[0].getBoundingClientRect();"
                    "return document.elementFromPoint(r.left + r.width / 2, "
                    "r.top + r.height / 2) === arguments[0];", button)
        centre = {v: left + w / 2 for v, (left, _, w, _) in buttons.items()}
        # Left points on the left, Similar in the middle, right points on the right.
        assert max(centre[v] for v in (-3, -2, -1)) < centre[0] < min(centre[v]
                                                                        for v in (1, 2, 3))
        if width == WINDOW[0]:
            assert len({round(top) for _, top, _, _ in buttons.values()}) == 1  # one row
            assert sorted(buttons, key=centre.get) == [-3, -2, -1, 0, 1, 2, 3]
        else:  # three columns; the stronger a point, the higher
            assert buttons[-3][1] < buttons[-2][1] < buttons[-1][1]
            assert buttons[3][1] < buttons[2][1] < buttons[1][1]


def test_keyboard_scales_of_quality_and_thumb(browser_tab, make_session, serve):
    browser = browser_tab
    quality = make_session(type="quality", systems=(), references=True, langs=("en",),
                           replication=1, gold_share=0.0)
    helpers.pass_introduction(quality)
    browser.get(f"{serve(quality)}/r/{quality.raters[0].token}")
    _wait_for_url(browser, "/item/1")
    _press(browser, "2")  # Good
    _wait_for_url(browser, "/item/2")

    thumb = make_session(type="thumb", systems=(), references=True, langs=("zh",),
                         replication=1, gold_share=0.0)
    helpers.pass_introduction(thumb)
    browser.get(f"{serve(thumb)}/r/{thumb.raters[0].token}")
    _wait_for_url(browser, "/item/1")
    # Precision 4, recall 3, then precision corrected to 2 (p chooses it again), fluency two
    # steps down, a conciseness deduction, then submit.
    _press(browser, "4", "3", "p", "2", "f", "f", "c", Keys.ENTER)
    _wait_for_url(browser, "/item/2")
    for session, expected in ((quality, {"quality": "Good"}),
                              (thumb, {"P": 2, "R": 3, "Fl": -0.2, "Con": -0.5, "Inc": 0.0})):
        with store.Store(session.db_path) as db:
            assert [r["answer"] for r in db.ratings()] == [expected]


def test_active_time_leaves_out_idle_and_hidden_time(browser_tab, served, serve):
    browser = browser_tab
    session, _ = served
    base = serve(session, idle_seconds=0.5)
    emad = session.by_name["emad"]
    browser.get(f"{base}/r/{emad.token}")
    _wait_for_url(browser, "/item/1")
    time.sleep(1.5)  # no input: idle after half a second
    _press(browser, "4")
    _wait_for_url(browser, "/item/2")
    # Busy for 1.2 s (a key that is no shortcut, every 0.2 s), then hidden for 1.2 s.
    for _ in range(6):
        _press(browser, "x")
        time.sleep(0.2)
    browser.execute_script("Object.defineProperty(document, 'visibilityState', "
                           "{get: () => 'hidden', configurable: true});")
    for _ in range(6):
        _press(browser, "x")
        time.sleep(0.2)
    browser.execute_script("delete document.visibilityState;")
    _press(browser, "4")
    _wait_for_url(browser, "/item/3")
    with store.Store(session.db_path) as db:
        rows = [r for r in db.ratings() if r["rater"] == "emad"]
    idle, busy = rows
    # The pause counts nothing, whole (not up to the idle threshold).
    assert idle["seconds"] >= 1.5 and idle["active_seconds"] <= 0.3
    # The hidden 1.2 s (at least) are left out, give or take the clock's half-second tick.
    assert busy["seconds"] >= 2.4 and 0.7 <= busy["active_seconds"] <= busy["seconds"] - 0.7


def test_screenshot_of_a_raters_page(served, tmp_path):
    session, _ = served
    for rater, page in (("ann", "current"), (None, "dashboard")):
        out = screenshot.take(session.folder, rater, str(tmp_path / f"{page}.png"),
                              size=(800, 600), page=page)
        with open(out, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(InputError, match="no rater 'nobody'"):
        screenshot.take(session.folder, "nobody", str(tmp_path / "x.png"))
    with pytest.raises(InputError, match="--page 'other'"):
        screenshot.take(session.folder, "ann", str(tmp_path / "x.png"), page="other")


def test_the_pause_is_said_to_the_rater(browser_tab, served, serve):
    session, _ = served
    base = serve(session, idle_seconds=1)
    browser_tab.get(f"{base}/r/{session.by_name['dina'].token}")
    _wait_for_url(browser_tab, "/item/1")
    paused = browser_tab.find_element(By.ID, "paused")
    assert not paused.is_displayed()
    WebDriverWait(browser_tab, 20).until(lambda d: paused.is_displayed())
    assert "not counted" in paused.text
    assert browser_tab.find_element(By.ID, "item-time").text == "0 min 00 s"
    _press(browser_tab, "x")  # any input: the clock goes on
    WebDriverWait(browser_tab, 20).until(lambda d: not paused.is_displayed())


def test_practice_feedback_shows_the_image_and_the_captions(browser_tab, make_session, serve):
    session = make_session(langs=("en",), replication=1, gold_share=0.0)
    rater = session.raters[0]
    base = serve(session)
    browser_tab.get(f"{base}/r/{rater.token}")
    _wait_for_url(browser_tab, "/guidelines")
    browser_tab.find_element(By.ID, "guidelines-continue").click()
    _wait_for_url(browser_tab, "/practice/1")
    _press(browser_tab, "1")
    _wait_for(browser_tab, "#verdict")
    image = browser_tab.find_element(By.ID, "image")
    WebDriverWait(browser_tab, 20).until(
        lambda d: d.execute_script("return arguments[0].naturalWidth", image) > 0)
    assert _captions(browser_tab) == tuple(session.practice["en"][0]["texts"])


def test_the_dashboard_shows_flagged_raters(browser_tab, make_session, serve, tmp_path):
    consent = tmp_path / "consent.txt"
    consent.write_text("Consent.", encoding="utf-8")
    session = make_session(langs=("en",), subset_size=8, quota=10, gold_share=0.25,
                           replication=4, crowd=True, consent=str(consent))
    base = serve(session, dashboard_refresh=0.5)
    browser = browser_tab
    join = f"{base}/join/{session.crowd['enrol_token']}/en"
    # One participant answers everything "Similar" at once, through the pages.
    browser.get(f"{join}?PROLIFIC_PID=SIMILAR")
    _wait_for_url(browser, "/consent")
    browser.find_element(By.ID, "agree").click()
    _wait_for_url(browser, "/guidelines")
    browser.find_element(By.ID, "guidelines-continue").click()
    for n in (1, 2, 3):
        _wait_for_url(browser, f"/practice/{n}")
        _press(browser, "4")
        _wait_for(browser, "#verdict")
        browser.find_element(By.ID, "next").click()
    for n in range(1, 11):
        _wait_for_url(browser, f"/item/{n}")
        _press(browser, "4")
    _wait_for(browser, "#completion-code")
    browser.get("about:blank")
    browser.get(f"{base}/dashboard/{session.owner_token}")
    row = "#raters tr[data-rater='en-1']"
    WebDriverWait(browser, 20).until(lambda d: "FLAGGED" in (_text(d, row) or ""))
    flags = _text(browser, f"{row} td.flags")
    assert "straight" in flags and "fast" in flags, flags
    assert browser.execute_script(
        "return document.querySelector(arguments[0]).className", row) == "flagged"
    # The three untaken slots are folded away, and the item view counts the ratings.
    assert "3 untaken slot(s)" in _text(browser, "#untaken summary")
    assert browser.execute_script(
        "return [...document.querySelectorAll('#raters tbody tr')].length") == 1
    browser.find_element(By.ID, "items-link").click()
    WebDriverWait(browser, 20).until(lambda d: "/items" in d.current_url)
    cells = browser.execute_script(
        "return [...document.querySelectorAll('tr[data-item] td.ratings')]"
        ".map(c => c.textContent)")
    assert len(cells) == 10 and set(cells) == {"1 / 4"}
