"""JSON Lines files (plain, `.bz2` or `.gz`) read one object per line, errors at file:line.

Every release file this project reads (XM3600 `captions.jsonl`, the COCO-35L and
CC3M-35L translation files) and every results file it writes is JSON Lines; one
reader keeps their error messages alike.
"""

import bz2
import gzip
import json


class FormatError(ValueError):
    """A file does not have the layout its reader expects."""


def _open_binary(path):
    path = str(path)
    if path.endswith(".bz2"):
        return bz2.open(path, "rb")
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


def read_objects(path, error=FormatError):
    """Yields (where, object) for each non-blank line; `where` is "path:line".

    Args:
        path: the file (compressed by its ending).
        error: the exception class raised for a line that is not a JSON object.

    Raises:
        error: a line is not UTF-8, not valid JSON or not an object; names the
            file and line.
    """
    with _open_binary(path) as f:
        for lineno, raw in enumerate(f, start=1):
            where = f"{path}:{lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise error(f"{where}: not UTF-8 ({e.reason} at byte {e.start})") from None
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise error(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from None
            if not isinstance(obj, dict):
                raise error(f"{where}: expected a JSON object, got {type(obj).__name__}")
            yield where, obj
