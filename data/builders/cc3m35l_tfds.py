"""TFDS builder of CC3M-35L from its translation files and the user's CC3M images.

Manual directory layout: see data/cc3m35l_release.py (cc3m_mt_{train,dev}.jsonl.bz2,
train/ and dev/ holding img2dataset tar shards or image files). Splits
`train_<lang>` and `dev_<lang>` for the 35 languages of the "all" config, or
en/es/hi/zh with "core"; one caption per image and language. Records whose
image was not downloaded (CC3M URLs rot) are counted and reported once.
Features: image, key, language, captions.
"""

import numpy as np
import tensorflow_datasets as tfds

from data import cc3m35l_release, languages
from data.builders import common

_INSTRUCTIONS = """\
Into the manual directory put cc3m_mt_train.jsonl.bz2 and cc3m_mt_dev.jsonl.bz2
(from https://google.github.io/crossmodal-3600/), and the CC3M images of each
split under train/ and dev/ as downloaded by img2dataset from the CC3M TSVs
(https://ai.google.com/research/ConceptualCaptions/download), unshuffled.
"""


class Cc3m35l(common.ManualBuilder):
    """Conceptual Captions 3M machine-translated into 35 languages."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "First release."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = _INSTRUCTIONS
    BUILDER_CONFIGS = common.lang_configs(languages.TRAIN_35L_LANGS, languages.CORE_LANGS)

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            description="CC3M-35L (Thapliyal et al., EMNLP 2022).",
            features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(encoding_format="jpeg"),
                "key": tfds.features.Scalar(dtype=np.int64),
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
            captions, path = cc3m35l_release.read_split(manual_dir, split,
                                                       self.builder_config.langs)
            folder = cc3m35l_release.image_dir(manual_dir, split)
            for lang, by_key in captions.items():
                if not by_key:
                    raise ValueError(f"{path} has no captions in {lang!r}, which config "
                                     f"{self.builder_config.name!r} needs")
                splits[f"{split}_{lang}"] = self._generate_examples(
                    folder, lang, captions, checker, split)
        return splits

    def _generate_examples(self, folder, lang, captions, checker, split):
        found = set()
        for key, data in cc3m35l_release.iter_images(folder):
            found.add(key)
            if key not in captions[lang] or not checker.ok(data, f"key {key} in {folder}"):
                continue
            yield key, {"image": data, "key": key, "language": lang,
                        "captions": [captions[lang][key]]}
        # Report once per split, after its first language has seen every image.
        if lang == next(iter(captions)):
            cc3m35l_release.report_missing(captions, found, f"CC3M-35L {split} ({folder})")
            checker.report(f"CC3M-35L {split}")
