"""Exports a session's ratings: every rating as CSV and JSONL, plus each type's own layout.

    python -m tools.humaneval export --session S --out DIR

- `ratings.csv`, `ratings.jsonl`: one row per rating (gold items included, marked by `kind`),
  with the models un-blinded (`left` / `right`, or `system`), the paper's value (`score`: sxs
  from m2's side, quality Excellent 4 .. Bad 1, thumb the total), the time it took (`seconds`:
  active time, the page visible and in use, empty where not measured; `wall_seconds`: first
  view to rating, idle time included) and `source` ("web", or "simulated" for the ratings of
  `python -m tools.humaneval simulate`; `--exclude-simulated` leaves those out of every file, and a
  session mixing both is warned about), and `rater_flags`: the flags of the rater
  (rating_stats: gold, fast, straight; `--exclude-flagged` leaves the flagged raters' ratings
  out). Practice answers are never exported.
- `raters.csv`: per rater, the crowd participant holding the slot, progress, median time,
  attention checks failed, the share of their most common answer, and their flags.
- sxs: `side_by_side.csv` in the layout of the paper's side_by_side.csv (Tables 5 and 7;
  tools/formats/side_by_side.py): one row per language, m2, m1, lang, set (core = en, es, hi, zh;
  else ext), delta_sxs (majority of the raters, rating_stats.delta_sxs), delta_cider_xm600 (on
  the rated subset, from per_image.jsonl), delta_cider_xm3600 (scores.json) and
  delta_cider_coco_dev (when both results folders have it); the input of
  tools/analysis/correlate.py.
- thumb: the THUMB 1.0 release layout (tools/formats/thumb_ratings.py; one line per caption):
  `thumb.jsonl` at replication 1, else `thumb_<k>.jsonl` with each caption's k-th rating
  (`thumb_files`), each checked against the rubric as it is written.
"""

import csv
import json
import os

import files
from tools.formats import side_by_side, thumb_ratings
from tools.humaneval import rating_stats, scales, store

RATING_COLUMNS = ("rater", "lang", "position", "item", "image", "kind", "left", "right",
                  "system", "answer", "score", "label", "seconds", "wall_seconds", "source",
                  "rater_flags")
RATER_COLUMNS = ("rater", "lang", "participant", "assigned", "rated", "median_seconds",
                 "gold", "gold_failed", "same_answer", "flags")


def _system_name(session, source):
    return session.systems[source["system"]]["name"]


def rating_row(session, rating):
    """One rating as a flat dict of RATING_COLUMNS (plus the caption texts)."""
    item = rating.item
    names = [_system_name(session, s) + ("" if s["image"] == item.image else "@other-image")
             for s in item.sources]
    row = {"rater": rating.rater, "lang": item.lang,
           "position": session.positions[rating.rater][item.id],
           "item": item.id, "image": item.image, "kind": item.kind,
           "left": names[0] if len(names) == 2 else "",
           "right": names[1] if len(names) == 2 else "",
           "system": names[0] if len(names) == 1 else "",
           "answer": rating.answer, "seconds": rating.seconds,
           "wall_seconds": rating.wall_seconds, "source": rating.source,
           "texts": list(item.texts)}
    if session.type == "sxs":
        row["score"] = rating_stats.m2_score(rating) if not item.is_gold else ""
        row["label"] = scales.SXS_LABELS[row["score"]] if not item.is_gold else ""
    elif session.type == "quality":
        row["score"] = scales.QUALITY_VALUES[rating.answer["quality"]]
        row["label"] = rating.answer["quality"]
    else:
        row["score"] = thumb_ratings.total(rating.answer)
        row["label"] = ""
    return row


def side_by_side_rows(session, ratings):
    """The session's rows of side_by_side.csv (one per language): dicts of
    tools.formats.side_by_side.COLUMNS, numbers or None where missing."""
    deltas = rating_stats.delta_sxs(session, ratings, resamples=0)
    m1, m2 = session.systems["m1"], session.systems["m2"]

    def diff(field, lang):  # CIDEr(m2) - CIDEr(m1), None when either lacks the language
        a, b = m2.get(field) or {}, m1.get(field) or {}
        return a[lang] - b[lang] if lang in a and lang in b else None

    rows = []
    for lang in session.langs:
        rows.append({
            "m2": m2["name"], "m1": m1["name"], "lang": lang,
            "set": side_by_side.set_of(lang), "delta_sxs": deltas[lang]["delta"],
            "delta_cider_xm600": diff("cider_subset", lang),
            "delta_cider_xm3600": diff("cider_xm3600", lang),
            "delta_cider_coco_dev": diff("cider_coco_dev", lang)})
    return rows


def thumb_rows(session, ratings):
    """Ratings of test items in the THUMB 1.0 release layout (dicts of
    tools.formats.thumb_ratings.RELEASE_FIELDS), in the order stored."""
    index = dict(zip(session.data["subset"]["keys"], session.data["subset"]["release_index"],
                     strict=True))
    rows = []
    for r in ratings:
        if r.item.is_gold:
            continue
        answer = thumb_ratings.check_rating(**r.answer)
        source = r.item.sources[0]
        # The release's own captions: one "system" per reference, as THUMB has one "Human".
        system = _system_name(session, source) + (f"#{source['ref'] + 1}" if "ref" in source
                                                  else "")
        rows.append({
            "SYS": system, "seg_id": r.item.image,
            "set_id": index[r.item.image], "hyp": r.item.texts[0],
            "image": f"{r.item.image}.jpg", "P": float(answer["P"]), "R": float(answer["R"]),
            "Fl": answer["Fl"], "Inc": answer["Inc"], "Con": answer["Con"],
            "human_score": thumb_ratings.total(answer)})
    return rows


def thumb_files(session, ratings):
    """The THUMB release-layout files: {file name: rows}.

    The release has one rating per caption (model, image). At replication 1 that is
    `thumb.jsonl`; at replication r, `thumb_1.jsonl` .. `thumb_<r>.jsonl` hold each caption's
    first, second, ... rating, so that each file is a release-layout file on its own.
    """
    rows = thumb_rows(session, ratings)
    if session.replication == 1:
        return {thumb_ratings.file_name(): rows}
    files, seen = {}, {}
    for row in rows:
        k = seen[(row["SYS"], row["seg_id"])] = seen.get((row["SYS"], row["seg_id"]), 0) + 1
        files.setdefault(thumb_ratings.file_name(k), []).append(row)
    return files


def warn_if_mixed(session, ratings, warn):
    """Warns (fn(message)) when `ratings` mix people's and simulated ones."""
    simulated = sum(r.source == "simulated" for r in ratings)
    if simulated and simulated < len(ratings) and warn is not None:
        warn(f"session {session.data['name']!r}: {simulated} of its {len(ratings)} ratings are "
             f"SIMULATED (python -m tools.humaneval simulate --force); --exclude-simulated leaves "
             f"them out")


def rater_rows(session, table):
    """Per rater (rating_stats.rater_table): the crowd participant, progress, flags."""
    participants = store.read_state(session.db_path, session.digest)["participants"]
    return [{"rater": name, "lang": row["lang"],
             "participant": (f"{participants[name]['platform']}:"
                             f"{participants[name]['participant']}"
                             if name in participants else ""),
             "assigned": row["assigned"], "rated": row["rated"],
             "median_seconds": row["median_seconds"], "gold": row["gold"],
             "gold_failed": row["gold_failed"], "same_answer": row["same_answer"],
             "flags": " ".join(row["flags"])} for name, row in table.items()]


def export(session, out, exclude_simulated=False, exclude_flagged=False, warn=None):
    """Writes the export files of `session` into the folder `out`.

    Args:
        session: a `Session`.
        out: the folder (created).
        exclude_simulated: leave out simulated ratings.
        exclude_flagged: leave out the ratings of flagged raters (raters.csv still lists
            them).
        warn: fn(message) for a session mixing people's and simulated ratings.

    Returns:
        {kind: path written}.
    """
    ratings = rating_stats.load_ratings(session, exclude_simulated=exclude_simulated)
    warn_if_mixed(session, ratings, warn)
    table = rating_stats.rater_table(session, ratings)
    if exclude_flagged:
        ratings = [r for r in ratings if not table[r.rater]["flagged"]]
    os.makedirs(out, exist_ok=True)
    rows = [dict(rating_row(session, r), rater_flags=" ".join(table[r.rater]["flags"]))
            for r in ratings]
    paths = {"csv": os.path.join(out, "ratings.csv"),
             "jsonl": os.path.join(out, "ratings.jsonl"),
             "raters": os.path.join(out, "raters.csv")}
    with files.replacing(paths["raters"], newline="") as f:
        writer = csv.DictWriter(f, RATER_COLUMNS)
        writer.writeheader()
        writer.writerows(rater_rows(session, table))
    with files.replacing(paths["csv"], newline="") as f:
        writer = csv.DictWriter(f, RATING_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(dict(row, answer=json.dumps(row["answer"], sort_keys=True))
                         for row in rows)
    with files.replacing(paths["jsonl"]) as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if session.type == "sxs":
        paths["side_by_side"] = side_by_side.write(os.path.join(out, side_by_side.FILE_NAME),
                                                   side_by_side_rows(session, ratings))
    if session.type == "thumb":
        for name, rows in thumb_files(session, ratings).items():
            paths[os.path.splitext(name)[0]] = thumb_ratings.write(os.path.join(out, name), rows)
    return paths
