"""Tests of reading session files back (tools/humaneval/session.py) and of the ratings store."""

import json
import os
import sqlite3

import pytest

from errors import InputError
from tools.humaneval import session as session_lib
from tools.humaneval import store


def _edit(session, change):
    path = os.path.join(session.folder, "session.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    change(data)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return path


@pytest.mark.parametrize("change, message", [
    # A caption swapped by hand: only the digest can tell.
    (lambda d: d["items"][0]["texts"].reverse(), "does not match its digest"),
    (lambda d: d["raters"][0].update(token="mine"), "does not match its digest"),
    (lambda d: d.pop("assignments"), "missing key 'assignments'"),
    (lambda d: d.update(type="ranking"), "type: unknown 'ranking'"),
    (lambda d: d.update(langs=["en", "klingon"]), "unknown language 'klingon'"),
    (lambda d: d["items"][1].update(kind="bonus"), r"items\[1\].kind: unknown 'bonus'"),
    (lambda d: d["items"][2]["sources"][0].update(system="m3"),
     r"items\[2\].sources\[0\].system: unknown 'm3'"),
    (lambda d: d["assignments"]["en-1"].append("zh-00001"), "not in the rater's language"),
    (lambda d: d["gold"].update(share="a lot"), "gold.share"),
    (lambda d: d.update(replication="3"), "replication: expected int"),
    (lambda d: d.update(format="xm3600-humaneval-session/1"),
     "written by an older version of the kit"),
])
def test_hand_edits_are_errors_naming_the_key(make_session, change, message):
    session = make_session()
    _edit(session, change)
    with pytest.raises(InputError, match=message):
        session_lib.load(session.folder)


def test_a_session_loads_back(make_session):
    session = make_session()
    again = session_lib.load(session.folder)
    assert again.data == session.data
    assert again.digest == session_lib.digest(session.data)


def test_a_session_file_not_json_is_named_with_its_line(make_session):
    session = make_session()
    path = os.path.join(session.folder, "session.json")
    with open(path, "a", encoding="utf-8") as f:
        f.write("{")
    with pytest.raises(InputError, match=r"session.json:\d+: not valid JSON"):
        session_lib.load(session.folder)


def test_a_missing_session_is_named(tmp_path):
    with pytest.raises(InputError, match="not found"):
        session_lib.load(os.path.join(tmp_path, "nowhere"))


def test_ratings_of_another_session_are_refused(make_session):
    first, second = make_session(), make_session(seed=1)
    store.init(first.db_path, first.digest)
    with pytest.raises(InputError, match="holds the ratings of another session"):
        store.init(first.db_path, second.digest)
    with open(second.db_path, "w", encoding="utf-8") as f:
        f.write("not a database at all, just some text " * 100)
    with pytest.raises(InputError, match="not a ratings database"):
        store.init(second.db_path, second.digest)


def test_a_duplicate_rating_keeps_the_first(make_session):
    session = make_session()
    store.init(session.db_path, session.digest)
    rater = session.raters[0].name
    item = session.assignments[rater][0]
    with store.Store(session.db_path) as db:
        db.mark_shown(rater, item, now=100.0)
        assert db.mark_shown(rater, item, now=150.0) == 100.0  # the first view counts
        # Wall clock since the first view; the page's active time is kept within it.
        assert db.add_rating(rater, item, 1, {"choice": 2}, now=130.0,
                             active_seconds=45.0) == (30.0, 30.0)
        with pytest.raises(store.DuplicateRating, match="already rated item 1"):
            db.add_rating(rater, item, 1, {"choice": -3})
        assert [r["answer"] for r in db.ratings()] == [{"choice": 2}]
        assert db.rated_items(rater) == {item}
    # Another connection sees the committed rating; the database enforces uniqueness too.
    conn = sqlite3.connect(session.db_path)
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO ratings (rater, item, position, answer, rated_at, source) "
                     "VALUES (?, ?, 1, '{}', 0, 'x')", (rater, item))
    conn.close()


def test_a_database_of_another_schema_is_refused(make_session):
    session = make_session()
    store.init(session.db_path, session.digest)
    conn = sqlite3.connect(session.db_path)
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema'")
    conn.commit()
    conn.close()
    with pytest.raises(InputError, match="schema '1', this kit reads schema '4'"):
        store.init(session.db_path, session.digest)
    with pytest.raises(InputError, match="schema '1'"):
        store.read_ratings(session.db_path, session.digest)
    # Schema 3 (before withdrawals were kept) is upgraded by the commands that rate.
    conn = sqlite3.connect(session.db_path)
    conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema'")
    conn.execute("DROP TABLE withdrawals")
    conn.commit()
    conn.close()
    store.init(session.db_path, session.digest)
    assert store.read_state(session.db_path, session.digest)["withdrawn"] == 0
