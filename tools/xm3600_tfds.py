r"""TFDS builder of Crossmodal-3600 from its release files (captions.jsonl, and images/<key>.jpg or
images.tgz): one split per language ("all" 36, "core" 4), each holding the images with captions in
it. Features: image, image/key, image/locale, language, captions, captions/tokenized. For tools
that read XM3600 through TFDS (the trainer and the checkpoint tool read the release folder).

    python -m tools.xm3600_tfds --manual_dir ~/data/xm3600 --data_dir ~/data/built \
        [--config all|core] [--corrupt_images stop|skip]
"""

import argparse
import dataclasses
import logging
import os
import sys

import tensorflow_datasets as tfds
from etils import epath

import errors
from data import languages
from data.build import image_shards
from data.releases import xm3600 as xm3600_release


@dataclasses.dataclass
class LangsConfig(tfds.core.BuilderConfig):
    """A builder config naming its languages (each split keeps its own copy of its images)."""
    langs: tuple = ()


class ImageChecker:
    """Decodes each image once: "stop" raises CorruptImageError naming it, "skip" counts it."""

    def __init__(self, policy="stop"):
        self.options = image_shards.ImageOptions(corrupt_images=policy)
        self.skipped, self._seen = [], {}

    def ok(self, data, name):
        """True if `data` (encoded bytes) decodes; `name` identifies it in errors."""
        if name not in self._seen:
            self._seen[name] = image_shards.prepare_image(data, name, self.options) is not None
            self.skipped += [] if self._seen[name] else [name]
        return self._seen[name]

    def report(self, where):
        """Logs once how many images were skipped."""
        if self.skipped:
            logging.warning("%s: skipped %d corrupt images, e.g. %s", where, len(self.skipped),
                            ", ".join(self.skipped[:5]))


_INSTRUCTIONS = """\
Download captions.jsonl and images.tgz from https://google.github.io/crossmodal-3600/
into the manual directory (images.tgz may also be extracted to images/<key>.jpg).
"""


class Xm3600(tfds.core.GeneratorBasedBuilder):
    """Crossmodal-3600: 3600 images with human captions in 36 languages (offline: manual dir)."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "First release."}
    MANUAL_DOWNLOAD_INSTRUCTIONS = _INSTRUCTIONS
    BUILDER_CONFIGS = [
        LangsConfig(name="all", description="every language", langs=languages.XM3600_LANGS),
        LangsConfig(name="core", description="en, es, hi, zh", langs=languages.CORE_LANGS)]

    def __init__(self, *, corrupt_images="stop", **kwargs):
        self._checker = ImageChecker(corrupt_images)  # Checks the policy.
        super().__init__(**kwargs)

    # TFDS 4.9.10 finds a builder's source (checksums.tsv) through the `importlib_resources`
    # backport, which it requires only on Python < 3.9; the plain file path serves.
    @tfds.core.utils.classproperty
    @classmethod
    def code_path(cls):
        return epath.Path(sys.modules[cls.__module__].__file__)

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
                f"https://google.github.io/crossmodal-3600/ (docs/files.md lists every release "
                f"file)")
        records = xm3600_release.read_captions(captions_path)
        image_dir = self._image_dir(dl_manager, manual_dir)
        checker, splits = self._checker, {}
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
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                raise FileNotFoundError(f"missing image of XM3600 key {record.key!r}: "
                                        f"{path}") from None
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


def get_builder(*, data_dir, config="all", corrupt_images="stop"):
    """The builder of config "all" or "core" rooted at `data_dir`; `corrupt_images`: "stop" at
    one (naming it) or "skip" and count."""
    names = [c.name for c in Xm3600.BUILDER_CONFIGS]
    if config not in names:
        raise ValueError(f"unknown xm3600 config {config!r}; known: {', '.join(names)}")
    tfds.disable_progress_bar()
    return Xm3600(config=config, data_dir=data_dir, file_format="array_record",
                  corrupt_images=corrupt_images)


def build(*, manual_dir, data_dir, config="all", corrupt_images="stop"):
    """Builds (or reuses) XM3600 from `manual_dir` into `data_dir`; returns {split: examples}."""
    builder = get_builder(data_dir=data_dir, config=config, corrupt_images=corrupt_images)
    if not builder.is_prepared():
        if not os.path.isdir(manual_dir):
            raise FileNotFoundError(f"manual directory of xm3600 not found: {manual_dir} "
                                    f"(see docs/datasets.md for what goes in it)")
        builder.download_and_prepare(
            download_config=tfds.download.DownloadConfig(manual_dir=manual_dir))
    return {split: info.num_examples for split, info in builder.info.splits.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tools.xm3600_tfds",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--manual_dir", required=True, help="the release files")
    parser.add_argument("--data_dir", required=True, help="where the built dataset goes")
    parser.add_argument("--config", default="all", choices=("all", "core"),
                        help="all languages, or core: en, es, hi, zh")
    parser.add_argument("--corrupt_images", default="stop",
                        choices=image_shards.CORRUPT_IMAGE_POLICIES)
    args = parser.parse_args(argv)
    try:
        counts = build(manual_dir=args.manual_dir, data_dir=args.data_dir, config=args.config,
                       corrupt_images=args.corrupt_images)
    except (OSError, errors.Error) as e:  # Missing/malformed input: the message says which.
        while e.__cause__ is not None:  # Our own message, without what TFDS prepends.
            e = e.__cause__
        errors.fail(e)
    print(f"xm3600 ready in {args.data_dir}:")
    for split, count in sorted(counts.items()):
        print(f"  {split}: {count} examples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
