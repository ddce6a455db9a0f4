"""The rating web app (Flask, server-rendered Jinja templates in humaneval/templates).

Every URL a rater sees is under their own secret token and addresses their items by place in
their own order (`/r/<token>/item/<n>`, the image at `.../image`), so a token reaches only its
rater's assignments, and nothing in a page, a URL, a form field or an image name says which
model wrote a caption (sxs answers are positional: left / right). A rating is committed to the
database before the browser is redirected to the next item (POST, then 303), so an
acknowledged rating survives the server being killed; opening `/r/<token>` resumes at the
first item not rated yet. Bad input is a 4xx page with the message: an unknown token or place
404, a malformed answer 400, a second rating of the same item 409 (the first is kept).
"""

import os
import time

import flask
import werkzeug.exceptions

from data import xm3600_release
from errors import InputError
from formats import thumb_ratings
from humaneval import scales, store
from humaneval import session as session_lib

_INSTRUCTIONS = {
    "sxs": "Which caption describes the image better? Judge what the captions say about the "
           "image, and how well they are written in this language.",
    "quality": "How good is this caption of the image, in this language?",
    "thumb": "Rate the caption: precision (is everything it says in the image?), recall (does "
             "it mention what matters?), and deduct for fluency, conciseness and "
             "non-inclusive language.",
}


def _format_seconds(seconds):
    seconds = int(seconds)
    return f"{seconds // 60} min {seconds % 60:02d} s"


def create_app(session_folder):
    """The Flask app of one session.

    Args:
        session_folder: a folder written by `python -m humaneval create`.

    Returns:
        The Flask application (serve it with humaneval/server.py, or its test client).

    Raises:
        InputError: the session file or its database fails its checks.
    """
    session = session_lib.load(session_folder)
    store.init(session.db_path, session.digest)
    app = flask.Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = 64 * 1024
    app.config["HUMANEVAL_SESSION"] = session

    def open_store():
        if "store" not in flask.g:
            flask.g.store = store.Store(session.db_path)
        return flask.g.store

    @app.teardown_appcontext
    def close_store(_):
        db = flask.g.pop("store", None)
        if db is not None:
            db.close()

    def rater_of(token):
        rater = session.by_token.get(token)
        if rater is None:
            flask.abort(404, "unknown rater token: check the link you were given")
        return rater

    def item_at(rater, n):
        items = session.assignments[rater.name]
        if not 1 <= n <= len(items):
            flask.abort(404, f"no item {n}: this link has items 1 to {len(items)}")
        return session.items[items[n - 1]]

    def message(code, text):
        return flask.render_template("message.html", code=code, text=text), code

    @app.errorhandler(werkzeug.exceptions.HTTPException)
    def http_error(e):
        return message(e.code, e.description)

    @app.errorhandler(store.DuplicateRating)
    def duplicate(e):
        return message(409, str(e))

    @app.errorhandler(InputError)
    def bad_input(e):
        return message(400, str(e))

    @app.get("/")
    def index():
        return flask.render_template("index.html")

    @app.get("/r/<token>")
    def resume(token):
        rater = rater_of(token)
        rated = open_store().rated_items(rater.name)
        for n, item_id in enumerate(session.assignments[rater.name], start=1):
            if item_id not in rated:
                return flask.redirect(flask.url_for("show", token=token, n=n), 303)
        return flask.render_template(
            "done.html", count=len(rated),
            spent=_format_seconds(open_store().rater_seconds(rater.name)))

    @app.get("/r/<token>/item/<int:n>")
    def show(token, n):
        rater = rater_of(token)
        item = item_at(rater, n)
        db = open_store()
        rated = db.rated_items(rater.name)
        if item.id in rated:
            return flask.redirect(flask.url_for("resume", token=token), 303)
        shown = db.mark_shown(rater.name, item.id)
        now = time.time()
        return flask.render_template(
            "item.html", type=session.type, item=item, n=n,
            total=len(session.assignments[rater.name]), done=len(rated),
            lang=item.lang, direction=scales.text_direction(item.lang),
            instructions=_INSTRUCTIONS[session.type], scales=scales, rubric=thumb_ratings,
            item_seconds=int(now - shown),
            total_seconds=int(db.rater_seconds(rater.name) + now - shown),
            image_url=flask.url_for("image", token=token, n=n),
            action=flask.url_for("rate", token=token, n=n))

    @app.post("/r/<token>/item/<int:n>")
    def rate(token, n):
        rater = rater_of(token)
        item = item_at(rater, n)
        form = flask.request.form.to_dict(flat=False)
        repeated = [name for name, values in form.items() if len(values) != 1]
        if repeated:
            raise InputError(f"field(s) {', '.join(repeated)} sent more than once")
        answer = scales.check_answer(session.type, {k: v[0] for k, v in form.items()})
        open_store().add_rating(rater.name, item.id, n, answer)
        return flask.redirect(flask.url_for("resume", token=token), 303)

    @app.get("/r/<token>/item/<int:n>/image")
    def image(token, n):
        item = item_at(rater_of(token), n)
        path = xm3600_release.image_path(session.data["release"], item.image)
        if not os.path.isfile(path):
            flask.abort(404, "the image of this item is missing from the release folder")
        # The bytes only: no file name, ETag or modification time reaches the browser.
        with open(path, "rb") as f:
            return flask.Response(f.read(), mimetype="image/jpeg",
                                  headers={"Cache-Control": "private, max-age=3600"})

    return app
