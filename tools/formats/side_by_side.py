"""Side-by-side human evaluations: the XM3600 paper's `side_by_side.csv` layout.

One row per evaluation of model m2 against model m1 in one language, with columns

    m2, m1, lang, set, delta_sxs, delta_cider_<dataset>, ...

where `set` is core (en, es, hi, zh) or ext, delta_sxs is wins minus losses of m2 in percent,
and each delta_cider_* column is CIDEr(m2) - CIDEr(m1) on some reference set (the paper has
xm600, xm3600 and coco_dev: COLUMNS). An empty or NA cell is a missing value. A pair of
models is evaluated once per language: a second row of the same two models (in either order)
and language is an error, since it would count that evaluation twice. The paper's file
(Tables 5 and 7) and the human-evaluation kit's export are in this layout; the correlation
with delta CIDEr (Table 6, tools/analysis/correlate.py), the meta-evaluation and the
kit's report read it.
"""

import csv
import dataclasses
import math
import numbers

import errors
import files
from data import languages
from formats import csv_table

FILE_NAME = "side_by_side.csv"
REQUIRED_COLUMNS = ("m2", "m1", "lang", "set", "delta_sxs")
DELTA_PREFIX = "delta_cider_"
# The paper's columns, in its order (what `write` writes by default).
COLUMNS = (*REQUIRED_COLUMNS, "delta_cider_xm600", "delta_cider_xm3600", "delta_cider_coco_dev")
KNOWN_SETS = ("core", "ext")
MISSING_VALUES = ("", "na", "n/a", "nan")
# Decimals written: delta S x S is a percentage, delta CIDEr a difference of scores.
_DECIMALS = {"delta_sxs": 2}
_DELTA_DECIMALS = 4


class SideBySideError(errors.InputError):
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


def set_of(lang):
    """The `set` of a language: "core" for the paper's first four, else "ext"."""
    return "core" if lang in languages.CORE_LANGS else "ext"


def _number(text, where, column):
    if text is None or text.strip().lower() in MISSING_VALUES:
        return None
    return csv_table.number(text, f"{where}: column {column}", SideBySideError)


def _check_header(header, where):
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    columns = tuple(c for c in header if c.startswith(DELTA_PREFIX))
    if not columns:
        missing.append(f"{DELTA_PREFIX}* (e.g. {DELTA_PREFIX}xm3600)")
    if missing:
        raise SideBySideError(f"{where}: missing column(s) {', '.join(missing)}; found: "
                              f"{', '.join(header) or 'no header'}")
    return columns


def _parse_row(row, columns, where, lineno):
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


def _check_once(evaluations, path, unit="line"):
    """SideBySideError at the second row of one pair of models (either order) and language;
    `unit` says what an evaluation's `line` counts: "line" (of a file) or "entry"."""
    first = {}
    for e in evaluations:
        pair = (frozenset((e.m1, e.m2)), e.lang)
        if pair in first:
            where = f"{path}:{e.line}" if unit == "line" else f"{path}: entry {e.line}"
            raise SideBySideError(f"{where}: {e.m2} vs {e.m1} in {e.lang!r} again (first at "
                                  f"{unit} {first[pair]}); each pair of models is evaluated "
                                  f"once per language")
        first[pair] = e.line


def read(path):
    """Reads and checks a side-by-side CSV.

    Args:
        path: the CSV file.

    Returns:
        (list of `Evaluation` in file order, tuple of the delta CIDEr column names).

    Raises:
        SideBySideError: a missing file or column (named), a file that is not UTF-8 text or
            not CSV, a value that is not a number, an unknown set or language, a second row
            of one pair of models and language (file:line and column), or no evaluation at
            all.
    """
    header, rows = csv_table.read(path, SideBySideError, "side-by-side file")
    columns = _check_header(header, path)
    evaluations = [_parse_row(row, columns, f"{path}:{lineno}", lineno) for lineno, row in rows]
    if not evaluations:
        raise SideBySideError(f"{path}: no evaluations (only a header)")
    _check_once(evaluations, path)
    return evaluations, columns


def _cell(value, column, where):
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value):
        raise SideBySideError(f"{where}: column {column}: expected a finite number or None, "
                              f"got {value!r}")
    return f"{value:.{_DECIMALS.get(column, _DELTA_DECIMALS)}f}"


def write(path, rows, columns=COLUMNS):
    """Writes evaluations in the layout; returns `path`.

    Args:
        path: the CSV file to write.
        rows: dicts with the columns: m2, m1 (model names), lang, set ("core" or "ext"),
            delta_sxs and the delta CIDEr columns (numbers, or None when missing).
        columns: the header: REQUIRED_COLUMNS and delta CIDEr columns (default: the paper's).

    Raises:
        SideBySideError: a missing or unknown column, an unknown set or language, a value that
            is neither a finite number nor None, a second row of one pair of models and
            language (the entry and column named); nothing is written then.
    """
    columns = tuple(columns)
    deltas = _check_header(columns, "columns")
    unknown = [c for c in columns if c not in REQUIRED_COLUMNS and c not in deltas]
    if unknown:
        raise SideBySideError(f"columns: unknown column(s) {', '.join(unknown)}")
    cells, evaluations = [], []
    for i, row in enumerate(rows):
        where = f"{path}: entry {i}"
        missing = [c for c in columns if c not in row]
        if missing:
            raise SideBySideError(f"{where}: missing column(s) {', '.join(missing)}")
        line = {c: str(row[c]) for c in ("m2", "m1", "lang", "set")}
        line.update({c: _cell(row[c], c, where) for c in ("delta_sxs", *deltas)})
        # The reader's checks of names, set, language.
        evaluations.append(_parse_row(line, deltas, where, i))
        cells.append(line)
    _check_once(evaluations, path, "entry")
    with files.replacing(path, newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(cells)
    return path
