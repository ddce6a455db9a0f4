"""Crowd enrolment (tools/humaneval: crowd.py, the /join links of app.py, store.enrol)."""

import threading

import pytest

from tests.tools.humaneval import helpers
from tools.humaneval import app as app_lib
from tools.humaneval import crowd, store


@pytest.fixture
def crowd_session(make_session, consent):
    """A crowd sxs session in en and zh: 6 images + 2 gold, replication 4, quota 8 (4 slots
    per language)."""
    return make_session(langs=("en", "zh"), replication=4, quota=8, crowd=True,
                        consent=consent, completion_code="DONE7")


_join, _token = helpers.join, helpers.token


def _slot(session, token):
    """The rater slot a participant's link reaches."""
    with store.Store(session.db_path) as db:
        return db.rater_of_token(token)


@pytest.mark.parametrize("params, platform, participant, details", [
    ({"PROLIFIC_PID": "5f1a", "STUDY_ID": "st", "SESSION_ID": "se"}, "prolific", "5f1a",
     {"STUDY_ID": "st", "SESSION_ID": "se"}),
    ({"workerId": "A1B2", "assignmentId": "as1", "hitId": "h1",
      "turkSubmitTo": "https://workersandbox.mturk.com"}, "mturk", "A1B2",
     {"assignmentId": "as1", "hitId": "h1", "turkSubmitTo": "https://workersandbox.mturk.com"}),
    ({"participant": "p-7"}, "link", "p-7", {}),
])
def test_arrivals_of_each_platform(params, platform, participant, details):
    arrival = crowd.arrival(params)
    assert (arrival.platform, arrival.participant, arrival.details) == (
        platform, participant, details)


@pytest.mark.parametrize("params, problem", [
    ({}, "no participant id"),
    ({"PROLIFIC_PID": "a b"}, "PROLIFIC_PID is malformed"),
    ({"workerId": "W", "turkSubmitTo": "https://evil.example"},
     "turkSubmitTo is not an MTurk site"),
])
def test_arrivals_that_cannot_enrol(params, problem):
    assert crowd.arrival(params).problem == problem


def test_enrolment_slots(crowd_session):
    client = app_lib.create_app(crowd_session.folder).test_client()
    first = _token(_join(client, crowd_session, "en", PROLIFIC_PID="p1", STUDY_ID="s",
                         SESSION_ID="a"))
    second = _token(_join(client, crowd_session, "en", PROLIFIC_PID="p2"))
    # The slots in the session's order; a returning id gets its own back, not another.
    assert [_slot(crowd_session, t) for t in (first, second)] == ["en-1", "en-2"]
    assert _token(_join(client, crowd_session, "en", PROLIFIC_PID="p1", SESSION_ID="b")) == first
    # The same id on another platform is another participant; the same participant through
    # another language's link still has one slot: their own.
    assert _slot(crowd_session, _token(_join(client, crowd_session, "en",
                                             participant="p1"))) == "en-3"
    assert _token(_join(client, crowd_session, "zh", PROLIFIC_PID="p1")) == first
    assert _slot(crowd_session, _token(_join(client, crowd_session, "zh",
                                             PROLIFIC_PID="p9"))) == "zh-1"
    state = store.read_state(crowd_session.db_path, crowd_session.digest)
    assert state["participants"]["en-1"]["details"] == {"STUDY_ID": "s", "SESSION_ID": "a"}
    assert _token(_join(client, crowd_session, "en", PROLIFIC_PID="p4")) != first
    full = _join(client, crowd_session, "en", PROLIFIC_PID="p5")
    assert full.status_code == 409 and "The study is full" in full.get_data(as_text=True)
    # Declining consent frees the slot for the next participant, under a new link.
    client.post(f"/r/{second}/consent", data={"consent": "decline"})
    newcomer = _token(_join(client, crowd_session, "en", PROLIFIC_PID="p5"))
    assert _slot(crowd_session, newcomer) == "en-2" and newcomer != second
    assert store.read_state(crowd_session.db_path, crowd_session.digest)["declined"] == 1
    # A participant who declines, comes back and declines again is one decline more.
    for _ in range(2):
        token = _token(_join(client, crowd_session, "en", PROLIFIC_PID="p5"))
        client.post(f"/r/{token}/consent", data={"consent": "decline"})
    assert store.read_state(crowd_session.db_path, crowd_session.digest)["declined"] == 2


def test_links_that_enrol_nobody(crowd_session, make_session):
    client = app_lib.create_app(crowd_session.folder).test_client()
    preview = _join(client, crowd_session, "en", assignmentId=crowd.MTURK_PREVIEW, hitId="h")
    assert preview.status_code == 200 and "Accept the task" in preview.get_data(as_text=True)
    assert "frame-ancestors https://www.mturk.com" in preview.headers["Content-Security-Policy"]
    assert "X-Frame-Options" not in preview.headers
    missing = _join(client, crowd_session, "en")
    assert missing.status_code == 400 and "lacks your participant id" in missing.get_data(
        as_text=True)
    assert _join(client, crowd_session, "fr", PROLIFIC_PID="x").status_code == 404
    assert client.get("/join/wrong/en?PROLIFIC_PID=x").status_code == 404
    assert store.read_state(crowd_session.db_path, crowd_session.digest)["participants"] == {}
    personal = make_session(langs=("en",))  # not a crowd session: no enrolment at all
    client = app_lib.create_app(personal.folder).test_client()
    assert client.get("/join/x/en?PROLIFIC_PID=x").status_code == 404


def test_completion_of_each_platform():
    settings = {"completion_code": "C 1", "completion_url": None}
    prolific = crowd.completion(settings, {"platform": "prolific", "details": {}})
    assert prolific["url"] == "https://app.prolific.com/submissions/complete?cc=C%201"
    mturk = crowd.completion(settings, {"platform": "mturk", "details": {
        "assignmentId": "as9", "turkSubmitTo": "https://www.mturk.com/"}})
    assert mturk["url"] is None and mturk["form"] == {
        "action": "https://www.mturk.com/mturk/externalSubmit",
        "fields": {"assignmentId": "as9", "completion_code": "C 1"}}
    link = crowd.completion(settings, {"platform": "link", "details": {}})
    assert (link["code"], link["url"], link["form"]) == ("C 1", None, None)
    own = crowd.completion(dict(settings, completion_url="https://lab.example/done?c={code}"),
                           {"platform": "prolific", "details": {}})
    assert own["url"] == "https://lab.example/done?c=C%201"


def test_mturk_participants_get_framed_pages_ending_with_the_submit_form(crowd_session):
    client = app_lib.create_app(crowd_session.folder).test_client()
    token = _token(_join(client, crowd_session, "zh", workerId="W1", assignmentId="as1",
                         hitId="h", turkSubmitTo="https://www.mturk.com"))
    page = client.get(f"/r/{token}/consent")
    assert "X-Frame-Options" not in page.headers
    rater = crowd_session.by_name[_slot(crowd_session, token)]
    with store.Store(crowd_session.db_path) as db:  # the whole list rated, and the intro
        for step in ("consent", "guidelines"):
            db.pass_step(rater.name, step)
        for item in crowd_session.practice["zh"]:
            db.add_practice(rater.name, item["id"], {}, True)
        for n, item in enumerate(crowd_session.assignments[rater.name], start=1):
            db.add_rating(rater.name, item, n, {"choice": 0})
    done = client.get(f"/r/{token}").get_data(as_text=True)
    assert 'action="https://www.mturk.com/mturk/externalSubmit"' in done
    assert 'name="assignmentId" value="as1"' in done and "DONE7" in done


def test_quota_sizes_the_slots_participants_arriving_together_never_share_one(crowd_session):
    for lang in ("en", "zh"):
        names = [r.name for r in crowd_session.raters if r.lang == lang]
        loads = [len(crowd_session.assignments[name]) for name in names]
        assert len(names) == 4 and max(loads) <= 8 and sum(loads) == 4 * 8
    store.init(crowd_session.db_path, crowd_session.digest)
    candidates = [r.name for r in crowd_session.raters if r.lang == "en"]
    got, barrier = [], threading.Barrier(8)

    def arrive(n):
        barrier.wait()
        with store.Store(crowd_session.db_path) as db:
            got.append(db.enrol("prolific", f"p{n}", candidates, {})[0])
    threads = [threading.Thread(target=arrive, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(name for name in got if name) == sorted(candidates)
    assert got.count(None) == 4


def test_a_withdrawn_participant_is_not_enrolled_again(crowd_session):
    client = helpers.client(crowd_session)
    token = _token(_join(client, crowd_session, PROLIFIC_PID="BACK1", STUDY_ID="s"))
    slot = _slot(crowd_session, token)
    with store.Store(crowd_session.db_path) as db:  # one item rated, then withdrawn
        db.add_rating(slot, crowd_session.assignments[slot][0], 1, {"choice": 1})
        assert db.decline(slot) == 1
    again = _join(client, crowd_session, PROLIFIC_PID="BACK1", STUDY_ID="s")
    assert again.status_code == 409 and "You withdrew" in again.get_data(as_text=True)
    with store.Store(crowd_session.db_path) as db:
        assert db.participant(slot) is None  # the slot stays free for someone else
    assert _join(client, crowd_session, PROLIFIC_PID="NEW2", STUDY_ID="s").status_code == 303
