"""Random-access training sources, one per language: TFDS datasets or release files.

The pipeline asks a source for the examples at given indices and gets back
`Item`s (name, captions, and the encoded image or its path). Two readers:

- "tfds" (default): the TFDS builders of data/builders, built on first use
  from `manual_dir` into `tfds_data_dir` and read through ArrayRecord random
  access, so a batch touches only its own records.
- "files": the COCO-35L release files read directly (data/coco35l_release.py); no build
  step, but the translation file is parsed at every start.

The two readers order examples differently (TFDS shuffles records when
writing), so the same seed gives different, equally valid, batches.
"""

import dataclasses
import os

from data import build as build_lib
from data import coco35l_release, languages

READERS = ("tfds", "files")
DATASETS = ("coco35l", "cc3m35l")
# The feature that names an example, per dataset.
_NAME_FEATURE = {"coco35l": "image/id", "cc3m35l": "key"}


@dataclasses.dataclass(frozen=True)
class Item:
    """One example of one language: its name, references and image.

    Exactly one of `data` (encoded bytes) and `path` is set.
    """
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

    def fetch(self, indices):
        """The `Item`s at `indices` (images are read later, from their paths)."""
        return [Item(e.image_id, e.captions, path=e.image_path)
                for e in (self._examples[int(i)] for i in indices)]


class TfdsSource:
    """Examples of one language read from a built TFDS split by index."""

    def __init__(self, data_source, name_feature):
        self._source = data_source
        self._name_feature = name_feature

    def __len__(self):
        return len(self._source)

    def fetch(self, indices):
        """The `Item`s at `indices`, with their encoded images."""
        records = self._source.__getitems__([int(i) for i in indices])
        return [Item(_text(r[self._name_feature]), tuple(_text(c) for c in r["captions"]),
                     data=r["image"]) for r in records]


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def default_tfds_data_dir(manual_dir):
    """`<parent of manual_dir>/tfds`: demo_data/coco35l -> demo_data/tfds."""
    return os.path.join(os.path.dirname(os.path.abspath(manual_dir)), "tfds")


def open_sources(data_config, split="train", allow_build=True):
    """Opens one source per configured language.

    Args:
        data_config: ConfigDict with dataset, manual_dir, langs; optional reader
            ("tfds" | "files"), tfds_data_dir, tfds_config ("all" | "core";
            default: the smallest holding `langs`), corrupt_images ("stop" | "skip").
        split: "train" or "dev".
        allow_build: build the TFDS dataset if it is missing; multi-process runs
            pass False (concurrent builds would collide) and build beforehand.

    Returns:
        (langs, sources): the language codes and a source per language.
    """
    dataset = data_config.dataset
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; known: {', '.join(DATASETS)}")
    langs = languages.check_langs(data_config.langs, known=languages.TRAIN_35L_LANGS,
                                  what="training language")
    reader = data_config.get("reader", None) or "tfds"
    if reader not in READERS:
        raise ValueError(f"unknown reader {reader!r}; known: {', '.join(READERS)}")
    if reader == "files":
        if dataset != "coco35l":
            raise ValueError(f"reader 'files' reads coco35l only; read {dataset} with 'tfds'")
        examples, _ = coco35l_release.read_split(data_config.manual_dir, split, langs)
        return langs, [FileSource(examples[lang]) for lang in langs]
    import tensorflow_datasets as tfds  # Deferred: TensorFlow is slow to import.

    data_dir = data_config.get("tfds_data_dir", None) or default_tfds_data_dir(
        data_config.manual_dir)
    config = data_config.get("tfds_config", None) or build_lib.config_for(langs)
    policy = data_config.get("corrupt_images", None) or "stop"
    if allow_build:
        builder = build_lib.build(dataset, manual_dir=data_config.manual_dir,
                                  data_dir=data_dir, config=config, corrupt_images=policy)
    else:
        builder = build_lib.get_builder(dataset, data_dir=data_dir, config=config,
                                        corrupt_images=policy)
        if not builder.is_prepared():
            raise FileNotFoundError(
                f"{dataset}/{config} is not built in {data_dir}; with several processes, "
                f"build it first: python -m data.build {dataset} --manual_dir "
                f"{data_config.manual_dir} --data_dir {data_dir} --config {config}")
    sources = []
    for lang in langs:
        name = f"{split}_{lang}"
        if name not in builder.info.splits:
            raise ValueError(f"{builder.data_dir} has no split {name!r}; config {config!r} "
                             f"holds {', '.join(sorted(builder.info.splits))}")
        sources.append(TfdsSource(builder.as_data_source(
            name, decoders={"image": tfds.decode.SkipDecoding()}), _NAME_FEATURE[dataset]))
    return langs, sources
