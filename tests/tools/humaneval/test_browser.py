"""A rater's pages in a real headless browser (chromium through chromedriver; the owner's pages:
test_browser_owner.py). The browser is required: these tests fail, never skip, without it
(`make test` installs chromium and chromium-driver)."""

import signal

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from tests.tools.humaneval import helpers, pages
from tools.humaneval import store


def test_rating_in_a_browser(browser_tab, served):
    browser = browser_tab
    session, base = served
    ann, bob = session.by_name["ann"], session.by_name["bob"]
    mine = session.assignments["ann"]

    browser.get(f"{base}/r/{ann.token}")
    pages.wait_for_url(browser, f"/r/{ann.token}/item/1")
    assert browser.find_element(By.ID, "progress").text == f"Item 1 of {len(mine)}"
    assert pages.captions(browser) == session.items[mine[0]].texts
    assert "min" in browser.find_element(By.ID, "total-time").text  # the clock runs

    # By mouse: "Left better" (-2).
    browser.find_element(By.CSS_SELECTOR, 'button[name="choice"][value="-2"]').click()
    pages.wait_for_url(browser, f"/r/{ann.token}/item/2")
    # By keyboard: 6 is "Right better" (+2).
    pages.press(browser, "6")
    pages.wait_for_url(browser, f"/r/{ann.token}/item/3")
    assert pages.stored(session, "ann") == [(mine[0], -2), (mine[1], 2)]

    # A reload, and opening the link afresh, both come back to the first unrated item.
    browser.refresh()
    pages.wait_for_url(browser, f"/r/{ann.token}/item/3")
    browser.get(f"{base}/r/{ann.token}")
    pages.wait_for_url(browser, f"/r/{ann.token}/item/3")
    assert browser.find_element(By.ID, "rated").text == "2 rated"
    pages.press(browser, "4")
    pages.wait_for_url(browser, f"/r/{ann.token}/item/4")
    assert pages.stored(session, "ann") == [(mine[0], -2), (mine[1], 2), (mine[2], 0)]

    # Bob's link shows bob's own first item, and his ratings leave ann's alone.
    browser.get(f"{base}/r/{bob.token}")
    pages.wait_for_url(browser, f"/r/{bob.token}/item/1")
    assert pages.captions(browser) == session.items[session.assignments["bob"][0]].texts
    pages.press(browser, "1")
    pages.wait_for_url(browser, f"/r/{bob.token}/item/2")
    assert pages.stored(session, "bob") == [(session.assignments["bob"][0], -3)]
    assert pages.stored(session, "ann") == [(mine[0], -2), (mine[1], 2), (mine[2], 0)]
    # No place under bob's token goes beyond bob's items; a made-up token reaches nothing.
    browser.get(f"{base}/r/{bob.token}/item/{len(session.assignments['bob']) + 1}")
    assert "no such item" in browser.find_element(By.ID, "message").text
    browser.find_element(By.ID, "forward").click()  # the way back to where bob is
    pages.wait_for_url(browser, f"/r/{bob.token}/item/2")
    browser.get(f"{base}/r/{'0' * 32}")
    assert "This link is not known" in browser.find_element(By.ID, "message").text


def test_crowd_participants_enrol_through_to_their_completion_code(browser_tab, make_session,
                                                                   serve, consent):
    # One language, two images at replication 2 (a quota of 8 items: two slots, the
    # replication's minimum).
    session = make_session(langs=("en",), subset_size=2, gold_share=0.0, replication=2,
                           quota=8, crowd=True, consent=consent,
                           completion_code="C0DE42")
    assert [r.name for r in session.raters] == ["en-1", "en-2"]
    base = serve(session)
    browser = browser_tab
    join = f"{base}/join/{session.crowd['enrol_token']}/en"
    tokens = {}
    for pid in ("pidA", "pidB"):
        browser.get(f"{join}?PROLIFIC_PID={pid}&STUDY_ID=study1&SESSION_ID=sess-{pid}")
        pages.wait_for_url(browser, "/consent")
        tokens[pid] = browser.current_url.split("/r/")[1].split("/")[0]
        assert "You may stop at any time." in browser.find_element(By.ID, "consent-text").text
        browser.find_element(By.ID, "agree").click()
        pages.wait_for_url(browser, "/guidelines")
        assert "Much better" in browser.find_element(By.ID, "guidelines").text
        image = browser.find_element(By.ID, "example-image")
        assert browser.execute_script("return arguments[0].naturalWidth", image) > 0
        browser.find_element(By.ID, "guidelines-continue").click()
        # Practice: the own caption on the left (1 is right), identical captions (4 is
        # right), the own caption on the right (1 is wrong: feedback says so).
        for n, key, verdict in ((1, "1", "Well done"), (2, "4", "Well done"),
                                (3, "1", "Not quite")):
            pages.wait_for_url(browser, f"/practice/{n}")
            assert browser.find_element(By.ID, "practice-note").is_displayed()
            pages.press(browser, key)
            pages.wait_for(browser, "#verdict")
            assert verdict in browser.find_element(By.ID, "verdict").text
            if verdict == "Not quite":
                assert "Right much better" in browser.find_element(By.ID, "expected").text
            browser.find_element(By.ID, "next").click()
        for n in (1, 2):
            pages.wait_for_url(browser, f"/item/{n}")
            pages.press(browser, "5")
        code = pages.wait_for(browser, "#completion-code").text
        link = browser.find_element(By.ID, "completion-link").get_attribute("href")
        browser.get("about:blank")  # before the page sends us to Prolific
        assert code == "C0DE42"
        assert link == "https://app.prolific.com/submissions/complete?cc=C0DE42"
    assert tokens["pidA"] != tokens["pidB"]
    # Coming back: the same slot, done, with the code again; no second slot taken.
    browser.get(f"{join}?PROLIFIC_PID=pidA&STUDY_ID=study1&SESSION_ID=again")
    assert pages.wait_for(browser, "#completion-code").text == "C0DE42"
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
    # Withdrawing after rating, from the consent page (A) or the study's link (B): the
    # ratings are withdrawn, the rater told so, the link dead, the slot free again.
    browser.get(f"{base}/r/{tokens['pidA']}/consent")
    browser.find_element(By.ID, "decline").click()
    pages.wait_for(browser, "#message")
    assert "Your 2 rating(s) are withdrawn" in browser.find_element(By.ID, "message").text
    browser.get(f"{base}/r/{tokens['pidB']}/withdraw")
    assert "You have rated 2 item(s)" in browser.find_element(By.ID, "message").text
    browser.find_element(By.ID, "withdraw").click()
    pages.wait_for_url(browser, "/declined/en?withdrawn=2")
    assert "This link no longer works" in browser.find_element(By.ID, "message").text
    browser.get(f"{base}/r/{tokens['pidA']}")
    assert "This link is not known" in browser.find_element(By.ID, "message").text
    state = store.read_state(session.db_path, session.digest)
    assert (state["withdrawn"], state["declined"], state["participants"]) == (2, 0, {})
    with store.Store(session.db_path) as db:
        assert db.ratings() == [] and db.conn.execute(
            "SELECT COUNT(*) FROM withdrawn_ratings").fetchone()[0] == 4
    browser.get(f"{join}?PROLIFIC_PID=pidC&STUDY_ID=study1&SESSION_ID=c")
    pages.wait_for_url(browser, "/consent")


def test_back_reload_two_tabs_never_leave_a_silent_page(browser_tab, served):
    browser = browser_tab
    session, base = served
    cyd = session.by_name["cyd"]
    mine = session.assignments["cyd"]
    browser.get(f"{base}/r/{cyd.token}")
    pages.wait_for_url(browser, "/item/1")
    pages.press(browser, "1")
    pages.wait_for_url(browser, "/item/2")
    # Back: the rated page is not shown again from the cache; the server sends the rater on,
    # and the keys work.
    browser.back()
    pages.wait_for_url(browser, "/item/2")
    assert browser.find_element(By.ID, "rated").text == "1 rated"
    pages.press(browser, "7")
    pages.wait_for_url(browser, "/item/3")
    browser.refresh()
    pages.wait_for_url(browser, "/item/3")
    # A second tab rates item 3; the first, still showing item 3, says so and leads on.
    first = browser.current_window_handle
    browser.switch_to.new_window("tab")
    browser.get(f"{base}/r/{cyd.token}")
    pages.wait_for_url(browser, "/item/3")
    pages.press(browser, "4")
    pages.wait_for_url(browser, "/item/4")
    browser.switch_to.window(first)
    pages.press(browser, "6")
    WebDriverWait(browser, 20).until(lambda d: "first answer is kept" in pages.status(d))
    browser.find_element(By.ID, "status-next").click()
    pages.wait_for_url(browser, "/item/4")
    assert pages.stored(session, "cyd") == [(mine[0], -3), (mine[1], 3), (mine[2], 0)]


def test_arabic_captions_run_right_to_left(browser_tab, served):
    browser = browser_tab
    session, base = served
    # Arabic captions run right to left.
    browser.get(f"{base}/r/{session.by_name['dina'].token}")
    pages.wait_for_url(browser, "/item/1")
    for element in browser.find_elements(By.CSS_SELECTOR, "p.caption"):
        assert element.get_attribute("lang") == "ar"
        assert browser.execute_script("return getComputedStyle(arguments[0]).direction",
                                      element) == "rtl"


def test_a_rating_sent_to_a_killed_server_goes_through_once_it_is_back(browser_tab, make_session):
    browser = browser_tab
    session = make_session(langs=("en",), replication=1, gold_share=0.0)
    helpers.pass_introduction(session)
    rater = session.raters[0]
    proc, port = helpers.start_server(session)
    try:
        browser.get(f"http://127.0.0.1:{port}/r/{rater.token}")
        pages.wait_for_url(browser, "/item/1")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    pages.press(browser, "2")
    WebDriverWait(browser, 20).until(lambda d: "NOT saved" in pages.status(d))
    assert browser.find_element(By.CSS_SELECTOR, 'button[value="-2"]').is_enabled()
    assert pages.stored(session, rater.name) == []
    proc, _ = helpers.start_server(session, port)  # back on the same port
    try:
        pages.press(browser, "2")
        pages.wait_for_url(browser, "/item/2")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    assert pages.stored(session, rater.name) == [(session.assignments[rater.name][0], -2)]


def test_keyboard_scale_of_quality(browser_tab, make_session, serve):
    browser = browser_tab
    quality = make_session(type="quality", systems=(), references=True, langs=("en",),
                           replication=1, gold_share=0.0)
    helpers.pass_introduction(quality)
    browser.get(f"{serve(quality)}/r/{quality.raters[0].token}")
    pages.wait_for_url(browser, "/item/1")
    pages.press(browser, "2")  # Good
    pages.wait_for_url(browser, "/item/2")
    with store.Store(quality.db_path) as db:
        assert [r["answer"] for r in db.ratings()] == [{"quality": "Good"}]


def test_keyboard_scale_of_thumb(browser_tab, make_session, serve):
    browser = browser_tab
    thumb = make_session(type="thumb", systems=(), references=True, langs=("zh",),
                         replication=1, gold_share=0.0)
    helpers.pass_introduction(thumb)
    browser.get(f"{serve(thumb)}/r/{thumb.raters[0].token}")
    pages.wait_for_url(browser, "/item/1")
    # Precision 4, recall 3, then precision corrected to 2 (p chooses it again), fluency two
    # steps down, a conciseness deduction, then submit.
    pages.press(browser, "4", "3", "p", "2", "f", "f", "c", Keys.ENTER)
    pages.wait_for_url(browser, "/item/2")
    with store.Store(thumb.db_path) as db:
        assert [r["answer"] for r in db.ratings()] == [
            {"P": 2, "R": 3, "Fl": -0.2, "Con": -0.5, "Inc": 0.0}]


def test_practice_feedback_shows_the_image_with_its_captions(browser_tab, make_session, serve):
    session = make_session(langs=("en",), replication=1, gold_share=0.0)
    rater = session.raters[0]
    base = serve(session)
    browser_tab.get(f"{base}/r/{rater.token}")
    pages.wait_for_url(browser_tab, "/guidelines")
    browser_tab.find_element(By.ID, "guidelines-continue").click()
    pages.wait_for_url(browser_tab, "/practice/1")
    pages.press(browser_tab, "1")
    pages.wait_for(browser_tab, "#verdict")
    image = browser_tab.find_element(By.ID, "image")
    WebDriverWait(browser_tab, 20).until(
        lambda d: d.execute_script("return arguments[0].naturalWidth", image) > 0)
    assert pages.captions(browser_tab) == tuple(session.practice["en"][0]["texts"])
