"""The report's figures: delta S x S per language, and delta S x S against delta CIDEr."""

import matplotlib

matplotlib.use("Agg")  # headless: set before pyplot is imported
import matplotlib.pyplot as plt
import numpy as np

import files
from tools.analysis import correlate
from tools.formats import side_by_side

_CORE_COLOR, _EXT_COLOR, _PAPER_COLOR = "#2171b5", "#e6550d", "#bdbdbd"


def sxs_bars(path, rows):
    """Bars of delta S x S per (session, language) with their bootstrap intervals.

    Args:
        path: the PNG file.
        rows: dicts with session, lang, delta_sxs, low, high and, for the "all" rows, the
            languages they average ("averaged"; study_report.py's sxs rows). An "all" bar is
            labelled "mean of" its languages, so a mean of fewer languages than the session
            has says so.

    Returns:
        `path`.
    """
    rows = [r for r in rows if r["delta_sxs"] is not None]
    fig, ax = plt.subplots(figsize=(max(5.0, 0.55 * len(rows) + 2), 3.6))
    x = np.arange(len(rows))
    values = [r["delta_sxs"] for r in rows]
    ax.bar(x, values, color=[_CORE_COLOR if r["lang"] != "all" else "#555555" for r in rows])
    has = [i for i, r in enumerate(rows) if r["low"] is not None]
    if has:
        low = [values[i] - rows[i]["low"] for i in has]
        high = [rows[i]["high"] - values[i] for i in has]
        ax.errorbar(has, [values[i] for i in has], yerr=[low, high], fmt="none",
                    ecolor="black", capsize=3, linewidth=1)
    many = len({r["session"] for r in rows}) > 1
    ax.set_xticks(x)
    labels = [r["lang"] if r["lang"] != "all" else "mean of\n" + ",".join(r["averaged"].split())
              for r in rows]
    ax.set_xticklabels([f"{r['session']}\n{label}" if many else label
                        for r, label in zip(rows, labels, strict=True)],
                       fontsize=8 if many else 10)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_ylabel("ΔS×S (wins − losses, %)")
    ax.set_title("ΔS×S per language (majority of raters, 95% intervals)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    with files.replacing(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)
    return path


def correlation_scatter(path, evaluations, paper_file=None, column="delta_cider_xm3600"):
    """delta S x S against delta CIDEr, each evaluation as given and flipped, as Table 6 uses.

    Args:
        path: the PNG file.
        evaluations: `tools.formats.side_by_side.Evaluation`s (this study).
        paper_file: the paper's side_by_side.csv, drawn in grey behind when it exists.
        column: the delta CIDEr column on the x axis.

    Returns:
        `path`.
    """
    fig, ax = plt.subplots(figsize=(5.6, 4.4))
    if paper_file is not None and paper_file.is_file():
        paper, _ = side_by_side.read(paper_file)
        sxs, cider = correlate.flipped_points(paper, column)
        ax.scatter(cider, sxs, s=12, color=_PAPER_COLOR, label="paper (Tables 5, 7)")
    for set_name, color in (("core", _CORE_COLOR), ("ext", _EXT_COLOR)):
        chosen = [e for e in evaluations if e.set == set_name]
        sxs, cider = correlate.flipped_points(chosen, column)
        if len(sxs):
            ax.scatter(cider, sxs, s=28, color=color, label=f"this study, {set_name}",
                       edgecolor="black", linewidth=0.4)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.axvline(0, color="black", linewidth=0.6)
    ax.set_xlabel(f"ΔCIDEr ({column.replace('delta_cider_', '')})")
    ax.set_ylabel("ΔS×S (%)")
    ax.set_title("Human side by side against CIDEr (as given and flipped)")
    if ax.get_legend_handles_labels()[0]:  # no point at all: no empty legend
        ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    with files.replacing(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)
    return path
