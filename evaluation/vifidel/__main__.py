"""Command line of VIFIDEL: scores a predictions file against an XM3600 release's images.

    python -m evaluation.vifidel --references DIR/captions.jsonl --predictions preds.jsonl \
        --labels 'DIR/*-annotations-human-imagelabels*.csv' \
        --class-descriptions DIR/oidv7-class-descriptions.csv \
        --vectors 'vectors/wiki.{lang}.align.vec' [--vectors fr=other.vec] \
        [--langs en,es] [--label-lang en] [--no-references] [--stopwords DIR] \
        [--multiword mean|split] [--min-confidence 1] [--vectors-format auto|text|binary] \
        [--max-words N] [--allow-missing] [--allow-missing-labels] [--control] \
        [--per-image OUT.jsonl] [--json]

Prints a table (or one JSON object) of per-language VIFIDEL, the share of unknown tokens, and
with --control how often an image's own caption scores above another image's caption. Bad input
is one `error: ...` line naming the file, line and value, and exit status 2.
"""

import argparse
import json
import sys

import numpy as np

import errors
from data import xm3600_release
from evaluation.vifidel import bags, corpus, vectors
from formats import per_image, predictions


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.vifidel",
        description="VIFIDEL (visual fidelity: WMD between object labels and caption words, "
                    "in a shared multilingual word-vector space), per language.")
    parser.add_argument("--references", required=True, help="XM3600 captions.jsonl")
    parser.add_argument("--predictions", required=True,
                        help='JSONL, one {"image/key", "lang", "caption"} per line')
    parser.add_argument("--labels", required=True, action="append",
                        help="Open Images label CSV(s) or JSONL {image/key, labels}; globs "
                             "allowed; repeatable")
    parser.add_argument("--class-descriptions", help="Open Images MID -> name CSV")
    parser.add_argument("--vectors", required=True, action="append",
                        help="word vectors: a pattern with {lang}, or LANG=PATH; repeatable")
    parser.add_argument("--vectors-format", choices=vectors.FORMATS, default="auto")
    parser.add_argument("--max-words", type=int, help="read only the first N words per file")
    parser.add_argument("--langs", help="comma-separated languages (default: all predicted)")
    parser.add_argument("--label-lang", default="en", help="language of the label names")
    parser.add_argument("--no-references", action="store_true",
                        help="plain VIFIDEL: no importance penalty from the references")
    parser.add_argument("--stopwords", metavar="DIR", help="folder of <lang>.txt stop words")
    parser.add_argument("--multiword", choices=bags.MULTIWORD, default="mean")
    parser.add_argument("--min-confidence", type=float, default=1.0,
                        help="Open Images rows kept (default 1: verified positives)")
    parser.add_argument("--allow-missing", action="store_true",
                        help="score only the images that have a prediction")
    parser.add_argument("--allow-missing-labels", action="store_true",
                        help="leave images without labels out instead of refusing")
    parser.add_argument("--control", action="store_true",
                        help="also report how often an image's own caption beats another's")
    parser.add_argument("--per-image", metavar="OUT.jsonl",
                        help='write {"image/key", "lang", "score"} lines')
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _table(results):
    lines = [f"{'lang':<6}{'images':>8}{'VIFIDEL':>10}{'empty':>7}{'OOV %':>8}"
             + ("  own > other" if any(r.control for r in results.values()) else "")]
    for r in results.values():
        line = (f"{r.lang:<6}{len(r.keys):>8}{r.score:>10.4f}{r.num_empty:>7}"
                f"{100 * r.oov['captions']['rate']:>8.1f}")
        if r.control:
            line += f"  {100 * r.control[0]:.1f}% of {r.control[1]}"
        lines.append(line)
    lines.append(f"{'average':<6}{'':>8}{np.mean([r.score for r in results.values()]):>10.4f}"
                 f"   ({len(results)} languages)")
    return "\n".join(lines)


def main(argv=None):
    """Runs the CLI; returns the exit status (2 for bad input)."""
    args = _parser().parse_args(argv)
    settings = corpus.Settings(
        vectors=tuple(args.vectors), labels=tuple(args.labels),
        class_descriptions=args.class_descriptions, label_lang=args.label_lang,
        use_references=not args.no_references, stopwords=args.stopwords,
        multiword=args.multiword, min_confidence=args.min_confidence,
        vectors_format=args.vectors_format, max_words=args.max_words,
        allow_missing_labels=args.allow_missing_labels)
    try:
        if args.max_words is not None and args.max_words < 1:
            raise errors.InputError(f"--max-words must be positive, got {args.max_words}")
        records = xm3600_release.read_captions(args.references)
        preds = predictions.read(args.predictions)
        results = corpus.score_languages(
            records, preds, settings, langs=args.langs.split(",") if args.langs else None,
            allow_missing=args.allow_missing, control=args.control)
        if args.per_image:  # An image without a known label (NaN) gets no line.
            per_image.write(args.per_image, {r.lang: dict(zip(r.keys, r.per_image.tolist(),
                                                              strict=True))
                                             for r in results.values()})
    except (errors.Error, OSError) as e:
        return errors.print_error(e)
    for r in results.values():
        notes = [f"{n} {what}" for n, what in ((r.num_skipped, "without a prediction"),
                                                (r.num_unlabelled, "without a known label"))
                 if n]
        if notes:
            print(f"{r.lang}: left out {', '.join(notes)}", file=sys.stderr)
    if args.json:
        print(json.dumps({
            "metric": "vifidel", "references_weighting": settings.use_references,
            "scores": {r.lang: r.score for r in results.values()},
            "average": float(np.mean([r.score for r in results.values()])),
            "num_images": {r.lang: len(r.keys) for r in results.values()},
            "oov": {r.lang: r.oov for r in results.values()},
            "control": {r.lang: r.control for r in results.values() if r.control},
        }, ensure_ascii=False))
    else:
        print(_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
