"""Builds the datasets (xm3600, coco35l, cc3m35l) from manual download folders.

    python -m data.build coco35l --manual_dir ~/data/coco35l --data_dir ~/data/built \
        [--config all|core | --langs en,es,...] [--max_side 320] [--workers N] \
        [--corrupt_images stop|skip]

Building is offline: every file comes from the manual directory (layouts in
docs/datasets.md). COCO-35L and CC3M-35L are written in the layout of
data/corpus.py (every image once, a caption table per language; see
data/builders/corpus.py for how the build streams, runs on every core and
resumes): building more languages later adds their tables and leaves the
images alone. XM3600 is a TFDS builder (data/builders/xm3600_tfds.py), one
split per language. What is already built in `data_dir` is reused.
"""

import argparse
import logging
import os
import sys
import time

import errors
from data import languages

BUILDERS = ("xm3600", "coco35l", "cc3m35l")
CONFIGS = {"all": None, "core": languages.CORE_LANGS}


def config_langs(config, langs=None, dataset="coco35l"):
    """The languages a build covers: `langs` if given, else those of config "all" or "core"."""
    known = languages.XM3600_LANGS if dataset == "xm3600" else languages.TRAIN_35L_LANGS
    if langs:
        return languages.check_langs(langs, known=known, what=f"{dataset} language")
    if config not in CONFIGS:
        raise ValueError(f"unknown {dataset} config {config!r}; known: {', '.join(CONFIGS)}")
    return tuple(CONFIGS[config] or known)


def config_for(langs):
    """The smallest standard XM3600 builder config holding every language in `langs`."""
    return "core" if set(langs) <= set(languages.CORE_LANGS) else "all"


def get_builder(name, *, data_dir, config="all", corrupt_images="stop"):
    """The TFDS builder of XM3600 with the given config, rooted at `data_dir`.

    Args:
        name: "xm3600" (COCO-35L and CC3M-35L are built by `build_corpus`).
        data_dir: the TFDS data directory (built datasets live under it).
        config: "all" or "core" (en, es, hi, zh).
        corrupt_images: "stop" at a corrupt image (naming it) or "skip" and count.
    """
    import tensorflow_datasets as tfds  # Deferred: TensorFlow is slow to import.

    from data.builders import xm3600_tfds

    if name != "xm3600":
        raise ValueError(f"unknown TFDS dataset {name!r}; known: xm3600 (build coco35l and "
                         f"cc3m35l with build_corpus)")
    names = [c.name for c in xm3600_tfds.Xm3600.BUILDER_CONFIGS]
    if config not in names:
        raise ValueError(f"unknown {name} config {config!r}; known: {', '.join(names)}")
    tfds.disable_progress_bar()
    return xm3600_tfds.Xm3600(config=config, data_dir=data_dir, file_format="array_record",
                              corrupt_images=corrupt_images)


def release(name, manual_dir):
    """The builder's `Release` of COCO-35L or CC3M-35L in `manual_dir`."""
    from data.builders import cc3m35l, coco35l

    modules = {"coco35l": coco35l, "cc3m35l": cc3m35l}
    if name not in modules:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(BUILDERS)}")
    return modules[name].release(manual_dir)


def estimate_bytes(name, manual_dir, langs, images=True):
    """About the disk a build of `langs` of COCO-35L or CC3M-35L takes (images too if `images`)."""
    from data.builders import cc3m35l, coco35l

    module = {"coco35l": coco35l, "cc3m35l": cc3m35l}[name]
    return module.estimate_bytes(manual_dir, langs, images=images)


def build_corpus(name, *, manual_dir, data_dir, langs, corrupt_images="stop", max_side=0,
                 workers=None, progress_stream=None):
    """Builds what is missing of COCO-35L or CC3M-35L for `langs`; returns its summary.

    See data/builders/corpus.build for the arguments and what is raised.
    """
    from data import corpus
    from data.builders import corpus as corpus_builder

    langs = config_langs(None, langs, name)
    for old in corpus.old_layout_dirs(data_dir, name):
        logging.warning("%s is %s in the layout before this version (a copy of every image per "
                        "language); the build writes the new layout beside it; delete it "
                        "when nothing reads it any more", old, name)
    options = corpus_builder.ImageOptions(corrupt_images=corrupt_images, max_side=max_side)
    logging.info("Building %s (%s) from %s into %s", name, ",".join(langs), manual_dir,
                 data_dir)
    return corpus_builder.build(release(name, manual_dir), data_dir=data_dir, langs=langs,
                                options=options, workers=workers,
                                progress_stream=progress_stream)


def build(name, *, manual_dir, data_dir, config="all", langs=None, corrupt_images="stop",
          max_side=0, workers=None):
    """Builds (or reuses) a dataset; returns {split: number of examples} of what is built.

    Args:
        name: one of BUILDERS.
        manual_dir: the release folder.
        data_dir: where built datasets live.
        config: "all" or "core" (en, es, hi, zh), when `langs` is not given.
        langs: the languages to build (COCO-35L, CC3M-35L).
        corrupt_images: "stop" at a corrupt image (naming it) or "skip" and count.
        max_side: COCO-35L, CC3M-35L: re-encode larger images at this side (0: keep them).
        workers: COCO-35L, CC3M-35L: worker processes (default: every core; 0: none).

    Raises:
        FileNotFoundError: the manual directory or a file in it is missing (the
            message says what is missing and where it goes).
    """
    if name not in BUILDERS:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(BUILDERS)}")
    if name != "xm3600":
        summary = build_corpus(name, manual_dir=manual_dir, data_dir=data_dir,
                               langs=config_langs(config, langs, name),
                               corrupt_images=corrupt_images, max_side=max_side,
                               workers=workers)
        return {**{f"images/{s}": n for s, n in summary["images"].items()},
                **{f"captions/{s}": n for s, n in summary["captions"].items()}}
    import tensorflow_datasets as tfds

    builder = get_builder(name, data_dir=data_dir, config=config,
                          corrupt_images=corrupt_images)
    if not builder.is_prepared():
        if not os.path.isdir(manual_dir):
            raise FileNotFoundError(f"manual directory of {name} not found: {manual_dir} "
                                    f"(see docs/datasets.md for what goes in it)")
        logging.info("Building %s/%s from %s into %s", name, config, manual_dir, data_dir)
        builder.download_and_prepare(
            download_config=tfds.download.DownloadConfig(manual_dir=manual_dir))
    return {split: info.num_examples for split, info in builder.info.splits.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset", choices=BUILDERS)
    parser.add_argument("--manual_dir", required=True, help="the release files")
    parser.add_argument("--data_dir", required=True, help="where built datasets go")
    parser.add_argument("--config", default="all", choices=tuple(CONFIGS),
                        help="all languages, or core: en, es, hi, zh")
    parser.add_argument("--langs", default="",
                        help="comma-separated languages to build instead of --config's")
    parser.add_argument("--max_side", type=int, default=0,
                        help="coco35l, cc3m35l: re-encode images larger than this many pixels "
                             "(longer side) at that side, e.g. 320 for 224-px training; 0 "
                             "keeps the release's JPEGs")
    parser.add_argument("--workers", type=int, default=None,
                        help="coco35l, cc3m35l: worker processes (default: every core)")
    parser.add_argument("--corrupt_images", default="stop", choices=("stop", "skip"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    start = time.time()
    try:
        counts = build(args.dataset, manual_dir=args.manual_dir, data_dir=args.data_dir,
                       config=args.config, langs=args.langs or None,
                       corrupt_images=args.corrupt_images, max_side=args.max_side,
                       workers=args.workers)
    except (OSError, errors.Error) as e:  # Missing/malformed input: the message says which.
        print(f"error: {_root_cause(e)}", file=sys.stderr)
        return 2
    print(f"{args.dataset} ready in {args.data_dir} ({time.time() - start:.0f}s):")
    for split, count in sorted(counts.items()):
        print(f"  {split}: {count} examples")
    return 0


def _root_cause(error):
    """Our own message, without the context TFDS prepends when it re-raises."""
    while error.__cause__ is not None:
        error = error.__cause__
    return error


if __name__ == "__main__":
    sys.exit(main())
