"""The build of the datasets from their release files: read this first, then builder.py.

    python -m data.build coco35l --manual_dir ~/data/coco35l --data_dir ~/data/built \
        [--config all|core | --langs en,es,...] [--max_side 320] [--workers N] \
        [--corrupt_images stop|skip]

Building is offline: every file comes from the manual directory (layouts in
docs/datasets.md). COCO-35L and CC3M-35L are written in the layout of layout.py (every
image once, a caption table per language) by builder.py, which streams, runs on every core
and resumes; coco35l_plan.py and cc3m35l_plan.py say what it reads of each release, and
image_shards.py and caption_tables.py write the two parts. Building more languages later
adds their tables and leaves the images alone. XM3600 is a TFDS builder (xm3600_tfds.py),
one split per language. What is already built in `data_dir` is reused. The functions here
are the entry points (`build`, `build_corpus`, and `ensure_built` for the trainer);
__main__.py is the command line.
"""

import logging
import os

from data import languages
from data.build import layout
from data.build.progress import size_text

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


def get_builder(name, *, data_dir, config="all", corrupt_images="stop"):
    """The TFDS builder of XM3600 with the given config, rooted at `data_dir`.

    Args:
        name: "xm3600" (COCO-35L and CC3M-35L are built by `build_corpus`).
        data_dir: the TFDS data directory (built datasets live under it).
        config: "all" or "core" (en, es, hi, zh).
        corrupt_images: "stop" at a corrupt image (naming it) or "skip" and count.
    """
    import tensorflow_datasets as tfds  # Deferred: TensorFlow is slow to import.

    from data.build import xm3600_tfds

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
    modules = _plans()
    if name not in modules:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(BUILDERS)}")
    return modules[name].release(manual_dir)


def estimate_bytes(name, manual_dir, langs, images=True):
    """About the disk a build of `langs` of COCO-35L or CC3M-35L takes (images too if `images`)."""
    return _plans()[name].estimate_bytes(manual_dir, langs, images=images)


def build_corpus(name, *, manual_dir, data_dir, langs, corrupt_images="stop", max_side=0,
                 workers=None, progress_stream=None):
    """Builds what is missing of COCO-35L or CC3M-35L for `langs`; returns its summary.

    See data/build/builder.build for the arguments and what is raised.
    """
    from data.build import builder, image_shards

    langs = config_langs(None, langs, name)
    options = image_shards.ImageOptions(corrupt_images=corrupt_images, max_side=max_side)
    logging.info("Building %s (%s) from %s into %s", name, ",".join(langs), manual_dir,
                 data_dir)
    return builder.build(release(name, manual_dir), data_dir=data_dir, langs=langs,
                         options=options, workers=workers, progress_stream=progress_stream)


def ensure_built(name, *, manual_dir, data_dir, langs, build=False, corrupt_images="stop"):
    """Checks that the training split of `langs` of COCO-35L or CC3M-35L is built in
    `data_dir`; builds what is missing if `build` (after checking the disk's free space).

    Returns:
        The `layout.Built` of the dataset.

    Raises:
        layout.NotBuiltError: something is missing and `build` is False; the message says
            what, about how big it is, and the build command.
    """
    try:
        built = layout.Built(data_dir, name)
        have, images = set(built.langs("train")), False
    except layout.NotBuiltError:
        have, images = set(), True
    missing = [lang for lang in langs if lang not in have]
    if not images and not missing:
        return built
    if build:
        build_corpus(name, manual_dir=manual_dir, data_dir=data_dir, langs=missing,
                     corrupt_images=corrupt_images)
        return layout.Built(data_dir, name)
    what = (["the images"] if images else []) + [f"the captions of {', '.join(missing)}"]
    try:
        size = f"about {size_text(estimate_bytes(name, manual_dir, missing, images))}"
    except (OSError, ValueError) as e:
        size = f"size unknown: {e}"
    raise layout.NotBuiltError(
        f"{name} is not built for these languages in {data_dir}: missing "
        f"{' and '.join(what)} ({size}); build it with: python -m data.build {name} "
        f"--manual_dir {manual_dir} --data_dir {data_dir} --langs {','.join(missing)} "
        f"(or run train.py with --build_data to build it first)")


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


def _plans():
    from data.build import cc3m35l_plan, coco35l_plan

    return {"coco35l": coco35l_plan, "cc3m35l": cc3m35l_plan}
