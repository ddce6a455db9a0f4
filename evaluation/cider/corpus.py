"""CIDEr of predictions against XM3600 references, language by language.

`score_languages` scores predictions (lang -> {image key -> caption}, as
`formats.predictions.read` returns them from a predictions file) against the
references of an XM3600 release `captions.jsonl`, one language per thread
(`scorer.map_languages`). The command line (`python -m evaluation.cider`) is
reading the two files, this, and printing.
"""

import dataclasses
import itertools

import numpy as np

from data import languages
from data.releases import xm3600 as xm3600_release
from errors import InputError
from evaluation.cider import scorer as scorer_lib
from evaluation.cider import text

REFERENCE_FIELDS = ("caption", "caption/tokenized")


@dataclasses.dataclass(frozen=True)
class LanguageScore:
    """The result for one language.

    Attributes:
        lang: language code.
        score: corpus score (mean over the scored images).
        keys: image keys scored, in reference file order.
        per_image: float64 [len(keys)] scores.
        num_skipped: images with references but no prediction (--allow-missing).
        scorer: the `CiderScorer` (its `document_frequency`, for --save-df), or
            None (`score_languages(..., keep_scorers=False)`).
    """
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
        if by_key.keys() <= known_keys:
            continue
        for key in by_key:
            if key not in known_keys:
                raise InputError(f"{_where(predictions, lang, key)}: prediction for image "
                                 f"{key!r} ({lang!r}), which is not in the references")


def score_languages(records, predictions, langs=None, metric="cider-d", df=None,
                    segmenter="char", reference_field="caption", allow_missing=False,
                    options=text.DEFAULT_OPTIONS, keep_scorers=True):
    """Scores predictions against XM3600 references, language by language.

    Args:
        records: `data.releases.xm3600.read_captions` output, or the
            `xm3600_release.References` of `read_references` (of the field
            `reference_field`).
        predictions: lang -> {image key -> caption} (`formats.predictions.read`).
        langs: languages to score; default: every language with predictions.
        metric: "cider-d" or "cider".
        df: optional {lang: DocumentFrequency} to use instead of counting over
            each language's references.
        segmenter: "char" or "word" (see `evaluation.cider.text`).
        reference_field: "caption" or "caption/tokenized".
        allow_missing: score only the images that have a prediction, instead of
            raising when some have none.
        options: other normalization settings.
        keep_scorers: keep each language's `CiderScorer` in its result; without
            them (None), a language's tables are freed as soon as it is scored.

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
    if isinstance(records, xm3600_release.References):
        references = records
        if references.field != reference_field:
            raise InputError(f"the references are of field {references.field!r}, not "
                             f"{reference_field!r}")
    else:
        references = xm3600_release.references_by_language(records, reference_field)
    _check_keys(predictions, references)
    tasks = []
    for lang in langs:
        keys, refs = references.get(lang)
        by_key = predictions.get(lang, {})
        if not keys:
            where = (f"{_where(predictions, lang, next(iter(by_key)))}: prediction for image "
                     f"{next(iter(by_key))!r} in {lang!r}, but the" if by_key else "the")
            raise InputError(f"{where} references have no {lang!r} captions (field "
                             f"{reference_field!r}); they have "
                             f"{', '.join(references.by_lang) or 'none'}")
        if not by_key:
            raise InputError(f"no predictions for {lang!r} (--langs asks for it)")
        with_references = set(keys)
        if not by_key.keys() <= with_references:
            for key in by_key:
                if key not in with_references:
                    raise InputError(f"{_where(predictions, lang, key)}: prediction for image "
                                     f"{key!r} in {lang!r}, which has no {lang!r} references")
        if len(by_key) == len(keys):  # every image (the keys are distinct and all known)
            covered, captions = None, list(map(by_key.__getitem__, keys))
        else:
            covered = [i for i, key in enumerate(keys) if key in by_key]
            captions = [by_key[keys[i]] for i in covered]
        num_skipped = len(keys) - len(captions)
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
        tasks.append((lang, keys, refs, captions, covered, num_skipped, lang_df))

    def score(task):
        lang, keys, refs, captions, covered, num_skipped, lang_df = task
        scorer = scorer_lib.CiderScorer(refs, lang, metric, df=lang_df, segmenter=segmenter,
                                        options=options)
        result = scorer.score(captions, indices=covered)
        return LanguageScore(lang, result.corpus,
                             list(keys) if covered is None else [keys[i] for i in covered],
                             result.per_image, num_skipped, scorer if keep_scorers else None)

    # The work grows with the characters, and more so where every character
    # is a token.
    costs = [(sum(map(len, itertools.chain.from_iterable(task[2]))) + sum(map(len, task[3])))
             * (4 if task[0] in text.SEGMENTED_LANGS and segmenter == "char" else 1)
             for task in tasks]
    return {result.lang: result
            for result in scorer_lib.map_languages(score, tasks, costs=costs)}
