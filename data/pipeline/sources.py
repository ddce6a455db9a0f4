"""Random-access training sources, one per language: the built datasets or the release files.

`source.items(indices)` are `Item`s (name, captions, and the encoded image or its path).
Two readers:

- "tfds" (default): the built COCO-35L / CC3M-35L (data/build/layout.py, written by
  `python -m data.build`), read by index: an example reads its caption record and its
  image, and a start reads nothing but the metadata. A dataset is never built here unless
  asked (`train.py --build_data`): a missing one is an error saying what is missing, about
  how big it is, and the build command.
- "files": the COCO-35L release files read directly, with no build step; the translation
  file is parsed at every start, which suits the demo and the tests, not the 19 million
  lines of the real release.

Both readers give the same examples in the same order (a language's images in key order,
references in caption order), so the same seed gives the same batches with either.
"""

import dataclasses
import os

from data import languages
from data.build import layout
from data.build.progress import size_text
from data.releases import coco35l

READERS = ("tfds", "files")
DATASETS = layout.DATASETS


@dataclasses.dataclass(frozen=True)
class Item:
    """One example of one language: its name, references and image (exactly one of `data`,
    the encoded bytes, and `path`)."""
    name: str
    captions: tuple
    data: bytes = None
    path: str = None


class FileSource:
    """Examples of one language read from the COCO-35L release files."""

    def __init__(self, examples):
        self._examples = examples

    def __len__(self):
        return len(self._examples)

    def __getitem__(self, index):
        example = self._examples[index]
        return Item(example.image_id, example.captions, path=example.image_path)

    def items(self, indices):
        """The `Item`s at `indices`."""
        return [self[i] for i in indices]


class BuiltSource:
    """Examples of one language of a built dataset: its caption table and the shared images."""

    def __init__(self, built, split, lang):
        self._captions = built.captions(split, lang)
        self._images = built.images(split)
        self._what = f"{built.dataset} {split}"

    def __len__(self):
        return len(self._captions)

    def __getitem__(self, index):
        return self.items([index])[0]

    def items(self, indices):
        """The `Item`s at `indices`, each record read once (in one read a shard)."""
        rows = self._captions.read(indices)
        wanted = sorted({image for image, _, _ in rows})
        data = dict(zip(wanted, self._images.read(wanted), strict=True))
        return [Item(f"key {key} ({self._what} image {image})", captions, data=data[image][1])
                for image, key, captions in rows]


def default_tfds_data_dir(manual_dir):
    """`<parent of manual_dir>/tfds`: demo_data/coco35l -> demo_data/tfds."""
    return os.path.join(os.path.dirname(os.path.abspath(manual_dir)), "tfds")


def _settings(data_config):
    dataset = data_config["dataset"]
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; known: {', '.join(DATASETS)}")
    langs = languages.check_langs(data_config["langs"], known=languages.TRAIN_35L_LANGS,
                                  what="training language")
    reader = data_config.get("reader", None) or "tfds"
    if reader not in READERS:
        raise ValueError(f"unknown reader {reader!r}; known: {', '.join(READERS)}")
    if reader == "files" and dataset != "coco35l":
        raise ValueError(f"reader 'files' reads coco35l only; read {dataset} with 'tfds'")
    data_dir = data_config.get("tfds_data_dir", None) or default_tfds_data_dir(
        data_config["manual_dir"])
    return dataset, langs, reader, data_dir


def langs(data_config):
    """The configured training languages, checked."""
    return _settings(data_config)[1]


def missing(data_config, split="train"):
    """What of the configured dataset and languages is not built: (images?, [languages])."""
    dataset, langs, _, data_dir = _settings(data_config)
    try:
        built = layout.Built(data_dir, dataset)
    except layout.NotBuiltError:
        return True, list(langs)
    have = set(built.langs(split))
    return False, [lang for lang in langs if lang not in have]


def build_command(data_config, langs):
    """The `python -m data.build` command line that builds `langs` of the configured dataset."""
    dataset, _, _, data_dir = _settings(data_config)
    return (f"python -m data.build {dataset} --manual_dir {data_config['manual_dir']} "
            f"--data_dir {data_dir} --langs {','.join(langs)}")


def ensure_built(data_config, build=False, split="train", progress_stream=None):
    """Checks that the configured dataset and languages are built; builds them if `build`.

    Args:
        data_config: `config.data` (dataset, manual_dir, langs, reader,
            tfds_data_dir, corrupt_images).
        build: build what is missing (after checking the disk's free space)
            instead of stopping; train.py passes its --build_data flag.
        split: the split the caller reads.
        progress_stream: where the build's progress line goes (default stderr).

    Raises:
        layout.NotBuiltError: something is missing and `build` is False; the
            message says what, about how big it is, and the build command.
    """
    dataset, _, reader, data_dir = _settings(data_config)
    if reader == "files":
        return
    images, langs = missing(data_config, split)
    if not images and not langs:
        return
    from data import build as build_lib  # Deferred: only a build needs the builders.

    manual_dir = data_config["manual_dir"]
    if build:
        build_lib.build_corpus(dataset, manual_dir=manual_dir, data_dir=data_dir, langs=langs,
                               corrupt_images=data_config.get("corrupt_images", None) or "stop",
                               progress_stream=progress_stream)
        return
    what = (["the images"] if images else []) + [f"the captions of {', '.join(langs)}"]
    try:
        size = f"about {size_text(build_lib.estimate_bytes(dataset, manual_dir, langs, images))}"
    except (OSError, ValueError) as e:
        size = f"size unknown: {e}"
    raise layout.NotBuiltError(
        f"{dataset} is not built for these languages in {data_dir}: missing "
        f"{' and '.join(what)} ({size}); build it with: {build_command(data_config, langs)} "
        f"(or run train.py with --build_data to build it first)")


def open_sources(data_config, split="train"):
    """Opens one source per configured language (nothing is built here; see `ensure_built`).

    Returns:
        (langs, sources): the language codes and a source per language.
    """
    dataset, langs, reader, data_dir = _settings(data_config)
    if reader == "files":
        examples, _ = coco35l.read_split(data_config["manual_dir"], split, langs)
        return langs, [FileSource(examples[lang]) for lang in langs]
    ensure_built(data_config, split=split)
    built = layout.Built(data_dir, dataset)
    return langs, [BuiltSource(built, split, lang) for lang in langs]
