"""The meta-evaluation's outputs: a text table, and meta.md + meta.csv + meta.png (and with
--curve meta_curve.csv + meta_curve.png: accuracy against the number of references).

A row (tools/analysis/meta.py) is a dict: analysis ("thumb", "side_by_side", "pairwise"),
subset, level ("instance", "system", "system pair", "pair"), target (the human judgement:
P, R, total, delta_sxs, preference), metric, n (points or pairs), the coefficients of
tools/analysis/coefficients.py (None where undefined), "ci" {coefficient: [low, high]} with
the bootstrap, and for accuracies "accuracy" (+ "pairs", "metric_ties", "accuracy_ci", ...).
A system-level row rests on as many points as there are systems: the outputs say so, and below
MIN_SYSTEMS_FOR_INTERVAL systems it has no interval.
"""

import csv
import os

import numpy as np

import files
from evaluation import cli
from tools import cli as tool_cli
from tools.analysis.coefficients import COEFFICIENTS

KEYS = ("analysis", "subset", "level", "target", "metric", "n")
EXTRA = ("accuracy", "pairs", "metric_ties", "draws", "accuracy_min", "accuracy_max",
         "human_ties", "human_ties_handling")
MIN_SYSTEMS_FOR_INTERVAL = 10
# The numbers of references the text shows of a curve (all of them go to meta_curve.csv).
CURVE_POINTS = (1, 2, 3, 5, 10, 20, 24, 48)


def _fmt(value, digits=3):
    return "–" if value is None else f"{value:.{digits}f}"


def _accuracy(row):
    if "accuracy" not in row:
        return None
    return row["accuracy"], row.get("accuracy_ci")


def system_note(rows):
    """A line saying how few systems the system-level rows rest on, or None."""
    counts = sorted({r["n"] for r in rows if r["level"] == "system"})
    if not counts:
        return None
    few = [n for n in counts if n < MIN_SYSTEMS_FOR_INTERVAL]
    return (f"system level: correlations of {' or '.join(map(str, counts))} per-system means "
            f"(n = the number of systems); intervals resample systems and images"
            + (f", none below {MIN_SYSTEMS_FOR_INTERVAL} systems" if few else ""))


def text(rows):
    """The rows as a fixed-width table (coefficients without their intervals)."""
    width = max([16] + [len(r["subset"]) + 1 for r in rows])
    target = max([11] + [len(r["target"]) + 1 for r in rows])
    header = (f"{'analysis':<13}{'subset':<{width}}{'level':<12}{'target':<{target}}"
              f"{'metric':<22}{'n':>6}" + "".join(f"{c:>11}" for c in COEFFICIENTS)
              + f"{'accuracy':>10}")
    lines = [header]
    for row in rows:
        cells = "".join(f"{_fmt(row.get(c)):>11}" for c in COEFFICIENTS)
        acc = _accuracy(row)
        lines.append(f"{row['analysis']:<13}{row['subset']:<{width}}{row['level']:<12}"
                     f"{row['target']:<{target}}{row['metric']:<22}{row['n']:>6}{cells}"
                     f"{_fmt(acc[0]) if acc and acc[0] is not None else '':>10}")
    note = system_note(rows)
    return "\n".join(lines + ([note] if note else []))


def _cell(row, name):
    value = row.get(name)
    ci = row.get("ci", {}).get(name)
    if value is None:
        return "–"
    return f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def markdown(rows, source, confidence):
    """The rows as Markdown, one table per analysis."""
    pct = int(round(confidence * 100))
    lines = [f"# Meta-evaluation of metrics ({source})", "",
             f"Coefficients with [{pct}% cluster bootstrap intervals]; Kendall tau-b counts "
             f"ties in its denominator, tau-c is Stuart's. Accuracy: share of pairs where the "
             f"metric prefers the caption people preferred (metric ties broken at random)."]
    note = system_note(rows)
    if note:
        lines += ["", note[0].upper() + note[1:] + "."]
    for analysis in dict.fromkeys(r["analysis"] for r in rows):
        chosen = [r for r in rows if r["analysis"] == analysis]
        with_accuracy = any("accuracy" in r for r in chosen)
        columns = ["subset", "level", "target", "metric", "n"]
        coefficient_columns = [c for c in COEFFICIENTS if any(c in r for r in chosen)]
        head = columns + coefficient_columns + (["accuracy"] if with_accuracy else [])
        lines += ["", f"## {analysis}", "", "| " + " | ".join(head) + " |",
                  "| " + " | ".join("---" if h in columns[:4] else "---:" for h in head) + " |"]
        for r in chosen:
            cells = [str(r[c]) for c in columns] + [_cell(r, c) for c in coefficient_columns]
            if with_accuracy:
                acc = _accuracy(r)
                cells.append("" if acc is None or acc[0] is None else _fmt(acc[0]) + (
                    f" [{acc[1][0]:.3f}, {acc[1][1]:.3f}]" if acc[1] else ""))
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_csv(path, rows):
    """One line per row: the keys, each coefficient with its interval, the accuracies."""
    header = [*KEYS, *(f"{c}{s}" for c in COEFFICIENTS for s in ("", "_low", "_high")), *EXTRA,
              "accuracy_low", "accuracy_high"]
    with files.replacing(path, newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for r in rows:
            cells = [r[k] for k in KEYS]
            for c in COEFFICIENTS:
                ci = r.get("ci", {}).get(c) or (None, None)
                cells += [r.get(c), *ci]
            cells += [r.get(k) for k in EXTRA]
            cells += list(r.get("accuracy_ci") or (None, None))
            writer.writerow(["" if v is None else (f"{v:.6f}" if isinstance(v, float) else v)
                             for v in cells])


def plot(path, rows, confidence):
    """Horizontal bars: Pearson (or the accuracy of pairwise rows) with its interval."""
    labels, values, errors = [], [], []
    for r in rows:
        if r["analysis"] == "pairwise":
            value, ci = r["accuracy"], r.get("accuracy_ci")
        else:
            value, ci = r.get("pearson"), r.get("ci", {}).get("pearson")
        if value is None:
            continue
        labels.append(f"{r['subset']} | {r['level']} | {r['target']} | {r['metric']}")
        values.append(value)
        errors.append((value - ci[0], ci[1] - value) if ci else (0.0, 0.0))
    fig, ax = cli.pyplot().subplots(figsize=(9, max(2.5, 0.28 * len(labels) + 1)))
    y = np.arange(len(labels))
    ax.barh(y, values, xerr=np.array(errors).T if errors else None, capsize=2,
            color=["tab:orange" if "pairwise" in label else "tab:blue" for label in labels])
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.axvline(0, color="black", linewidth=0.6)
    ax.set_xlabel(f"Pearson r (pairwise: accuracy), {int(round(confidence * 100))}% intervals")
    fig.tight_layout()
    tool_cli.save_figure(fig, path, dpi=120)


def write(out, rows, source, confidence):
    """Writes meta.md, meta.csv and meta.png into `out`; returns {kind: path}."""
    os.makedirs(out, exist_ok=True)
    paths = {kind: os.path.join(out, f"meta.{kind}") for kind in ("md", "csv", "png")}
    files.write_text(paths["md"], markdown(rows, source, confidence))
    write_csv(paths["csv"], rows)
    plot(paths["png"], rows, confidence)
    return paths


def curve_text(curves):
    """Accuracy against the number of references, a few points per metric and kind."""
    lines = []
    for metric, by_kind in curves.items():
        points = [k for k in CURVE_POINTS if k <= len(next(iter(by_kind.values())))]
        lines.append(f"accuracy of {metric} by references per image: "
                     + f"{'refs':<6}" + "".join(f"{k:>7}" for k in points))
        for kind, values in by_kind.items():
            lines.append(f"{'':<{len(lines[-1]) - 6 - 7 * len(points)}}{kind:<6}"
                         + "".join(f"{_fmt(values[k - 1]):>7}" for k in points))
    return "\n".join(lines)


def write_curves(out, curves, source):
    """Writes meta_curve.csv and meta_curve.png into `out`; returns {kind: path}."""
    os.makedirs(out, exist_ok=True)
    paths = {"curve_csv": os.path.join(out, "meta_curve.csv"),
             "curve_png": os.path.join(out, "meta_curve.png")}
    with files.replacing(paths["curve_csv"], newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["metric", "kind", "refs", "accuracy"])
        for metric, by_kind in curves.items():
            for kind, values in by_kind.items():
                writer.writerows([metric, kind, k + 1, "" if np.isnan(v) else f"{v:.6f}"]
                                 for k, v in enumerate(values))
    fig, ax = cli.pyplot().subplots(figsize=(7, 4))
    for metric, by_kind in curves.items():
        for kind, values in by_kind.items():
            ax.plot(np.arange(1, len(values) + 1), values, marker="." if len(values) < 60
                    else None, label=f"{metric} {kind}",
                    linewidth=2 if kind == "all" else 1)
    ax.set_xlabel("references per image")
    ax.set_ylabel("accuracy (share of pairs)")
    ax.set_title(f"Accuracy against the number of references\n{source[:90]}", fontsize=9)
    ax.legend(fontsize=7, ncols=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    tool_cli.save_figure(fig, paths["curve_png"], dpi=120)
    return paths
