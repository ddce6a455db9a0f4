"""The rating web app (Flask, server-rendered Jinja templates in tools/humaneval/templates).

Every URL a rater sees is under their own secret token and addresses their items by place in
their own order (`/r/<token>/item/<n>`, the image at `.../image`), so a token reaches only its
rater's assignments, and nothing in a page, a URL, a form field or an image name says which
model wrote a caption (sxs answers are positional: left / right). A rating is committed to the
database before the browser is sent on (POST, then 303; or JSON {"next"} to the page's
script), so an acknowledged rating survives the server being killed. Opening `/r/<token>`
resumes where the rater is: the consent (when the study has one), the guidelines and the
practice items (tools/humaneval/onboarding.py) come before the first item to rate, then the first
item not rated, then the end (a crowd participant's completion code).

A crowd session (tools/humaneval/crowd.py) enrols participants at `/join/<enrolment token>/<lang>`:
the next free rater slot, or the participant's own when they come back. The study owner's
dashboard is at `/dashboard/<owner token>` (tools/humaneval/dashboard.py).

Bad input is a page in the rater's language with a way forward (web.Refused): an unknown
token or place 404, a malformed answer 400, a second rating of the same item 409 (the first
is kept), a rating of an item the server never sent to the rater 409. When the database
cannot be written (a full disk), the rater reads that the study is paused and their answer
was not stored (503), and the server's log gets one line per failure.

Every answer carries `Referrer-Policy: no-referrer` (the tokens are in the URLs),
`X-Frame-Options: DENY` (but for MTurk participants, whose task MTurk frames),
`X-Content-Type-Options: nosniff`, a Content-Security-Policy allowing only the app's own
scripts, styles and images, and pages `Cache-Control: no-store`, so that Back never shows a
stale page from the browser's cache.
"""

import os
import secrets
import sqlite3

import flask
import werkzeug.exceptions

from data.releases import xm3600 as xm3600_release
from errors import InputError
from tools.humaneval import crowd, dashboard, onboarding, store, web
from tools.humaneval import session as session_lib

_MTURK = " ".join(crowd.MTURK_SITES)
_CSP = ("default-src 'self'; img-src 'self'; style-src 'self'; script-src 'self'; "
        "object-src 'none'; base-uri 'none'; form-action 'self' " + _MTURK + "; "
        "frame-ancestors ")


def format_seconds(seconds):
    seconds = int(seconds)
    return f"{seconds // 60} min {seconds % 60:02d} s"


def _headers(response):
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    if flask.g.get("framed"):
        response.headers["Content-Security-Policy"] = _CSP + _MTURK
    else:
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Content-Security-Policy"] = _CSP + "'none'"
    if response.mimetype in ("text/html", "application/json"):
        response.headers["Cache-Control"] = "no-store"
    return response


def _register_errors(app):
    @app.errorhandler(web.Refused)
    def refused(e):
        return web.refusal_response(e)

    @app.errorhandler(store.DuplicateRating)
    def duplicate(e):
        return web.refusal_response(web.Refused(409, "error.duplicate",
                                                rater=flask.g.get("rater")))

    @app.errorhandler(sqlite3.DatabaseError)
    def paused(e):
        app.logger.error("%s: cannot use the ratings database (%s): %s %s answered 503, "
                         "nothing stored", web.session().db_path, e, flask.request.method,
                         flask.request.url_rule or "?")  # the route, never a token
        return web.refusal_response(web.Refused(503, "error.paused",
                                                rater=flask.g.get("rater")))

    @app.errorhandler(InputError)
    def bad_input(e):
        return web.refusal_response(web.Refused(400, "error.400", str(e),
                                                rater=flask.g.get("rater")))

    @app.errorhandler(werkzeug.exceptions.HTTPException)
    def http_error(e):
        if e.code == 404:  # a URL of no page: said in the visitor's language
            return web.refusal_response(web.Refused(404, "error.unknown_link"))
        return web.refusal_response(web.Refused(e.code, "error.400", e.description or "",
                                                rater=flask.g.get("rater")))


def create_app(session_folder, idle_seconds=None, dashboard_refresh=10):
    """The Flask app of one session.

    Args:
        session_folder: a folder written by `python -m tools.humaneval create`.
        idle_seconds: a pause without input longer than this is not active time; default
            the session's (create --idle-seconds).
        dashboard_refresh: seconds between the dashboard's updates.

    Returns:
        The Flask application (serve it with tools/humaneval/server.py, or its test client).

    Raises:
        InputError: the session file or its database fails its checks.
    """
    session = session_lib.load(session_folder)
    store.init(session.db_path, session.digest, served=True)
    app = flask.Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = 64 * 1024
    app.config["HUMANEVAL_SESSION"] = session
    app.config["IDLE_SECONDS"] = idle_seconds or session.checks["idle_seconds"]
    app.config["DASHBOARD_REFRESH"] = dashboard_refresh
    app.config["HUMANEVAL_IMAGE"] = _image_response
    app.teardown_appcontext(web.close_store)
    app.after_request(_headers)
    _register_errors(app)
    _register_rating(app)
    app.get("/join/<enrol_token>/<lang>")(_join)
    onboarding.register(app)
    dashboard.register(app)
    return app


def _item_at(rater, n):
    items = web.session().assignments[rater.name]
    if not 1 <= n <= len(items):
        raise web.Refused(404, "error.no_item", f"1 to {len(items)}", rater)
    return web.session().items[items[n - 1]]


def _register_rating(app):
    """The rater's pages: where they are, an item, its answer, its image."""

    @app.get("/")
    def index():
        return web.render("index.html")

    @app.get("/r/<token>")
    def resume(token):
        rater = web.rater_of(token)
        db = web.open_store()
        step = onboarding.next_step(rater, db)
        if step is not None:
            return flask.redirect(step, 303)
        session = web.session()
        rated = db.rated_items(rater.name)
        for n, item_id in enumerate(session.assignments[rater.name], start=1):
            if item_id not in rated:
                return flask.redirect(flask.url_for("show", token=token, n=n), 303)
        finish = None
        if session.crowd is not None:
            finish = crowd.completion(session.crowd, db.participant(rater.name))
        return web.render("done.html", rater, count=len(rated), finish=finish,
                          spent=format_seconds(db.rater_seconds(rater.name)),
                          withdraw_url=flask.url_for("withdraw", token=token))

    @app.get("/r/<token>/item/<int:n>")
    def show(token, n):
        rater = web.rater_of(token)
        item = _item_at(rater, n)
        db = web.open_store()
        if onboarding.next_step(rater, db) is not None:
            return flask.redirect(flask.url_for("resume", token=token), 303)
        rated = db.rated_items(rater.name)
        if item.id in rated:
            return flask.redirect(flask.url_for("resume", token=token), 303)
        db.mark_shown(rater.name, item.id)
        return web.item_page(rater, item.texts, n, len(web.session().assignments[rater.name]),
                             done=len(rated), total_seconds=db.rater_seconds(rater.name),
                             image_url=flask.url_for("image", token=token, n=n),
                             action=flask.url_for("rate", token=token, n=n))

    @app.post("/r/<token>/item/<int:n>")
    def rate(token, n):
        rater = web.rater_of(token)
        item = _item_at(rater, n)
        db = web.open_store()
        if onboarding.next_step(rater, db) is not None:
            raise web.Refused(409, "error.introduction", rater=rater)
        answer, active = web.posted_answer()
        if not db.shown(rater.name, item.id):  # its time would be the client's word alone
            raise web.Refused(409, "error.not_shown", rater=rater)
        db.add_rating(rater.name, item.id, n, answer, active_seconds=active)
        return web.moved_on(flask.url_for("resume", token=token))

    @app.get("/r/<token>/item/<int:n>/image")
    def image(token, n):
        return _image_response(_item_at(web.rater_of(token), n).image)


def _join(enrol_token, lang):
    """A crowd participant arriving through a language's enrolment link."""
    session = web.session()
    if session.crowd is None or lang not in session.langs \
            or not secrets.compare_digest(enrol_token, session.crowd["enrol_token"]):
        raise web.Refused(404, "error.unknown_link")
    arrival = crowd.arrival(flask.request.args)
    if arrival.platform == "mturk":
        flask.g.framed = True
    if arrival.preview:
        return web.render("message.html", code=200, title=web.wording()("preview.title"),
                          text=web.wording()("preview.body"), forward=None)
    if arrival.participant is None:
        raise web.Refused(400, "join.no_id", arrival.problem or "")
    candidates = [r.name for r in session.raters if r.lang == lang]
    if web.open_store().withdrew(arrival.platform, arrival.participant):  # Final: not again.
        raise web.Refused(409, "error.withdrawn")
    name, token, _ = web.open_store().enrol(arrival.platform, arrival.participant,
                                            candidates, arrival.details)
    if name is None:
        rater = next(r for r in session.raters if r.lang == lang)
        ui = web.wording(rater)
        return web.render("message.html", rater, code=409, title=ui("full.title"),
                          text=ui("full.body"), forward=None), 409
    return flask.redirect(flask.url_for("resume", token=token), 303)


def _image_response(key):
    path = xm3600_release.image_path(web.session().data["release"], key)
    if not os.path.isfile(path):
        raise web.Refused(404, "error.404", "the image is missing from the release folder")
    # The bytes only: no file name, ETag or modification time reaches the browser.
    with open(path, "rb") as f:
        return flask.Response(f.read(), mimetype="image/jpeg",
                              headers={"Cache-Control": "private, max-age=3600"})
