"""What a study owner paying crowd raters relies on (issue 33), each driven through the app's
HTTP interface as a rater would: every slot meets an attention check, `simulate` never fills
a live session, a declined slot's link dies before the slot is given again, careless raters
are flagged, the report is computed with and without them, empty predictions are refused."""

import csv
import dataclasses
import re
import shutil

import pytest

from errors import InputError
from formats import predictions
from tests.cli import error_line
from tests.tools.humaneval import helpers
from tools.humaneval import __main__ as cli
from tools.humaneval import app as app_lib
from tools.humaneval import export, rating_stats, store, study_report


def _join(client, session, pid, lang="en"):
    return helpers.token(helpers.join(client, session, lang, PROLIFIC_PID=pid))


def _introduction(client, token, session, lang="en"):
    """Consent, guidelines and the practice items, answered as a rater would."""
    assert client.post(f"/r/{token}/consent", data={"consent": "agree"}).status_code == 303
    assert client.post(f"/r/{token}/guidelines").status_code == 303
    for n in range(1, len(session.practice[lang]) + 1):
        assert client.post(f"/r/{token}/practice/{n}", data={"choice": "0"}).status_code == 303


def _rate_all(client, token, choice="0"):
    """Rates every item of the link, one page after the other; returns the pages' captions."""
    shown = []
    while True:
        where = client.get(f"/r/{token}").location
        if where is None:
            return shown
        page = client.get(where).get_data(as_text=True)
        shown.append(page)
        assert client.post(where, data={"choice": choice}).status_code == 303


def _take_time(session, token, seconds):
    """Moves the link's rater's past `seconds` back: the item on screen was sent that long
    ago, as the server will measure it."""
    with store.Store(session.db_path) as db:
        for table in ("views SET first_shown = first_shown", "ratings SET rated_at = rated_at"):
            db.conn.execute(f"UPDATE {table} - ? WHERE rater = ?",
                            (seconds, db.rater_of_token(token)))


def test_every_crowd_slot_meets_an_attention_check(make_session, consent):
    warnings = []
    session = make_session(langs=("en",), subset_size=8, quota=8, gold_share=0.25,
                           crowd=True, consent=consent, warn=warnings.append)
    slots = [r.name for r in session.raters]
    assert len(slots) == 4  # (8 + 2 attention checks) x 3 / 8 items per slot
    # 30 assignments over 4 slots: two slots of 7 items, below what straight-lining needs.
    assert any("slots get 7-8 items, fewer than the 8" in w for w in warnings)
    client = app_lib.create_app(session.folder).test_client()
    for n, _ in enumerate(slots):
        token = _join(client, session, f"pid{n}")
        _introduction(client, token, session)
        _rate_all(client, token)
    by_rater = {}
    for row in store.read_ratings(session.db_path, session.digest):
        by_rater.setdefault(row["rater"], []).append(session.items[row["item"]].is_gold)
    assert sorted(by_rater) == sorted(slots) and all(any(g) for g in by_rater.values())


def test_a_share_too_small_for_every_slot_is_refused(make_session, consent):
    # Quota 8, 8 images: 10% gives one check (3 assignments) for 4 slots.
    with pytest.raises(InputError, match=r"'en' gets 1 attention check\(s\) for 4 rater slots "
                                         r"\(3 assignments at replication 3\): 1 slots would "
                                         r"have none. Give --gold-share 0.188 or more"):
        make_session(langs=("en",), subset_size=8, quota=8, gold_share=0.1, crowd=True,
                     consent=consent)
    assert make_session(langs=("en",), subset_size=8, quota=8, gold_share=0.188, crowd=True,
                        consent=consent)  # the suggestion is accepted
    assert make_session(langs=("en",), subset_size=8, quota=8, gold_share=0.0, crowd=True,
                        consent=consent)  # no attention checks at all: the owner's choice


def test_every_suggested_gold_share_is_accepted():
    """A sweep of the settings (images, quota, replication, share): every refusal's suggested
    --gold-share is accepted by the same check (more checks can mean more slots)."""
    from tools.humaneval import create
    suggested = 0
    for tests in (6, 8, 30, 60, 97, 600):
        for quota in (8, 10, 13, 40):
            for replication in (1, 2, 3, 5):
                for share in (0.01, 0.05, 0.1, 0.11, 0.2):
                    spec = create.Spec(type="sxs", release="", langs=("en",), systems=(),
                                       quota=quota, replication=replication, gold_share=share)
                    try:
                        create._check_gold_spread(spec, "en", tests, {})
                    except InputError as e:
                        found = re.search(r"--gold-share ([0-9.]+) or more", str(e))
                        if found:
                            suggested += 1
                            create._check_gold_spread(
                                dataclasses.replace(spec, gold_share=float(found[1])), "en",
                                tests, {})
    assert suggested > 100


def test_simulate_never_fills_a_served_crowd_study(make_session, consent, capsys):
    session = make_session(langs=("en",), quota=8, crowd=True, consent=consent)
    client = app_lib.create_app(session.folder).test_client()
    token = _join(client, session, "REAL1")
    _introduction(client, token, session)  # consent, guidelines, practice: nothing rated
    err = error_line(capsys, cli.main, ["simulate", "--session", session.folder])
    assert "people have begun under 1 rater(s) (e.g. en-1 (enrolled, introduction))" in err
    assert store.read_ratings(session.db_path, session.digest) == []
    # The rater's link still starts at their first item, not at "You rated all".
    assert client.get(f"/r/{token}").location.endswith(f"/r/{token}/item/1")
    # Forced too: a served crowd study's free slots are the next participants'.
    err = error_line(capsys, cli.main, ["simulate", "--session", session.folder, "--force"])
    assert "crowd study that has been served" in err and "--raters" in err
    assert store.read_ratings(session.db_path, session.digest) == []
    assert _join(client, session, "REAL2")  # the next participant gets a slot
    # The slots the owner names are simulated; naming a person's is refused, forced or not.
    err = error_line(capsys, cli.main, ["simulate", "--session", session.folder, "--force",
                                        "--raters", "en-1,en-3"])
    assert "--raters: a person has begun under en-1 (enrolled, introduction)" in err
    assert store.read_ratings(session.db_path, session.digest) == []
    cli.main(["simulate", "--session", session.folder, "--force", "--raters", "en-3"])
    rows = store.read_ratings(session.db_path, session.digest)
    assert {r["rater"] for r in rows} == {"en-3"} and len(rows) == len(session.assignments["en-3"])
    assert client.get(f"/r/{token}").location.endswith(f"/r/{token}/item/1")
    with pytest.raises(SystemExit):
        cli.main(["simulate", "--help"])
    assert "a served crowd study is never simulated unless --raters" in " ".join(
        capsys.readouterr().out.split())


def test_a_declined_slots_link_is_dead_before_the_slot_is_given_again(make_session, consent):
    session = make_session(langs=("en",), quota=8, crowd=True, consent=consent)
    client = app_lib.create_app(session.folder).test_client()
    old = _join(client, session, "DECLINER2")
    assert client.post(f"/r/{old}/consent", data={"consent": "decline"}).status_code == 303
    assert client.get(f"/r/{old}").status_code == 404  # dead at once
    new = _join(client, session, "NEWCOMER2")
    assert new != old
    # The decliner reopens the old link, agrees and tries to rate: nothing reaches the slot.
    assert client.post(f"/r/{old}/consent", data={"consent": "agree"}).status_code == 404
    assert client.post(f"/r/{old}/item/1", data={"choice": "1"}).status_code == 404
    assert client.get(f"/r/{old}/item/1").status_code == 404
    with store.Store(session.db_path) as db:
        assert db.ratings() == [] and db.steps("en-1") == {}
        assert db.rater_of_token(new) == "en-1"
        assert db.participant("en-1")["participant"] == "NEWCOMER2"
    assert store.read_state(session.db_path, session.digest)["declined"] == 1
    _introduction(client, new, session)  # the newcomer's consent is their own
    with store.Store(session.db_path) as db:
        assert "consent" in db.steps("en-1")


@pytest.fixture
def careless(make_session, consent):
    """A crowd session of one language where four slots are rated through the app: two
    careful raters and two who give one answer to everything, instantly."""
    session = make_session(langs=("en",), subset_size=8, quota=10, gold_share=0.25,
                           replication=4, crowd=True, consent=consent)
    assert len(session.raters) == 4  # 8 images + 2 attention checks, 10 items each
    client = app_lib.create_app(session.folder).test_client()
    tokens = {}
    for pid, choice in (("careful1", None), ("careful2", None), ("SIMILAR", "0"),
                        ("LEFTMUCH", "-3")):
        token = tokens[pid] = _join(client, session, pid)
        _introduction(client, token, session)
        n = 0
        while (where := client.get(f"/r/{token}").location) is not None:
            n += 1
            answer = choice or str((n * 5) % 7 - 3)  # a spread of answers
            client.get(where)
            _take_time(session, token, 30)  # careful raters take their time
            data = {"choice": answer, "active_ms": "0" if choice else "12000"}
            assert client.post(where, data=data).status_code == 303
    with store.Store(session.db_path) as db:
        names = {pid: db.rater_of_token(t) for pid, t in tokens.items()}
    return session, names


def test_careless_raters_are_flagged_in_every_output_or_left_out(careless, tmp_path):
    session, names = careless
    table = rating_stats.rater_table(session, rating_stats.load_ratings(session))
    for pid in ("SIMILAR", "LEFTMUCH"):
        assert {"fast", "straight"} <= set(table[names[pid]]["flags"]), table[names[pid]]
        assert table[names[pid]]["same_answer"] == 1.0
    for pid in ("careful1", "careful2"):
        assert "fast" not in table[names[pid]]["flags"]
        assert "straight" not in table[names[pid]]["flags"]
    careless_raters = {names["SIMILAR"], names["LEFTMUCH"]}
    paths = export.export(session, str(tmp_path / "all"))
    with open(paths["raters"], newline="", encoding="utf-8") as f:
        raters = {row["rater"]: row for row in csv.DictReader(f)}
    assert all("straight" in raters[n]["flags"] for n in careless_raters)
    assert raters[names["SIMILAR"]]["participant"] == "prolific:SIMILAR"
    with open(paths["csv"], newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {r["rater"] for r in rows if "fast" in r["rater_flags"]} >= careless_raters
    kept = export.export(session, str(tmp_path / "kept"), exclude_flagged=True)
    with open(kept["csv"], newline="", encoding="utf-8") as f:
        assert not {r["rater"] for r in csv.DictReader(f)} & careless_raters
    full = study_report.write_report([session], str(tmp_path / "r1"), resamples=0)
    text = open(full["markdown"], encoding="utf-8").read()
    assert "flagged rater(s)** among these" in text and "--exclude-flagged" in text
    without = study_report.write_report([session], str(tmp_path / "r2"), resamples=0,
                                        exclude_flagged=True)
    text = open(without["markdown"], encoding="utf-8").read()
    assert "Flagged raters' ratings left out" in text
    kept_count = len(rating_stats.load_ratings(session, exclude_flagged=True))
    assert f"; {kept_count} ratings)" in text and kept_count < len(rows)


@pytest.mark.parametrize("session_type, kept, amount", [
    ("sxs", 0, "all 6"), ("quality", 0, "all 6"), ("sxs", 2, "4 of 6")])
def test_mostly_empty_predictions_are_refused_saying_so(make_session, results_pair, tmp_path,
                                                        session_type, kept, amount):
    folder = tmp_path / "empty"
    shutil.copytree(results_pair[1], folder)
    path = str(folder / predictions.file_name("en"))
    captions = predictions.read_language(path, "en")
    predictions.write(path, {"en": {k: c if i < kept else "" for i, (k, c)
                                    in enumerate(sorted(captions.items()))}})
    systems = ((("base", results_pair[0]), ("empty", str(folder))) if session_type == "sxs"
               else (("empty", str(folder)),))
    with pytest.raises(InputError, match=rf"predictions_en.jsonl: {amount} of the session's "
                                         r"captions in 'en' are empty: there is little or "
                                         r"nothing to rate") as info:
        make_session(type=session_type, langs=("en",), systems=systems)
    assert "attention" not in str(info.value)


def test_flags_from_the_first_rating_mark_early_stoppers_incomplete(make_session, consent,
                                                                   tmp_path, capsys):
    """Speed is judged from the first rating; a rater who stops early is marked incomplete;
    `analyze --exclude-flagged` leaves out the flagged ones (not those only incomplete)."""
    session = make_session(langs=("en",), quota=8, crowd=True, consent=consent)
    client = app_lib.create_app(session.folder).test_client()
    for pid, count, seconds in (("QUICK", 2, 0), ("SLOW", 3, 30), ("DONE", 99, 30)):
        token = _join(client, session, pid)
        _introduction(client, token, session)
        for _ in range(count):
            where = client.get(f"/r/{token}").location
            if where is None:
                break
            client.get(where)
            _take_time(session, token, seconds)
            data = {"choice": "3", "active_ms": str(1000 * (seconds or 45))}
            assert client.post(where, data=data).status_code == 303
    table = rating_stats.rater_table(session, rating_stats.load_ratings(session))
    flags = {name: [f for f in row["flags"] if f != "gold"] for name, row in table.items()
             if row["rated"]}
    # en-3 gave one answer to all of its 8 items (the smallest --quota): straight-lining.
    assert flags == {"en-1": ["fast", "incomplete"], "en-2": ["incomplete"], "en-3": ["straight"]}
    cli.main(["analyze", "--session", session.folder, "--out", str(tmp_path / "r"),
              "--resamples", "1", "--exclude-flagged"])
    text = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert "left out** (2: base_vs_test/en-1, base_vs_test/en-3)" in text


def test_a_small_crowd_study_gets_a_default_gold_share_that_works(make_session, consent):
    # Quota 8, 8 images: the share 0.1 would give 4 slots one check (3 assignments).
    warnings = []
    session = make_session(langs=("en",), subset_size=8, quota=8, gold_share=None, crowd=True,
                           consent=consent, warn=warnings.append)
    assert "--gold-share 0.188, not 0.1: the smallest share that gives every rater slot an " \
           "attention check (give --gold-share to choose)" in warnings
    assert session.data["gold"]["share"] == 0.188
    gold = {item_id for item_id, item in session.items.items() if item.is_gold}
    assert all(set(items) & gold for items in session.assignments.values())
