"""Command line of VIFIDEL: scores a predictions file against an XM3600 release's images.

    python -m tools.vifidel --references DIR/captions.jsonl --predictions preds.jsonl \
        --labels 'DIR/*-annotations-human-imagelabels*.csv' \
        --class-descriptions DIR/oidv7-class-descriptions.csv \
        --vectors 'vectors/wiki.{lang}.align.vec' [--vectors fr=other.vec] \
        [--langs en,es] [--label-lang en] [--no-references] [--penalty halved|clipped] \
        [--cost-power 2|1] [--stopwords function|iso|none|DIR] \
        [--label-weights instances|binary] \
        [--multiword mean|split] [--min-confidence 1] [--vectors-format auto|text|binary] \
        [--max-words N] [--allow-missing] [--allow-missing-labels] [--control] \
        [--per-image OUT.jsonl] [--json]

The defaults are the paper's setting (tools/vifidel/wmd.py): the halved penalty of Eq. 4,
p = 2 in Eq. 1, function words removed (tools/vifidel/stopwords.py), labels weighted by their
number of boxes where box files are given.

Prints a table (or one JSON object) of per-language VIFIDEL, the share of unknown tokens, and
with --control how often an image's own caption scores above another image's caption. Bad input
is one `error: ...` line naming the file, line and value, and exit status 2.
"""

import json
import sys

import numpy as np

import errors
from data.releases import xm3600 as xm3600_release
from formats import per_image, predictions
from tools import cli as tool_cli
from tools.vifidel import corpus, options


def _parser():
    parser = tool_cli.ArgumentParser(
        prog="python -m tools.vifidel",
        description="VIFIDEL (visual fidelity: WMD between object labels and caption words, "
                    "in a shared multilingual word-vector space), per language.")
    parser.add_argument("--references", required=True, help="XM3600 captions.jsonl")
    parser.add_argument("--predictions", required=True, action="append",
                        help="a predictions file of any kind (as python -m tools.cider's); "
                             "repeatable")
    parser.add_argument("--langs", help="comma-separated languages (default: all predicted; "
                        "one: the language of entries without \"lang\")")
    parser.add_argument("--allow-missing", action="store_true",
                        help="score only the images that have a prediction")
    parser.add_argument("--control", action="store_true",
                        help="also report how often an image's own caption beats another's")
    parser.add_argument("--per-image", metavar="OUT.jsonl",
                        help='write {"image/key", "lang", "score"} lines')
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    options.add_arguments(parser)
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
    try:
        if args.per_image:
            tool_cli.check_output_file(args.per_image, "--per-image")
        settings = options.settings(args)
        records = xm3600_release.read_captions(args.references)
        langs = args.langs.split(",") if args.langs else None
        preds = predictions.read_files(args.predictions, langs)
        results = corpus.score_languages(
            records, preds, settings, langs=langs,
            allow_missing=args.allow_missing, control=args.control)
        if args.per_image:  # An image without a known label (NaN) gets no line.
            per_image.write(args.per_image, {r.lang: dict(zip(r.keys, r.per_image.tolist(),
                                                              strict=True))
                                             for r in results.values()})
    except (errors.Error, OSError) as e:
        return errors.print_error(e)
    for r in results.values():
        if r.stopwords.missing:
            print(f"{r.lang}: no stop words ({r.stopwords.origin})", file=sys.stderr)
        notes = [f"{n} {what}" for n, what in ((r.num_skipped, "without a prediction"),
                                                (r.num_unlabelled, "without a known label"))
                 if n]
        if notes:
            print(f"{r.lang}: left out {', '.join(notes)}", file=sys.stderr)
    if args.json:
        print(json.dumps({
            "metric": "vifidel", "settings": settings.describe(),
            "references_weighting": settings.use_references,
            "stopwords": {r.lang: r.stopwords.origin for r in results.values()},
            "scores": {r.lang: r.score for r in results.values()},
            "average": float(np.mean([r.score for r in results.values()])),
            "num_images": {r.lang: len(r.keys) for r in results.values()},
            "oov": {r.lang: r.oov for r in results.values()},
            "control": {r.lang: r.control for r in results.values() if r.control},
        }, ensure_ascii=False))
    else:
        print(_table(results))
        print(f"({settings.describe()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
