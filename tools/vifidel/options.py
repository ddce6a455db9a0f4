"""VIFIDEL's command-line options, shared by `python -m tools.vifidel` and
`python -m tools.analysis.meta --metric vifidel`, so that both tools offer the same
settings under the same names (and the in-loop evaluator the same fields,
tools/vifidel/evaluator.py).
"""

from tools.vifidel import bags, corpus, stopwords, vectors, wmd


def add_arguments(parser, *, required=True):
    """Adds the inputs and settings of `corpus.Settings` to an argparse parser.

    Args:
        parser: an `argparse.ArgumentParser`.
        required: whether --labels and --vectors are required (the meta-evaluation asks for
            them only with --metric vifidel).
    """
    group = parser.add_argument_group("VIFIDEL (defaults: the paper's setting)")
    group.add_argument("--labels", required=required, action="append",
                       help="Open Images label CSV(s) (image-level or boxes) or JSONL "
                            "{image/key, labels}; globs allowed; repeatable")
    group.add_argument("--class-descriptions", help="Open Images MID -> name CSV")
    group.add_argument("--vectors", required=required, action="append",
                       help="word vectors: a pattern with {lang}, or LANG=PATH; repeatable")
    group.add_argument("--vectors-format", choices=vectors.FORMATS, default="auto")
    group.add_argument("--max-words", type=int, help="read only the first N words per file")
    group.add_argument("--label-lang", default="en", help="language of the label names")
    group.add_argument("--no-references", action="store_true",
                       help="plain VIFIDEL: no importance penalty from the references (Eq. 3 "
                            "without Eqs. 4-5)")
    group.add_argument("--penalty", choices=wmd.PENALTIES, default="halved",
                       help="importance penalty: halved = Eq. 4, (1 - max cos) / 2 (default); "
                            "clipped = clip(1 - max cos, 0, 1)")
    group.add_argument("--cost-power", type=int, choices=wmd.COST_POWERS, default=2,
                       help="exponent p of the cost ||x_i - x_j||^p: 2 = Eq. 1 (default), "
                            "1 = the authors' script")
    group.add_argument("--stopwords", default=stopwords.DEFAULT,
                       metavar="function|iso|none|DIR",
                       help="stop words: function = function words from Universal "
                            "Dependencies (default), iso = the stopwordsiso lists, none, or a "
                            "folder of <lang>.txt")
    group.add_argument("--label-weights", choices=corpus.LABEL_WEIGHTS, default="instances",
                       help="instances: a label weighs its number of boxes (box files), "
                            "binary: each label once")
    group.add_argument("--multiword", choices=bags.MULTIWORD, default="mean")
    group.add_argument("--min-confidence", type=float, default=1.0,
                       help="Open Images rows kept (default 1: verified positives)")
    group.add_argument("--allow-missing-labels", action="store_true",
                       help="leave images without labels out instead of refusing")
    return group


def settings(args):
    """The `corpus.Settings` of parsed arguments (checked: `Settings.check`)."""
    out = corpus.Settings(
        vectors=tuple(args.vectors or ()), labels=tuple(args.labels or ()),
        class_descriptions=args.class_descriptions, label_lang=args.label_lang,
        use_references=not args.no_references, penalty=args.penalty,
        cost_power=args.cost_power, stopwords=args.stopwords,
        label_weights=args.label_weights, multiword=args.multiword,
        min_confidence=args.min_confidence, vectors_format=args.vectors_format,
        max_words=args.max_words, allow_missing_labels=args.allow_missing_labels)
    out.check()
    return out
