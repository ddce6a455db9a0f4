"""A CSV file with a header line, read with errors at file:line, never a traceback; `number`
reads a cell as the tables write numbers (not Python's `float`, which takes "1_0" and " 0.2")."""

import csv
import io
import math
import re

import formats

# Digits, an optional point and exponent: what a table writes.
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def number(text, where, error):
    """The finite number `text` writes plainly, else `error` naming `where` ("file:line: column
    c"): NaN, inf, "1_0", " 0.2" and the like are refused."""
    value = float(text) if _PLAIN_NUMBER.fullmatch(text) else math.nan
    if not math.isfinite(value):
        raise error(f"{where}: not a finite number: {text!r}")
    return value


def read(path, error, what):
    """(header, [(line number, {column: cell})] of every non-blank row) of a CSV file.
    Raises `error` (file:line) for a missing, binary or malformed file, a column named twice, or
    a row with more or fewer cells than the header; `what` names a missing file."""
    # -sig: a byte-order mark (Excel's) is no column name.
    text = formats.read_text(path, error, what, "not UTF-8 text ({}); is it a CSV file?",
                             "utf-8-sig")
    if "\0" in text:
        line = text.count("\n", 0, text.index("\0")) + 1
        raise error(f"{path}:{line}: a NUL character; is it a CSV file?")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [name.strip() for name in next(reader, [])]
        if repeated := [name for name in header if header.count(name) > 1]:
            raise error(f"{path}:1: column {repeated[0]!r} appears twice in the header")
        rows, lineno = [], reader.line_num + 1
        for cells in reader:
            if any(cell.strip() for cell in cells):
                if len(cells) != len(header):
                    more = "more" if len(cells) > len(header) else "fewer"
                    raise error(f"{path}:{lineno}: {more} cells than columns in the header")
                rows.append((lineno, dict(zip(header, cells, strict=True))))
            lineno = reader.line_num + 1
    except csv.Error as e:
        raise error(f"{path}:{reader.line_num}: not valid CSV ({e})") from None
    return header, rows
