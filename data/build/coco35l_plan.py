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

    def split_images(split):
        """Sorted cocoids of a split's images."""
        wanted = coco35l_release.SPLITS[split]
        return sorted(cid for cid, (s, _, _) in karpathy().items() if s in wanted)

    def image_shards(split):
        images = karpathy()
        root = coco35l_release.image_root(manual_dir)
        paths = [(cid, os.path.join(root, images[cid][1])) for cid in split_images(split)]
        missing = [path for _, path in paths if not os.path.exists(path)]
        warning = (f"{TITLE} {split}: {len(missing)} images of {KARPATHY_FILE} have no JPEG "
                   f"and are left out, e.g. {missing[0]}" if missing else "")
        return plan_shards(split, loose=[p for p in paths if os.path.exists(p[1])]), warning

    def text_path(split, langs):
        if all(lang == "en" for lang in langs):
            return None
        return coco35l_release.translations_path(manual_dir, split)

    def write_captions(split, langs, spill, tick):
        images = karpathy()
        wanted = set(split_images(split))
        if "en" in langs:
            for cid in sorted(wanted):
                for n, caption in enumerate(images[cid][2]):
                    spill.add("en", cid, n, caption)
        translated = [lang for lang in langs if lang != "en"]
        if not translated:
            return []
        stream = coco35l_release.open_translations(
            coco35l_release.translations_path(manual_dir, split))
        unknown = wrong_split = 0
        for cid, n, lang, text in builder.ticked(
                coco35l_release.translations_of(stream, translated), stream, tick):
            if cid in wanted:
                spill.add(lang, cid, n, text)
            elif cid in images:
                wrong_split += 1
            else:
                unknown += 1
        return [f"{TITLE} {split}: skipped {count} caption lines naming {what}"
                for count, what in ((unknown, f"an image that is not in {KARPATHY_FILE}"),
                                    (wrong_split, "an image of another Karpathy split")) if count]

    return builder.Release(
        dataset="coco35l", title=TITLE, image_shards=image_shards, text_path=text_path,
        write_captions=write_captions,
        description="COCO-35L (Thapliyal et al., EMNLP 2022): COCO 2014 images (Karpathy "
                    "train + restval, val) with captions in 35 languages.")

