"""Metric scores of single captions for the meta-evaluation: computed by the engines, or read.

- `compute` scores (image, caption) items with CIDEr-D or CIDEr (evaluation/cider/, document
  frequencies from the references of the items' images) or VIFIDEL (tools/vifidel/), optionally
  against a random subset of each image's references (the CIDEr paper's protocol). An image
  with several captions (several systems) is scored in layers, each image once per layer,
  with the same references and document frequencies.
- `read_references`: an XM3600 `captions.jsonl` (one language) or THUMB's references file.
- `read_caption_scores` (JSONL {"system", "image/key", "score"}) and `read_system_scores`
  (CSV system,score): scores computed elsewhere.
"""

import json
import math
import os

import numpy as np

import errors
from data import jsonl
from data.releases import xm3600 as xm3600_release
from evaluation import cider
from formats import csv_table
from tools import vifidel as vifidel_lib
from tools.formats import thumb_ratings

METRICS = ("cider-d", "cider", "vifidel")


class MetaError(errors.InputError):
    """Bad meta-evaluation input; the message names the file, line and value at fault."""


def read_references(path, lang):
    """{image: [reference captions]} from XM3600 captions.jsonl (in `lang`) or THUMB's file."""
    if not os.path.isfile(path):
        raise MetaError(f"references not found: {path}")
    first = next(jsonl.read_objects(path, error=MetaError), (None, {}))[1]
    if "refs" in first:
        return thumb_ratings.read_references(path)
    records = xm3600_release.read_captions(path)
    refs = {r.key: r.captions[lang] for r in records if lang in r.captions}
    if not refs:
        raise MetaError(f"{path}: no references in {lang!r}")
    return refs


def _layers(images):
    """Groups positions so that each layer holds each image at most once."""
    seen, layers = {}, []
    for position, image in enumerate(images):
        k = seen[image] = seen.get(image, -1) + 1
        if k == len(layers):
            layers.append([])
        layers[k].append(position)
    return layers


def compute(metric, lang, items, references, *, vifidel_settings=None, num_refs=None,
            rng=None, where="references"):
    """Scores captions of images with a metric engine.

    Args:
        metric: one of METRICS.
        lang: the captions' language.
        items: [(image, caption)].
        references: {image: [reference captions]}.
        vifidel_settings: an `tools.vifidel.Settings` (needed for "vifidel").
        num_refs: use this many references per image, drawn with `rng` (None: all).
        rng: a numpy Generator for the draw.
        where: the references' file, for messages.

    Returns:
        float64 [len(items)] scores.

    Raises:
        MetaError: an image without references, or an engine's input error.
    """
    if metric not in METRICS:
        raise MetaError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}")
    images = list(dict.fromkeys(image for image, _ in items))
    missing = [image for image in images if image not in references]
    if missing:
        raise MetaError(f"{where}: no references for image {missing[0]!r} "
                        f"({len(missing)} images have none)")
    refs = [references[image] for image in images]
    if num_refs:
        refs = [[r[i] for i in rng.choice(len(r), size=min(num_refs, len(r)), replace=False)]
                for r in refs]
    row = {image: i for i, image in enumerate(images)}
    try:
        if metric == "vifidel":
            if vifidel_settings is None:
                raise MetaError("VIFIDEL needs --labels and --vectors")
            scorer = vifidel_lib.build_scorers({lang: images}, {lang: refs},
                                               vifidel_settings)[lang]
        else:
            scorer = cider.CiderScorer(refs, lang, metric)
        out = np.zeros(len(items))
        for layer in _layers([image for image, _ in items]):
            result = scorer.score([items[p][1] for p in layer],
                                  indices=[row[items[p][0]] for p in layer])
            out[layer] = result.per_image
    except errors.InputError as e:
        raise MetaError(str(e)) from None
    return out


def _score(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise MetaError(f"{where}: field 'score' must be a finite number, got {value!r}")
    return float(value)


def read_caption_scores(path):
    """Per-caption scores: JSONL {"system", "image/key", "score"} -> {(system, image): score}.

    Returns:
        (scores, {(system, image): "file:line"}).
    """
    if not os.path.isfile(path):
        raise MetaError(f"scores not found: {path}")
    scores, lines = {}, {}
    for where, obj in jsonl.read_objects(path, error=MetaError):
        system, image = obj.get("system"), obj.get("image/key")
        if not isinstance(system, str) or not isinstance(image, (str, int)):
            raise MetaError(f"{where}: expected {{\"system\", \"image/key\", \"score\"}}, got "
                            f"{json.dumps(obj)[:80]}")
        pair = (system, str(image))
        if pair in scores:
            raise MetaError(f"{where}: a second score of system {system!r} on image "
                            f"{str(image)!r} (first at {lines[pair]})")
        scores[pair] = _score(obj.get("score"), where)
        lines[pair] = where
    if not scores:
        raise MetaError(f"{path}: no scores (the file is empty)")
    return scores, lines


def read_system_scores(path):
    """Per-system scores: CSV with columns system, score -> ({system: score}, {system: where})."""
    header, rows = csv_table.read(path, MetaError, "system scores")
    if not {"system", "score"} <= set(header):
        raise MetaError(f"{path}: expected columns system,score; found "
                        f"{', '.join(header) or 'nothing'}")
    scores, lines = {}, {}
    for lineno, row in rows:
        where = f"{path}:{lineno}"
        try:
            value = float(row["score"])
        except ValueError:
            raise MetaError(f"{where}: column score: not a number: {row['score']!r}") from None
        if row["system"] in scores:
            raise MetaError(f"{where}: system {row['system']!r} appears twice (first at "
                            f"{lines[row['system']]})")
        scores[row["system"]] = _score(value, where)
        lines[row["system"]] = where
    return scores, lines
