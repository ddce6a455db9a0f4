"""The files the checkpoint tool and the tools exchange: one module each, their only reader and
writer (`predictions`, `per_image`, `scores`, `eval_metrics`), plus `json_object` and
`csv_table`, readers naming the file and line of a malformed input. Readers are strict;
writers check everything first and write whole or not at all (tests/formats/test_owners.py).
What the readers share is here: `read_text`, and the checks `finite` and `whole`.
"""

import math
import numbers
import os


def read_text(path, error, what, problem="not UTF-8 ({})", encoding="utf-8"):
    """The text of the file `path`, else `error`: "<what> not found: <path>", or at file:line
    `problem` with the decoder's reason."""
    if not os.path.isfile(path):
        raise error(f"{what} not found: {path}")
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise error(f"{path}:{line}: {problem.format(e.reason)}") from None


def finite(value, what, error):
    """`value` as a float if it is a finite real number (numpy's too, not a bool), else `error`
    naming `what`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise error(f"{what}: expected a finite number, got {value!r}")
    return float(value)


def whole(value, what, error, kind):
    """`value` as an int if it is an integer >= 0 (not a bool), else `error` naming `what`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise error(f"{what}: expected a {kind} >= 0, got {value!r}")
    return int(value)
