"""TFDS builder of COCO-35L from its release files and the COCO 2014 images.

Manual directory layout: see data/coco35l_release.py (dataset_coco.json,
coco_mt_{train,dev}.jsonl.bz2, train2014/, val2014/). Splits `train_<lang>`
(Karpathy train + restval) and `dev_<lang>` (Karpathy val) for the 35
languages of the "all" config (no quz), or en/es/hi/zh with "core". English
comes from the Karpathy captions. Features: image, image/id
("<cocoid>_<lang>"), cocoid, language, captions.
"""

import numpy as np
import tensorflow_datasets as tfds

from data import coco35l_release, languages
from data.builders import common

_INSTRUCTIONS = """\
Into the manual directory put: dataset_coco.json (from
http://cs.stanford.edu/people/karpathy/deepimagesent/caption_datasets.zip),
coco_mt_train.jsonl.bz2 and coco_mt_dev.jsonl.bz2 (from
https://google.github.io/crossmodal-3600/), and the folders train2014/ and
val2014/ (unzipped from https://cocodataset.org/#download).
"""


class Coco35l(common.ManualBuilder):
    """COCO captions machine-translated into 35 languages."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "First release."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = _INSTRUCTIONS
    BUILDER_CONFIGS = common.lang_configs(languages.TRAIN_35L_LANGS, languages.CORE_LANGS)

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            description="COCO-35L (Thapliyal et al., EMNLP 2022).",
            features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(encoding_format="jpeg"),
                "image/id": tfds.features.Text(),
                "cocoid": tfds.features.Scalar(dtype=np.int64),
                "language": tfds.features.Text(),
                "captions": tfds.features.Sequence(tfds.features.Text()),
            }),
            homepage="https://google.github.io/crossmodal-3600/",
        )

    def _split_generators(self, dl_manager):
        manual_dir = str(dl_manager.manual_dir)
        checker = common.ImageChecker(self._corrupt_images)
        splits = {}
        for split in ("train", "dev"):
            examples, _ = coco35l_release.read_split(manual_dir, split, self.builder_config.langs)
            for lang, items in examples.items():
                if not items:
                    raise ValueError(
                        f"COCO-35L {split} has no captions in {lang!r} under {manual_dir}, "
                        f"which config {self.builder_config.name!r} needs")
                splits[f"{split}_{lang}"] = self._generate_examples(items, checker)
        return splits

    def _generate_examples(self, items, checker):
        for item in items:
            data = common.read_bytes(item.image_path, f"cocoid {item.cocoid}")
            if not checker.ok(data, f"cocoid {item.cocoid} ({item.image_path})"):
                continue
            yield item.image_id, {"image": data, "image/id": item.image_id,
                                  "cocoid": item.cocoid, "language": item.lang,
                                  "captions": list(item.captions)}
        checker.report("COCO-35L")
