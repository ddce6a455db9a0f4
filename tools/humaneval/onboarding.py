"""What a rater goes through before the first item: consent, guidelines, practice.

In this order, each once (store.steps and store.practice keep where a rater is):

1. Consent (only when the study owner gave `create --consent FILE`): the owner's text and two
   buttons. Agreeing is recorded; declining frees a crowd participant's slot for someone else
   and ends on a page saying nothing was kept. Declining after rating (the consent page stays
   open) is a withdrawal, as is `/r/<token>/withdraw` (linked from every item page and the
   last page): the ratings are withdrawn (store.decline), the link dies, and the page says
   so with the number of ratings withdrawn.
2. Guidelines: what the protocol asks and what each level means (tools/humaneval/texts.py), with an
   example from the session's language: an image, a caption written for it and one of
   another image. The rater says they have read them; the page stays open to them later from
   every item page.
3. Practice (tools/humaneval/practice.py): a few items with known answers, rated on the same page as
   the real ones; each answer gets feedback (right or not, the expected answer, why) before
   the next. Practice answers are stored apart and never reach a result; the dashboard shows
   how each rater did.

All of it is in the rater's language where the session has a translation.
"""

import flask

from tools.humaneval import practice, scales, web


def next_step(rater, db):
    """The URL of the introduction step `rater` has not passed yet, or None when done."""
    session = web.session()
    steps = db.steps(rater.name)
    if session.data["study"]["consent"] and "consent" not in steps:
        return flask.url_for("consent", token=rater.token)
    if "guidelines" not in steps:
        return flask.url_for("guidelines", token=rater.token)
    answered = db.practice_answers(rater.name)
    for n, item in enumerate(session.practice[rater.lang], start=1):
        if item["id"] not in answered:
            return flask.url_for("practice_item", token=rater.token, n=n)
    return None


def _practice_at(rater, n):
    items = web.session().practice[rater.lang]
    if not 1 <= n <= len(items):
        raise web.Refused(404, "error.no_item", f"practice 1 to {len(items)}", rater)
    return items[n - 1]


def register(app):
    """Adds the consent, guidelines and practice pages to the rating app."""
    _register_consent(app)
    _register_guidelines(app)
    _register_practice(app)


def _register_consent(app):

    @app.get("/r/<token>/consent")
    def consent(token):
        rater = web.rater_of(token)
        if not web.session().data["study"]["consent"]:
            return flask.redirect(web.resume_url(rater), 303)
        return web.render("consent.html", rater, action=flask.url_for("consent", token=token))

    @app.post("/r/<token>/consent")
    def consent_answer(token):
        rater = web.rater_of(token)
        db = web.open_store()
        choice = flask.request.form.get("consent")
        if choice == "agree":
            db.pass_step(rater.name, "consent")
            return web.moved_on(web.resume_url(rater))
        if choice != "decline":
            raise web.Refused(400, "error.400", "field 'consent': expected agree or decline",
                              rater)
        return _decline(rater, db)

    @app.get("/r/<token>/withdraw")
    def withdraw(token):
        rater = web.rater_of(token)
        ui = web.wording(rater)
        return web.render("withdraw.html", rater, count=len(web.open_store().rated_items(
            rater.name)), action=flask.url_for("withdraw", token=token),
            back=web.resume_url(rater), title=ui("withdraw.title"))

    @app.post("/r/<token>/withdraw")
    def withdraw_answer(token):
        rater = web.rater_of(token)
        return _decline(rater, web.open_store())

    @app.get("/declined/<lang>")
    def declined(lang):
        if lang not in web.session().langs:
            raise web.Refused(404, "error.unknown_link")
        rater = next(r for r in web.session().raters if r.lang == lang)
        ui = web.wording(rater)
        count = flask.request.args.get("withdrawn", "")
        if count.isascii() and count.isdigit() and 0 < len(count) < 10 and int(count) > 0:
            title, text = ui("withdrawn.title"), ui("withdrawn.body", count=int(count))
        else:
            title, text = ui("declined.title"), ui("declined.body")
        return web.render("message.html", rater, code=200, title=title, text=text,
                          forward=None)


def _decline(rater, db):
    """Declining, or withdrawing after rating (store.decline): the link dies here."""
    count = db.decline(rater.name)
    return web.moved_on(flask.url_for("declined", lang=rater.lang, withdrawn=count or None))



def _register_guidelines(app):
    @app.get("/r/<token>/guidelines")
    def guidelines(token):
        rater = web.rater_of(token)
        session = web.session()
        passed = "guidelines" in web.open_store().steps(rater.name)
        return web.render(
            "guidelines.html", rater, type=session.type, scales=scales,
            example=session.examples[rater.lang], passed=passed,
            lang=rater.lang, direction=scales.text_direction(rater.lang),
            example_image=flask.url_for("example_image", token=token),
            action=flask.url_for("guidelines", token=token), resume=web.resume_url(rater))

    @app.post("/r/<token>/guidelines")
    def guidelines_read(token):
        rater = web.rater_of(token)
        web.open_store().pass_step(rater.name, "guidelines")
        return web.moved_on(web.resume_url(rater))

    @app.get("/r/<token>/guidelines/image")
    def example_image(token):
        rater = web.rater_of(token)
        return app.config["HUMANEVAL_IMAGE"](web.session().examples[rater.lang]["image"])



def _register_practice(app):
    @app.get("/r/<token>/practice/<int:n>")
    def practice_item(token, n):
        rater = web.rater_of(token)
        item = _practice_at(rater, n)
        session = web.session()
        db = web.open_store()
        total = len(session.practice[rater.lang])
        answered = db.practice_answers(rater.name).get(item["id"])
        if answered is not None:
            answer, correct = answered
            ui = web.wording(rater)
            last = n == total
            return web.render(
                "feedback.html", rater, n=n, total=total, correct=correct,
                yours=practice.describe(session.type, answer, ui),
                expected=practice.describe_accepted(session.type, item, ui), why=item["why"],
                next_url=web.resume_url(rater) if last else
                flask.url_for("practice_item", token=token, n=n + 1), last=last,
                texts=item["texts"], type=session.type, lang=rater.lang,
                direction=scales.text_direction(rater.lang),
                image_url=flask.url_for("practice_image", token=token, n=n))
        if "guidelines" not in db.steps(rater.name):
            return flask.redirect(web.resume_url(rater), 303)
        return web.item_page(rater, item["texts"], n, total, practice=True,
                             image_url=flask.url_for("practice_image", token=token, n=n),
                             action=flask.url_for("practice_answer", token=token, n=n))

    @app.post("/r/<token>/practice/<int:n>")
    def practice_answer(token, n):
        rater = web.rater_of(token)
        item = _practice_at(rater, n)
        db = web.open_store()
        if "guidelines" not in db.steps(rater.name):
            raise web.Refused(409, "error.introduction", rater=rater)
        answer, _ = web.posted_answer()  # practice time is not kept
        db.add_practice(rater.name, item["id"], answer, practice.is_correct(item, answer))
        return web.moved_on(flask.url_for("practice_item", token=token, n=n))

    @app.get("/r/<token>/practice/<int:n>/image")
    def practice_image(token, n):
        rater = web.rater_of(token)
        return app.config["HUMANEVAL_IMAGE"](_practice_at(rater, n)["image"])
