"""The meta-evaluation's outputs: a text table, and meta.md + meta.csv + meta.png.

A row (evaluation/analysis/meta.py) is a dict: analysis ("thumb", "side_by_side", "pairwise"),
subset, level ("instance", "system", "system pair", "pair"), target (the human judgement:
P, R, total, delta_sxs, preference), metric, n (points or pairs), the coefficients of
evaluation/analysis/coefficients.py (None where undefined), "ci" {coefficient: [low, high]} with
the bootstrap, and for accuracies "accuracy" (+ "pairs", "metric_ties", "accuracy_ci", ...).
"""

import csv
import os

import matplotlib

matplotlib.use("Agg")  # headless: set before pyplot is imported
import matplotlib.pyplot as plt
import numpy as np

from evaluation.analysis.coefficients import COEFFICIENTS

KEYS = ("analysis", "subset", "level", "target", "metric", "n")
EXTRA = ("accuracy", "pairs", "metric_ties", "draws", "accuracy_min", "accuracy_max")


def _fmt(value, digits=3):
    return "–" if value is None else f"{value:.{digits}f}"


def _accuracy(row):
    if "accuracy" not in row:
        return None
    return row["accuracy"], row.get("accuracy_ci")


def text(rows):
    """The rows as a fixed-width table (coefficients without their intervals)."""
    header = (f"{'analysis':<13}{'subset':<16}{'level':<12}{'target':<11}{'metric':<22}"
              f"{'n':>6}" + "".join(f"{c:>11}" for c in COEFFICIENTS) + f"{'accuracy':>10}")
    lines = [header]
    for row in rows:
        cells = "".join(f"{_fmt(row.get(c)):>11}" for c in COEFFICIENTS)
        acc = _accuracy(row)
        lines.append(f"{row['analysis']:<13}{row['subset']:<16}{row['level']:<12}"
                     f"{row['target']:<11}{row['metric']:<22}{row['n']:>6}{cells}"
                     f"{_fmt(acc[0]) if acc else '':>10}")
    return "\n".join(lines)


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
                cells.append("" if acc is None else _fmt(acc[0]) + (
                    f" [{acc[1][0]:.3f}, {acc[1][1]:.3f}]" if acc[1] else ""))
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_csv(path, rows):
    """One line per row: the keys, each coefficient with its interval, the accuracies."""
    header = [*KEYS, *(f"{c}{s}" for c in COEFFICIENTS for s in ("", "_low", "_high")), *EXTRA,
              "accuracy_low", "accuracy_high"]
    with open(path, "w", newline="", encoding="utf-8") as f:
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
    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.28 * len(labels) + 1)))
    y = np.arange(len(labels))
    ax.barh(y, values, xerr=np.array(errors).T if errors else None, capsize=2,
            color=["tab:orange" if "pairwise" in label else "tab:blue" for label in labels])
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.axvline(0, color="black", linewidth=0.6)
    ax.set_xlabel(f"Pearson r (pairwise: accuracy), {int(round(confidence * 100))}% intervals")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write(out, rows, source, confidence):
    """Writes meta.md, meta.csv and meta.png into `out`; returns {kind: path}."""
    os.makedirs(out, exist_ok=True)
    paths = {kind: os.path.join(out, f"meta.{kind}") for kind in ("md", "csv", "png")}
    with open(paths["md"], "w", encoding="utf-8") as f:
        f.write(markdown(rows, source, confidence))
    write_csv(paths["csv"], rows)
    plot(paths["png"], rows, confidence)
    return paths
