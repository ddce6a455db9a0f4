"""Builds the TFDS datasets (xm3600, coco35l, cc3m35l) from manual download folders.

    python -m data.build coco35l --manual_dir ~/data/coco35l --data_dir ~/tensorflow_datasets \
        [--config all|core] [--corrupt_images stop|skip]

Building is offline: every file comes from the manual directory (layouts in
the README's Datasets section). A dataset already built in `data_dir` is reused.
"""

import argparse
import logging
import os
import sys
import time

BUILDERS = ("xm3600", "coco35l", "cc3m35l")


def config_for(langs):
    """The smallest standard builder config holding every language in `langs`."""
    from data import languages

    return "core" if set(langs) <= set(languages.CORE_LANGS) else "all"


def get_builder(name, *, data_dir, config="all", corrupt_images="stop"):
    """The TFDS builder `name` with the given config, rooted at `data_dir`.

    Args:
        name: one of BUILDERS.
        data_dir: the TFDS data directory (built datasets live under it).
        config: "all" or "core" (en, es, hi, zh).
        corrupt_images: "stop" at a corrupt image (naming it) or "skip" and count.
    """
    import tensorflow_datasets as tfds  # Deferred: TensorFlow is slow to import.

    from data import builders

    classes = {"xm3600": builders.xm3600_tfds.Xm3600,
               "coco35l": builders.coco35l_tfds.Coco35l,
               "cc3m35l": builders.cc3m35l_tfds.Cc3m35l}
    if name not in classes:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(BUILDERS)}")
    names = [c.name for c in classes[name].BUILDER_CONFIGS]
    if config not in names:
        raise ValueError(f"unknown {name} config {config!r}; known: {', '.join(names)}")
    tfds.disable_progress_bar()
    return classes[name](config=config, data_dir=data_dir, file_format="array_record",
                         corrupt_images=corrupt_images)


def build(name, *, manual_dir, data_dir, config="all", corrupt_images="stop"):
    """Builds (or reuses) a dataset; returns its builder.

    Raises:
        FileNotFoundError: the manual directory or a file in it is missing (the
            message says what is missing and where it goes).
    """
    import tensorflow_datasets as tfds

    builder = get_builder(name, data_dir=data_dir, config=config,
                          corrupt_images=corrupt_images)
    if builder.is_prepared():
        return builder
    if not os.path.isdir(manual_dir):
        raise FileNotFoundError(f"manual directory of {name} not found: {manual_dir} "
                                f"(see the README's Datasets section for what goes in it)")
    logging.info("Building %s/%s from %s into %s", name, config, manual_dir, data_dir)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=manual_dir))
    return builder


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset", choices=BUILDERS)
    parser.add_argument("--manual_dir", required=True)
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--config", default="all", choices=("all", "core"))
    parser.add_argument("--corrupt_images", default="stop", choices=("stop", "skip"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    start = time.time()
    try:
        builder = build(args.dataset, manual_dir=args.manual_dir, data_dir=args.data_dir,
                        config=args.config, corrupt_images=args.corrupt_images)
    except (OSError, ValueError) as e:  # Missing/malformed input: the message says which.
        print(f"error: {_root_cause(e)}", file=sys.stderr)
        return 2
    print(f"{args.dataset}/{args.config} ready in {builder.data_dir} "
          f"({time.time() - start:.0f}s):")
    for split, info in sorted(builder.info.splits.items()):
        print(f"  {split}: {info.num_examples} examples")
    return 0


def _root_cause(error):
    """Our own message, without the context TFDS prepends when it re-raises."""
    while error.__cause__ is not None:
        error = error.__cause__
    return error


if __name__ == "__main__":
    sys.exit(main())
