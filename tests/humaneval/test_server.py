"""The real server as a subprocess: SIGKILL between ratings loses no acknowledged rating."""

import http.client
import os
import subprocess
import sys
import urllib.parse

from humaneval import store
from tests.humaneval import helpers

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _start(session):
    """Starts `python -m humaneval serve --port 0`; returns (process, port)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "humaneval", "serve", "--session", session.folder, "--port", "0"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = proc.stdout.readline()
    assert line.startswith("serving http://127.0.0.1:"), line + proc.stdout.read()
    return proc, int(line.rsplit(":", 1)[1])


def _post(port, path, choice):
    """POSTs one answer; returns the status once the server has answered (acknowledged)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
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
    proc, port = _start(session)
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
    proc, port = _start(session)
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
