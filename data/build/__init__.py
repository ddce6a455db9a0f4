r"""The build of the datasets from their release files: read this first, then builder.py.

    python -m tools.build_data coco35l --manual_dir ~/data/coco35l --data_dir ~/data/built \
        [--config all|core | --langs en,es,...] [--max_side 320] [--workers N] \
        [--corrupt_images stop|skip]

Offline: every file comes from the manual directory (docs/datasets.md). COCO-35L and
CC3M-35L go into layout.py's layout by builder.py (streaming, on every core, resumable;
coco35l_plan.py and cc3m35l_plan.py say what it reads); more languages later only add
tables. What is built is reused. (XM3600 is read from its release folder; tools/xm3600_tfds.py
builds it for TFDS.)
"""

import logging
import os

from data import languages
from data.build import layout
from data.build.progress import size_text

BUILDERS = ("coco35l", "cc3m35l")
CONFIGS = {"all": languages.TRAIN_35L_LANGS, "core": languages.CORE_LANGS}


def release(name, manual_dir):
    """The builder's `Release` of COCO-35L or CC3M-35L in `manual_dir`."""
    if name not in BUILDERS:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(BUILDERS)}")
    if not os.path.isdir(manual_dir):
        raise FileNotFoundError(f"manual directory of {name} not found: {manual_dir} "
                                f"(see docs/datasets.md for what goes in it)")
    return _plans()[name].release(manual_dir)


def build_corpus(name, *, manual_dir, data_dir, langs, corrupt_images="stop", max_side=0,
                 workers=None):
    """Builds what is missing of COCO-35L or CC3M-35L for `langs` (`builder.build`); its summary."""
    from data.build import builder, image_shards

    langs = languages.check_langs(langs, known=languages.TRAIN_35L_LANGS, what=f"{name} language")
    options = image_shards.ImageOptions(corrupt_images=corrupt_images, max_side=max_side)
    logging.info("Building %s (%s) from %s into %s", name, ",".join(langs), manual_dir,
                 data_dir)
    return builder.build(release(name, manual_dir), data_dir=data_dir, langs=langs,
                         options=options, workers=workers)


def ensure_built(name, *, manual_dir, data_dir, langs, build=False, corrupt_images="stop"):
    """The `layout.Built` once the training split of `langs` is built in `data_dir`.
    Builds what is missing if `build` (after checking free space); else NotBuiltError saying what,
    about how big, and the build command."""
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
    from data.build import builder

    try:
        size = builder.estimate_bytes(_plans()[name].release(manual_dir), missing, images)
        size = f"about {size_text(size)}"
    except (OSError, ValueError) as e:
        size = f"size unknown: {e}"
    raise layout.NotBuiltError(
        f"{name} is not built for these languages in {data_dir}: missing "
        f"{' and '.join(what)} ({size}); build it with: python -m tools.build_data {name} "
        f"--manual_dir {manual_dir} --data_dir {data_dir} --langs {','.join(missing)} "
        f"(or run train.py with --build_data to build it first)")


def build(name, *, manual_dir, data_dir, config="all", langs=None, corrupt_images="stop",
          max_side=0, workers=None):
    """Builds (or reuses) a dataset of BUILDERS; returns {split: examples}.
    `config` ("all" or "core") applies when `langs` is not given; `max_side` (re-encode larger
    images, 0: keep) and `workers` apply to COCO-35L and CC3M-35L. FileNotFoundError names a missing
    manual directory or file."""
    if not langs and config not in CONFIGS:
        raise ValueError(f"unknown {name} config {config!r}; known: {', '.join(CONFIGS)}")
    summary = build_corpus(name, manual_dir=manual_dir, data_dir=data_dir,
                           langs=langs or CONFIGS[config],
                           corrupt_images=corrupt_images, max_side=max_side, workers=workers)
    return {f"{kind}/{s}": n for kind in ("images", "captions") for s, n in summary[kind].items()}


def _plans():
    from data.build import cc3m35l_plan, coco35l_plan

    return {"coco35l": coco35l_plan, "cc3m35l": cc3m35l_plan}
