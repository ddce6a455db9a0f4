"""The report of one or more sessions: Markdown + CSV + PNG, Table 6 by analysis/correlate.

    python -m tools.humaneval analyze --session S1 [--session S2 ...] --out DIR

writes to DIR:

- `report.md`: everything below in tables, with the paper's values beside ours where it has
  them; its first line says when any rating is SIMULATED.
- `sxs.csv`: per sxs session and language (and "all"): images, incomplete items, Wins,
  Losses, delta S x S and its bootstrap interval (tools/humaneval/rating_stats.delta_sxs).
- `side_by_side.csv`: the paper's side_by_side.csv layout (tools/formats/side_by_side.py), one row
  per sxs session and language (tools/humaneval/export.side_by_side_rows; an empty delta_sxs where
  a language has no complete rating yet); `correlations.csv`: Table 6 computed from it by
  tools/analysis/correlate.py (`table6`), laid out like the paper's correlations.csv.
  An evaluation is a (session, language) with ratings; each counts twice (as given and
  flipped), as in the paper. A cell of fewer than MIN_EVALUATIONS evaluations is left empty
  (two evaluations are four points on two lines through the origin), and with no cell left
  there is no Table 6 at all: the report says how many evaluations it has and why.
- `agreement.csv`: Krippendorff's alpha per session, language and field.
- `raters.csv`: per-rater statistics, gold-check failure rates and flags (gold, fast,
  straight: rating_stats); `exclude_flagged` (`analyze --exclude-flagged`) computes
  everything else without the flagged raters' ratings, and the report's first lines say which
  raters are flagged either way.
- quality sessions: `quality_table2.csv`, the paper's Table 2 (each caption's rating is the
  median of its raters', rating_stats.quality_level; cumulative %Good+, %Med+ and %Bad per
  language and model), beside `quality.csv`, each label's share of all ratings.
- `thumb.csv`: rubric means per language and model.
- `sxs.png` (delta S x S per language with intervals; the "all" bar is the mean of the
  languages it names) and `correlation.png` (delta S x S against delta CIDEr on XM3600, over
  the paper's 65 evaluations).

`exclude_simulated` (`analyze --exclude-simulated`) leaves out the ratings of
`python -m tools.humaneval simulate`; otherwise a report with any says so on its first line.
"""

import collections
import csv
import os

import numpy as np

import files
from errors import InputError
from evaluation import report as eval_report
from formats import csv_table
from tools.analysis import correlate
from tools.formats import side_by_side, thumb_ratings
from tools.humaneval import export, plots, rating_stats, scales

TABLE6_COLUMNS = ("delta_cider_xm600", "delta_cider_xm3600", "delta_cider_coco_dev")
MIN_EVALUATIONS = 3  # a correlation over fewer evaluations (2 x as many points) is not shown
TABLE2_COLUMNS = ("lang", "system", "captions", "good_plus", "med_plus", "bad", "nei",
                  "incomplete")


def _write_csv(path, columns, rows):
    with files.replacing(path, newline="") as f:
        writer = csv.DictWriter(f, columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if row.get(k) is None else row[k] for k in columns})
    return path


def _fmt(value, digits=1):
    return "–" if value is None else f"{value:.{digits}f}"


def read_paper_correlations(paper_dir=None):
    """{(coefficient, languages): {column: value}} of the paper's correlations.csv, or {}."""
    path = eval_report.paper_reference_dir(paper_dir) / "correlations.csv"
    if not path.is_file():
        return {}
    header, rows = csv_table.read(path, InputError, "the paper's correlations")
    missing = [c for c in ("coefficient", "languages", *TABLE6_COLUMNS) if c not in header]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}")
    return {(row["coefficient"], row["languages"]): {
        c: csv_table.number(row[c], f"{path}:{lineno}: column {c}", InputError)
        for c in TABLE6_COLUMNS} for lineno, row in rows}


def table6_rows(result):
    """Table 6 (tools/analysis/correlate.table6) as rows of the paper's correlations.csv;
    a cell of fewer than MIN_EVALUATIONS evaluations (2 points each) is None."""
    rows = []
    for coefficient in correlate.COEFFICIENTS:
        for set_name in correlate.SETS:
            counts = result[set_name]["n"]
            row = {"coefficient": coefficient, "languages": set_name,
                   "n_points": counts.get("delta_cider_xm3600", max(counts.values()))}
            for column in TABLE6_COLUMNS:
                value = result[set_name][coefficient].get(column)
                if counts.get(column, 0) < 2 * MIN_EVALUATIONS:
                    value = None
                row[column] = None if value is None else round(value, 4)
            rows.append(row)
    return rows


def _table6_markdown(result, paper):
    lines = ["| coefficient | languages | n | " + " | ".join(
        c.replace("delta_cider_", "ΔCIDEr ") for c in TABLE6_COLUMNS) + " |",
        "| --- | --- | ---: |" + " ---: |" * len(TABLE6_COLUMNS)]
    for row in table6_rows(result):
        cells = []
        for column in TABLE6_COLUMNS:
            ours = _fmt(row[column], 2)
            theirs = paper.get((row["coefficient"], row["languages"]), {}).get(column)
            cells.append(ours + ("" if theirs is None else f" ({theirs:.2f})"))
        lines.append(f"| {row['coefficient']} | {row['languages']} | {row['n_points']} | "
                     + " | ".join(cells) + " |")
    return lines


def _sxs_section(session, ratings, resamples, seed, sxs_rows):
    deltas = rating_stats.delta_sxs(session, ratings, resamples=resamples, seed=seed)
    m1, m2 = session.systems["m1"]["name"], session.systems["m2"]["name"]
    lines = [f"Side by side, m2 = {m2} against m1 = {m1} (majority of "
             f"{session.replication} raters; 95% bootstrap intervals over images):", "",
             "| lang | images | incomplete | Wins % | Losses % | ΔS×S | interval |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for lang, row in deltas.items():
        sxs_rows.append(dict(row, session=session.data["name"], m2=m2, m1=m1, lang=lang,
                             delta_sxs=row["delta"], averaged=" ".join(row["languages"])))
        interval = "–" if row["low"] is None else f"[{row['low']:.1f}, {row['high']:.1f}]"
        name = lang
        if lang == "all":
            rated = row["languages"]
            name = (f"**mean of the {len(rated)} rated language(s) of {len(session.langs)} "
                    f"({', '.join(rated)})**" if rated else "**no language rated yet**")
        lines.append(f"| {name} | "
                     f"{row['images']} | {row['incomplete']} | {_fmt(row['wins'])} | "
                     f"{_fmt(row['losses'])} | {_fmt(row['delta'])} | {interval} |")
    return lines + [""]


def _quality_rows(session, ratings):
    counts = collections.defaultdict(collections.Counter)
    for r in ratings:
        if not r.item.is_gold:
            counts[(r.item.lang, r.item.sources[0]["system"])][r.answer["quality"]] += 1
    rows = []
    for (lang, system), counter in sorted(counts.items()):
        total = sum(counter.values())
        row = {"session": session.data["name"], "lang": lang,
               "system": session.systems[system]["name"], "ratings": total}
        row.update({label: round(100 * counter[label] / total, 1)
                    for label, _, _ in scales.QUALITY_CHOICES})
        rows.append(row)
    return rows


def _quality_table2_lines(session, ratings, table2_rows):
    """The paper's Table 2 for one quality session (rows added to `table2_rows`)."""
    rows = []
    for row in rating_stats.quality_table2(session, ratings):
        row = dict(row, session=session.data["name"],
                   system=session.systems[row["system"]]["name"])
        table2_rows.append(row)
        rows.append({k: (round(v, 1) if isinstance(v, float) else v) for k, v in row.items()})
    lines = [f"Quality as the paper's Table 2: each caption's rating is the median of its "
             f"{session.replication} raters' (Not-Enough-Info left out of the median; the "
             f"lower middle value of an even count); %Good+ = Excellent or Good, %Med+ = "
             f"Excellent, Good or Medium, %Bad, in percent of the captions with a median "
             f"(nei: captions rated Not-Enough-Info by all; incomplete: fewer than "
             f"{session.replication} ratings, left out):", ""]
    return lines + _summary_lines(TABLE2_COLUMNS, rows)


def _thumb_rows(session, ratings):
    values = collections.defaultdict(list)
    for r in ratings:
        if not r.item.is_gold:
            values[(r.item.lang, r.item.sources[0]["system"])].append(
                dict(r.answer, total=thumb_ratings.total(r.answer)))
    rows = []
    for (lang, system), answers in sorted(values.items()):
        row = {"session": session.data["name"], "lang": lang,
               "system": session.systems[system]["name"], "ratings": len(answers)}
        row.update({f: round(float(np.mean([a[f] for a in answers])), 3)
                    for f in (*thumb_ratings.FIELDS, "total")})
        rows.append(row)
    return rows


def _summary_lines(columns, rows):
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    lines += ["| " + " | ".join("–" if row.get(c) is None else str(row[c]) for c in columns)
              + " |" for row in rows]
    return lines + [""]


def _rater_lines(session, raters, rater_rows):
    columns = ("rater", "lang", "rated", "median_seconds", "mean_score", "majority_agreement",
               "gold", "gold_failed", "same_answer", "flagged")
    rows = []
    for name, row in raters.items():
        row = dict(row, session=session.data["name"], rater=name, flags=" ".join(row["flags"]))
        rater_rows.append(row)
        rows.append({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()})
        rows[-1]["rated"] = f"{row['rated']} / {row['assigned']}"
        rows[-1]["flagged"] = f"**FLAGGED: {row['flags']}**" if row["flagged"] else row["flags"]
    return _summary_lines(columns, rows)


def _table6_section(paths, out, side_rows, paper_dir):
    """Writes side_by_side.csv, and Table 6 when there are enough evaluations; returns the
    report's lines and the evaluations with ratings."""
    paths["side_by_side"] = side_by_side.write(
        os.path.join(out, side_by_side.FILE_NAME), side_rows)
    evaluations, columns = side_by_side.read(paths["side_by_side"])
    rated = [e for e in evaluations if e.delta_sxs is not None]
    unrated = [f"{e.m2} vs {e.m1} {e.lang}" for e in evaluations if e.delta_sxs is None]
    lines = ["## Correlation with delta CIDEr (the paper's Table 6)", "",
             f"{len(rated)} side-by-side evaluation(s) with ratings"
             + (f" ({len(unrated)} without: {', '.join(unrated)})" if unrated else "")
             + ", each counted twice (as given and flipped). ΔCIDEr xm600 is on the rated "
             "images (per-image CIDEr-D), xm3600 on all images (scores.json)."]
    result = correlate.table6(rated, columns)
    rows = table6_rows(result)
    if all(row[c] is None for row in rows for c in TABLE6_COLUMNS):
        lines += ["", f"No Table 6: a correlation needs at least {MIN_EVALUATIONS} evaluations "
                  f"with ratings in a set of languages (all, ext, core); analyze more sessions "
                  f"(model pairs) together.", ""]
        return lines, rated
    paths["correlations"] = _write_csv(
        os.path.join(out, "correlations.csv"),
        ("coefficient", "languages", "n_points", *TABLE6_COLUMNS), rows)
    paper = read_paper_correlations(paper_dir)
    lines[-1] += (f" A cell of fewer than {MIN_EVALUATIONS} evaluations is left empty (–)."
                  + (" The paper's values in parentheses." if paper else ""))
    return lines + [""] + _table6_markdown(result, paper) + [""], rated


def _session_lines(session, ratings, table, resamples, seed, rows):
    """The report's section of one session; its CSV rows go into `rows` (lists by file)."""
    lines = []
    if session.type == "sxs":
        lines += _sxs_section(session, ratings, resamples, seed, rows["sxs"])
        rows["side"] += export.side_by_side_rows(session, ratings)
    elif session.type == "quality":
        lines += _quality_table2_lines(session, ratings, rows["table2"])
        quality = _quality_rows(session, ratings)
        rows["quality"] += quality
        lines += ["Each label's share of all ratings (%; every rating counted once):", ""]
        lines += _summary_lines(("lang", "system", "ratings", *scales.QUALITY_VALUES), quality)
    else:
        thumb = _thumb_rows(session, ratings)
        rows["thumb"] += thumb
        lines += _summary_lines(("lang", "system", "ratings", *thumb_ratings.FIELDS, "total"),
                                thumb)
    agreement = rating_stats.agreement_table(session, ratings)
    lines += ["Agreement (Krippendorff's alpha over test items):", "",
              "| lang | field | level | alpha | items | ratings |",
              "| --- | --- | --- | ---: | ---: | ---: |"]
    for (lang, field), row in agreement.items():
        rows["agreement"].append(dict(row, session=session.data["name"], lang=lang,
                                      field=field))
        lines.append(f"| {lang} | {field} | {row['level']} | {_fmt(row['alpha'], 3)} | "
                     f"{row['units']} | {row['values']} |")
    checks = session.checks
    lines += ["", f"Raters, flagged (rating_stats.FLAGS) for: gold, failing more than "
              f"{session.data['gold']['max_failure_rate']:.0%} of their attention checks; "
              f"fast, a median below {checks['min_seconds']:g} s per item; straight, one "
              f"answer to {checks['straight_share']:.0%} or more of their items (from "
              f"{checks['min_ratings']} ratings on); incomplete, some but not all of their "
              f"items rated:", ""]
    return lines + _rater_lines(session, table, rows["raters"])


def _write_tables(out, paths, rows):
    """The CSV files of the report's rows."""
    tables = (("sxs", ("session", "m2", "m1", "lang", "images", "incomplete", "wins", "losses",
                       "delta_sxs", "low", "high", "averaged")),
              ("agreement", ("session", "lang", "field", "level", "alpha", "units", "values")),
              ("raters", ("session", "rater", "lang", "assigned", "rated", "median_seconds",
                          "mean_score", "majority_agreement", "gold", "gold_failed",
                          "gold_failure_rate", "same_answer", "flags", "flagged")),
              ("quality", ("session", "lang", "system", "ratings", *scales.QUALITY_VALUES)),
              ("table2", ("session", *TABLE2_COLUMNS)),
              ("thumb", ("session", "lang", "system", "ratings", *thumb_ratings.FIELDS,
                         "total")))
    names = {"table2": "quality_table2"}
    for key, columns in tables:
        if rows[key] or key in ("agreement", "raters"):
            name = names.get(key, key)
            paths[name] = _write_csv(os.path.join(out, f"{name}.csv"), columns, rows[key])


def write_report(sessions, out, resamples=1000, seed=0, paper_dir=None,
                 exclude_simulated=False, exclude_flagged=False):
    """Analyzes `sessions` together and writes the report files into `out`.

    Args:
        sessions: `Session`s (any types; sxs ones feed Table 6).
        out: the report folder (created).
        resamples: bootstrap resamples.
        seed: bootstrap seed.
        paper_dir: the paper's tables (tools/analysis/report.paper_reference_dir).
        exclude_simulated: leave out the ratings of `python -m tools.humaneval simulate`.
        exclude_flagged: leave out the ratings of flagged raters (rating_stats.FLAGS); the
            raters' table still lists them, flagged.

    Returns:
        {kind: path written}.
    """
    os.makedirs(out, exist_ok=True)
    paths, lines, rows = {}, [], collections.defaultdict(list)
    simulated, flagged = False, []
    for session in sessions:
        ratings = rating_stats.load_ratings(session, exclude_simulated=exclude_simulated)
        table = rating_stats.rater_table(session, ratings)
        names = [name for name, row in table.items() if row["flagged"]]
        flagged += [f"{session.data['name']}/{name}" for name in names]
        if exclude_flagged:
            ratings = [r for r in ratings if r.rater not in names]
        simulated |= any(r.source == "simulated" for r in ratings)
        lines += [f"## Session {session.data['name']} ({session.type}, "
                  f"{', '.join(session.langs)}; {len(ratings)} ratings)", ""]
        lines += _session_lines(session, ratings, table, resamples, seed, rows)
    if rows["side"]:
        table6_lines, rated = _table6_section(paths, out, rows["side"], paper_dir)
        lines += table6_lines
        paths["sxs_png"] = plots.sxs_bars(os.path.join(out, "sxs.png"), rows["sxs"])
        paths["correlation_png"] = plots.correlation_scatter(
            os.path.join(out, "correlation.png"), rated,
            eval_report.paper_reference_dir(paper_dir) / side_by_side.FILE_NAME)
    _write_tables(out, paths, rows)
    head = ["# Human evaluation report", ""]
    if simulated:
        head += ["**SIMULATED ratings** (python -m tools.humaneval simulate) are among these: this "
                 "report shows the pipeline, not what people think of the captions "
                 "(`analyze --exclude-simulated` leaves them out).", ""]
    if flagged:
        head += [f"**Flagged raters' ratings left out** ({len(flagged)}: {', '.join(flagged)})."
                 if exclude_flagged else
                 f"**{len(flagged)} flagged rater(s)** among these ({', '.join(flagged)}); "
                 f"`analyze --exclude-flagged` computes the report without them.", ""]
    paths["markdown"] = os.path.join(out, "report.md")
    files.write_text(paths["markdown"], "\n".join(head + lines) + "\n")
    return paths
