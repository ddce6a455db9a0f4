"""Corpus scores of one evaluated checkpoint: `scores.json` in a results folder.

    {"metric": "cider-d", "scores": {lang: score}, "average": mean of "scores",
     "num_images": {lang: count}, optional "step", "config", "coco_dev_scores": {lang:
     score} (Table 8's column), and further fields (averages, decoding, workdir)}
"""

import json

import errors
import files
import formats
from data import languages
from formats import json_object

FILE_NAME = "scores.json"
# The fields `make` writes; any other field is the caller's (`extra`).
FIELDS = ("metric", "scores", "average", "num_images", "step", "config", "coco_dev_scores")


class ScoresError(errors.InputError):
    """A scores file (or what is to be written to one) is malformed; names the field."""


def file_name(outputs=""):
    """The name of an evaluator's scores file in a results folder ("": XM3600's)."""
    return f"scores{'_' + outputs if outputs else ''}.json"


def ordered(langs):
    """Languages in the paper's order (XM3600_LANGS)."""
    return [lang for lang in languages.XM3600_LANGS if lang in langs]


def check_language_scores(scores, what):
    """{lang: finite number} as floats in the paper's order; else ScoresError naming `what`."""
    if not isinstance(scores, dict) or not scores:
        raise ScoresError(f"{what}: expected a non-empty {{lang: score}} dict, got {scores!r}")
    with errors.reraised(ScoresError, ValueError):
        languages.check_langs(scores.keys(), what=f"language in {what}")
    return {lang: formats.finite(scores[lang], f"{what}[{lang!r}]", ScoresError)
            for lang in ordered(scores)}


def _check_num_images(num_images, scores):
    if not isinstance(num_images, dict):
        raise ScoresError(f"num_images: expected a {{lang: count}} dict, got {num_images!r}")
    missing = [lang for lang in scores if lang not in num_images]
    extra = [lang for lang in num_images if lang not in scores]
    if missing or extra:
        raise ScoresError(
            f"num_images and scores cover different languages: without a count: "
            f"{', '.join(missing) or 'none'}; without a score: {', '.join(extra) or 'none'}")
    return {lang: formats.whole(num_images[lang], f"num_images[{lang!r}]", ScoresError, "count")
            for lang in scores}


def _check(summary):
    """The checked summary (numbers as Python floats and ints); ScoresError without a path."""
    if not isinstance(summary, dict):
        raise ScoresError(f"expected a JSON object, got {type(summary).__name__}")
    if not isinstance(summary.get("metric"), str) or not summary["metric"]:
        raise ScoresError(f"field 'metric': expected a metric name, got "
                          f"{summary.get('metric')!r}")
    out = dict(summary)
    out["scores"] = check_language_scores(summary.get("scores"), "scores")
    out["num_images"] = _check_num_images(summary.get("num_images"), out["scores"])
    out["average"] = formats.finite(summary.get("average"), "field 'average'", ScoresError)
    if summary.get("step") is not None:
        out["step"] = formats.whole(summary["step"], "field 'step'", ScoresError, "step")
    if summary.get("config") is not None and not isinstance(summary["config"], str):
        raise ScoresError(f"field 'config': expected a string, got {summary['config']!r}")
    if summary.get("coco_dev_scores") is not None:
        out["coco_dev_scores"] = check_language_scores(summary["coco_dev_scores"],
                                                       "coco_dev_scores")
    return out


def make(metric, scores, num_images, *, step=None, config=None, coco_dev_scores=None,
         extra=None):
    """A checked summary to `write`; `extra` fields must not be one of FIELDS (ScoresError)."""
    scores = check_language_scores(scores, "scores")
    optional = {"step": step, "config": None if config is None else str(config),
                "coco_dev_scores": coco_dev_scores or None}
    if clash := sorted(set(extra or {}) & set(FIELDS)):
        raise ScoresError(f"extra fields {', '.join(clash)} are fields of the format")
    average = sum(scores.values()) / len(scores)
    return _check({"metric": metric, "scores": scores, "average": average, "num_images": num_images,
                   **{k: v for k, v in optional.items() if v is not None}, **(extra or {})})


def write(path, summary):
    """Writes a summary (from `make`, or one read; nothing on error); returns `path`."""
    summary = _check(summary)
    files.write_text(path, json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    return path


def read(path):
    """The checked summary of a scores file; ScoresError names the file:line or field at fault."""
    summary = json_object.read(path, ScoresError, "scores file")
    with errors.reraised(ScoresError, ScoresError, f"{path}: "):
        return _check(summary)
