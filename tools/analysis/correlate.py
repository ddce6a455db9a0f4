"""Correlation of human side-by-side judgements with delta CIDEr (Table 6 of the XM3600 paper).

    python -m tools.analysis.correlate --side-by-side FILE [--json]

FILE is a CSV laid out like the paper's side_by_side.csv: one row per side-by-side human
evaluation of model m2 against model m1 in one language, with columns

    m2, m1, lang, set, delta_sxs, delta_cider_<dataset>, ...

where `set` is core (en, es, hi, zh) or ext, delta_sxs is wins minus losses of m2 in percent,
and each delta_cider_* column is CIDEr(m2) - CIDEr(m1) on some reference set (the paper
has xm600, xm3600 and coco_dev). As in Sec. 3.3 of the paper, every evaluation counts twice:
as given and flipped, (-delta_sxs, -delta_cider), so the correlations do not depend on which
model was called m1. Pearson, Spearman and Kendall's tau-b (scipy.stats, ties counted in
tau-b's denominator) between delta_sxs and each delta CIDEr column, over all, ext and core
evaluations. An empty or NA cell is a missing value; it drops that evaluation from the
columns it touches only (pairwise deletion), and the number of points n is reported.

The file is read by tools/formats/side_by_side.py. Table 6 is computed here, by `table`, and only
here: this command prints its three coefficients, and the side-by-side path of the
meta-evaluation tool (`python -m tools.analysis.meta --side-by-side FILE`) prints the same
`table` with tau-c and cluster bootstrap intervals (an evaluation and its flipped twin are
drawn together). Bad input is one `error:` line, exit status 2.

On the paper's side_by_side.csv this reproduces every value of its correlations.csv within
0.01; four cells round to another second decimal (off by at most 0.007: Kendall all/xm600,
ext/xm3600, core/coco_dev; Spearman core/xm3600). That residue comes from the paper's
rounding of its inputs (S x S to 0.1, CIDEr to 0.001): jittering the inputs within their
rounding moves those cells over ranges that include the paper's values.
"""

import json

import numpy as np

import errors
from tools import cli as tool_cli
from tools.analysis import coefficients as coefficients_lib
from tools.formats import side_by_side

SETS = ("all", "ext", "core")
COEFFICIENTS = ("pearson", "spearman", "kendall")
# The paper's Kendall is tau-b (scipy's default); meta's names for the three.
_META_NAMES = {"pearson": "pearson", "spearman": "spearman", "kendall": "kendall_b"}


def flipped_points(evaluations, column):
    """The points of one column: each evaluation as given and flipped.

    Args:
        evaluations: `tools.formats.side_by_side.Evaluation`s.
        column: a delta CIDEr column.

    Returns:
        (delta_sxs, delta_cider), float arrays [2 * evaluations with both values].
    """
    pairs = [(e.delta_sxs, e.deltas[column]) for e in evaluations
             if e.delta_sxs is not None and e.deltas[column] is not None]
    sxs = np.array([p[0] for p in pairs], dtype=float)  # [evaluations]
    cider = np.array([p[1] for p in pairs], dtype=float)  # [evaluations]
    return np.concatenate([sxs, -sxs]), np.concatenate([cider, -cider])


def flipped_clusters(evaluations, column):
    """The cluster (evaluation) of each point of `flipped_points`: int array [2 * k]."""
    k = sum(1 for e in evaluations
            if e.delta_sxs is not None and e.deltas[column] is not None)
    return np.tile(np.arange(k), 2)


def table(evaluations, columns, *, names=coefficients_lib.COEFFICIENTS, samples=0, seed=0,
          confidence=coefficients_lib.CONFIDENCE):
    """Table 6: correlations of delta S x S with each delta column over all / ext / core.

    Args:
        evaluations: `tools.formats.side_by_side.Evaluation`s.
        columns: the delta CIDEr columns.
        names: coefficients (tools/analysis/coefficients.py).
        samples: bootstrap resamples for the intervals (0: none).
        seed, confidence: of the bootstrap.

    Returns:
        {set: {coefficient: {column: value or None}, "n": {column: points},
        "ci": {coefficient: {column: [low, high] or None}} (with samples)}}.
    """
    result = {}
    for set_name in SETS:
        chosen = [e for e in evaluations if set_name == "all" or e.set == set_name]
        rows = {name: {} for name in names}
        rows["n"] = {}
        if samples:
            rows["ci"] = {name: {} for name in names}
        for column in columns:
            x, y = flipped_points(chosen, column)
            rows["n"][column] = len(x)
            for name, value in coefficients_lib.coefficients(x, y, names).items():
                rows[name][column] = value
            if samples:
                intervals = coefficients_lib.bootstrap_intervals(
                    x, y, flipped_clusters(chosen, column), samples, seed, confidence, names)
                for name, value in intervals.items():
                    rows["ci"][name][column] = value
        result[set_name] = rows
    return result


def correlations(x, y):
    """Pearson, Spearman and Kendall tau-b of two samples.

    Args:
        x, y: float arrays [n].

    Returns:
        {"pearson", "spearman", "kendall"} -> float, or None where undefined (fewer than
        three points, or a constant sample).
    """
    values = coefficients_lib.coefficients(x, y, tuple(_META_NAMES.values()))
    return {name: values[meta] for name, meta in _META_NAMES.items()}


def table6(evaluations, columns):
    """`table` with the paper's three coefficients, named as the paper names them.

    Args:
        evaluations: `Evaluation`s.
        columns: the delta CIDEr columns.

    Returns:
        {set: {coefficient: {column: value or None}, "n": {column: number of points}}}.
    """
    result = table(evaluations, columns, names=tuple(_META_NAMES.values()))
    return {set_name: {**{name: rows[meta] for name, meta in _META_NAMES.items()},
                       "n": rows["n"]}
            for set_name, rows in result.items()}


def format_table(result, columns):
    """The correlations as a fixed-width text table (two decimals, as in the paper).

    Args:
        result: output of `table6`.
        columns: the delta CIDEr columns, in print order.

    Returns:
        The table as a string.
    """
    widths = [max(len(c), 12) for c in columns]
    title = ("Correlation of delta S x S with delta CIDEr; each evaluation counted twice "
             "(as given and flipped).")
    lines = [title,
             f"{'coefficient':<12} {'languages':<10} {'n':>5}  "
             + "  ".join(f"{c:>{w}}" for c, w in zip(columns, widths, strict=True))]
    for set_name in SETS:
        counts = result[set_name]["n"]
        uniform = len(set(counts.values())) == 1
        n_text = str(next(iter(counts.values()))) if uniform else "-"
        for name in COEFFICIENTS:
            cells = []
            for column, width in zip(columns, widths, strict=True):
                value = result[set_name][name][column]
                text = "–" if value is None else f"{value:.2f}"
                if not uniform:
                    text += f" (n={counts[column]})"
                cells.append(f"{text:>{width}}")
            lines.append(f"{name:<12} {set_name:<10} {n_text:>5}  " + "  ".join(cells))
    return "\n".join(lines)


def main(argv=None):
    """Command line: see the module docstring."""
    parser = tool_cli.ArgumentParser(
        description="Correlation of side-by-side human judgements with delta CIDEr "
                    "(Table 6 of the XM3600 paper).")
    parser.add_argument("--side-by-side", required=True, metavar="FILE",
                        help="CSV with columns m2,m1,lang,set,delta_sxs,delta_cider_*")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    try:
        evaluations, columns = side_by_side.read(args.side_by_side)
    except errors.Error as e:
        errors.fail(e)
    result = table6(evaluations, columns)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_table(result, columns))


if __name__ == "__main__":
    errors.run_main(main)
