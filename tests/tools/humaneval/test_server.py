"""The server (tools/humaneval/server.py): SIGKILL between ratings loses no acknowledged rating (the
real command as a subprocess); a port in use; links behind a reverse proxy; the log under load."""

import http.client
import io
import logging
import socket
import urllib.parse

import pytest

from errors import InputError
from tests.cli import error_line
from tests.tools.humaneval import helpers
from tools.humaneval import server, store


def _post(port, path, choice):
    """Opens the item's page, then POSTs one answer; returns the status once the server has
    answered (acknowledged)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        conn.getresponse().read()
        conn.request("POST", path, urllib.parse.urlencode({"choice": choice}),
                     {"Content-Type": "application/x-www-form-urlencoded"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def _stored(session):
    with store.Store(session.db_path) as db:
        return [(r["item"], r["answer"]["choice"]) for r in db.ratings()]


def test_sigkill_loses_no_acknowledged_rating(make_session):
    session = make_session(langs=("en",), replication=1, subset_size=8, gold_share=0.25)
    helpers.pass_introduction(session)
    rater = session.raters[0]
    items = session.assignments[rater.name]
    acknowledged = []
    proc, port = helpers.start_server(session)
    try:
        for n in range(1, 5):
            choice = n % 7 - 3
            assert _post(port, f"/r/{rater.token}/item/{n}", choice) == 303
            acknowledged.append((items[n - 1], choice))
    finally:
        proc.kill()  # SIGKILL: no handler runs, no buffer is flushed by the server
        proc.wait(timeout=30)
        proc.stdout.close()
    assert _stored(session) == acknowledged

    # A new server resumes where the rater left off, and the ratings go on accumulating.
    proc, port = helpers.start_server(session)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", f"/r/{rater.token}")
        response = conn.getresponse()
        assert response.status == 303 and response.getheader("Location").endswith("/item/5")
        conn.close()
        assert _post(port, f"/r/{rater.token}/item/5", 3) == 303
        acknowledged.append((items[4], 3))
        assert _post(port, f"/r/{rater.token}/item/5", -3) == 409  # a duplicate: kept first
    finally:
        proc.kill()
        proc.wait(timeout=30)
        proc.stdout.close()
    assert _stored(session) == acknowledged


def test_a_port_in_use_is_one_error_line(make_session, capsys):
    from tools.humaneval import __main__ as cli
    session = make_session(langs=("en",))
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        port = busy.getsockname()[1]
        err = error_line(capsys, cli.main, ["serve", "--session", session.folder, "--port",
                                            str(port)])
    finally:
        busy.close()
    assert err == (f"error: --port {port}: 127.0.0.1:{port} is already in use (another "
                   f"server?); stop it or choose another --port\n")


def test_the_servers_threads_are_set_at_least_one(make_session):
    session = make_session(langs=("en",))
    httpd, _, _ = server.make_server(session.folder, port=0, threads=3)
    try:
        assert httpd.adj.threads == 3
    finally:
        httpd.close()
    with pytest.raises(InputError, match="--threads must be >= 1"):
        server.make_server(session.folder, port=0, threads=0)


def test_links_behind_a_reverse_proxy(make_session):
    session = make_session(langs=("en",))
    helpers.pass_introduction(session)
    httpd, thread, _, base = server.serve_in_thread(
        session.folder, port=0, public_url="https://rate.example.org/study1/")
    try:
        assert base == "https://rate.example.org/study1"
        out = io.StringIO()
        server.print_links(session, base, out)
        rater = session.raters[0]
        assert f"https://rate.example.org/study1/r/{rater.token}" in out.getvalue()
        assert f"https://rate.example.org/study1/dashboard/{session.owner_token}" in \
            out.getvalue()
        # The proxy passes the path on: the app lives under it, and its links keep it.
        conn = http.client.HTTPConnection("127.0.0.1", httpd.effective_port, timeout=30)
        conn.request("GET", f"/study1/r/{rater.token}")
        response = conn.getresponse()
        response.read()
        assert response.status == 303
        assert response.getheader("Location").endswith(f"/study1/r/{rater.token}/item/1")
        conn.request("GET", f"/study1/r/{rater.token}/item/1")
        page = conn.getresponse().read().decode()
        assert 'href="/study1/static/style.css"' in page
        assert f'action="/study1/r/{rater.token}/item/1"' in page
        conn.close()
    finally:
        server.stop(httpd)
        thread.join(timeout=10)
    assert not thread.is_alive()


@pytest.mark.parametrize("host, expected", [
    ("127.0.0.1", "http://127.0.0.1:8000"), ("0.0.0.0", f"http://{socket.gethostname()}:8000"),
    ("::1", "http://[::1]:8000")])
def test_links_without_a_public_url(host, expected):
    assert server.public_base(None, host, 8000) == (expected, "")


@pytest.mark.parametrize("url", ["rate.example.org", "https://x.org/a?b=1", "ftp://x.org"])
def test_bad_public_urls(url):
    with pytest.raises(InputError, match="--public-url"):
        server.public_base(url, "127.0.0.1", 8000)


def test_crowd_links_are_printed(make_session, consent):
    session = make_session(langs=("en",), crowd=True, consent=consent, quota=8,
                           completion_code="Z9")
    out = io.StringIO()
    server.print_links(session, "https://h.org", out)
    text = out.getvalue()
    join = f"https://h.org/join/{session.crowd['enrol_token']}/en"
    assert (f"{join}?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}&STUDY_ID={{{{%STUDY_ID%}}}}"
            f"&SESSION_ID={{{{%SESSION_ID%}}}}") in text
    assert "at most 8 items each" in text and "Z9" in text
    assert all(r.token not in text for r in session.raters)  # no personal links


def test_queue_warnings_do_not_flood_the_log(caplog):
    logger = logging.getLogger("waitress.queue")
    flood = server.quiet_queue_warnings(interval=60.0)
    assert server.quiet_queue_warnings() is flood  # installed once
    try:
        with caplog.at_level(logging.WARNING, logger="waitress.queue"):
            for depth in range(1, 101):
                logger.warning("Task queue depth is %d", depth)
            assert [r.getMessage() for r in caplog.records] == ["Task queue depth is 1"]
            flood.last -= 61  # a minute later: one line, with what it held back
            logger.warning("Task queue depth is %d", 7)
        assert caplog.records[-1].getMessage() == (
            "Task queue depth is 7 (99 such warning(s) held back in the last 60 s; raise "
            "serve --threads if it persists)")
    finally:
        logger.removeFilter(flood)
