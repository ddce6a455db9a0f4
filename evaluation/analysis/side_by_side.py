"""Side-by-side human evaluations in the XM3600 paper's layout, and their Table 6.

A side-by-side CSV (the paper's side_by_side.csv, or what humaneval exports) has one row per
evaluation of model m2 against model m1 in one language, with columns

    m2, m1, lang, set, delta_sxs, delta_cider_<dataset>, ...

where `set` is core (en, es, hi, zh) or ext, delta_sxs is wins minus losses of m2 in percent,
and each delta_cider_* column is CIDEr(m2) - CIDEr(m1) on some reference set (the paper has
xm600, xm3600 and coco_dev). As in Sec. 3.3 of the paper, every evaluation counts twice, as
given and flipped, (-delta_sxs, -delta_cider), so the correlations do not depend on which model
was called m1. An empty or NA cell is a missing value; it drops that evaluation from the
columns it touches only (pairwise deletion), and the number of points n is reported.

`table` computes the correlations over all, ext and core evaluations (evaluation/analysis/
coefficients.py), with cluster bootstrap intervals when asked (an evaluation and its flipped
twin are drawn together). `evaluation.analysis.correlate` (the paper's Table 6) and
`evaluation.analysis.meta --side-by-side` both go through it.
"""

import csv
import dataclasses
import math

import numpy as np

from data import languages
from evaluation.analysis import coefficients as coefficients_lib

SETS = ("all", "ext", "core")
REQUIRED_COLUMNS = ("m2", "m1", "lang", "set", "delta_sxs")
DELTA_PREFIX = "delta_cider_"
KNOWN_SETS = ("core", "ext")
MISSING_VALUES = ("", "na", "n/a", "nan")


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


def flipped_clusters(evaluations, column):
    """The cluster (evaluation) of each point of `flipped_points`: int array [2 * k]."""
    k = sum(1 for e in evaluations
            if e.delta_sxs is not None and e.deltas[column] is not None)
    return np.tile(np.arange(k), 2)


def table(evaluations, columns, *, names=coefficients_lib.COEFFICIENTS, samples=0, seed=0,
          confidence=coefficients_lib.CONFIDENCE):
    """Correlations of delta S x S with each delta column over all / ext / core evaluations.

    Args:
        evaluations: `Evaluation`s.
        columns: the delta CIDEr columns.
        names: coefficients (evaluation/analysis/coefficients.py).
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
