"""Correlation of human side-by-side judgements with delta CIDEr (Table 6 of the XM3600 paper).

    python -m evaluation.analysis.correlate --side-by-side FILE [--json]

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

The file and its reading are evaluation/analysis/side_by_side.py; the numbers come from its `table`,
the side-by-side path of the meta-evaluation tool
(`python -m evaluation.analysis.meta --side-by-side
FILE` adds tau-c and bootstrap intervals). Bad input is one `error:` line, exit status 2.

On the paper's side_by_side.csv this reproduces every value of its correlations.csv within
0.01; four cells round to another second decimal (off by at most 0.007: Kendall all/xm600,
ext/xm3600, core/coco_dev; Spearman core/xm3600). That residue comes from the paper's
rounding of its inputs (S x S to 0.1, CIDEr to 0.001): jittering the inputs within their
rounding moves those cells over ranges that include the paper's values.
"""

import argparse
import json
import sys

from evaluation.analysis import coefficients as coefficients_lib
from evaluation.analysis import side_by_side
from evaluation.analysis.side_by_side import (  # noqa: F401 (the names callers import from here)
    DELTA_PREFIX,
    KNOWN_SETS,
    MISSING_VALUES,
    REQUIRED_COLUMNS,
    SETS,
    Evaluation,
    SideBySideError,
    flipped_points,
    read_side_by_side,
)

COEFFICIENTS = ("pearson", "spearman", "kendall")
# The paper's Kendall is tau-b (scipy's default); meta's names for the three.
_META_NAMES = {"pearson": "pearson", "spearman": "spearman", "kendall": "kendall_b"}


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
    """Correlations over all / ext / core evaluations, in the layout of the paper's Table 6.

    Computed by `side_by_side.table`, the meta-evaluation tool's side-by-side path.

    Args:
        evaluations: `Evaluation`s.
        columns: the delta CIDEr columns.

    Returns:
        {set: {coefficient: {column: value or None}, "n": {column: number of points}}}.
    """
    result = side_by_side.table(evaluations, columns, names=tuple(_META_NAMES.values()))
    return {set_name: {**{name: rows[meta] for name, meta in _META_NAMES.items()},
                       "n": rows["n"]}
            for set_name, rows in result.items()}


class _Exit(SystemExit):
    """Exit status 2 after an `error:` line; str() is the message (what tests match)."""

    def __init__(self, message):
        super().__init__(2)
        self.message = message

    def __str__(self):
        return self.message


def _fail(message):
    print(f"error: {message}", file=sys.stderr)
    raise _Exit(message)


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
    parser = argparse.ArgumentParser(
        description="Correlation of side-by-side human judgements with delta CIDEr "
                    "(Table 6 of the XM3600 paper).")
    parser.add_argument("--side-by-side", required=True, metavar="FILE",
                        help="CSV with columns m2,m1,lang,set,delta_sxs,delta_cider_*")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    try:
        evaluations, columns = read_side_by_side(args.side_by_side)
    except FileNotFoundError:
        _fail(f"side-by-side file not found: {args.side_by_side}")
    except SideBySideError as e:
        _fail(str(e))
    result = table6(evaluations, columns)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_table(result, columns))


if __name__ == "__main__":
    main()
