"""The study owner's dashboard (tools/humaneval/dashboard.py): its numbers from the database."""

import statistics

import numpy as np
import pytest

from tests.tools.humaneval import helpers
from tools.humaneval import app as app_lib
from tools.humaneval import dashboard, rating_stats, simulate, store


@pytest.fixture(scope="module")
def running(release, results_pair, tmp_path_factory):
    """An sxs session in en and zh where en is simulated in full, and zh-1 has rated two
    items by hand with known active times; made once for the module's tests (which only
    read it)."""
    session = helpers.new_session(release, results_pair,
                                  str(tmp_path_factory.mktemp("running") / "session"),
                                  langs=("en", "zh"), gold_share=0.34)
    simulate.simulate(session, raters={"en-1", "en-2", "en-3"}, careless={"en-2": 1.0}, seed=4)
    helpers.pass_introduction(session, raters={"zh-1"})
    with store.Store(session.db_path) as db:
        for n, active, at in ((1, 4.0, 1030.0), (2, 10.0, 1045.0)):
            item = session.assignments["zh-1"][n - 1]
            db.mark_shown("zh-1", item, now=1000.0)
            db.add_rating("zh-1", item, n, {"choice": 1}, now=at, active_seconds=active)
        db.enrol("prolific", "pid9", ["zh-2"], {"STUDY_ID": "s"})
        # zh-3 rated one item in 1 s, stored without an active time (an older kit's rating).
        db.mark_shown("zh-3", session.assignments["zh-3"][0], now=1000.0)
        db.add_rating("zh-3", session.assignments["zh-3"][0], 1, {"choice": 1}, now=1001.0)
        db.conn.execute("UPDATE ratings SET active_seconds = NULL WHERE rater = 'zh-3'")
    return session


def test_overview_counts_the_ratings_by_source(running):
    data = dashboard.overview(running, now=1090.0)
    ratings = rating_stats.load_ratings(running)
    assert data["ratings"] == {"web": 3, "simulated": sum(r.source == "simulated" for r in ratings)}


def test_overview_of_each_language_equals_a_direct_count(running):
    data = dashboard.overview(running, now=1090.0)
    ratings = rating_stats.load_ratings(running)
    by_lang = {row["lang"]: row for row in data["langs"]}
    en_tests = [i for i in running.items.values() if i.lang == "en" and not i.is_gold]
    assert by_lang["en"]["complete"] == len(en_tests) == by_lang["en"]["items"]
    assert by_lang["zh"]["complete"] == 0
    zh_first = {*running.assignments["zh-1"][:2], running.assignments["zh-3"][0]}
    assert by_lang["zh"]["begun"] == sum(not running.items[i].is_gold for i in zh_first)
    assert by_lang["zh"]["median_seconds"] == 4.0 and by_lang["en"]["median_seconds"] is None
    assert by_lang["zh"]["p90_seconds"] == pytest.approx(np.percentile([4.0, 10.0, 1.0], 90))
    table = rating_stats.agreement_table(running, ratings)
    assert by_lang["en"]["alpha"]["score"] == table[("en", "score")]["alpha"]


def test_overview_of_each_rater_equals_a_direct_count(running):
    data = dashboard.overview(running, now=1090.0)
    rows = {row["name"]: row for row in data["raters"]}
    assert rows["zh-1"]["rated"] == 2 and rows["zh-1"]["last"] == "45 s ago"
    assert rows["zh-1"]["median_seconds"] == statistics.median([4.0, 10.0])
    assert rows["zh-1"]["practice"] == "3 / 3" and rows["zh-1"]["guidelines"]
    assert rows["zh-2"]["participant"]["participant"] == "pid9"
    # Flagged on the wall clock: the median shown is the one the flag rests on.
    assert "fast" in rows["zh-3"]["flags"] and rows["zh-3"]["median_seconds"] == 1.0
    assert rows["en-2"]["flagged"] and rows["en-2"]["gold_failed"] > 0
    assert not rows["en-1"]["flagged"]


def test_the_pages_show_the_overview(running):
    client = app_lib.create_app(running.folder).test_client()
    token = running.owner_token
    page = client.get(f"/dashboard/{token}").get_data(as_text=True)
    assert 'data-rater="en-2" class="flagged"' in page and "SIMULATED" in page
    panel = client.get(f"/dashboard/{token}/panel").get_data(as_text=True)
    assert panel.count("<tr data-rater=") == len(running.raters) and "<html" not in panel


def test_the_plots_are_png_images(running):
    client = app_lib.create_app(running.folder).test_client()
    token = running.owner_token
    for name in dashboard.PLOTS:
        plot = client.get(f"/dashboard/{token}/plot/{name}.png")
        assert plot.mimetype == "image/png" and plot.data[:8] == b"\x89PNG\r\n\x1a\n"
    assert client.get(f"/dashboard/{token}/plot/other.png").status_code == 404


def test_the_dashboard_needs_the_owners_token(running):
    client = app_lib.create_app(running.folder).test_client()
    for url in ("/dashboard/x", "/dashboard/x/panel", "/dashboard/x/plot/times.png",
                f"/dashboard/{running.raters[0].token}"):
        assert client.get(url).status_code == 404, url


def test_a_fresh_session(make_session):
    session = make_session(langs=("en",))
    data = dashboard.overview(session)
    assert data["ratings"] == {"web": 0, "simulated": 0}
    assert all(row["last"] == "–" for row in data["raters"])
    assert dashboard.times_png(data)[:4] == b"\x89PNG"


def test_a_median_just_below_the_fast_flag_is_shown_below_it(make_session):
    session = make_session(langs=("zh",), min_seconds=2.0)
    helpers.pass_introduction(session, raters={"zh-1"})
    with store.Store(session.db_path) as db:
        item = session.assignments["zh-1"][0]
        db.mark_shown("zh-1", item, now=1000.0)
        db.add_rating("zh-1", item, 1, {"choice": 1}, now=1010.0, active_seconds=1.96)
    client = app_lib.create_app(session.folder).test_client()
    panel = client.get(f"/dashboard/{session.owner_token}/panel").get_data(as_text=True)
    row = next(r for r in panel.split("<tr ") if r.startswith('data-rater="zh-1"'))
    assert "<td>1.96</td>" in row and "FLAGGED: fast" in row, row
