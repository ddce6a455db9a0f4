"""CIDEr of predictions against XM3600 references, language by language (one per thread)."""

import dataclasses
import itertools
import typing

import numpy as np

from data import languages
from data.releases import xm3600 as xm3600_release
from errors import InputError, reraised
from evaluation.cider import scorer as scorer_lib
from evaluation.cider import text

REFERENCE_FIELDS = ("caption", "caption/tokenized")


@dataclasses.dataclass(frozen=True)
class LanguageScore:
    """One language's corpus `score`, `keys` scored, `per_image` scores, `num_skipped`, `scorer`."""
    lang: str
    score: float
    keys: list
    per_image: np.ndarray
    num_skipped: int
    scorer: scorer_lib.CiderScorer | None


def _where(predictions, lang, key):
    """"file:line" of a prediction when `predictions` knows it (formats.predictions.read)."""
    where = getattr(predictions, "where", None)
    return where(lang, key) if where else "predictions"


def _check_keys(predictions, references):
    """Raises for the first prediction (in file order) of an image not in the references."""
    known_keys = set(references.keys)
    for lang, by_key in predictions.items():
        if (key := _unknown(by_key, known_keys)) is not None:
            raise InputError(f"{_where(predictions, lang, key)}: prediction for image "
                             f"{key!r} ({lang!r}), which is not in the references")


def _unknown(by_key, known):
    """The first key of `by_key` not in the set `known`, or None."""
    return None if by_key.keys() <= known else next(key for key in by_key if key not in known)


class _Task(typing.NamedTuple):
    lang: str
    keys: list  # Every image with references in the language, in file order.
    refs: list
    captions: list  # Of the images `covered`.
    covered: list  # Indices into keys of the images with a prediction.
    num_skipped: int
    df: object  # The language's `DocumentFrequency`, or None.


def _references(records, reference_field):
    """The `xm3600_release.References` of `records` (or `records` themselves), checked."""
    if reference_field not in REFERENCE_FIELDS:
        raise InputError(f"unknown reference field {reference_field!r}; expected one of "
                         f"{', '.join(REFERENCE_FIELDS)}")
    if not isinstance(records, xm3600_release.References):
        if not all(isinstance(r, xm3600_release.Record) for r in records):
            raise InputError("records must be those of data.releases.xm3600.read_captions (or "
                             "the References of read_references)")
        return xm3600_release.references_by_language(records, reference_field)
    if records.field != reference_field:
        raise InputError(f"the references are of field {records.field!r}, not "
                         f"{reference_field!r}")
    return records


MISSING_HINT = "pass --allow-missing to score only the images that have one"


def _task(lang, references, predictions, df, allow_missing, missing_hint=MISSING_HINT):
    """The `_Task` of `lang`, or an InputError naming what is missing or unknown."""
    keys, refs = references.get(lang)
    by_key = predictions.get(lang, {})
    if not keys:
        where = (f"{_where(predictions, lang, next(iter(by_key)))}: prediction for image "
                 f"{next(iter(by_key))!r} in {lang!r}, but the" if by_key else "the")
        raise InputError(f"{where} references have no {lang!r} captions (field "
                         f"{references.field!r}); they have "
                         f"{', '.join(references.by_lang) or 'none'}")
    if not by_key:
        raise InputError(f"no predictions for {lang!r} (--langs asks for it)")
    if (key := _unknown(by_key, set(keys))) is not None:
        raise InputError(f"{_where(predictions, lang, key)}: prediction for image "
                         f"{key!r} in {lang!r}, which has no {lang!r} references")
    covered = [i for i, key in enumerate(keys) if key in by_key]
    captions = [by_key[keys[i]] for i in covered]
    num_skipped = len(keys) - len(captions)
    if num_skipped and not allow_missing:
        missing = [key for key in keys if key not in by_key]
        raise InputError(
            f"{getattr(predictions, 'path', 'predictions')}: {num_skipped} of {len(keys)} "
            f"images with {lang!r} references have no prediction (first: "
            f"{', '.join(map(repr, missing[:3]))}); {missing_hint}")
    if df is not None and lang not in df:
        raise InputError(f"no document frequencies for {lang!r} (they cover "
                         f"{', '.join(df) or 'nothing'})")
    return _Task(lang, keys, refs, captions, covered, num_skipped,
                 None if df is None else df[lang])


def chosen_langs(langs, predictions):
    """`langs` checked, or (None) the XM3600 languages `predictions` has, in XM3600 order."""
    if langs is None:
        langs = [lang for lang in languages.XM3600_LANGS if predictions.get(lang)]
    with reraised(InputError, ValueError):
        return languages.check_langs(langs)


def score_languages(records, predictions, langs=None, metric="cider-d", df=None,
                    segmenter="char", reference_field="caption", allow_missing=False,
                    options=text.DEFAULT_OPTIONS, keep_scorers=True, missing_hint=MISSING_HINT):
    """{lang: LanguageScore} of predictions against XM3600 references, in `langs` order.
    `records`: `xm3600.read_captions` output or `References`; `df`: optional {lang:
    DocumentFrequency}; `allow_missing` scores only the images with a prediction (else an image
    without one is an InputError ending in `missing_hint`, what the caller's user can do);
    without `keep_scorers` a language's tables are freed once scored. InputError for bad input."""
    references = _references(records, reference_field)
    langs = chosen_langs(langs, predictions)
    _check_keys(predictions, references)
    tasks = [_task(lang, references, predictions, df, allow_missing, missing_hint)
             for lang in langs]

    def score(task):
        scorer = scorer_lib.CiderScorer(task.refs, task.lang, metric, df=task.df,
                                        segmenter=segmenter, options=options)
        result = scorer.score(task.captions, indices=task.covered)
        return LanguageScore(task.lang, result.corpus, [task.keys[i] for i in task.covered],
                             result.per_image, task.num_skipped, scorer if keep_scorers else None)

    # The work grows with the characters, and more so where every character is a token.
    costs = [(sum(map(len, itertools.chain.from_iterable(task.refs)))
              + sum(map(len, task.captions)))
             * (4 if task.lang in text.SEGMENTED_LANGS and segmenter == "char" else 1)
             for task in tasks]
    return {result.lang: result
            for result in scorer_lib.map_languages(score, tasks, costs=costs)}
