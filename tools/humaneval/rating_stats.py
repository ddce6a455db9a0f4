"""What a session's ratings say: delta S x S, agreement, per-rater statistics, gold checks.

Side by side as in Sec. 3.3 of the XM3600 paper: each rating is turned into the 7-point value
from m2's side (scales.sxs_score, using the item's recorded left/right order); an image is a
win of m2 when more than half of its ratings (2 of 3 at replication 3) rate m2 better (> 0), a
loss when more than half rate it worse (< 0), else neither. Wins and Losses are percentages of
the rated images, delta S x S = Wins - Losses. Only test items with at least `replication`
ratings count (incomplete ones are reported); gold items never count. Intervals are percentile
bootstraps over images: per language, and over languages (the mean of the languages' deltas,
each language resampled on its own).

Raters are flagged (`rater_table`, `FLAGS`) for what a study owner paying for ratings must
look at, each by a rule fixed in the session's "gold" and "checks" blocks:

- "gold": failing more than `gold.max_failure_rate` of their attention checks (any, by
  default);
- "fast": a median time per rated item (the stored active time, which the server bounds:
  store.add_rating; the wall clock where none is stored) below `checks.min_seconds` (create
  --min-seconds, default 2 s), judged from the first timed rating on;
- "straight" (straight-lining): one answer for nearly every item, "nearly" meaning at least
  `checks.straight_share` (STRAIGHT_SHARE, 90%) of at least `checks.min_ratings`
  (MIN_RATINGS, 8) rated items (attention checks included) with the same answer as given:
  the same button of the 7-point scale (so "always Left much better" counts, whichever model
  was on the left), the same 5-level label, or the same THUMB precision and recall. Fewer
  answers say too little (a rater with 5 of 7 answers alike may be right); `create` refuses a
  --quota below MIN_RATINGS;
- "incomplete": some but not all of the rater's items rated (stopped early, or still
  rating): a state, not a fault (FAULTS), so it does not make a rater "flagged".

`load_ratings(..., exclude_flagged=True)` leaves the flagged raters' ratings out (those with
a flag of FAULTS: a report run mid-study keeps everyone still rating), so that a report can
be computed with and without them.
"""

import collections
import dataclasses
import json
import statistics

import numpy as np

from errors import InputError
from tools.formats import thumb_ratings
from tools.humaneval import agreement, scales
from tools.humaneval import store as store_lib

FLAGS = ("gold", "fast", "straight", "incomplete")
FAULTS = ("gold", "fast", "straight")  # The flags that make a rater "flagged".
STRAIGHT_SHARE = 0.9  # one answer to at least this share of a rater's items: straight-lining
MIN_RATINGS = 8  # a rater is judged straight-lining from this many ratings on


@dataclasses.dataclass(frozen=True)
class Rating:
    """One stored rating, checked again on the way out of the database.

    Attributes:
        rater: the rater's name.
        item: the `session.Item`.
        answer: the checked answer.
        seconds: the active time on the item: the page visible and in use (idle periods left
            out), as the page measured it; None when it was not measured (no script, a
            simulated rating).
        wall_seconds: first view to rating on the server's clock, idle time included; None
            without a view (simulated).
        source: "web" (a person) or "simulated".
        rated_at: when it was stored (seconds since the epoch).
    """
    rater: str
    item: object
    answer: dict
    seconds: float | None
    wall_seconds: float | None
    source: str
    rated_at: float


def load_ratings(session, exclude_simulated=False, exclude_flagged=False):
    """The session's ratings, each answer checked against the scale (read-only: the database
    is neither created nor changed; no database yet is no rating).

    Args:
        session: a `Session`.
        exclude_simulated: leave out the ratings of `python -m tools.humaneval simulate`.
        exclude_flagged: leave out the ratings of the raters `rater_table` flags (judged on
            the ratings kept otherwise).

    Raises:
        InputError: the database is not the session's, a stored row names an unknown rater or
            item, or its answer is off the scale (the database was written by something
            else); the row id is named.
    """
    rows = store_lib.read_ratings(session.db_path, session.digest)
    out = []
    for row in rows:
        where = f"{session.db_path}: ratings row id {row['id']}"
        item = session.items.get(row["item"])
        if item is None or row["item"] not in session.positions.get(row["rater"], {}):
            raise InputError(f"{where}: rater {row['rater']!r} has no item {row['item']!r}")
        try:
            answer = scales.check_answer(session.type, row["answer"])
        except InputError as e:
            raise InputError(f"{where}: {e}") from None
        if exclude_simulated and row["source"] == "simulated":
            continue
        out.append(Rating(row["rater"], item, answer, row["active_seconds"], row["seconds"],
                          row["source"], row["rated_at"]))
    if exclude_flagged:
        flagged = {name for name, row in rater_table(session, out).items() if row["flagged"]}
        out = [r for r in out if r.rater not in flagged]
    return out


def m2_score(rating):
    """The sxs rating on the paper's scale from m2's side (+3 Much-Better ... -3)."""
    m2_side = rating.item.side_of("m2")
    return scales.sxs_score(rating.answer["choice"], 1 if m2_side is None else m2_side)


def ordinal_value(session_type, answer, field=None):
    """The ordinal value of an answer for agreement (None: no place on the scale)."""
    if session_type == "quality":
        return scales.QUALITY_VALUES[answer["quality"]]
    if session_type == "thumb":
        return answer[field] if field else thumb_ratings.total(answer)
    return answer["choice"]


def majority(scores):
    """+1 when more than half of `scores` are > 0 (m2 better), -1 when more than half < 0."""
    scores = np.asarray(scores)
    if 2 * (scores > 0).sum() > len(scores):
        return 1
    if 2 * (scores < 0).sum() > len(scores):
        return -1
    return 0


def wins_losses(outcomes):
    """(Wins %, Losses %, delta S x S) of an array of +1 / 0 / -1 outcomes, one per image."""
    outcomes = np.asarray(outcomes)
    wins = 100.0 * (outcomes == 1).mean()
    losses = 100.0 * (outcomes == -1).mean()
    return float(wins), float(losses), float(wins - losses)


def _bootstrap_deltas(outcomes, resamples, rng):
    """delta S x S of `resamples` resamples of the images, float [resamples]."""
    outcomes = np.asarray(outcomes)
    picks = outcomes[rng.integers(len(outcomes), size=(resamples, len(outcomes)))]
    return 100.0 * ((picks == 1).mean(axis=1) - (picks == -1).mean(axis=1))


def _interval(samples, confidence):
    tail = 100 * (1 - confidence) / 2
    return float(np.percentile(samples, tail)), float(np.percentile(samples, 100 - tail))


def sxs_outcomes(session, ratings):
    """Per language: {image key: majority outcome} of complete test items, and the count of
    incomplete ones; plus {item id: [m2-side scores]} of every test item."""
    scores = collections.defaultdict(list)
    for rating in ratings:
        if not rating.item.is_gold:
            scores[rating.item.id].append(m2_score(rating))
    per_lang = {lang: ({}, 0) for lang in session.langs}
    for item in session.items.values():
        if item.is_gold:
            continue
        outcomes, incomplete = per_lang[item.lang]
        if len(scores[item.id]) >= session.replication:
            outcomes[item.image] = majority(scores[item.id])
        else:
            per_lang[item.lang] = (outcomes, incomplete + 1)
    return per_lang, dict(scores)


def delta_sxs(session, ratings, resamples=1000, confidence=0.95, seed=0):
    """Wins, Losses and delta S x S per language and over languages, with bootstrap intervals.

    Args:
        session: an sxs `Session`.
        ratings: its `Rating`s.
        resamples: bootstrap resamples (0: no intervals).
        confidence: of the percentile intervals.
        seed: of the bootstrap.

    Returns:
        {lang or "all": {"images", "incomplete", "wins", "losses", "delta", "low", "high",
        "languages"}}; "all" averages the languages that have rated images, which its
        "languages" lists (None values when none has).
    """
    per_lang, _ = sxs_outcomes(session, ratings)
    rng = np.random.default_rng(seed)
    out, boots = {}, []
    for lang in session.langs:
        outcomes, incomplete = per_lang[lang]
        row = {"images": len(outcomes), "incomplete": incomplete, "wins": None,
               "losses": None, "delta": None, "low": None, "high": None,
               "languages": [lang] if outcomes else []}
        if outcomes:
            values = np.array(list(outcomes.values()))
            row["wins"], row["losses"], row["delta"] = wins_losses(values)
            if resamples:
                samples = _bootstrap_deltas(values, resamples, rng)
                row["low"], row["high"] = _interval(samples, confidence)
                boots.append(samples)
        out[lang] = row
    rated = [out[lang] for lang in session.langs if out[lang]["images"]]
    summary = {"images": sum(r["images"] for r in out.values()),
               "incomplete": sum(r["incomplete"] for r in out.values()),
               "wins": None, "losses": None, "delta": None, "low": None, "high": None,
               "languages": [lang for lang in session.langs if out[lang]["images"]]}
    if rated:
        for key in ("wins", "losses", "delta"):
            summary[key] = float(np.mean([r[key] for r in rated]))
        if resamples:
            summary["low"], summary["high"] = _interval(np.mean(boots, axis=0), confidence)
    out["all"] = summary
    return out


def agreement_table(session, ratings):
    """Krippendorff's alpha over test items, per language and over all.

    Returns:
        {(lang or "all", field): {"alpha", "level", "units", "values"}}; field is "score"
        (sxs: m2-side 7-point value; quality: Excellent 4 .. Bad 1, Not-Enough-Info left
        out), or P, R (ordinal) and total (interval) for thumb.
    """
    fields = {"sxs": [("score", "ordinal", list(range(-3, 4)))],
              "quality": [("score", "ordinal", [1, 2, 3, 4])],
              "thumb": [("P", "ordinal", [1, 2, 3, 4, 5]), ("R", "ordinal", [1, 2, 3, 4, 5]),
                        ("total", "interval", None)]}[session.type]
    out = {}
    for lang in (*session.langs, "all"):
        chosen = [r for r in ratings if not r.item.is_gold and lang in ("all", r.item.lang)]
        for field, level, domain in fields:
            units = collections.defaultdict(list)
            for r in chosen:
                value = (m2_score(r) if session.type == "sxs" else
                         ordinal_value(session.type, r.answer, None if field in ("score", "total")
                                       else field))
                if value is not None:
                    units[r.item.id].append(value)
            pairable = [u for u in units.values() if len(u) >= 2]
            out[(lang, field)] = {"alpha": agreement.alpha(pairable, level, domain),
                                  "level": level, "units": len(pairable),
                                  "values": sum(map(len, pairable))}
    return out


def gold_passed(session_type, item, answer):
    """Whether a rating of a gold item passes its check.

    sxs: identical captions must be rated Similar; with a caption of another image, the
    image's own caption must be rated better. quality: another image's caption must be Bad.
    thumb: another image's caption must get precision 1 or 2.
    """
    if session_type == "sxs":
        if item.kind == "gold-identical":
            return answer["choice"] == 0
        own_side = next(s for s, src in enumerate(item.sources) if src["image"] == item.image)
        return answer["choice"] > 0 if own_side == 1 else answer["choice"] < 0
    if session_type == "quality":
        return answer["quality"] == "Bad"
    return answer["P"] <= 2


def _given_answer(session_type, answer):
    """An answer as the rater gave it, for straight-lining: the button, the label, or THUMB's
    precision and recall."""
    if session_type == "thumb":
        return (answer["P"], answer["R"])
    return json.dumps(answer, sort_keys=True)


def times(mine):
    """The time of each timed rating: active, else the wall clock."""
    values = [r.seconds if r.seconds is not None else r.wall_seconds for r in mine]
    return [t for t in values if t is not None]


def rater_flags(session, mine, gold_failed, gold_count, assigned):
    """The flags (FLAGS, the module docstring) of a rater with ratings `mine` of `assigned`
    items; also the share of their most common answer."""
    checks = session.checks
    flags = []
    if gold_count and gold_failed and gold_failed / gold_count > \
            session.data["gold"]["max_failure_rate"]:
        flags.append("gold")
    seconds = times(mine)
    if seconds and statistics.median(seconds) < checks["min_seconds"]:
        flags.append("fast")
    share = None
    if mine:
        counts = collections.Counter(_given_answer(session.type, r.answer) for r in mine)
        share = counts.most_common(1)[0][1] / len(mine)
        if len(mine) >= checks["min_ratings"] and share >= checks["straight_share"]:
            flags.append("straight")
    if 0 < len(mine) < assigned:
        flags.append("incomplete")
    return flags, share


def rater_table(session, ratings):
    """Per-rater statistics, gold-check results and flags.

    Returns:
        {rater name: {"lang", "assigned", "rated", "median_seconds", "mean_score",
        "majority_agreement" (sxs: share of complete test items whose majority the rater's
        sign matches), "gold", "gold_failed", "gold_failure_rate", "same_answer" (share of
        the most common answer), "flags" (of FLAGS), "flagged" (a flag of FAULTS)}}.
    """
    per_lang, _ = sxs_outcomes(session, ratings) if session.type == "sxs" else ({}, None)
    by_rater = collections.defaultdict(list)
    for r in ratings:
        by_rater[r.rater].append(r)
    out = {}
    for rater in session.raters:
        mine = by_rater.get(rater.name, [])
        tests = [r for r in mine if not r.item.is_gold]
        gold = [r for r in mine if r.item.is_gold]
        failed = sum(not gold_passed(session.type, r.item, r.answer) for r in gold)
        values = [m2_score(r) if session.type == "sxs" else
                  ordinal_value(session.type, r.answer) for r in tests]
        values = [v for v in values if v is not None]
        seconds = times(mine)
        row = {"lang": rater.lang, "assigned": len(session.assignments[rater.name]),
               "rated": len(mine),
               "median_seconds": statistics.median(seconds) if seconds else None,
               "mean_score": float(np.mean(values)) if values else None,
               "majority_agreement": None, "gold": len(gold), "gold_failed": failed,
               "gold_failure_rate": failed / len(gold) if gold else None}
        row["flags"], row["same_answer"] = rater_flags(session, mine, failed, len(gold),
                                                       row["assigned"])
        row["flagged"] = any(flag in FAULTS for flag in row["flags"])
        if session.type == "sxs":
            outcomes = per_lang[rater.lang][0]
            signs = [(int(np.sign(m2_score(r))), outcomes[r.item.image]) for r in tests
                     if r.item.image in outcomes]
            row["majority_agreement"] = (sum(a == b for a, b in signs) / len(signs)
                                         if signs else None)
        out[rater.name] = row
    return out


def quality_level(labels):
    """The aggregated 5-level rating of one caption: the median of its ratings.

    The paper takes the median of the three ratings (Sec. 2.3) and does not say how
    Not-Enough-Info enters it. Here Not-Enough-Info ratings are left out; the median is taken
    over the others (Excellent 4 .. Bad 1), the lower middle value when their number is even
    (the guidelines' "take the lower rating in borderline cases"); a caption whose every
    rating is Not-Enough-Info gets Not-Enough-Info.

    Args:
        labels: the caption's quality labels.

    Returns:
        A label of scales.QUALITY_CHOICES.
    """
    values = sorted(scales.QUALITY_VALUES[label] for label in labels
                    if scales.QUALITY_VALUES[label] is not None)
    if not values:
        return "Not-Enough-Info"
    value = values[(len(values) - 1) // 2]
    return next(label for label, v in scales.QUALITY_VALUES.items() if v == value)


def quality_table2(session, ratings):
    """The paper's Table 2 per language and system: cumulative shares of the median ratings.

    Only test items with at least `replication` ratings count (the others are counted as
    incomplete); a caption whose median is Not-Enough-Info is counted apart and left out of the
    shares.

    Returns:
        [{"lang", "system" (id), "captions" (complete, with a level), "incomplete", "nei",
        "good_plus", "med_plus", "bad"}] in percent of "captions" (None without any), sorted
        by language and system.
    """
    labels = collections.defaultdict(list)
    for r in ratings:
        if not r.item.is_gold:
            labels[r.item.id].append(r.answer["quality"])
    groups = collections.defaultdict(lambda: {"levels": [], "incomplete": 0, "nei": 0})
    for item in session.items.values():
        if item.is_gold:
            continue
        group = groups[(item.lang, item.sources[0]["system"])]
        if len(labels[item.id]) < session.replication:
            group["incomplete"] += 1
            continue
        level = quality_level(labels[item.id])
        if level == "Not-Enough-Info":
            group["nei"] += 1
        else:
            group["levels"].append(scales.QUALITY_VALUES[level])
    rows = []
    for (lang, system), group in sorted(groups.items()):
        levels = np.array(group["levels"])
        row = {"lang": lang, "system": system, "captions": len(levels),
               "incomplete": group["incomplete"], "nei": group["nei"],
               "good_plus": None, "med_plus": None, "bad": None}
        if len(levels):
            row.update(good_plus=float(100 * (levels >= 3).mean()),
                       med_plus=float(100 * (levels >= 2).mean()),
                       bad=float(100 * (levels == 1).mean()))
        rows.append(row)
    return rows
