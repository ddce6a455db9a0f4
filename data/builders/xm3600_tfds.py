"""TFDS builder of Crossmodal-3600 from its release files.

Manual directory (https://google.github.io/crossmodal-3600/):

    captions.jsonl                   one JSON object per image (data/xm3600_release.py)
    images/<image/key>.jpg           the 3600 images, or instead:
    images.tgz                       the image archive as downloaded

One split per language (36 with the "all" config, en/es/hi/zh with "core"),
holding every image that has captions in that language. Features: image,
image/key, image/locale, language, captions, captions/tokenized.
"""

import os

import tensorflow_datasets as tfds

from data import languages, xm3600_release
from data.builders import common

_INSTRUCTIONS = """\
Download captions.jsonl and images.tgz from https://google.github.io/crossmodal-3600/
into the manual directory (images.tgz may also be extracted to images/<key>.jpg).
"""


class Xm3600(common.ManualBuilder):
    """Crossmodal-3600: 3600 images with human captions in 36 languages."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "First release."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = _INSTRUCTIONS
    BUILDER_CONFIGS = common.lang_configs(languages.XM3600_LANGS, languages.CORE_LANGS)

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            description="Crossmodal-3600 (Thapliyal et al., EMNLP 2022).",
            features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(encoding_format="jpeg"),
                "image/key": tfds.features.Text(),
                "image/locale": tfds.features.Text(),
                "language": tfds.features.Text(),
                "captions": tfds.features.Sequence(tfds.features.Text()),
                "captions/tokenized": tfds.features.Sequence(tfds.features.Text()),
            }),
            homepage="https://google.github.io/crossmodal-3600/",
        )

    def _split_generators(self, dl_manager):
        manual_dir = os.fspath(dl_manager.manual_dir)
        captions_path = os.path.join(manual_dir, "captions.jsonl")
        if not os.path.exists(captions_path):
            raise FileNotFoundError(
                f"missing XM3600 captions: expected {captions_path}; get captions.jsonl from "
                f"https://google.github.io/crossmodal-3600/ (see the README's Datasets section)")
        records = xm3600_release.read_captions(captions_path)
        image_dir = self._image_dir(dl_manager, manual_dir)
        checker = common.ImageChecker(self._corrupt_images)
        splits = {}
        for lang in self.builder_config.langs:
            if not any(lang in r.captions for r in records):
                raise ValueError(
                    f"{captions_path} has no captions in {lang!r}, which config "
                    f"{self.builder_config.name!r} needs; build a config without it")
            splits[lang] = self._generate_examples(records, lang, image_dir, checker)
        return splits

    @staticmethod
    def _image_dir(dl_manager, manual_dir):
        folder = os.path.join(manual_dir, "images")
        if os.path.isdir(folder):
            return folder
        archive = os.path.join(manual_dir, "images.tgz")
        if not os.path.exists(archive):
            raise FileNotFoundError(
                f"missing XM3600 images: expected {folder}/<image/key>.jpg or {archive}; get "
                f"images.tgz from https://google.github.io/crossmodal-3600/")
        extracted = os.fspath(dl_manager.extract(archive))
        nested = os.path.join(extracted, "images")
        return nested if os.path.isdir(nested) else extracted

    def _generate_examples(self, records, lang, image_dir, checker):
        for record in records:
            if lang not in record.captions:
                continue
            path = os.path.join(image_dir, f"{record.key}.jpg")
            data = common.read_bytes(path, f"XM3600 key {record.key!r}")
            if not checker.ok(data, f"{record.key!r} ({path})"):
                continue
            yield record.key, {
                "image": data,
                "image/key": record.key,
                "image/locale": record.locale,
                "language": lang,
                "captions": record.captions[lang],
                "captions/tokenized": record.tokenized[lang],
            }
        checker.report(f"XM3600 {lang}")
