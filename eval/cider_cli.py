"""Command line of `eval.cider`, and the functions behind it.

    python -m eval.cider --references captions.jsonl --predictions preds.jsonl

`read_predictions` reads and validates a predictions JSONL file and
`score_languages` scores it against XM3600 references, language by language;
`main` prints the table (or JSON) and writes the optional outputs. See
the README (section "Evaluation: CIDEr").
"""

import argparse
import dataclasses
import json
import os
import sys

import numpy as np

from data import jsonl, languages, xm3600
from eval import cider, text
from eval.cider_df import InputError, load_document_frequencies, save_document_frequencies

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
    scorer: cider.CiderScorer


def _where(predictions, lang, key):
    if isinstance(predictions, Predictions):
        return predictions.where(lang, key)
    return "predictions"


def score_languages(records, predictions, langs=None, metric="cider-d", df=None,
                    segmenter="char", reference_field="caption", allow_missing=False,
                    options=text.DEFAULT_OPTIONS):
    """Scores predictions against XM3600 references, language by language.

    Args:
        records: `data.xm3600.read_captions` output.
        predictions: lang -> {image key -> caption} (e.g. `read_predictions`).
        langs: languages to score; default: every language with predictions.
        metric: "cider-d" or "cider".
        df: optional {lang: DocumentFrequency} to use instead of counting over
            each language's references.
        segmenter: "char" or "word" (see `eval.text`).
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
        keys, refs = xm3600.references(records, lang, reference_field)
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
        scorer = cider.CiderScorer(refs, lang, metric, df=lang_df, segmenter=segmenter,
                                   options=options)
        result = scorer.score(captions, indices=covered if num_skipped else None)
        return LanguageScore(lang, result.corpus, [keys[i] for i in covered],
                             result.per_image, num_skipped, scorer)

    return {result.lang: result for result in cider.map_languages(score, tasks)}


def _format_table(results, metric):
    name = {"cider-d": "CIDEr-D", "cider": "CIDEr"}[metric]
    lines = [f"{'lang':<6}{'images':>8}{name:>10}"]
    for r in results.values():
        lines.append(f"{r.lang:<6}{len(r.keys):>8}{r.score:>10.4f}")
    average = float(np.mean([r.score for r in results.values()]))
    lines.append(f"{'average':<6}{'':>8}{average:>10.4f}   ({len(results)} languages; "
                 f"pycocoevalcap scale, x100 in PaLI papers)")
    return "\n".join(lines)


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m eval.cider",
        description="CIDEr-D / CIDEr of predictions against XM3600 references, per language.")
    parser.add_argument("--references", required=True,
                        help="XM3600 captions.jsonl (release layout)")
    parser.add_argument("--predictions", required=True,
                        help='JSONL, one {"image/key": ..., "lang": ..., "caption": ...} per line')
    parser.add_argument("--langs", help="comma-separated languages (default: all predicted)")
    parser.add_argument("--metric", choices=cider.METRICS, default="cider-d")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--per-image", metavar="OUT.jsonl",
                        help='write {"image/key", "lang", "score"} lines')
    parser.add_argument("--df", metavar="FILE", help="document frequencies to use")
    parser.add_argument("--save-df", metavar="FILE",
                        help="write the document frequencies used (one file, all languages)")
    parser.add_argument("--allow-missing", action="store_true",
                        help="score only images that have a prediction")
    parser.add_argument("--segmenter", choices=text.SEGMENTERS, default="char",
                        help="ja/th/zh: characters (default) or words (needs jieba, "
                             "fugashi+unidic-lite, pythainlp)")
    parser.add_argument("--reference-field", choices=REFERENCE_FIELDS, default="caption")
    return parser


def main(argv=None):
    """Runs the CLI; returns the exit status (2 for bad input)."""
    args = _parser().parse_args(argv)
    try:
        records = xm3600.read_captions(args.references)
        predictions = read_predictions(args.predictions)
        df = load_document_frequencies(args.df) if args.df else None
        results = score_languages(
            records, predictions, langs=args.langs, metric=args.metric, df=df,
            segmenter=args.segmenter, reference_field=args.reference_field,
            allow_missing=args.allow_missing)
        for r in results.values():
            if r.num_skipped:
                print(f"{r.lang}: scored {len(r.keys)} of {len(r.keys) + r.num_skipped} "
                      f"images; skipped {r.num_skipped} without a prediction", file=sys.stderr)
        if args.per_image:
            with open(args.per_image, "w", encoding="utf-8") as f:
                for r in results.values():
                    for key, score in zip(r.keys, r.per_image.tolist(), strict=True):
                        f.write(json.dumps({"image/key": key, "lang": r.lang, "score": score},
                                           ensure_ascii=False) + "\n")
        if args.save_df:
            save_document_frequencies(args.save_df,
                                      [r.scorer.document_frequency for r in results.values()])
    except (InputError, xm3600.FormatError, text.NormalizationError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({
            "metric": args.metric,
            "scores": {r.lang: r.score for r in results.values()},
            "average": float(np.mean([r.score for r in results.values()])),
            "num_images": {r.lang: len(r.keys) for r in results.values()},
        }, ensure_ascii=False))
    else:
        print(_format_table(results, args.metric))
    return 0

