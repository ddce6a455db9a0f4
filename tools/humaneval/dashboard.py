"""The study owner's live dashboard: progress, gold checks, time per item, agreement so far.

`/dashboard/<owner token>` (the token is in session.json; `serve` prints the link). Every view
reads the ratings database afresh, read-only (store.read_ratings / read_state), so it shows the
study as it is, while the server runs, without a restart; the page's script
(static/dashboard.js) fetches its panel again every few seconds. It shows:

- per language: test items complete (rated by `replication` raters), begun, not begun;
  ratings stored of those assigned; time per item (median and 90th percentile of the active
  time, tools/humaneval/static/rate.js); Krippendorff's alpha so far (rating_stats.agreement_table);
- per rater: the crowd participant holding the slot (platform and id), the introduction
  passed (consent, guidelines, practice right / answered), ratings of those assigned, gold
  checks failed (a flagged rater in red), median active seconds, last rating;
- the raters' flags (rating_stats: gold, fast, straight, incomplete) and the share of
  their most common answer; a crowd session's untaken slots (no participant, nothing done)
  folded away;
- two plots (PNG, matplotlib's object API, safe in the server's threads): progress per
  language, and the distribution of active time per item;
- `/dashboard/<owner token>/items`: every item's progress (ratings of the replication, by
  whom), per language.

A view's panel and its two plots share one reading of the database (kept for a second at
least, half the refresh interval at most), so the owner's page costs the raters' server one
computation per refresh, not three.
"""

import collections
import io
import secrets
import statistics
import threading
import time

import flask
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tools.humaneval import rating_stats, store, web

PLOTS = ("progress", "times")


def _percentile(values, q):
    return float(np.percentile(values, q)) if values else None


def _ago(seconds):
    if seconds is None:
        return "–"
    if seconds < 90:
        return f"{int(seconds)} s ago"
    if seconds < 5400:
        return f"{int(seconds // 60)} min ago"
    return f"{seconds / 3600:.1f} h ago"


def seconds_text(seconds, threshold):
    """`seconds` with one decimal, or as many more as it takes to be on the side of `threshold`
    (the "fast" flag's) the value is on: 1.96 below 2 is "1.96", not "2.0"; "–" for None."""
    if seconds is None:
        return "–"
    for digits in range(1, 16):
        text = f"{seconds:.{digits}f}"
        if (float(text) < threshold) == (seconds < threshold):
            break
    return text


def overview(session, now=None):
    """Everything the dashboard shows, computed from the database as it is now.

    Returns:
        {"ratings": {"web", "simulated"}, "declined", "withdrawn", "langs": [per-language
        dicts],
        "raters": [per-rater dicts], "stamp": a number that changes when the data does}.
    """
    now = time.time() if now is None else now
    ratings = rating_stats.load_ratings(session)
    state = store.read_state(session.db_path, session.digest)
    counts = {item_id: 0 for item_id, item in session.items.items() if not item.is_gold}
    for r in ratings:
        if r.item.id in counts:
            counts[r.item.id] += 1
    agreement = rating_stats.agreement_table(session, ratings)
    raters = rating_stats.rater_table(session, ratings)
    langs = []
    for lang in session.langs:
        tests = [n for item_id, n in counts.items() if session.items[item_id].lang == lang]
        mine = [r for r in ratings if r.item.lang == lang]
        seconds = rating_stats.times(mine)
        alphas = {field: row["alpha"] for (where, field), row in agreement.items()
                  if where == lang}
        langs.append({
            "lang": lang, "items": len(tests),
            "complete": sum(n >= session.replication for n in tests),
            "begun": sum(0 < n < session.replication for n in tests),
            "ratings": len(mine),
            "assigned": sum(len(session.assignments[r.name]) for r in session.raters
                            if r.lang == lang),
            "median_seconds": statistics.median(seconds) if seconds else None,
            "median_text": seconds_text(statistics.median(seconds) if seconds else None,
                                        session.checks["min_seconds"]),
            "p90_seconds": _percentile(seconds, 90), "seconds": seconds, "alpha": alphas})
    rows = []
    for rater in session.raters:
        stats = raters[rater.name]
        steps = state["steps"].get(rater.name, {})
        answers = state["practice"].get(rater.name, [])
        mine = [r.rated_at for r in ratings if r.rater == rater.name]
        participant = state["participants"].get(rater.name)
        rows.append(dict(
            stats, name=rater.name, participant=participant,
            consent="consent" in steps, guidelines="guidelines" in steps,
            practice=f"{sum(a['correct'] for a in answers)} / {len(answers)}",
            last=_ago(now - max(mine)) if mine else "–",
            median_text=seconds_text(stats["median_seconds"], session.checks["min_seconds"]),
            # A crowd slot nobody holds or has rated under: folded away on the page.
            untaken=session.crowd is not None and participant is None and not mine
            and not steps))
    by_source = {source: sum(r.source == source for r in ratings) for source in store.SOURCES}
    return {"ratings": by_source, "declined": state["declined"],
            "withdrawn": state["withdrawn"], "langs": langs,
            "raters": rows, "stamp": f"{len(ratings)}-{len(state['practice'])}-"
                                     f"{sum(map(len, state['steps'].values()))}"}


def item_rows(session, ratings):
    """Per language, each item's progress: [{"id", "kind", "image", "position"s, "ratings",
    "raters", "status"}] in item order ("complete" at the replication, "begun", "not begun")."""
    raters = collections.defaultdict(list)
    for r in ratings:
        raters[r.item.id].append(r.rater)
    out = {lang: [] for lang in session.langs}
    for item in session.items.values():
        names = raters[item.id]
        status = ("complete" if len(names) >= session.replication else
                  "begun" if names else "not begun")
        out[item.lang].append({"id": item.id, "kind": item.kind, "image": item.image,
                               "ratings": len(names), "raters": names, "status": status})
    return out


def _png(fig):
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def progress_png(data):
    """Horizontal bars per language: % of test items complete, begun, not begun."""
    langs = data["langs"]
    fig = Figure(figsize=(5.4, max(3.0, 0.45 * len(langs) + 1.2)))
    ax = fig.add_subplot()
    y = np.arange(len(langs))
    left = np.zeros(len(langs))
    for key, color, label in (("complete", "#2171b5", "complete"),
                              ("begun", "#9ecae1", "begun"), (None, "#eeeeee", "not begun")):
        values = np.array([100.0 * ((row[key] if key else row["items"] - row["complete"]
                                     - row["begun"]) / max(row["items"], 1))
                           for row in langs])
        ax.barh(y, values, left=left, color=color, label=label, edgecolor="white")
        left += values
    ax.set_yticks(y, [row["lang"] for row in langs])
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("test items (%)")
    ax.set_title("Progress per language", fontsize=10)
    ax.legend(fontsize=8, ncols=3, loc="lower center", bbox_to_anchor=(0.5, 1.08),
              frameon=False)
    fig.tight_layout()
    return _png(fig)


def times_png(data):
    """Box plots of the active seconds per item, per language."""
    langs = [row for row in data["langs"] if row["seconds"]]
    fig = Figure(figsize=(5.4, 3.0))
    ax = fig.add_subplot()
    if langs:
        ax.boxplot([row["seconds"] for row in langs], tick_labels=[r["lang"] for r in langs],
                   showfliers=True)
    else:
        ax.text(0.5, 0.5, "no timed rating yet", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_ylabel("active seconds per item")
    ax.set_title("Time per item (page visible and in use)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def register(app):
    """Adds the dashboard's pages to the rating app."""
    lock, cache = threading.Lock(), {"at": None, "data": None}

    def current():
        max_age = max(1.0, app.config["DASHBOARD_REFRESH"] / 2)
        with lock:
            if cache["at"] is None or time.monotonic() - cache["at"] > max_age:
                cache["data"], cache["at"] = overview(web.session()), time.monotonic()
            return cache["data"]

    def owner(token):
        if not secrets.compare_digest(token, web.session().owner_token):
            raise web.Refused(404, "error.unknown_link")

    def page(template, token):
        owner(token)
        session = web.session()
        return flask.render_template(
            template, session=session, data=current(),
            refresh=app.config["DASHBOARD_REFRESH"], t=web.wording(), ui=web.wording(),
            panel_url=flask.url_for("dashboard_panel", token=token),
            items_url=flask.url_for("dashboard_items", token=token),
            plot_url=lambda name: flask.url_for("dashboard_plot", token=token, name=name))

    @app.get("/dashboard/<token>")
    def dashboard(token):
        return page("dashboard.html", token)

    @app.get("/dashboard/<token>/panel")
    def dashboard_panel(token):
        return page("dashboard_panel.html", token)

    @app.get("/dashboard/<token>/items")
    def dashboard_items(token):
        owner(token)
        session = web.session()
        return flask.render_template(
            "dashboard_items.html", session=session, t=web.wording(), ui=web.wording(),
            langs=item_rows(session, rating_stats.load_ratings(session)),
            back=flask.url_for("dashboard", token=token))

    @app.get("/dashboard/<token>/plot/<name>.png")
    def dashboard_plot(token, name):
        owner(token)
        if name not in PLOTS:
            raise web.Refused(404, "error.404")
        data = current()
        draw = progress_png if name == "progress" else times_png
        return flask.Response(draw(data), mimetype="image/png",
                              headers={"Cache-Control": "no-store"})
