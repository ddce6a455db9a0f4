"""The owner's dashboard and the page layout in a real headless browser (conftest.py's; the
rater's own flow: test_browser.py)."""

import shutil
import time

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from errors import InputError
from formats import predictions
from tests.tools.humaneval import helpers, pages
from tools.humaneval import screenshot, store


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
    assert pages.text(browser, cell).startswith("0 / ")
    with store.Store(session.db_path) as db:  # a rating arrives while the page is open
        item = session.assignments["ann"][0]
        db.mark_shown(ann.name, item, now=time.time() - 8)
        db.add_rating(ann.name, item, 1, {"choice": 1}, active_seconds=5.0)
    WebDriverWait(browser, 20).until(lambda d: (pages.text(d, cell) or "").startswith("1 / "))
    assert "updated" in pages.text(browser, "#updated")
    en = pages.text(browser, "#langs tr[data-lang='en']")
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


def test_over_long_captions_keep_the_buttons_within_reach_on_a_phone(
        browser_tab, make_session, results_pair, release, serve, tmp_path):
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
    for width, height in ((pages.WINDOW[0], pages.WINDOW[1]), (390, 844)):
        browser.set_window_size(width, height)
        browser.get(f"{base}/r/{rater.token}/item/{n}")
        inner = browser.execute_script("return window.innerWidth")
        assert browser.execute_script("return document.documentElement.scrollWidth") <= inner
        buttons = {int(b.get_attribute("value")): pages.box(browser, b)
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
        assert max(centre[v] for v in (-3, -2, -1)) < centre[0] < min(centre[v] for v in (1, 2, 3))
        if width == pages.WINDOW[0]:
            assert len({round(top) for _, top, _, _ in buttons.values()}) == 1  # one row
            assert sorted(buttons, key=centre.get) == [-3, -2, -1, 0, 1, 2, 3]
        else:  # three columns; the stronger a point, the higher
            assert buttons[-3][1] < buttons[-2][1] < buttons[-1][1]
            assert buttons[3][1] < buttons[2][1] < buttons[1][1]


def test_active_time_leaves_out_idle_or_hidden_time(browser_tab, served, serve):
    browser = browser_tab
    session, _ = served
    base = serve(session, idle_seconds=0.5)
    emad = session.by_name["emad"]
    browser.get(f"{base}/r/{emad.token}")
    pages.wait_for_url(browser, "/item/1")
    time.sleep(1.5)  # no input: idle after half a second
    pages.press(browser, "4")
    pages.wait_for_url(browser, "/item/2")
    # Busy for 1.2 s (a key that is no shortcut, every 0.2 s), then hidden for 1.2 s.
    for _ in range(6):
        pages.press(browser, "x")
        time.sleep(0.2)
    browser.execute_script("Object.defineProperty(document, 'visibilityState', "
                           "{get: () => 'hidden', configurable: true});")
    for _ in range(6):
        pages.press(browser, "x")
        time.sleep(0.2)
    browser.execute_script("delete document.visibilityState;")
    pages.press(browser, "4")
    pages.wait_for_url(browser, "/item/3")
    with store.Store(session.db_path) as db:
        rows = [r for r in db.ratings() if r["rater"] == "emad"]
    idle, busy = rows
    # The pause counts nothing, whole (not up to the idle threshold).
    assert idle["seconds"] >= 1.5 and idle["active_seconds"] <= 0.3
    # The hidden 1.2 s (at least) are left out, give or take the clock's half-second tick.
    assert busy["seconds"] >= 2.4 and 0.7 <= busy["active_seconds"] <= busy["seconds"] - 0.7


def test_screenshots_of_a_raters_page_or_the_dashboard(served, tmp_path):
    session, _ = served
    # Screenshots of a rater's page and the dashboard.
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
    pages.wait_for_url(browser_tab, "/item/1")
    paused = browser_tab.find_element(By.ID, "paused")
    assert not paused.is_displayed()
    WebDriverWait(browser_tab, 20).until(lambda d: paused.is_displayed())
    assert "not counted" in paused.text
    assert browser_tab.find_element(By.ID, "item-time").text == "0 min 00 s"
    pages.press(browser_tab, "x")  # any input: the clock goes on
    WebDriverWait(browser_tab, 20).until(lambda d: not paused.is_displayed())


def test_the_dashboard_shows_flagged_raters(browser_tab, make_session, serve, consent):
    session = make_session(langs=("en",), subset_size=8, quota=10, gold_share=0.25,
                           replication=4, crowd=True, consent=consent)
    base = serve(session, dashboard_refresh=0.5)
    browser = browser_tab
    join = f"{base}/join/{session.crowd['enrol_token']}/en"
    # One participant answers everything "Similar" at once, through the pages.
    browser.get(f"{join}?PROLIFIC_PID=SIMILAR")
    pages.wait_for_url(browser, "/consent")
    browser.find_element(By.ID, "agree").click()
    pages.wait_for_url(browser, "/guidelines")
    browser.find_element(By.ID, "guidelines-continue").click()
    for n in (1, 2, 3):
        pages.wait_for_url(browser, f"/practice/{n}")
        pages.press(browser, "4")
        pages.wait_for(browser, "#verdict")
        browser.find_element(By.ID, "next").click()
    for n in range(1, 11):
        pages.wait_for_url(browser, f"/item/{n}")
        pages.press(browser, "4")
    pages.wait_for(browser, "#completion-code")
    browser.get("about:blank")
    browser.get(f"{base}/dashboard/{session.owner_token}")
    row = "#raters tr[data-rater='en-1']"
    WebDriverWait(browser, 20).until(lambda d: "FLAGGED" in (pages.text(d, row) or ""))
    flags = pages.text(browser, f"{row} td.flags")
    assert "straight" in flags and "fast" in flags, flags
    assert browser.execute_script(
        "return document.querySelector(arguments[0]).className", row) == "flagged"
    # The three untaken slots are folded away, and the item view counts the ratings.
    assert "3 untaken slot(s)" in pages.text(browser, "#untaken summary")
    assert browser.execute_script(
        "return [...document.querySelectorAll('#raters tbody tr')].length") == 1
    browser.find_element(By.ID, "items-link").click()
    WebDriverWait(browser, 20).until(lambda d: "/items" in d.current_url)
    cells = browser.execute_script(
        "return [...document.querySelectorAll('tr[data-item] td.ratings')]"
        ".map(c => c.textContent)")
    assert len(cells) == 10 and set(cells) == {"1 / 4"}
