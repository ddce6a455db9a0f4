"""A file holding one JSON object (scores.json, metrics.json), read with errors at file:line."""

import formats
from data import jsonl


def read(path, error, what):
    """The object in `path`; raises `error` (file:line, a key twice) for anything else."""
    obj = jsonl.loads(formats.read_text(path, error, what), path, error)
    if not isinstance(obj, dict):
        raise error(f"{path}: expected a JSON object, got {type(obj).__name__}")
    return obj
