"""VIFIDEL of an image set's captions, language by language: labels, vectors, scorers.

`Settings` holds the choices (vector files, label language, references or not, the penalty,
the cost's exponent, stop words, label weights, multi-word labels), each default the paper's
setting; `build_scorers` reads the labels of the images, loads each language's
vectors once and prepares one `VifidelScorer` per language; the in-loop evaluator
(tools/vifidel/evaluator.py) and the command line (`python -m tools.vifidel`) both
use it.
`score_languages` scores predictions (`formats.predictions.read` of a predictions file) against
an XM3600 release, and `ranking_control` checks the metric's grounding: how often an image's
own caption scores above the caption of another image.
"""

import collections
import dataclasses

import numpy as np

from data import languages
from data.releases import xm3600 as xm3600_release
from errors import InputError
from evaluation.cider import per_language
from evaluation.cider import scorer as cider_scorer
from tools.vifidel import labels, vectors, wmd
from tools.vifidel import stopwords as stop_lists
from tools.vifidel.scorer import VifidelScorer

_EXAMPLES = 3


LABEL_WEIGHTS = ("instances", "binary")


@dataclasses.dataclass(frozen=True)
class Settings:
    """How VIFIDEL is computed; each default is the paper's setting.

    Attributes:
        vectors: vector file specs (`vectors.vector_paths`): "lang=PATH" or a pattern with
            "{lang}".
        labels: label files or glob patterns (`labels.read_labels`).
        class_descriptions: the Open Images class-description CSV, or None (JSONL labels).
        label_lang: the language of the label names (Open Images: "en").
        use_references: weight the cost by the references (Eqs. 4-5) when there are some.
        penalty: "halved" (Eq. 4) or "clipped" (tools/vifidel/wmd.py).
        cost_power: the exponent p of the cost, 2 (Eq. 1) or 1 (the authors' script).
        stopwords: "function" (function words from Universal Dependencies treebanks), "iso"
            (the stopwordsiso lists), "none", or a folder of `<lang>.txt` lists
            (tools/vifidel/stopwords.py).
        label_weights: "instances" (a label weighs its number of boxes where box files are
            given, 1 with image-level labels) or "binary" (every label once: the paper's
            ablation).
        multiword: "mean" or "split" (tools/vifidel/bags.py).
        min_confidence: Open Images rows kept (1: verified positives).
        vectors_format: "auto", "text" or "binary".
        max_words: read only the first this many words of each vector file.
        allow_missing_labels: score images without labels as missing (NaN, left out of the
            mean) instead of refusing.
    """
    vectors: tuple
    labels: tuple
    class_descriptions: str | None = None
    label_lang: str = "en"
    use_references: bool = True
    penalty: str = "halved"
    cost_power: int = 2
    stopwords: str | None = stop_lists.DEFAULT
    label_weights: str = "instances"
    multiword: str = "mean"
    min_confidence: float = 1.0
    vectors_format: str = "auto"
    max_words: int | None = None
    allow_missing_labels: bool = False

    def check(self):
        """Raises InputError naming a setting outside its choices."""
        for name, value, known in (("penalty", self.penalty, wmd.PENALTIES),
                                   ("cost power", self.cost_power, wmd.COST_POWERS),
                                   ("label weights", self.label_weights, LABEL_WEIGHTS)):
            if value not in known:
                raise InputError(f"unknown VIFIDEL {name} {value!r}; known: "
                                 f"{', '.join(map(str, known))}")
        if not 0 <= self.min_confidence <= 1:
            raise InputError(f"--min-confidence must be in [0, 1], got {self.min_confidence}")
        if self.max_words is not None and self.max_words < 1:
            raise InputError(f"--max-words must be positive, got {self.max_words}")

    def describe(self):
        """The settings that change scores, as one line for reports."""
        refs = (f"references penalty {self.penalty}" if self.use_references
                else "no references")
        return (f"p={self.cost_power}, {refs}, stop words {self.stopwords or 'none'}, label "
                f"weights {self.label_weights}, multiword {self.multiword}")


def build_scorers(keys, references, settings, *, map_fn=None):
    """One `VifidelScorer` per language.

    Args:
        keys: {lang: [image keys]}.
        references: {lang: [list of reference captions per image]}; used for the importance
            penalty when `settings.use_references`.
        settings: `Settings`.
        map_fn: optional (fn, items) -> results, to prepare languages in parallel.

    Returns:
        {lang: VifidelScorer}, in `keys` order.

    Raises:
        InputError: missing or malformed label, vector or stop-word files; images without
            labels (unless allowed; the count and examples are named); a language without
            vectors.
    """
    langs = list(keys)
    settings.check()
    if settings.label_lang not in languages.XM3600_LANGS:
        raise InputError(f"unknown label language {settings.label_lang!r}")
    all_keys = [k for lang in langs for k in keys[lang]]
    found = labels.read_labels(settings.labels, all_keys,
                               class_descriptions=settings.class_descriptions,
                               min_confidence=settings.min_confidence)
    missing = labels.missing_labels(found, dict.fromkeys(all_keys))
    if missing and not settings.allow_missing_labels:
        raise InputError(f"{len(missing)} of {len(set(all_keys))} images have no label in "
                         f"{', '.join(labels.expand(settings.labels))} (first: "
                         f"{', '.join(missing[:_EXAMPLES])}); allow missing labels to score "
                         f"the others only")
    if settings.label_weights == "binary":
        found = {key: collections.Counter(dict.fromkeys(names, 1)) for key, names in found.items()}
    loaded = vectors.load_languages(settings.vectors, sorted({*langs, settings.label_lang}),
                                    fmt=settings.vectors_format, max_words=settings.max_words)
    label_stopwords = stop_lists.load(settings.stopwords, settings.label_lang).keys

    def prepare(lang):
        return VifidelScorer(
            [found.get(k, {}) for k in keys[lang]], lang, loaded[lang],
            label_vectors=loaded[settings.label_lang], label_lang=settings.label_lang,
            references=references[lang] if settings.use_references else None,
            stopwords=stop_lists.load(settings.stopwords, lang).keys,
            label_stopwords=label_stopwords, multiword=settings.multiword,
            penalty=settings.penalty, cost_power=settings.cost_power)

    prepared = (map_fn or (lambda fn, items: [fn(x) for x in items]))(prepare, langs)
    return dict(zip(langs, prepared, strict=True))


def ranking_control(scorer, captions):
    """How often an image's own caption scores above another image's caption.

    The other caption of image i is the caption of the next image (cyclically) whose caption
    differs from image i's: a fixed pairing, so runs are comparable, and never the same text
    (two images showing the same thing may share a caption, which is then right for both).

    Returns:
        (share of the compared images where own > other, number compared: images with a known
        label and some different caption).
    """
    captions = list(captions)
    n = len(captions)
    partner = []
    for i, caption in enumerate(captions):
        step = next((d for d in range(1, n) if captions[(i + d) % n] != caption), None)
        partner.append(i if step is None else (i + step) % n)
    own = scorer.score(captions).per_image
    other = scorer.score([captions[j] for j in partner]).per_image
    valid = ~np.isnan(own) & (np.array(partner) != np.arange(n))
    if not valid.any():
        return float("nan"), 0
    return float(np.mean(own[valid] > other[valid])), int(valid.sum())


@dataclasses.dataclass(frozen=True)
class LanguageVifidel:
    """The result of one language of a predictions file.

    Attributes:
        lang: language code.
        score: mean VIFIDEL over the scored images.
        keys: image keys scored, in reference-file order.
        per_image: float64 [len(keys)] (NaN: no known label).
        num_skipped: images with references but no prediction (allowed missing).
        num_unlabelled: images none of whose labels the vectors know.
        num_empty: captions without a known content word.
        oov: unknown-token counts (see `VifidelResult.oov`).
        control: `ranking_control` result, or None.
        stopwords: the language's `stopwords.StopWords` (where they come from, or that there
            are none).
    """
    lang: str
    score: float
    keys: list
    per_image: np.ndarray
    num_skipped: int
    num_unlabelled: int
    num_empty: int
    oov: dict
    control: tuple | None
    stopwords: stop_lists.StopWords | None = None


def score_languages(records, predictions, settings, *, langs=None, allow_missing=False,
                    control=False):
    """Scores a predictions file against an XM3600 release's images, language by language.

    Args:
        records: `data.releases.xm3600.read_captions` output.
        predictions: lang -> {image key -> caption} (`formats.predictions.read`).
        settings: `Settings`.
        langs: languages to score (default: every language with predictions).
        allow_missing: score only the images that have a prediction.
        control: also compute `ranking_control`.

    Returns:
        {lang: LanguageVifidel}.

    Raises:
        InputError: as `build_scorers`, or predictions for unknown images, or images without
            predictions (unless `allow_missing`).
    """
    langs = per_language.chosen_langs(langs, predictions)
    keys, refs, chosen, skipped = {}, {}, {}, {}
    for lang in langs:
        all_keys, all_refs = xm3600_release.references(records, lang)
        by_key = predictions.get(lang, {})
        if not by_key:
            raise InputError(f"no predictions for {lang!r}")
        unknown = [k for k in by_key if k not in set(all_keys)]
        if unknown:
            where = getattr(predictions, "where", lambda lang, key: "predictions")
            raise InputError(f"{where(lang, unknown[0])}: prediction for image {unknown[0]!r} "
                             f"in {lang!r}, which has no {lang!r} references")
        covered = [i for i, k in enumerate(all_keys) if k in by_key]
        skipped[lang] = len(all_keys) - len(covered)
        if skipped[lang] and not allow_missing:
            first = [k for k in all_keys if k not in by_key][:_EXAMPLES]
            raise InputError(f"{skipped[lang]} of {len(all_keys)} images with {lang!r} "
                             f"references have no prediction (first: {', '.join(first)}); "
                             f"pass --allow-missing to score only the others")
        keys[lang] = [all_keys[i] for i in covered]
        refs[lang] = [all_refs[i] for i in covered]
        chosen[lang] = [by_key[k] for k in keys[lang]]
    scorers = build_scorers(keys, refs, settings, map_fn=cider_scorer.map_languages)
    out = {}
    for lang, scorer in scorers.items():
        result = scorer.score(chosen[lang])
        out[lang] = LanguageVifidel(
            lang=lang, score=result.corpus, keys=keys[lang], per_image=result.per_image,
            num_skipped=skipped[lang], num_unlabelled=scorer.num_unlabelled,
            num_empty=result.num_empty, oov=result.oov,
            control=ranking_control(scorer, chosen[lang]) if control else None,
            stopwords=stop_lists.load(settings.stopwords, lang))
    return out

