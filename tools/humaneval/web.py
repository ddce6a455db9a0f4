"""What every page of the rating app shares: the session, the store, the rater, refusals.

The app's modules (app.py: the rating pages and enrolment; onboarding.py: consent, guidelines
and practice; dashboard.py: the study owner's view) register their routes on one Flask app
and reach the session and the request's database connection through here.

A refusal (`refuse`) is a page in the rater's language with a way forward (back to where
they are in their list), or, for the page's script, JSON {"error", "next"}: no request ever
ends on a bare status page. The page's script asks for JSON with `Accept: application/json`.
"""

import dataclasses
import re

import flask

from errors import InputError
from tools.humaneval import scales, store, texts


class Refused(InputError):
    """A request the app answers with a localized page (or JSON) and a status code.

    Args:
        code: the HTTP status.
        key: the text key of the message (tools/humaneval/texts.py).
        detail: a technical detail shown after it (English), or "".
        rater: the rater whose link it was, or None (then no "Continue" link).
    """

    def __init__(self, code, key, detail="", rater=None):
        super().__init__(detail or key)
        self.code, self.key, self.detail, self.rater = code, key, detail, rater


def session():
    return flask.current_app.config["HUMANEVAL_SESSION"]


def open_store():
    """The request's database connection (closed at the end of the request)."""
    if "store" not in flask.g:
        flask.g.store = store.Store(session().db_path)
    return flask.g.store


def close_store(_=None):
    db = flask.g.pop("store", None)
    if db is not None:
        db.close()


def rater_of(token):
    """The rater of a link's token, or a 404 refusal.

    A personal link's token is the rater's, in session.json. In a crowd session a slot is
    reached only through its participant's own token (store.enrol), so the returned rater
    carries that token (every link of their pages is made with it); a token of a participant
    who gave the slot up (declined, withdrew) reaches nothing, even when someone else holds
    the slot; nor does a personal link whose rater withdrew.
    """
    if session().crowd is None:
        rater = session().by_token.get(token)
        if rater is not None and open_store().withdrawn(rater.name):
            raise Refused(404, "error.withdrawn")
    else:
        name = open_store().rater_of_token(token)
        rater = None if name is None else dataclasses.replace(session().by_name[name],
                                                              token=token)
    if rater is None:
        raise Refused(404, "error.unknown_link")
    flask.g.rater = rater
    participant = open_store().participant(rater.name)
    if participant is not None and participant["platform"] == "mturk":
        flask.g.framed = True  # MTurk shows the task in a frame on its own site
    return rater


def wording(rater=None):
    """The texts of `rater`'s pages, or of the visitor's browser language without one."""
    if rater is not None:
        return texts.wording_for(session(), rater.lang)
    return texts.best_wording(session(), flask.request.accept_languages)


def wants_json():
    return flask.request.accept_mimetypes.best == "application/json"


def render(template, rater=None, **values):
    """A page of `template` in the rater's language (`t` the texts, `ui` the wording)."""
    ui = wording(rater)
    return flask.render_template(template, t=ui, ui=ui, **values)


def item_page(rater, texts_shown, n, total, image_url, action, done=0, practice=False,
              total_seconds=0.0):
    """The rating page of an item (or a practice item) in `rater`'s language."""
    return render(
        "item.html", rater, type=session().type, texts=texts_shown, n=n, total=total,
        done=done, practice=practice, lang=rater.lang,
        direction=scales.text_direction(rater.lang), scales=scales,
        total_seconds=int(total_seconds),
        idle_seconds=flask.current_app.config["IDLE_SECONDS"], image_url=image_url,
        action=action, guidelines_url=flask.url_for("guidelines", token=rater.token),
        withdraw_url=flask.url_for("withdraw", token=rater.token))


def _active_seconds(form):
    """The `active_ms` field the page's script sends (milliseconds), in seconds, or None."""
    values = form.pop("active_ms", None)
    if values is None:
        return None
    value = values[0]
    if len(values) != 1 or not re.fullmatch(r"[0-9]{1,10}", value):  # "²", "١": not ASCII
        raise InputError(f"field 'active_ms': expected milliseconds, got {value!r}"[:120])
    return int(value) / 1000


def posted_answer():
    """(the checked answer of the posted form, its active seconds or None).

    Raises:
        InputError: a field sent twice, a malformed active time, or an answer off the scale.
    """
    form = flask.request.form.to_dict(flat=False)
    active = _active_seconds(form)
    repeated = [name for name, values in form.items() if len(values) != 1]
    if repeated:
        raise InputError(f"field(s) {', '.join(repeated)} sent more than once")
    answer = scales.check_answer(session().type, {k: v[0] for k, v in form.items()})
    return answer, active


def resume_url(rater):
    return flask.url_for("resume", token=rater.token)


def moved_on(url):
    """The answer to a form that went through: JSON {"next"} for the page's script (which
    then goes there), else a 303 redirect."""
    if wants_json():
        return flask.jsonify(next=url)
    return flask.redirect(url, 303)


def refusal_response(error):
    """The page (or JSON) of a `Refused`."""
    rater = error.rater
    ui = wording(rater)
    message = ui(error.key) + (f" ({error.detail})" if error.detail else "")
    forward = resume_url(rater) if rater is not None else None
    if wants_json():
        return flask.jsonify(error=message, next=forward), error.code
    title_key = {400: "error.400", 404: "error.404", 409: "error.409",
                 503: "paused.title"}.get(error.code, "error.400")
    page = flask.render_template("message.html", t=ui, ui=ui, code=error.code,
                                 title=ui(title_key), text=message, forward=forward)
    return page, error.code
