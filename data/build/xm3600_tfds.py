"""TFDS builder of Crossmodal-3600 from its release files (captions.jsonl, and images/<key>.jpg
or images.tgz): one split per language ("all" 36, "core" 4), each holding the images with
captions in it. Features: image, image/key, image/locale, language, captions,
captions/tokenized."""

import dataclasses
import logging
import os
import sys

import tensorflow_datasets as tfds
from etils import epath

from data import languages
from data.build import image_shards
from data.releases import xm3600 as xm3600_release


@dataclasses.dataclass
class LangsConfig(tfds.core.BuilderConfig):
    """A builder config naming its languages (each split keeps its own copy of its images)."""
    langs: tuple = ()


def lang_configs(all_langs, core_langs):
    """The standard configs: "all" languages and the paper's four "core" ones."""
    return [LangsConfig(name="all", description="every language", langs=tuple(all_langs)),
            LangsConfig(name="core", description="en, es, hi, zh", langs=tuple(core_langs))]


class ManualBuilder(tfds.core.GeneratorBasedBuilder):
    """Base of the builders here: offline (manual directory), with a corrupt-image policy."""

    def __init__(self, *, corrupt_images="stop", **kwargs):
        if corrupt_images not in image_shards.CORRUPT_IMAGE_POLICIES:
            raise ValueError(f"unknown corrupt_images policy {corrupt_images!r}; known: "
                             f"{', '.join(image_shards.CORRUPT_IMAGE_POLICIES)}")
        self._corrupt_images = corrupt_images
        super().__init__(**kwargs)

    # TFDS 4.9.10 finds a builder's source (checksums.tsv) through the `importlib_resources`
    # backport, which it requires only on Python < 3.9; the plain file path serves.
    @tfds.core.utils.classproperty
    @classmethod
    def code_path(cls):
        return epath.Path(sys.modules[cls.__module__].__file__)


class ImageChecker:
    """Decodes each image once: "stop" raises CorruptImageError naming it, "skip" counts it."""

    def __init__(self, policy="stop"):
        self.options = image_shards.ImageOptions(corrupt_images=policy)
        self.policy = policy
        self.skipped = []
        self._seen = {}

    def ok(self, data, name):
        """True if `data` (encoded bytes) decodes; `name` identifies it in errors."""
        if name not in self._seen:
            good = image_shards.prepare_image(data, name, self.options) is not None
            if not good:
                self.skipped.append(name)
            self._seen[name] = good
        return self._seen[name]

    def report(self, where):
        """Logs once how many images were skipped."""
        if self.skipped:
            logging.warning("%s: skipped %d corrupt images, e.g. %s", where, len(self.skipped),
                            ", ".join(self.skipped[:5]))


def read_bytes(path, what):
    """Bytes of a file, or FileNotFoundError naming `what` and the path."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"missing image of {what}: {path}") from None


_INSTRUCTIONS = """\
Download captions.jsonl and images.tgz from https://google.github.io/crossmodal-3600/
into the manual directory (images.tgz may also be extracted to images/<key>.jpg).
"""


class Xm3600(ManualBuilder):
    """Crossmodal-3600: 3600 images with human captions in 36 languages."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "First release."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = _INSTRUCTIONS
    BUILDER_CONFIGS = lang_configs(languages.XM3600_LANGS, languages.CORE_LANGS)

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
        checker = ImageChecker(self._corrupt_images)
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
            data = read_bytes(path, f"XM3600 key {record.key!r}")
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
