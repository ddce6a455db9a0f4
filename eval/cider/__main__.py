"""Command line of the CIDEr engine: scores a predictions file against XM3600 references.

    python -m eval.cider --references captions.jsonl --predictions preds.jsonl \
        [--langs en,es] [--metric cider-d|cider] [--json] [--per-image OUT.jsonl] \
        [--df FILE] [--save-df FILE] [--allow-missing] [--segmenter char|word] \
        [--reference-field caption|caption/tokenized]

Prints a table (or one JSON object) of per-language scores and their average;
bad input is one `error: ...` line naming the file, line and key, and exit
status 2. See the README (section "Evaluation: CIDEr").
"""

import argparse
import json
import sys

import numpy as np

from data import xm3600_release
from eval.cider import corpus, scorer, text
from eval.cider.df import InputError, load_document_frequencies, save_document_frequencies


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
    parser.add_argument("--metric", choices=scorer.METRICS, default="cider-d")
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
    parser.add_argument("--reference-field", choices=corpus.REFERENCE_FIELDS, default="caption")
    return parser


def main(argv=None):
    """Runs the CLI; returns the exit status (2 for bad input)."""
    args = _parser().parse_args(argv)
    try:
        records = xm3600_release.read_captions(args.references)
        predictions = corpus.read_predictions(args.predictions)
        df = load_document_frequencies(args.df) if args.df else None
        results = corpus.score_languages(
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
    except (InputError, xm3600_release.FormatError, text.NormalizationError, OSError) as e:
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


if __name__ == "__main__":
    sys.exit(main())
