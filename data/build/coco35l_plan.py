"""What the build of COCO-35L reads: the Karpathy split, the COCO 2014 JPEGs, the translations.

Images (layout: data/releases/coco35l.py): train = Karpathy train + restval, dev = val, in cocoid
order; English from the Karpathy file, 34 languages from the translations. Images whose JPEG is
missing, and translation lines of images not in their file's split, are left out and counted.
"""

import functools
import os

from data.build import builder
from data.build.image_shards import plan_shards
from data.releases import coco35l as coco35l_release
from data.releases.coco35l import KARPATHY_FILE

TITLE = "COCO-35L"


def release(manual_dir):
    """The `Release` of COCO-35L in `manual_dir`, for data/build/builder.build."""
    karpathy = functools.cache(lambda: coco35l_release.read_karpathy(
        coco35l_release.karpathy_path(manual_dir)))

    def image_shards(split):
        images, wanted = karpathy(), coco35l_release.SPLITS[split]
        root = coco35l_release.image_root(manual_dir)
        paths = [(cid, os.path.join(root, path))
                 for cid, (s, path, _) in sorted(images.items()) if s in wanted]
        missing = [path for _, path in paths if not os.path.exists(path)]
        warning = (f"{TITLE} {split}: {len(missing)} images of {KARPATHY_FILE} have no JPEG "
                   f"and are left out, e.g. {missing[0]}" if missing else "")
        return plan_shards(split, loose=[p for p in paths if os.path.exists(p[1])]), warning

    def text_path(split, langs):
        return None if all(lang == "en" for lang in langs) else \
            coco35l_release.translations_path(manual_dir, split)

    def write_captions(split, langs, spill, tick):
        path, stats = text_path(split, langs), coco35l_release.ReadStats()
        stream = path and coco35l_release.open_translations(path)
        captions = coco35l_release.split_captions(karpathy(), split, langs, stream, stats)
        for lang, cid, n, text in builder.ticked(captions, stream, tick) if stream else captions:
            spill.add(lang, cid, n, text)
        return [f"{TITLE} {split}: skipped {count} caption lines naming {what}" for count, what in (
            (stats.unknown_image, f"an image that is not in {KARPATHY_FILE}"),
            (stats.wrong_split, "an image of another Karpathy split")) if count]

    return builder.Release(
        dataset="coco35l", title=TITLE, image_shards=image_shards, text_path=text_path,
        write_captions=write_captions,
        description="COCO-35L (Thapliyal et al., EMNLP 2022): COCO 2014 images (Karpathy "
                    "train + restval, val) with captions in 35 languages.")

