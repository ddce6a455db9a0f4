"""CIDEr of prediction files against XM3600 references, language by language.

`read_predictions` reads and validates a predictions JSONL file (lines
{"image/key", "lang", "caption"}, as the checkpoint tool writes them) and
`score_languages` scores it against the references of an XM3600 release
`captions.jsonl`, one language per thread (`scorer.map_languages`). The
command line (`python -m eval.cider`) is these two plus printing.
"""

import dataclasses
import os

import numpy as np

from data import jsonl, languages, xm3600_release
from eval.cider import scorer as scorer_lib
from eval.cider import text
from eval.cider.df import InputError

REFERENCE_FIELDS = ("caption", "caption/tokenized")


class Predictions(dict):
    """lang -> {image key -> caption}, remembering the file and line of each prediction."""

    def __init__(self, path):
        super().__init__()
        self.path = path
        self.lines = {}

    def where(self, lang, key):
        """"file:line" of the prediction for (lang, key), or the file name."""
        return self.lines.get((lang, key), str(self.path))


def _check_prediction(obj, where):
    missing = [k for k in ("image/key", "lang", "caption") if k not in obj]
    if missing:
        raise InputError(f"{where}: missing field {', '.join(map(repr, missing))}")
    key, lang, caption = obj["image/key"], obj["lang"], obj["caption"]
    if not isinstance(key, str) or not key:
        raise InputError(f"{where}: \"image/key\" must be a non-empty string, got {key!r}")
    if lang not in languages.XM3600_LANGS:
        raise InputError(f"{where}: image {key!r}: unknown language {lang!r}; known: "
                         f"{', '.join(languages.XM3600_LANGS)}")
    if not isinstance(caption, str):
        raise InputError(f"{where}: image {key!r}: \"caption\" must be a string, got "
                         f"{type(caption).__name__}")
    return key, lang, caption


def read_predictions(path):
    """Reads and validates a predictions JSONL file.

    Each line is {"image/key": ..., "lang": ..., "caption": ...}.

    Args:
        path: the file.

    Returns:
        `Predictions`: a dict lang -> {image key -> caption}.

    Raises:
        InputError: missing or empty file, a malformed line, an unknown
            language, or a second prediction for one (image, language); the
            message names the file and line.
    """
    if not os.path.exists(path):
        raise InputError(f"predictions file not found: {path}")
    predictions = Predictions(path)
    for where, obj in jsonl.read_objects(path, error=InputError):
        key, lang, caption = _check_prediction(obj, where)
        if (lang, key) in predictions.lines:
            raise InputError(f"{where}: second prediction for image {key!r} in {lang!r} "
                             f"(the first is at {predictions.lines[(lang, key)]})")
        predictions.setdefault(lang, {})[key] = caption
        predictions.lines[(lang, key)] = where
    if not predictions:
        raise InputError(f"{path}: no predictions (the file is empty)")
    return predictions


@dataclasses.dataclass(frozen=True)
class LanguageScore:
    """The result for one language.

    Attributes:
        lang: language code.
        score: corpus score (mean over the scored images).
        keys: image keys scored, in reference file order.
        per_image: float64 [len(keys)] scores.
        num_skipped: images with references but no prediction (--allow-missing).
        scorer: the `CiderScorer` (its `document_frequency`, for --save-df).
    """
    lang: str
    score: float
    keys: list
    per_image: np.ndarray
    num_skipped: int
    scorer: scorer_lib.CiderScorer


def _where(predictions, lang, key):
    if isinstance(predictions, Predictions):
        return predictions.where(lang, key)
    return "predictions"


def score_languages(records, predictions, langs=None, metric="cider-d", df=None,
                    segmenter="char", reference_field="caption", allow_missing=False,
                    options=text.DEFAULT_OPTIONS):
    """Scores predictions against XM3600 references, language by language.

    Args:
        records: `data.xm3600_release.read_captions` output.
        predictions: lang -> {image key -> caption} (e.g. `read_predictions`).
        langs: languages to score; default: every language with predictions.
        metric: "cider-d" or "cider".
        df: optional {lang: DocumentFrequency} to use instead of counting over
            each language's references.
        segmenter: "char" or "word" (see `eval.cider.text`).
        reference_field: "caption" or "caption/tokenized".
        allow_missing: score only the images that have a prediction, instead of
            raising when some have none.
        options: other normalization settings.

    Returns:
        {lang: LanguageScore}, in `langs` order.

    Raises:
        InputError: unknown language or image key, images without predictions
            (unless allow_missing), missing document frequencies.
    """
    if reference_field not in REFERENCE_FIELDS:
        raise InputError(f"unknown reference field {reference_field!r}; expected one of "
                         f"{', '.join(REFERENCE_FIELDS)}")
    if langs is None:
        langs = [lang for lang in languages.XM3600_LANGS if predictions.get(lang)]
    try:
        langs = languages.check_langs(langs)
    except ValueError as e:
        raise InputError(str(e)) from None
    known_keys = {record.key for record in records}
    for lang, by_key in predictions.items():
        for key in by_key:
            if key not in known_keys:
                raise InputError(f"{_where(predictions, lang, key)}: prediction for image "
                                 f"{key!r} ({lang!r}), which is not in the references")
    tasks = []
    for lang in langs:
        keys, refs = xm3600_release.references(records, lang, reference_field)
        by_key = predictions.get(lang, {})
        if not keys:
            raise InputError(f"no {lang!r} references (field {reference_field!r})")
        if not by_key:
            raise InputError(f"no predictions for {lang!r}")
        index = {key: i for i, key in enumerate(keys)}
        for key in by_key:
            if key not in index:
                raise InputError(f"{_where(predictions, lang, key)}: prediction for image "
                                 f"{key!r} in {lang!r}, which has no {lang!r} references")
        covered = [i for i, key in enumerate(keys) if key in by_key]
        num_skipped = len(keys) - len(covered)
        if num_skipped and not allow_missing:
            missing = [key for key in keys if key not in by_key]
            raise InputError(
                f"{num_skipped} of {len(keys)} images with {lang!r} references have no "
                f"prediction (first: {', '.join(map(repr, missing[:3]))}); pass "
                f"--allow-missing to score only the images that have one")
        lang_df = None
        if df is not None:
            if lang not in df:
                raise InputError(f"no document frequencies for {lang!r} (they cover "
                                 f"{', '.join(df) or 'nothing'})")
            lang_df = df[lang]
        tasks.append((lang, keys, refs, [by_key[keys[i]] for i in covered], covered,
                      num_skipped, lang_df))

    def score(task):
        lang, keys, refs, captions, covered, num_skipped, lang_df = task
        scorer = scorer_lib.CiderScorer(refs, lang, metric, df=lang_df, segmenter=segmenter,
                                   options=options)
        result = scorer.score(captions, indices=covered if num_skipped else None)
        return LanguageScore(lang, result.corpus, [keys[i] for i in covered],
                             result.per_image, num_skipped, scorer)

    return {result.lang: result for result in scorer_lib.map_languages(score, tasks)}
