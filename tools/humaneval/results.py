"""Reading what a session is built from: results folders and the XM3600 release folder.

A results folder is what the checkpoint tool writes (evaluation/evaluate.py, laid out in
docs/evaluation.md): XM3600's `predictions_<lang>.jsonl`, `scores.json` (corpus CIDEr-D per
language under "scores", optionally "coco_dev_scores") and `per_image.jsonl`, each read by its
owner in formats/ (which names the file and line at fault). The checks here are the session's:
the languages it asks for, and, against the release, a results folder of other images.
"""

import dataclasses
import os
import shlex

import files
from data.releases import xm3600 as xm3600_release
from errors import InputError
from evaluation import cli
from formats import per_image as per_image_format
from formats import predictions as predictions_format
from formats import scores as scores_format


@dataclasses.dataclass(frozen=True)
class Results:
    """One results folder, read for some languages.

    Attributes:
        path: the folder (absolute).
        captions: {lang: {image key: caption}}.
        scores: {lang: corpus CIDEr-D on XM3600} (scores.json "scores").
        coco_dev: {lang: CIDEr-D on COCO-dev} for the languages scores.json has.
        per_image: {lang: {image key: CIDEr-D}}, or None without per_image.jsonl.
        step: the checkpoint step in scores.json, or None.
    """
    path: str
    captions: dict
    scores: dict
    coco_dev: dict
    per_image: dict | None
    step: int | None


def read_release(release_dir):
    """The release's records (data/xm3600.Record), in file order.

    Raises:
        InputError: captions.jsonl is missing (and so not a release folder) or malformed
            (file:line in the message).
    """
    try:
        return xm3600_release.read_captions(os.path.join(release_dir, "captions.jsonl"))
    except FileNotFoundError as e:
        raise InputError(f"{e} (--release must be an XM3600 release folder)") from None


def _read_predictions(folder, lang):
    path = os.path.join(folder, predictions_format.file_name(lang))
    if not os.path.isfile(path):
        raise InputError(f"{path} not found: the results folder has no predictions in "
                         f"{lang!r} (a results folder of other languages?)")
    return predictions_format.read_language(path, lang)


def _language_scores(summary, field, langs, path, required):
    values = summary.get(field) or {}
    if required and any(lang not in values for lang in langs):
        lang = next(lang for lang in langs if lang not in values)
        raise InputError(f"{path}: no {field!r} for {lang!r} (it has "
                         f"{', '.join(values) or 'none'}): a results folder of other languages?")
    return {lang: values[lang] for lang in langs if lang in values}


def report_command(predictions, references, langs=None):
    """The command that scores the predictions file `predictions` into a results folder."""
    out = os.path.splitext(predictions)[0] + "_results"
    return " ".join(["python -m tools.table8", *map(shlex.quote, (
        out, "--predictions", predictions, "--references", references))]
        + ([f"--langs {','.join(langs)}"] if langs else []))


def read_results(path, langs, release="XM3600"):
    """Reads a results folder for `langs`.

    Args:
        path: the folder.
        langs: XM3600 language codes.
        release: the XM3600 release folder, in the command named for a predictions file.

    Returns:
        A `Results`; its per_image holds every language of per_image.jsonl.

    Raises:
        InputError: the folder, a predictions file or scores.json is missing, a file is
            malformed (formats/), or a language is absent from them.
    """
    if os.path.isfile(path):
        references = os.path.join(release, "captions.jsonl")
        raise InputError(f"{path} is a predictions file, not a results folder: make one with "
                         f"{report_command(path, references, langs)} and give that folder")
    cli.finish_swap(path)
    if not os.path.isdir(path):
        raise InputError(f"results folder {path} is {files.kind(path)}, not a folder"
                         if os.path.exists(path) else f"results folder not found: {path}")
    scores_path = os.path.join(path, scores_format.file_name())
    if not os.path.isfile(scores_path):
        raise InputError(f"{scores_path} not found: not a results folder of the evaluation "
                         f"tool (python -m evaluation.evaluate)")
    summary = scores_format.read(scores_path)
    per_image_path = os.path.join(path, per_image_format.file_name())
    return Results(
        path=os.path.abspath(path),
        captions={lang: _read_predictions(path, lang) for lang in langs},
        scores=_language_scores(summary, "scores", langs, scores_path, required=True),
        coco_dev=_language_scores(summary, "coco_dev_scores", langs, scores_path,
                                  required=False),
        per_image=per_image_format.read(per_image_path) if os.path.isfile(per_image_path)
        else None,
        step=summary.get("step"))


def check_against_release(results, release_keys, wanted_keys):
    """Checks that `results` captions exactly the release's images, at least `wanted_keys`.

    Args:
        results: a `Results`.
        release_keys: the release's image keys (a set).
        wanted_keys: the session's images (each must have a caption in every language).

    Raises:
        InputError: an image of the predictions is not in the release (a results folder of
            other images), or a wanted image has no caption; names file and examples.
    """
    for lang, captions in results.captions.items():
        where = os.path.join(results.path, predictions_format.file_name(lang))
        foreign = [k for k in captions if k not in release_keys]
        if foreign:
            raise InputError(
                f"{where}: {len(foreign)} of its {len(captions)} images are not in the XM3600 "
                f"release (e.g. {', '.join(map(repr, foreign[:3]))}): a results folder of "
                f"other images?")
        missing = [k for k in wanted_keys if k not in captions]
        if missing:
            raise InputError(
                f"{where}: no caption for {len(missing)} of the session's {len(wanted_keys)} "
                f"images (e.g. {', '.join(map(repr, missing[:3]))}); evaluate every image "
                f"(no max_images) or choose a subset it covers")


def describe(results, name):
    """The session file's record of a results folder: name, path, step and the CIDEr-D it
    reports, so that analysis needs the folder no more.

    Args:
        results: a `Results`.
        name: the model's name in reports (m1 / m2 column of side_by_side.csv).
    """
    return {"name": name, "results": results.path, "step": results.step,
            "cider_xm3600": results.scores, "cider_coco_dev": results.coco_dev}


def subset_cider(results, keys):
    """The per-image CIDEr-D of `keys` and its mean, per language ({} without per_image.jsonl).

    The per-image scores share the corpus's document frequencies, so the mean is the corpus
    score restricted to the subset (the paper's XM600 column, up to those frequencies).

    Returns:
        ({lang: mean over keys}, {lang: {key: score}}).

    Raises:
        InputError: per_image.jsonl lacks the score of a session image in a session language
            (that language's delta CIDEr would silently be missing); file, language, count and
            examples named.
    """
    if results.per_image is None:
        return {}, {}
    means, per_image = {}, {}
    for lang in results.captions:
        scores = results.per_image.get(lang, {})
        missing = [k for k in keys if k not in scores]
        if missing:
            path = os.path.join(results.path, per_image_format.file_name())
            raise InputError(
                f"{path}: no score for {len(missing)} of the session's {len(keys)} images in "
                f"{lang!r} (e.g. {', '.join(map(repr, missing[:3]))}): the delta CIDEr of "
                f"{lang!r} on the rated images would be missing; evaluate the folder again")
        per_image[lang] = {k: scores[k] for k in keys}
        means[lang] = sum(per_image[lang].values()) / len(keys)
    return means, per_image
