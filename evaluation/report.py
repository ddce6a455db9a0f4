"""The reports of one evaluated checkpoint: Table 8 next to the paper's baselines, and others.

Its command line (a report redrawn, or a predictions file scored into a results folder) is
tools/table8.py.
"""

import csv
import io
import math
import os
import pathlib
import textwrap

import errors
import files
import paper_tables
from data import languages
from evaluation import cli
from formats import csv_table
from formats import per_image as per_image_format
from formats import predictions as predictions_format
from formats import scores as scores_format

BASELINES = ("BB+CC", "BB", "Bg", "Lg")
PAPER_SCORES_FILE = paper_tables.CIDER_PER_LANGUAGE
PAPER_COLUMNS = {"xm3600": "cider_xm3600", "coco_dev": "cider_coco_dev"}


def paper_reference_dir(override=None):
    """Folder with the paper's tables: `override`, else the repository's `paper_tables/`."""
    return pathlib.Path(override) if override else paper_tables.FOLDER


def read_paper_scores(path):
    """The paper's per-language CIDEr (cider_per_language.csv) as
    {"xm3600": {model: {lang: score}}, "coco_dev": {...}}; raises errors.InputError (file:line)."""
    out = {kind: {} for kind in PAPER_COLUMNS}
    header, rows = csv_table.read(path, errors.InputError, "the paper's scores")
    if missing := [c for c in ("model", "lang", *PAPER_COLUMNS.values()) if c not in header]:
        raise errors.InputError(f"{path}: missing column(s) {', '.join(missing)}")
    first = {}
    for lineno, row in rows:
        if row["lang"] not in languages.XM3600_LANGS:
            raise errors.InputError(f"{path}:{lineno}: unknown language {row['lang']!r}")
        if (seen := first.setdefault((row["model"], row["lang"]), lineno)) != lineno:
            raise errors.InputError(f"{path}:{lineno}: model {row['model']!r} in "
                                    f"{row['lang']!r} again (first at line {seen})")
        for kind, column in PAPER_COLUMNS.items():
            out[kind].setdefault(row["model"], {})[row["lang"]] = csv_table.number(
                row[column], f"{path}:{lineno}: column {column}", errors.InputError)
    return out


def averages(scores):
    """The paper's averages of {lang: score}: over the 35 training languages (no quz) and all 36.
    Returns {"avg_35", "avg_36", "missing_35", "missing_36"}: an average is None when a
    language it needs is missing, and its `missing_*` says which."""
    out = {}
    for count, langs in ((35, languages.TRAIN_35L_LANGS), (36, languages.XM3600_LANGS)):
        missing = tuple(lang for lang in langs if lang not in scores)
        out[f"avg_{count}"] = None if missing else sum(scores[lang] for lang in langs) / count
        out[f"missing_{count}"] = missing
    return out


def fmt(value):
    """A score as the tables print it (3 decimals; None: a dash)."""
    return "–" if value is None else f"{value:.3f}"


def _table(title, baselines, scores, name, extra=None, with_quz=True):
    """One Markdown table: a row per language, then the averages (`extra`: (heading, {lang:
    value}) for a last column; `with_quz`: whether the 36-language average applies)."""
    models = [m for m in BASELINES if m in baselines]
    header = ["lang", *models, name] + ([extra[0]] if extra else [])
    lines = [f"## {title}", "", _row(header), "| --- |" + " ---: |" * (len(header) - 1)]
    for lang in scores_format.ordered(scores):
        cells = [lang] + [fmt(baselines[m].get(lang)) for m in models] + [fmt(scores[lang])]
        lines.append(_row(cells + ([str(extra[1][lang])] if extra else [])))
    own = averages(scores)
    labels = {35: "average, 35 languages (no quz)", 36: "average, 36 languages"}
    counts = (35, 36) if with_quz else (35,)
    for count in counts:
        cells = [f"**{labels[count]}**"] + [fmt(averages(baselines[m])[f"avg_{count}"])
                                             for m in models] + [fmt(own[f"avg_{count}"])]
        lines.append(_row(cells + ([""] if extra else [])))
    for count in counts:
        if missing := own[f"missing_{count}"]:
            lines.append(f"\n{name}: no {count}-language average; " + (
                f"missing: {', '.join(missing)}." if len(missing) <= 10
                else f"only {len(scores)} language(s) scored."))
    return lines + [""]


def _row(cells):
    return "| " + " | ".join(cells) + " |"


def describe_decoding(decoding):
    """How captions were decoded, in words, from scores.json's "decoding", or "" when unknown."""
    if not isinstance(decoding, dict) or "method" not in decoding:
        return ""
    if decoding["method"] == "beam":
        return (f"beam search ({decoding.get('beam_size')} beams, length penalty alpha "
                f"{decoding.get('alpha')})")
    details = ", ".join(f"{k} {v}" for k, v in decoding.items() if k != "method")
    return f"{decoding['method']} decoding" + (f" ({details})" if details and
                                                decoding["method"] != "greedy" else "")


_BASELINE_COLORS = {"BB+CC": "#756bb1", "BB": "#c6dbef", "Bg": "#6baed6", "Lg": "#2171b5"}
_MODEL_COLOR = "#e6550d"
_GROUPS_PER_ROW = 19


def bars_png(scores, baselines, name):
    """A grouped bar chart (a group per language) of `scores` and `baselines`, as PNG bytes."""
    groups = scores_format.ordered(scores)
    tables = [(m, baselines[m], _BASELINE_COLORS[m]) for m in BASELINES if m in baselines]
    with_avg = averages(scores)["avg_35"] is not None
    series = [(label, [table.get(lang) for lang in groups]
               + ([averages(table)["avg_35"]] if with_avg else []), color)
              for label, table, color in [*tables, (name, scores, _MODEL_COLOR)]]
    groups = groups + ["avg35"] * with_avg
    # Two rows for all 36 languages, so that the labels stay legible at page width.
    rows = math.ceil(len(groups) / _GROUPS_PER_ROW)
    per_row = math.ceil(len(groups) / rows)
    fig_width = max(6.0, 0.6 * per_row + 1.5)
    plt = cli.pyplot()
    fig, axes = plt.subplots(rows, 1, squeeze=False, sharey=True,
                             figsize=(fig_width, 3.2 * rows + 0.8))
    top = max(v for _, values, _ in series for v in values if v is not None)
    width = 0.8 / len(series)
    for r, ax in enumerate(axes[:, 0]):
        first = r * per_row
        row_groups = groups[first:first + per_row]
        for i, (label, values, color) in enumerate(series):
            offset = (i - (len(series) - 1) / 2) * width
            shown = [(g + offset, v) for g, v in enumerate(values[first:first + per_row])
                     if v is not None]
            ax.bar([x for x, _ in shown], [v for _, v in shown], width=width,
                   label=label, color=color, edgecolor="none")
        ax.set_xticks(range(len(row_groups)), row_groups, fontsize=10)
        ax.set(xlim=(-0.6, per_row - 0.4), ylim=(0, top * 1.08), ylabel="CIDEr-D")
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    # Wrapped to the figure's width (about 8 characters an inch at this size): a narrow
    # chart of a few languages would cut a one-line title off.
    title = f"CIDEr-D on XM3600 per language: {name} vs the paper's baselines"
    axes[0, 0].set_title(textwrap.fill(title, width=int(fig_width * 8)), fontsize=11)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    # As many legend entries a row as the width holds (about 12 characters an inch).
    entry = max(len(label) for label in labels) + 4
    ncol = max(1, min(len(series), int(fig_width * 12) // entry))
    legend_rows = math.ceil(len(series) / ncol)
    fig.legend(handles, labels, ncol=ncol, loc="lower center", frameon=False, fontsize=10)
    fig.tight_layout(rect=(0, 0.07 * legend_rows / rows, 1, 1))
    png = io.BytesIO()
    try:
        fig.savefig(png, format="png", dpi=110)
    finally:
        plt.close(fig)
    return png.getvalue()


def write_report(results_dir, scores, num_images, *, coco_dev_scores=None, name="this model",
                 step=None, config=None, paper_dir=None, extra=None):
    """Writes scores.json, scores.csv, table.md and bars.png to results_dir; returns {kind: path}.
    Everything is checked and drawn first: bad input (formats.scores.ScoresError,
    errors.InputError) writes nothing."""
    summary = scores_format.make("cider-d", scores, num_images, step=step, config=config,
                                 coco_dev_scores=coco_dev_scores, extra=extra)
    scores, num_images = summary["scores"], summary["num_images"]
    coco_dev_scores = summary.get("coco_dev_scores")
    path = paper_reference_dir(paper_dir) / PAPER_SCORES_FILE
    paper, note = (read_paper_scores(path), []) if path.is_file() else (
        {}, [f"Note: the paper's baselines are left out: {path} not found.", ""])
    intro = ("CIDEr-D on the paper's scale (BB+CC, English, XM3600 = 0.584); baselines "
             "from Thapliyal et al. (EMNLP 2022), Tables 8-11.")
    if step is not None:
        intro += f" Checkpoint step {step}."
    if decoding := describe_decoding(summary.get("decoding")):
        intro += f" Captions by {decoding}."
    table = [f"# CIDEr-D on XM3600: {name}", "", intro, "", *note] + _table(
        "XM3600 (human references)", paper.get("xm3600", {}), scores, name,
        extra=("images", num_images))
    if coco_dev_scores:
        table += _table("COCO-dev (machine-translated references)",
                        paper.get("coco_dev", {}), coco_dev_scores, name, with_quz=False)
    return _write_files(results_dir, summary, scores_format.file_name(), {
        "csv": ("scores.csv", _scores_csv(scores, coco_dev_scores)),
        "table": ("table.md", "\n".join(table)),
        "bars": ("bars.png", bars_png(scores, paper.get("xm3600", {}), name))})


def write_metric_report(results_dir, outputs, metric, title, scores, num_images, *,
                        name="this model", step=None, config=None, with_quz=True, extra=None):
    """Writes an evaluator's scores_<outputs>.json and table_<outputs>.md; returns {kind: path}."""
    if not outputs:
        raise ValueError("an evaluator's report needs its outputs name (scores.json and "
                         "table.md are XM3600's, write_report)")
    summary = scores_format.make(metric, scores, num_images, step=step, config=config,
                                 extra=extra)
    heading = f"# {title}: {name}" + (f", checkpoint step {step}" if step is not None else "")
    decoding = describe_decoding(summary.get("decoding"))
    lines = [heading, ""] + ([f"Captions by {decoding}.", ""] if decoding else []) + _table(
        title, {}, summary["scores"], name, extra=("images", summary["num_images"]),
        with_quz=with_quz)
    return _write_files(results_dir, summary, scores_format.file_name(outputs),
                        {"table": (f"table_{outputs}.md", "\n".join(lines))})


def _write_files(results_dir, summary, json_name, contents):
    """Writes `summary` as `json_name`, then {kind: (file name, text or bytes)}, into
    results_dir (made if missing); returns {kind: path}, "json" first."""
    results_dir = pathlib.Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": scores_format.write(results_dir / json_name, summary)}
    for kind, (name, content) in contents.items():
        paths[kind] = results_dir / name
        write = files.write_bytes if isinstance(content, bytes) else files.write_text
        write(paths[kind], content)
    return paths


def _scores_csv(scores, coco_dev_scores):
    columns = {"cider_xm3600": scores}
    if coco_dev_scores:
        columns["cider_coco_dev"] = coco_dev_scores
    text = io.StringIO(newline="")
    csv.writer(text).writerows([["lang", *columns]] + [
        [lang] + [by_lang.get(lang, "") for by_lang in columns.values()]
        for lang in scores_format.ordered(set(scores) | set(coco_dev_scores or {}))])
    return text.getvalue()


def write_outputs(folder, by_lang, outputs=""):
    """An evaluator's predictions file per language and its per-image scores, from {lang:
    (image keys, captions, per-image scores)}."""
    for lang, (keys, captions, _) in by_lang.items():
        predictions_format.write(os.path.join(folder, predictions_format.file_name(lang, outputs)),
                                 {lang: dict(zip(keys, captions, strict=True))})
    per_image_format.write(os.path.join(folder, per_image_format.file_name(outputs)), {
        lang: dict(zip(keys, per_image.tolist(), strict=True))
        for lang, (keys, _, per_image) in by_lang.items()})
