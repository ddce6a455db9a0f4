"""Correlation of human side-by-side judgements with delta CIDEr (Table 6 of the XM3600 paper).

    python -m eval.analysis.correlate --side-by-side FILE [--json]

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

On the paper's side_by_side.csv this reproduces every value of its correlations.csv within
0.01; four cells round to another second decimal (off by at most 0.007: Kendall all/xm600,
ext/xm3600, core/coco_dev; Spearman core/xm3600). That residue comes from the paper's
rounding of its inputs (S x S to 0.1, CIDEr to 0.001): jittering the inputs within their
rounding moves those cells over ranges that include the paper's values.
"""

import argparse
import csv
import dataclasses
import json
import math
import sys
import warnings

import numpy as np
from scipy import stats

from data import languages

SETS = ("all", "ext", "core")
COEFFICIENTS = ("pearson", "spearman", "kendall")
REQUIRED_COLUMNS = ("m2", "m1", "lang", "set", "delta_sxs")
DELTA_PREFIX = "delta_cider_"
KNOWN_SETS = ("core", "ext")
MISSING_VALUES = ("", "na", "n/a", "nan")
# Fewer points than this leave a correlation undefined (one evaluation gives two points
# that lie on a line through the origin by construction).
MIN_POINTS = 3


class SideBySideError(ValueError):
    """The side-by-side file is malformed; the message names file, line and column."""


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """One side-by-side evaluation of m2 against m1.

    Attributes:
        m2, m1: the two models (delta = m2 - m1).
        lang: language code.
        set: "core" or "ext".
        delta_sxs: wins minus losses of m2, in percent, or None when missing.
        deltas: {delta CIDEr column: value or None when missing}.
        line: line number in the file, for messages.
    """
    m2: str
    m1: str
    lang: str
    set: str
    delta_sxs: float
    deltas: dict
    line: int


def _number(text, where, column):
    if text is None or text.strip().lower() in MISSING_VALUES:
        return None
    try:
        value = float(text)
    except ValueError:
        raise SideBySideError(f"{where}: column {column}: not a number: {text!r}") from None
    if not math.isfinite(value):
        raise SideBySideError(f"{where}: column {column}: not a finite number: {text!r}")
    return value


def read_side_by_side(path):
    """Reads and checks a side-by-side CSV.

    Args:
        path: the CSV file.

    Returns:
        (list of `Evaluation` in file order, tuple of the delta CIDEr column names).

    Raises:
        FileNotFoundError: the file does not exist.
        SideBySideError: a column is missing (named), a value is not a number, a set or
            language is unknown (file:line and column).
    """
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = [name.strip() for name in (reader.fieldnames or [])]
        reader.fieldnames = header
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        columns = tuple(c for c in header if c.startswith(DELTA_PREFIX))
        if not columns:
            missing.append(f"{DELTA_PREFIX}* (e.g. {DELTA_PREFIX}xm3600)")
        if missing:
            raise SideBySideError(
                f"{path}: missing column(s) {', '.join(missing)}; found: "
                f"{', '.join(header) or 'no header'}")
        evaluations = [_parse_row(row, columns, f"{path}:{lineno}", lineno)
                       for lineno, row in enumerate(reader, start=2)
                       if any((v or "").strip() for v in row.values() if isinstance(v, str))]
    if not evaluations:
        raise SideBySideError(f"{path}: no evaluations (only a header)")
    return evaluations, columns


def _parse_row(row, columns, where, lineno):
    if None in row:
        raise SideBySideError(f"{where}: more cells than columns in the header")
    if any(row[c] is None for c in REQUIRED_COLUMNS + columns):
        raise SideBySideError(f"{where}: fewer cells than columns in the header")
    set_name = row["set"].strip()
    if set_name not in KNOWN_SETS:
        raise SideBySideError(
            f"{where}: column set: unknown value {row['set']!r}; expected one of "
            f"{', '.join(KNOWN_SETS)}")
    lang = row["lang"].strip()
    if lang not in languages.XM3600_LANGS:
        raise SideBySideError(f"{where}: column lang: unknown language {row['lang']!r}")
    return Evaluation(
        m2=row["m2"].strip(), m1=row["m1"].strip(), lang=lang, set=set_name,
        delta_sxs=_number(row["delta_sxs"], where, "delta_sxs"),
        deltas={c: _number(row[c], where, c) for c in columns}, line=lineno)


def flipped_points(evaluations, column):
    """The points of one column: each evaluation as given and flipped.

    Args:
        evaluations: `Evaluation`s.
        column: a delta CIDEr column.

    Returns:
        (delta_sxs, delta_cider), float arrays [2 * evaluations with both values].
    """
    pairs = [(e.delta_sxs, e.deltas[column]) for e in evaluations
             if e.delta_sxs is not None and e.deltas[column] is not None]
    sxs = np.array([p[0] for p in pairs], dtype=float)  # [evaluations]
    cider = np.array([p[1] for p in pairs], dtype=float)  # [evaluations]
    return np.concatenate([sxs, -sxs]), np.concatenate([cider, -cider])


def correlations(x, y):
    """Pearson, Spearman and Kendall tau-b of two samples.

    Args:
        x, y: float arrays [n].

    Returns:
        {"pearson", "spearman", "kendall"} -> float, or None where undefined (fewer than
        MIN_POINTS points, or a constant sample).
    """
    if len(x) < MIN_POINTS:
        return {name: None for name in COEFFICIENTS}
    with warnings.catch_warnings():
        # A constant sample makes scipy warn and return nan; None says it below.
        warnings.simplefilter("ignore")
        values = {
            "pearson": stats.pearsonr(x, y)[0],
            "spearman": stats.spearmanr(x, y)[0],
            "kendall": stats.kendalltau(x, y, variant="b")[0],
        }
    return {name: (float(v) if np.isfinite(v) else None) for name, v in values.items()}


def table6(evaluations, columns):
    """Correlations over all / ext / core evaluations, in the layout of the paper's Table 6.

    Args:
        evaluations: `Evaluation`s.
        columns: the delta CIDEr columns.

    Returns:
        {set: {coefficient: {column: value or None}, "n": {column: number of points}}}.
    """
    result = {}
    for set_name in SETS:
        chosen = [e for e in evaluations if set_name == "all" or e.set == set_name]
        rows = {name: {} for name in COEFFICIENTS}
        rows["n"] = {}
        for column in columns:
            x, y = flipped_points(chosen, column)
            rows["n"][column] = len(x)
            for name, value in correlations(x, y).items():
                rows[name][column] = value
        result[set_name] = rows
    return result


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
        sys.exit(f"error: side-by-side file not found: {args.side_by_side}")
    except SideBySideError as e:
        sys.exit(f"error: {e}")
    result = table6(evaluations, columns)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_table(result, columns))


if __name__ == "__main__":
    main()
