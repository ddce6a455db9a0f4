"""The introduction before the first item (tools/humaneval/onboarding.py): consent, guidelines,
practice with feedback, in the rater's language where the session has a translation."""

import json

import pytest

from tests.tools.humaneval import helpers
from tools.humaneval import store

ZH = {"guidelines.title": "评分指南", "consent.title": "开始之前",
      "consent.agree": "我同意参加", "consent.text": "我们研究图片描述。\n\n您可以随时停止。",
      "error.unknown_link": "此链接无效。", "feedback.right": "答对了。",
      "progress": "第 {n} 项，共 {total} 项"}


@pytest.fixture
def study(make_session, tmp_path, consent):
    """An sxs session in en and zh with a consent text and a Chinese translation."""
    translation = tmp_path / "zh.json"
    translation.write_text(json.dumps(ZH, ensure_ascii=False), encoding="utf-8")
    warnings = []
    session = make_session(langs=("en", "zh"), consent=consent,
                           translations=(("zh", str(translation)),), warn=warnings.append)
    return session, warnings


def _page(client, url, **kwargs):
    response = client.get(url, **kwargs)
    assert response.status_code == 200, (url, response.status_code)
    return response.get_data(as_text=True)


def test_consent_guidelines_practice_lead_to_the_items(study):
    session, _ = study
    client, rater = helpers.client(session), session.by_name["en-1"]
    token = rater.token
    assert client.get(f"/r/{token}").location.endswith(f"/r/{token}/consent")
    page = _page(client, f"/r/{token}/consent")
    assert "<p>We study captions.</p>" in page and "<p>You may stop at any time.</p>" in page
    assert client.post(f"/r/{token}/consent", data={"consent": "agree"}).status_code == 303
    assert client.get(f"/r/{token}").location.endswith(f"/r/{token}/guidelines")
    page = _page(client, f"/r/{token}/guidelines")
    example = session.examples["en"]
    # The example quotes the release's own captions in the session's language.
    assert example["own"] in page and example["other"] in page
    assert client.get(f"/r/{token}/guidelines/image").mimetype == "image/jpeg"
    assert client.post(f"/r/{token}/guidelines").status_code == 303
    items = session.practice["en"]
    answers = [("-3", True), ("2", False), ("3", True)]  # own left, identical, own right
    for n, (choice, right) in enumerate(answers, start=1):
        assert client.get(f"/r/{token}").location.endswith(f"/practice/{n}")
        page = _page(client, f"/r/{token}/practice/{n}")
        assert "does not count" in page and all(t in page for t in items[n - 1]["texts"])
        assert client.post(f"/r/{token}/practice/{n}", data={"choice": choice}).status_code == 303
        feedback = _page(client, f"/r/{token}/practice/{n}")
        assert ("Well done" in feedback) == right
        # A second answer changes nothing: the first one's feedback stands.
        client.post(f"/r/{token}/practice/{n}", data={"choice": "0"})
        assert ("Well done" in _page(client, f"/r/{token}/practice/{n}")) == right
    assert "Similar" in feedback or "Right" in feedback
    assert client.get(f"/r/{token}").location.endswith("/item/1")
    # Practice answers are kept apart: no rating yet.
    with store.Store(session.db_path) as db:
        assert db.ratings() == []
        assert {k: v[1] for k, v in db.practice_answers("en-1").items()} == {
            item["id"]: right for item, (_, right) in zip(items, answers, strict=True)}
    # The guidelines stay open to the rater, with the way back.
    assert 'id="guidelines-back"' in _page(client, f"/r/{token}/guidelines")


def test_the_feedback_on_a_wrong_practice_answer_names_the_expected_one(study):
    session, _ = study
    client = helpers.client(session)
    # A wrong practice answer: the feedback names the expected one.
    token = session.by_name["en-2"].token
    client.post(f"/r/{token}/consent", data={"consent": "agree"})
    client.post(f"/r/{token}/guidelines")
    client.post(f"/r/{token}/practice/1", data={"choice": "3"})  # the own caption is left
    page = _page(client, f"/r/{token}/practice/1")
    assert "Not quite" in page
    assert "Left much better / Left better / Left slightly better" in page
    assert "Right much better" in page  # what the rater answered


def test_declining_consent_ends_keeping_nothing(study):
    session, _ = study
    client = helpers.client(session)
    # Declining consent ends and keeps nothing.
    token = session.by_name["en-3"].token
    response = client.post(f"/r/{token}/consent", data={"consent": "decline"},
                           headers={"Accept": "application/json"})
    assert response.get_json() == {"next": "/declined/en"}
    assert "chose not to take part" in _page(client, "/declined/en")
    assert client.get(f"/r/{token}").location.endswith("/consent")  # asked again on return
    assert client.post(f"/r/{token}/consent", data={"consent": "maybe"}).status_code == 400


def test_declining_after_rating_withdraws(study, tmp_path, capsys):
    """The consent page stays open after rating: "I do not agree" there withdraws the ratings
    (kept for the audit, out of every report), counts it, and kills the personal link."""
    from tools.humaneval import __main__ as cli
    from tools.humaneval import rating_stats
    session, _ = study
    helpers.pass_introduction(session, raters={"en-1"})
    client, token = helpers.client(session), session.by_name["en-1"].token
    for n in (1, 2, 3):
        client.get(f"/r/{token}/item/{n}")
        assert client.post(f"/r/{token}/item/{n}", data={"choice": "1"}).status_code == 303
    assert "I do not agree" in _page(client, f"/r/{token}/consent")
    assert "You have rated 3 item(s)" in _page(client, f"/r/{token}/withdraw")
    response = client.post(f"/r/{token}/consent", data={"consent": "decline"})
    assert response.location == "/declined/en?withdrawn=3"
    page = _page(client, response.location)
    assert "Your 3 rating(s) are withdrawn" in page and "Nothing you did" not in page
    for url in (f"/r/{token}", f"/r/{token}/item/4", f"/r/{token}/consent"):
        gone = client.get(url)
        assert gone.status_code == 404 and "You withdrew" in gone.get_data(as_text=True)
    assert rating_stats.load_ratings(session) == []
    state = store.read_state(session.db_path, session.digest)
    assert (state["withdrawn"], state["declined"]) == (1, 0)
    assert "1 withdrew" in _page(client, f"/dashboard/{session.owner_token}/panel")
    capsys.readouterr()
    cli.main(["status", "--session", session.folder])
    assert "1 rater(s) withdrew" in capsys.readouterr().out
    cli.main(["export", "--session", session.folder, "--out", str(tmp_path / "x")])
    assert (tmp_path / "x" / "ratings.csv").read_text().count("\n") == 1  # the header
    with store.Store(session.db_path) as db:  # kept for the audit
        assert db.conn.execute("SELECT COUNT(*) FROM withdrawn_ratings WHERE rater = 'en-1'"
                               ).fetchone()[0] == 3


def test_pages_in_the_raters_language(study):
    session, warnings = study
    assert any("zh.json" in w and "shown in English" in w for w in warnings)
    client, token = helpers.client(session), session.by_name["zh-1"].token
    page = _page(client, f"/r/{token}/consent")
    assert '<html lang="zh" dir="ltr">' in page
    assert "开始之前" in page and "我同意参加" in page and "<p>您可以随时停止。</p>" in page
    assert "I do not agree" in page  # not translated: English
    client.post(f"/r/{token}/consent", data={"consent": "agree"})
    assert "评分指南" in _page(client, f"/r/{token}/guidelines")
    client.post(f"/r/{token}/guidelines")
    for n in (1, 2, 3):
        client.post(f"/r/{token}/practice/{n}", data={"choice": "-3"})
    assert "答对了。" in _page(client, f"/r/{token}/practice/1")
    assert "第 1 项，共" in _page(client, f"/r/{token}/item/1")
    # English raters read English; an unknown link speaks the browser's language.
    assert "开始之前" not in _page(client, f"/r/{session.by_name['en-1'].token}/consent")
    unknown = client.get("/r/nobody", headers={"Accept-Language": "zh-CN,zh;q=0.9"})
    assert unknown.status_code == 404 and "此链接无效。" in unknown.get_data(as_text=True)
    unknown = client.get("/r/nobody", headers={"Accept-Language": "fr"})
    assert "This link is not known" in unknown.get_data(as_text=True)


def test_a_right_to_left_page_keeps_left_on_the_left(make_session, tmp_path):
    translation = tmp_path / "ar.json"
    translation.write_text(json.dumps({"side.left": "اليسار", "side.right": "اليمين"}),
                           encoding="utf-8")
    session = make_session(langs=("ar",), translations=(("ar", str(translation)),))
    helpers.pass_introduction(session)
    client, token = helpers.client(session), session.raters[0].token
    page = _page(client, f"/r/{token}/item/1")
    assert '<html lang="ar" dir="rtl">' in page
    # The page runs right to left, but the two captions and the seven points stay where
    # their words say: Left on the left.
    assert '<div class="pair" dir="ltr">' in page and '<div class="scale sxs" dir="ltr">' in page
    assert page.index("اليسار") < page.index("اليمين")


@pytest.mark.parametrize("session_type, levels, answer, right", [
    ("quality", ("Excellent: accurate", "Medium: gets the main subject right",
                 "Not enough information: you cannot judge"), {"quality": "Good"}, True),
    ("thumb", ("Precision: how much", "Recall: how much", "Fluency: deduct",
               "Conciseness: deduct", "Inclusive language: deduct"),
     {"P": "4", "R": "2", "Fl": "0", "Con": "0", "Inc": "0"}, False),
])
def test_each_protocols_guidelines_lead_to_its_practice(make_session, session_type, levels,
                                                        answer, right):
    session = make_session(type=session_type, systems=(), references=True, langs=("en",),
                           replication=1, gold_share=0.0)
    client, token = helpers.client(session), session.raters[0].token
    page = _page(client, f"/r/{token}/guidelines")
    for level in levels:
        assert level in page, level
    example = session.examples["en"]
    assert example["own"] in page and example["other"] in page
    client.post(f"/r/{token}/guidelines")
    # Practice 1: quality rates its own reference; THUMB another image's caption.
    page = _page(client, f"/r/{token}/practice/1")
    assert session.practice["en"][0]["texts"][0] in page
    assert client.post(f"/r/{token}/practice/1", data=answer).status_code == 303
    feedback = _page(client, f"/r/{token}/practice/1")
    assert ("Well done" in feedback) == right
    if session_type == "thumb":
        assert "Precision 1 / 2" in feedback and "This caption describes another image." in \
            feedback
