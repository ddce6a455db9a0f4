"""What the build of CC3M-35L reads: the user's CC3M images and the translation files.

Every image under train/ (dev/) (layout: data/releases/cc3m35l.py) is stored once, in the
order of the sorted shards and files; one caption per image and language, English the
source caption. Captions whose image was not downloaded (CC3M URLs rot) are left out, counted.
"""

from data.build import builder
from data.build.image_shards import plan_shards
from data.releases import cc3m35l as cc3m35l_release

TITLE = "CC3M-35L"


def release(manual_dir):
    """The `Release` of CC3M-35L in `manual_dir`, for data/build/builder.build."""

    def image_shards(split):
        folder = cc3m35l_release.image_dir(manual_dir, split)
        tars, files = cc3m35l_release.image_files(folder)
        if not tars and not files:
            raise FileNotFoundError(
                f"no CC3M {split} images under {folder}: expected img2dataset shards "
                f"(00000.tar, ...) or NNNNNNNNN.jpg files (see docs/datasets.md)")
        return plan_shards(split, loose=files, tars=tars), ""

    def text_path(split, langs):
        return cc3m35l_release.translations_path(manual_dir, split)

    def write_captions(split, langs, spill, tick):
        stream = cc3m35l_release.open_translations(text_path(split, langs))
        for key, lang, text in builder.ticked(
                cc3m35l_release.stream_captions(stream, langs), stream, tick):
            spill.add(lang, key, 0, text)
        return []

    return builder.Release(
        dataset="cc3m35l", title=TITLE, image_shards=image_shards, text_path=text_path,
        write_captions=write_captions,
        description="CC3M-35L (Thapliyal et al., EMNLP 2022): Conceptual Captions 3M images "
                    "with captions machine-translated into 35 languages.")

