"""Tests of the rating web app through Flask's test client (tools/humaneval/app.py)."""

import os
import re
import time

import pytest

import errors
from tests.tools.humaneval import helpers
from tools.humaneval import store

FIELD = r'<(?:input|button|select|textarea)\b[^>]*\bname="([^"]+)"'

@pytest.fixture
def blind_session(make_session, results_pair):
    """An sxs session whose model names are easy to look for in pages (every rater past the
    introduction)."""
    session = make_session(systems=(("modelAlpha", results_pair[0]),
                                    ("modelBeta", results_pair[1])),
                           langs=("en", "ar"), replication=2, raters=("en=ann,bob,cyd", "2"))
    helpers.pass_introduction(session)
    return session


_ratings = helpers.ratings


def _rate(client, token, n, data, **options):
    """Opens item `n` (the server sends it) and posts `data` as its rating."""
    assert client.get(f"/r/{token}/item/{n}").status_code == 200
    return client.post(f"/r/{token}/item/{n}", data=data, **options)


def test_a_rater_resumes_at_the_first_item_not_rated_until_done(blind_session):
    client, rater = helpers.client(blind_session), blind_session.by_name["ann"]
    items = blind_session.assignments["ann"]
    response = client.get(f"/r/{rater.token}")
    assert response.status_code == 303 and response.location.endswith("/item/1")
    page = client.get(response.location).get_data(as_text=True)
    assert f"Item 1 of {len(items)}" in page
    response = client.post(f"/r/{rater.token}/item/1", data={"choice": "-2"})
    assert response.status_code == 303 and response.location.endswith(f"/r/{rater.token}")
    # Resuming goes to the first item not rated; a rated item is not shown again.
    assert client.get(f"/r/{rater.token}").location.endswith("/item/2")
    assert client.get(f"/r/{rater.token}/item/1").status_code == 303
    for n in range(2, len(items) + 1):
        assert _rate(client, rater.token, n, {"choice": "0"}).status_code == 303
    done = client.get(f"/r/{rater.token}")
    assert done.status_code == 200 and f"all {len(items)} items" in done.get_data(as_text=True)
    rows = _ratings(blind_session)
    assert [r["item"] for r in rows] == list(items)
    assert rows[0]["answer"] == {"choice": -2} and rows[0]["seconds"] is not None


@pytest.mark.parametrize("data, message", [
    ({"choice": "9"}, "outside -3..3"),
    ({"choice": "left"}, "expected an integer"),
    ({"choice": " 1"}, "expected an integer"),  # only the buttons' exact values
    ({"choice": "+1"}, "expected an integer"),
    ({"choice": "١"}, "expected an integer"),
    ({"choice": "01"}, "expected an integer"),
    ({}, "missing: choice"),
    ({"choice": "1", "system": "m2"}, "unknown: system"),
    ({"choice": ["1", "2"]}, "sent more than once"),
    ({"choice": "1", "active_ms": "-5"}, "active_ms"),
    ({"choice": "-0"}, "expected an integer"),  # the button of 0 sends "0"
    ({"choice": "1", "active_ms": "²"}, "active_ms"),  # str.isdigit's, not int's digits
    ({"choice": "1", "active_ms": "١٢٠٠"}, "active_ms"),  # refused as answers are
])
def test_bad_answers_are_refused_400_storing_nothing(blind_session, data, message):
    client, token = helpers.client(blind_session), blind_session.by_name["bob"].token
    response = client.post(f"/r/{token}/item/1", data=data)
    assert response.status_code == 400
    assert message in response.get_data(as_text=True)
    assert _ratings(blind_session) == []


def test_unknown_tokens_or_places_are_404_with_a_way_back(blind_session):
    client, token = helpers.client(blind_session), blind_session.by_name["cyd"].token
    count = len(blind_session.assignments["cyd"])
    for url in ("/r/0123456789abcdef", f"/r/{token}/item/0", f"/r/{token}/item/{count + 1}",
                f"/r/{token}/item/{count + 1}/image", "/r/nobody/item/1/image", "/nothing"):
        response = client.get(url)
        assert response.status_code == 404, url
    page = client.get("/r/nobody").get_data(as_text=True)
    assert "This link is not known" in page and 'id="forward"' not in page
    # A place beyond the rater's list: a way back to where they are.
    page = client.get(f"/r/{token}/item/{count + 1}").get_data(as_text=True)
    assert "no such item" in page and f'id="forward" href="/r/{token}"' in page
    assert client.post("/r/nobody/item/1", data={"choice": "1"}).status_code == 404


def test_a_second_answer_to_an_item_is_409_keeping_the_first(blind_session):
    client, token = helpers.client(blind_session), blind_session.by_name["cyd"].token
    assert _rate(client, token, 1, {"choice": "1"}).status_code == 303
    again = client.post(f"/r/{token}/item/1", data={"choice": "-3"})
    page = again.get_data(as_text=True)
    assert again.status_code == 409 and "your first answer is kept" in page
    assert f'id="forward" href="/r/{token}"' in page  # the way on: the next item
    # The page's script gets the same as JSON, with the way on.
    again = client.post(f"/r/{token}/item/1", data={"choice": "-3"},
                        headers={"Accept": "application/json"})
    assert again.status_code == 409
    assert again.get_json()["next"] == f"/r/{token}" and "first answer" in again.get_json()["error"]
    assert [r["answer"] for r in _ratings(blind_session)] == [{"choice": 1}]


def test_nothing_tells_which_model_wrote_a_caption(blind_session):
    client = helpers.client(blind_session)
    secrets = ["modelAlpha", "modelBeta", "m1", "m2", "base", "test", "gold",
               *(s["results"] for s in blind_session.data["systems"])]
    for rater in blind_session.raters:
        for n, item_id in enumerate(blind_session.assignments[rater.name], start=1):
            item = blind_session.items[item_id]
            response = client.get(f"/r/{rater.token}/item/{n}")
            page = response.get_data(as_text=True)
            for secret in [*secrets, item.image, item.id]:
                assert secret not in page, (secret, n)
            # The form sends positional choices only, under the rater's own URL.
            assert set(re.findall(FIELD, page)) == {"choice"}
            assert set(re.findall(r'(?:src|action|href)="([^"]+)"', page)) == {
                f"/r/{rater.token}/item/{n}/image", f"/r/{rater.token}/item/{n}",
                f"/r/{rater.token}/guidelines", f"/r/{rater.token}/withdraw",
                "/static/style.css", "/static/rate.js"}
            image = client.get(f"/r/{rater.token}/item/{n}/image")
            assert image.status_code == 200 and image.mimetype == "image/jpeg"
            headers = str(image.headers)
            assert item.image not in headers and "ETag" not in headers


def test_a_token_reaches_only_its_raters_items(blind_session):
    client = helpers.client(blind_session)
    ann, bob = blind_session.by_name["ann"], blind_session.by_name["bob"]
    assert set(blind_session.assignments["ann"]) - set(blind_session.assignments["bob"])
    # Every place under bob's token is one of bob's items (so none of ann's alone).
    for n, item_id in enumerate(blind_session.assignments["bob"], start=1):
        page = client.get(f"/r/{bob.token}/item/{n}").get_data(as_text=True)
        shown = tuple(re.findall(r'<p class="caption"[^>]*>([^<]*)</p>', page))
        assert shown == blind_session.items[item_id].texts
    _rate(client, ann.token, 1, {"choice": "3"})
    _rate(client, bob.token, 1, {"choice": "-3"})
    rows = {r["rater"]: r for r in _ratings(blind_session)}
    assert rows["ann"]["item"] == blind_session.assignments["ann"][0]
    assert rows["ann"]["answer"] == {"choice": 3}
    assert rows["bob"]["item"] == blind_session.assignments["bob"][0]


def test_quality_pages(make_session):
    quality = make_session(type="quality", systems=(), references=True, langs=("en",),
                           replication=1, gold_share=0.0)
    helpers.pass_introduction(quality)
    client, token = helpers.client(quality), quality.raters[0].token
    page = client.get(f"/r/{token}/item/1").get_data(as_text=True)
    assert "Not-Enough-Info" in page and 'name="quality"' in page
    assert _rate(client, token, 1, {"quality": "Good"}).status_code == 303
    assert client.post(f"/r/{token}/item/2", data={"quality": "Great"}).status_code == 400


def test_thumb_pages(make_session):
    thumb = make_session(type="thumb", systems=(), references=True, langs=("zh",),
                         replication=1, gold_share=0.0)
    helpers.pass_introduction(thumb)
    client, token = helpers.client(thumb), thumb.raters[0].token
    page = client.get(f"/r/{token}/item/1").get_data(as_text=True)
    assert set(re.findall(FIELD, page)) == {"P", "R", "Fl", "Con", "Inc"}
    answer = {"P": "5", "R": "4", "Fl": "-0.1", "Con": "0.0", "Inc": "-0.5"}
    assert _rate(client, token, 1, answer).status_code == 303
    bad = client.post(f"/r/{token}/item/2", data=dict(answer, P="7"))
    assert bad.status_code == 400 and "outside 1-5" in bad.get_data(as_text=True)
    assert _ratings(thumb)[0]["answer"] == {"P": 5, "R": 4, "Fl": -0.1, "Con": 0.0, "Inc": -0.5}


def test_headers_of_every_answer(blind_session):
    client, token = helpers.client(blind_session), blind_session.by_name["ann"].token
    for url in (f"/r/{token}/item/1", f"/r/{token}/item/1/image", "/r/nobody", "/",
                f"/dashboard/{blind_session.owner_token}"):
        headers = client.get(url).headers
        assert headers["X-Frame-Options"] == "DENY", url
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"], url
        assert headers["Referrer-Policy"] == "no-referrer", url  # tokens are in the URLs
        assert headers["X-Content-Type-Options"] == "nosniff", url
    # Pages are never kept by the browser (Back reloads them); images may be.
    assert client.get(f"/r/{token}/item/1").headers["Cache-Control"] == "no-store"
    assert client.get(f"/r/{token}").headers["Cache-Control"] == "no-store"
    assert "no-store" not in client.get(f"/r/{token}/item/1/image").headers["Cache-Control"]


def test_right_to_left_captions(blind_session):
    client, token = helpers.client(blind_session), blind_session.by_name["ann"].token
    # Right-to-left captions.
    arabic = next(r for r in blind_session.raters if r.lang == "ar")
    page = client.get(f"/r/{arabic.token}/item/1").get_data(as_text=True)
    assert page.count('lang="ar" dir="rtl"') == 2
    assert 'lang="en" dir="ltr"' in client.get(f"/r/{token}/item/1").get_data(as_text=True)


def test_answers_for_the_pages_script_are_json(blind_session):
    client, token = helpers.client(blind_session), blind_session.by_name["bob"].token
    json_accept = {"Accept": "application/json"}
    ok = _rate(client, token, 1, {"choice": "2"}, headers=json_accept)
    assert ok.status_code == 200 and ok.get_json() == {"next": f"/r/{token}"}
    bad = client.post(f"/r/{token}/item/2", data={"choice": "8"}, headers=json_accept)
    assert bad.status_code == 400 and "outside -3..3" in bad.get_json()["error"]


@pytest.mark.parametrize("sent, stored", [("2500", 2.5), (None, "wall"), ("99999999", "wall")])
def test_active_time_is_kept_within_the_wall_clock(blind_session, sent, stored):
    client, rater = helpers.client(blind_session), blind_session.by_name["ann"]
    client.get(f"/r/{rater.token}/item/1")  # the first view
    item = blind_session.assignments["ann"][0]
    with store.Store(blind_session.db_path) as db:  # seen ten seconds ago
        db.conn.execute("UPDATE views SET first_shown = first_shown - 10 WHERE item = ?", (item,))
    data = {"choice": "1"} if sent is None else {"choice": "1", "active_ms": sent}
    assert client.post(f"/r/{rater.token}/item/1", data=data).status_code == 303
    (row,) = _ratings(blind_session)
    assert row["seconds"] == pytest.approx(10.0, abs=1.0)
    expected = row["seconds"] if stored == "wall" else stored
    assert row["active_seconds"] == pytest.approx(expected)


def test_items_wait_for_the_introduction(make_session):
    session = make_session(langs=("en",))
    client, token = helpers.client(session), session.raters[0].token
    # Before the guidelines and practice: item pages lead back, answers are refused.
    response = client.get(f"/r/{token}/item/1")
    assert response.status_code == 303 and response.location.endswith(f"/r/{token}")
    assert client.get(f"/r/{token}").location.endswith(f"/r/{token}/guidelines")
    refused = client.post(f"/r/{token}/item/1", data={"choice": "1"})
    assert refused.status_code == 409 and "finish the introduction" in refused.get_data(
        as_text=True)
    assert _ratings(session) == []


def test_the_server_measures_the_time_whatever_the_client_claims(blind_session, capsys):
    """A forged active_ms: on an item never sent, refused; otherwise the stored time is at most
    the server's (since the item was sent, or since the rater's previous rating), so 45 s
    claimed per item posted 0.1 s apart is stored as ~0.1 s, paid as such and flagged fast."""
    from tools.humaneval import __main__ as cli
    from tools.humaneval import rating_stats
    client, token = helpers.client(blind_session), blind_session.by_name["ann"].token
    count = len(blind_session.assignments["ann"])
    never_sent = client.post(f"/r/{token}/item/1", data={"choice": "3", "active_ms": "9999999999"})
    assert never_sent.status_code == 409 and "not shown to you" in never_sent.get_data(as_text=True)
    assert _ratings(blind_session) == []
    assert _rate(client, token, 1, {"choice": "3", "active_ms": "9999999999"}).status_code == 303
    for n in range(2, count + 1):  # every page fetched first, then 45 s claimed per answer
        client.get(f"/r/{token}/item/{n}")
    for n in range(2, count + 1):
        time.sleep(0.1)
        assert client.post(f"/r/{token}/item/{n}", data={"choice": "3", "active_ms": "45000"}
                           ).status_code == 303
    rows = _ratings(blind_session)
    assert len(rows) == count and all(r["active_seconds"] < 2 for r in rows)
    assert sum(r["active_seconds"] for r in rows) <= rows[-1]["rated_at"] - rows[0]["shown_at"]
    cli.main(["status", "--session", blind_session.folder])
    assert re.search(r"^ann .* 0\.0 min$", capsys.readouterr().out, re.M)
    assert re.search(r"\(0 min 0[0-2] s\)", client.get(f"/r/{token}").get_data(as_text=True))
    table = rating_stats.rater_table(blind_session, rating_stats.load_ratings(blind_session))
    assert "fast" in table["ann"]["flags"] and table["ann"]["median_seconds"] < 2


def test_a_full_disk_pauses_the_study_while_reading_still_works(make_session, tmp_path, caplog,
                                                              capsys):
    """The rater reads that the study is paused and the answer not stored (503), the log one
    line per failure; status, export and analyze read a full disk; simulate leaves no empty
    database; the same answer goes through once there is room."""
    import logging
    import shutil

    from tests import tiny
    from tests.evaluation import full_disk
    from tools.humaneval import __main__ as cli
    from tools.humaneval import session as session_lib
    rated, fresh = make_session(langs=("en",)), make_session(langs=("en",))
    helpers.pass_introduction(rated)
    with tiny.small_tmpfs(tmp_path / "disk", "2m") as disk:
        rated = session_lib.load(shutil.copytree(rated.folder, disk / "rated"))
        fresh = session_lib.load(shutil.copytree(fresh.folder, disk / "fresh"))
        client, token = helpers.client(rated), rated.raters[0].token
        assert _rate(client, token, 1, {"choice": "1"}).status_code == 303
        assert client.get(f"/r/{token}/item/2").status_code == 200
        full_disk.fill(disk)
        with caplog.at_level(logging.ERROR):
            page = client.post(f"/r/{token}/item/2", data={"choice": "2"})
            script = client.post(f"/r/{token}/item/2", data={"choice": "2"},
                                 headers={"Accept": "application/json"})
        assert page.status_code == script.status_code == 503
        assert "The study is paused" in page.get_data(as_text=True)
        assert "your last answer was NOT stored" in script.get_json()["error"]
        assert len(caplog.records) == 2 and all(
            "\n" not in r.getMessage() and r.exc_info is None and token not in r.getMessage()
            and "ratings.sqlite" in r.getMessage() for r in caplog.records)
        capsys.readouterr()
        cli.main(["status", "--session", rated.folder])
        assert re.search(r"^en-1 .* 1 / ", capsys.readouterr().out, re.M)
        cli.main(["export", "--session", rated.folder, "--out", str(tmp_path / "export")])
        cli.main(["analyze", "--session", rated.folder, "--out", str(tmp_path / "report"),
                  "--resamples", "1"])
        with pytest.raises(errors.InputError, match="is the disk full"):
            cli.main(["simulate", "--session", fresh.folder])
        assert sorted(os.listdir(fresh.folder)) == ["session.json"]  # no empty database
        os.remove(disk / ".filler")
        assert client.post(f"/r/{token}/item/2", data={"choice": "2"}).status_code == 303
    assert (tmp_path / "export" / "ratings.csv").read_text().count("\n") == 2
