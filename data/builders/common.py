"""Pieces of the TFDS builder of XM3600: language-subset configs and image checks."""

import dataclasses
import logging
import sys

import tensorflow_datasets as tfds
from etils import epath

from data.builders import corpus as corpus_builder
from data.builders.corpus import CORRUPT_IMAGE_POLICIES, CorruptImageError  # noqa: F401


@dataclasses.dataclass
class LangsConfig(tfds.core.BuilderConfig):
    """A builder config that names the languages to build (one or two splits each).

    Each language split stores its own copy of its images (XM3600 is small).
    """
    langs: tuple = ()


def lang_configs(all_langs, core_langs):
    """The standard configs: "all" languages and the paper's four "core" ones."""
    return [LangsConfig(name="all", description="every language", langs=tuple(all_langs)),
            LangsConfig(name="core", description="en, es, hi, zh", langs=tuple(core_langs))]


class ManualBuilder(tfds.core.GeneratorBasedBuilder):
    """Base of the builders here: offline (manual directory) and a corrupt-image policy.

    Args:
        corrupt_images: "stop" at a corrupt image (naming it) or "skip" and count.
        **kwargs: passed to tfds.core.GeneratorBasedBuilder (config, data_dir, ...).
    """

    def __init__(self, *, corrupt_images="stop", **kwargs):
        if corrupt_images not in CORRUPT_IMAGE_POLICIES:
            raise ValueError(f"unknown corrupt_images policy {corrupt_images!r}; known: "
                             f"{', '.join(CORRUPT_IMAGE_POLICIES)}")
        self._corrupt_images = corrupt_images
        super().__init__(**kwargs)

    # TFDS 4.9.10 resolves a packaged builder's source path through the
    # `importlib_resources` backport, which it only requires on Python < 3.9;
    # the plain file path serves the same purpose (finding checksums.tsv).
    @tfds.core.utils.classproperty
    @classmethod
    def code_path(cls):
        return epath.Path(sys.modules[cls.__module__].__file__)


class ImageChecker:
    """Decodes each image once, to stop at or skip (and count) corrupt ones.

    Args:
        policy: "stop" raises CorruptImageError naming the image; "skip"
            counts it and lets the caller drop the example.
    """

    def __init__(self, policy="stop"):
        self.options = corpus_builder.ImageOptions(corrupt_images=policy)
        self.policy = policy
        self.skipped = []
        self._seen = {}

    def ok(self, data, name):
        """True if `data` (encoded bytes) decodes; `name` identifies it in errors."""
        if name not in self._seen:
            good = corpus_builder.prepare_image(data, name, self.options) is not None
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
