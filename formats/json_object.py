"""A file holding one JSON object (scores.json, metrics.json), read with errors at file:line."""

import os

from data import jsonl


def read(path, error, what):
    """The object in `path`; raises `error` (file:line, a key twice) for anything else."""
    if not os.path.isfile(path):
        raise error(f"{what} not found: {path}")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 ({e.reason})") from None
    obj = jsonl.loads(text, path, error)
    if not isinstance(obj, dict):
        raise error(f"{path}: expected a JSON object, got {type(obj).__name__}")
    return obj
