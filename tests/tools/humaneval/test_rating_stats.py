"""tools/humaneval/rating_stats.py on a simulated session: Wins, Losses and delta S x S equal a
direct computation, Krippendorff's alpha the `krippendorff` package's within 1e-9."""

import json
import os
import sqlite3

import krippendorff
import numpy as np
import pytest

from errors import InputError
from tests.tools.humaneval import helpers
from tools.humaneval import __main__ as cli
from tools.humaneval import export, rating_stats, simulate

BIASES = {"en-1": 0.8, "en-2": -0.6, "en-3": 0.0, "zh-1": 1.2, "zh-2": 0.3, "zh-3": -0.4}


def _truth(seed):
    """A known latent m2 advantage per image, the same in every language."""
    rng = np.random.default_rng(seed)
    cache = {}

    def truth(item):
        return cache.setdefault(item.image, float(rng.normal(0.3, 1.8)))
    return truth


@pytest.fixture(scope="module")
def rated(release, results_pair, tmp_path_factory):
    """A session rated by simulated raters, made once for the module's tests (which only read
    it)."""
    session = helpers.new_session(release, results_pair,
                                  str(tmp_path_factory.mktemp("rated") / "s"),
                                  langs=("en", "zh"), subset_size=8, gold_share=0.25)
    simulate.simulate(session, truth=_truth(5), biases=BIASES, noise=0.9, seed=11,
                      careless={"zh-3": 1.0})
    return session


def _direct(session):
    """{lang: {item id: {rater: m2-side score}}} of test items, from the raw files."""
    with open(os.path.join(session.folder, "session.json"), encoding="utf-8") as f:
        items = {i["id"]: i for i in json.load(f)["items"]}
    conn = sqlite3.connect(session.db_path)
    rows = conn.execute("SELECT rater, item, answer FROM ratings").fetchall()
    conn.close()
    scores = {}
    for rater, item_id, answer in rows:
        item = items[item_id]
        if item["kind"] != "test":
            continue
        m2_right = item["sources"][1]["system"] == "m2"
        choice = json.loads(answer)["choice"]
        scores.setdefault(item["lang"], {}).setdefault(item_id, {})[rater] = (
            choice if m2_right else -choice)
    return scores, items, rows


def test_wins_losses_delta_equal_a_direct_computation(rated):
    scores, _, _ = _direct(rated)
    result = rating_stats.delta_sxs(rated, rating_stats.load_ratings(rated), resamples=500, seed=3)
    deltas = []
    for lang in ("en", "zh"):
        votes = [list(v.values()) for v in scores[lang].values()]
        assert all(len(v) == 3 for v in votes)
        wins = 100 * np.mean([sum(s > 0 for s in v) >= 2 for v in votes])
        losses = 100 * np.mean([sum(s < 0 for s in v) >= 2 for v in votes])
        row = result[lang]
        assert row["images"] == 8 and row["incomplete"] == 0
        assert row["wins"] == pytest.approx(wins, abs=1e-12)
        assert row["losses"] == pytest.approx(losses, abs=1e-12)
        assert row["delta"] == pytest.approx(wins - losses, abs=1e-12)
        assert row["low"] <= row["delta"] <= row["high"]
        deltas.append(wins - losses)
    assert result["all"]["delta"] == pytest.approx(np.mean(deltas), abs=1e-12)
    assert result["all"]["low"] <= result["all"]["delta"] <= result["all"]["high"]


def test_the_bootstrap_is_seeded(rated):
    result = rating_stats.delta_sxs(rated, rating_stats.load_ratings(rated), resamples=500, seed=3)
    again = rating_stats.delta_sxs(rated, rating_stats.load_ratings(rated), resamples=500, seed=3)
    assert again == result  # the bootstrap is seeded


def test_alpha_equals_the_krippendorff_packages(rated):
    scores, _, _ = _direct(rated)
    # Krippendorff's alpha equals the package's.
    table = rating_stats.agreement_table(rated, rating_stats.load_ratings(rated))
    for lang in ("en", "zh", "all"):
        langs = ("en", "zh") if lang == "all" else (lang,)
        units = [u for la in langs for u in scores[la].values()]
        raters = sorted({r for u in units for r in u})
        data = np.array([[u.get(r, np.nan) for u in units] for r in raters], dtype=float)
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal",
                                      value_domain=list(range(-3, 4)))
        assert table[(lang, "score")]["alpha"] == pytest.approx(expected, abs=1e-9)
        assert table[(lang, "score")]["units"] == len(units)


def test_gold_failures_equal_a_direct_count_flagging_the_careless_rater(rated):
    _, items, rows = _direct(rated)
    # Gold failures flag the careless rater.
    failed = {}
    for rater, item_id, answer in rows:
        item = items[item_id]
        if item["kind"] == "test":
            continue
        choice = json.loads(answer)["choice"]
        if item["kind"] == "gold-identical":
            ok = choice == 0
        else:
            own_right = item["sources"][1]["image"] == item["image"]
            ok = choice > 0 if own_right else choice < 0
        failed.setdefault(rater, []).append(not ok)
    table = rating_stats.rater_table(rated, rating_stats.load_ratings(rated))
    for rater, outcomes in failed.items():
        assert table[rater]["gold"] == len(outcomes)
        assert table[rater]["gold_failed"] == sum(outcomes)
        assert table[rater]["flagged"] == (sum(outcomes) > 0)
        if rater != "zh-3":
            assert sum(outcomes) == 0  # attentive simulated raters pass every check
    assert all(0 <= row["majority_agreement"] <= 1 for row in table.values())
    assert table["en-1"]["mean_score"] > table["en-2"]["mean_score"]  # the set biases show


def test_items_without_every_rating_are_left_out(make_session):
    session = make_session(langs=("en",), subset_size=8, gold_share=0.0)
    simulate.simulate(session, truth=lambda item: 1.0, noise=0.0, raters={"en-1", "en-2"})
    result = rating_stats.delta_sxs(session, rating_stats.load_ratings(session), resamples=0)
    assert result["en"]["images"] == 0 and result["en"]["incomplete"] == 8
    simulate.simulate(session, truth=lambda item: 1.0, noise=0.0)
    result = rating_stats.delta_sxs(session, rating_stats.load_ratings(session), resamples=0)
    assert (result["en"]["wins"], result["en"]["losses"]) == (100.0, 0.0)


def test_majority_needs_more_than_half():
    assert rating_stats.majority([1, 2, -3]) == 1
    assert rating_stats.majority([1, 0, -3]) == 0
    assert rating_stats.majority([-1, -1, 3]) == -1
    assert rating_stats.majority([1, -1]) == 0


def test_thumb_agreement(make_session):
    thumb = make_session(type="thumb", systems=(), references=True, langs=("en",), gold_share=0.0)
    simulate.simulate(thumb, noise=1.0, seed=2)
    ratings = rating_stats.load_ratings(thumb)
    units = {}
    for r in ratings:
        units.setdefault(r.item.id, {})[r.rater] = r.answer["P"]
    data = np.array([[u.get(name, np.nan) for u in units.values()]
                     for name in ("en-1", "en-2", "en-3")], dtype=float)
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal",
                                  value_domain=[1, 2, 3, 4, 5])
    table = rating_stats.agreement_table(thumb, ratings)
    assert table[("en", "P")]["alpha"] == pytest.approx(expected, abs=1e-9)


def test_quality_gold_checks_pass_an_attentive_rater(make_session):
    quality = make_session(type="quality", systems=(), references=True, langs=("zh",),
                           gold_share=0.2)
    simulate.simulate(quality, noise=1.0, seed=2, careless={"zh-2": 1.0})
    raters = rating_stats.rater_table(quality, rating_stats.load_ratings(quality))
    assert raters["zh-1"]["gold_failed"] == 0 and raters["zh-1"]["gold"] > 0


def test_reading_ratings_changes_nothing(rated, make_session, tmp_path):
    # A database in rollback-journal mode (a copy, or one made elsewhere) stays byte for byte
    # what it was, in its journal mode: the readers (load_ratings, export, the report) open it
    # read-only and create nothing in it.
    conn = sqlite3.connect(rated.db_path)
    conn.execute("PRAGMA journal_mode=DELETE")
    count = conn.execute("SELECT COUNT(*) FROM ratings").fetchone()[0]
    conn.close()
    with open(rated.db_path, "rb") as f:
        before = f.read()
    assert len(rating_stats.load_ratings(rated)) == count
    export.export(rated, str(tmp_path / "export"))
    cli.main(["status", "--session", rated.folder])
    with open(rated.db_path, "rb") as f:
        assert f.read() == before
    conn = sqlite3.connect(rated.db_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()
    # A session nobody has rated yet: no ratings, and no database made for them.
    fresh = make_session()
    assert rating_stats.load_ratings(fresh) == []
    cli.main(["status", "--session", fresh.folder])
    assert not os.path.exists(fresh.db_path)


def test_a_database_of_another_session_is_refused_read_only(rated, make_session):
    other = make_session(seed=1)
    os.replace(rated.db_path, other.db_path)
    with pytest.raises(InputError, match="holds the ratings of another session"):
        rating_stats.load_ratings(other)


def test_exclude_flagged_keeps_raters_still_rating(make_session):
    from tests.tools.humaneval import helpers
    from tools.humaneval import store
    session = make_session(langs=("en",))
    helpers.pass_introduction(session, raters={"en-1"})
    with store.Store(session.db_path) as db:  # one of its items rated, at an unhurried pace
        item = session.assignments["en-1"][0]
        db.mark_shown("en-1", item, now=1000.0)
        db.add_rating("en-1", item, 1, {"choice": 1}, now=1030.0, active_seconds=30.0)
    row = rating_stats.rater_table(session, rating_stats.load_ratings(session))["en-1"]
    assert row["flags"] == ["incomplete"] and not row["flagged"]
    kept = rating_stats.load_ratings(session, exclude_flagged=True)
    assert [r.rater for r in kept] == ["en-1"]
