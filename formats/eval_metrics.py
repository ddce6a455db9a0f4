"""The metrics of one evaluated checkpoint: `metrics.json` in a results folder, {"step": int,
"<metric name>": number, ...}, named as the training loop logs them.
"""

import json

import errors
import files
import formats
from formats import json_object

FILE_NAME = "metrics.json"


class EvalMetricsError(errors.InputError):
    """A metrics.json (or what is to be written to one) is malformed; names the file and key."""


def _check(step, metrics):
    step = formats.whole(step, "'step'", EvalMetricsError, "step")
    if not isinstance(metrics, dict):
        raise EvalMetricsError(f"expected a {{metric name: value}} dict, got {metrics!r}")
    out = {}
    for name, value in metrics.items():
        if not isinstance(name, str) or not name or name == "step":
            raise EvalMetricsError(f"metric name {name!r}: expected a name other than 'step'")
        out[name] = formats.finite(value, repr(name), EvalMetricsError)
    return step, out


def write(path, step, metrics):
    """Writes {"step": step, **metrics}; returns `path` (EvalMetricsError: nothing is written)."""
    step, metrics = _check(step, metrics)
    files.write_text(path, json.dumps({"step": step, **metrics}, indent=2) + "\n")
    return path


def read(path):
    """(step, {metric name: value}) of a metrics.json; EvalMetricsError names the file and key."""
    metrics = json_object.read(path, EvalMetricsError, "metrics file")
    with errors.reraised(EvalMetricsError, EvalMetricsError, f"{path}: "):
        return _check(metrics.pop("step", None), metrics)
