"""The built COCO-35L and CC3M-35L datasets: every image stored once, captions per language.

`python -m data.build coco35l|cc3m35l` (data/builders/corpus.py) writes, under
the data directory, two TFDS datasets of ArrayRecord shards:

    <data_dir>/<dataset>/images/2.0.0/      splits train, dev: one record per image
        features image (the JPEG bytes), key (COCO id or CC3M record key);
        keys_<split>.npy: the key of each image, in record order
    <data_dir>/<dataset>/captions/2.0.0/    splits train_<lang>, dev_<lang>: one record
        per image with captions in that language, in image order
        features image_index (the image's record in the images split), key, captions

so that the images of 35 languages cost their bytes once, languages can be
added without touching the images, and `tfds.builder_from_directory` (or
`tfds.builder("coco35l/images", data_dir=...)`) serves both to other tools.
Images may have been re-encoded at a maximum side when built (`metadata()`).

This module reads them for training without TensorFlow or TFDS: the TFDS
metadata is JSON, the shards are read with array_record's reader, and records
are parsed by data/records.py. Nothing is read at start but the metadata;
examples are fetched by index when a batch needs them.
"""

import json
import os

import numpy as np

import errors
from data import records

DATASETS = ("coco35l", "cc3m35l")
SPLITS = ("train", "dev")
VERSION = "2.0.0"
# Where the layout before this one (one image copy per language split) lived.
OLD_LAYOUT = ("all/1.0.0", "core/1.0.0")
FILE_TEMPLATE = "{dataset}-{split}.array_record-{shard:05d}-of-{num_shards:05d}"


class NotBuiltError(errors.InputError):
    """A dataset, or some of its languages, is not built in the data directory."""


class OldLayoutError(errors.InputError):
    """The data directory holds a dataset in the layout before this one."""


def images_dir(data_dir, dataset):
    """The TFDS folder of a dataset's images."""
    return os.path.join(data_dir, dataset, "images", VERSION)


def captions_dir(data_dir, dataset):
    """The TFDS folder of a dataset's caption tables."""
    return os.path.join(data_dir, dataset, "captions", VERSION)


def shard_path(folder, dataset, split, shard, num_shards):
    """The path of one ArrayRecord shard, named as TFDS names them."""
    return os.path.join(folder, FILE_TEMPLATE.format(dataset=dataset, split=split, shard=shard,
                                                     num_shards=num_shards))


def read_splits(folder):
    """{split name: [records per shard]} from a TFDS folder's dataset_info.json, or None."""
    path = os.path.join(folder, "dataset_info.json")
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
    except FileNotFoundError:
        return None
    return {s["name"]: [int(n) for n in s.get("shardLengths", [])] for s in info["splits"]}


def old_layout_dirs(data_dir, dataset):
    """The folders of `dataset` built in the layout before this one, if any."""
    return [os.path.join(data_dir, dataset, sub) for sub in OLD_LAYOUT
            if os.path.isdir(os.path.join(data_dir, dataset, sub))]


class Shards:
    """Random access to the records of one split (a list of ArrayRecord shards).

    Readers open lazily, in the process that reads (worker processes open their own).
    """

    def __init__(self, folder, dataset, split, shard_lengths):
        self._paths = [shard_path(folder, dataset, split, i, len(shard_lengths))
                       for i in range(len(shard_lengths))]
        self._starts = np.cumsum([0, *shard_lengths])  # [num_shards + 1]
        self._readers = [None] * len(shard_lengths)

    def __len__(self):
        return int(self._starts[-1])

    def _reader(self, shard):
        if self._readers[shard] is None:
            from array_record.python import array_record_module

            self._readers[shard] = array_record_module.ArrayRecordReader(
                self._paths[shard], "readahead_buffer_size:0")
        return self._readers[shard]

    def read(self, indices):
        """The serialized records at `indices` (any order, repeats allowed)."""
        indices = np.asarray(indices, np.int64)
        if len(indices) and (indices.min() < 0 or indices.max() >= len(self)):
            raise IndexError(f"record index out of range [0, {len(self)})")
        shards = np.searchsorted(self._starts, indices, side="right") - 1
        out = [None] * len(indices)
        for shard in np.unique(shards):
            where = np.flatnonzero(shards == shard)
            positions = (indices[where] - self._starts[shard]).tolist()
            for i, data in zip(where, self._reader(int(shard)).read(positions), strict=True):
                out[i] = data
        return out

    def close(self):
        for reader in self._readers:
            if reader is not None:
                reader.close()
        self._readers = [None] * len(self._readers)


class Corpus:
    """A built COCO-35L or CC3M-35L dataset in `data_dir` (the layout in the module docstring).

    Args:
        data_dir: the data directory `python -m data.build` wrote into.
        dataset: one of DATASETS.

    Raises:
        OldLayoutError: only the layout before this one is there (the message
            names the rebuild command).
        NotBuiltError: the images are not built.
    """

    def __init__(self, data_dir, dataset):
        if dataset not in DATASETS:
            raise ValueError(f"unknown dataset {dataset!r}; known: {', '.join(DATASETS)}")
        self.data_dir, self.dataset = data_dir, dataset
        self._image_splits = read_splits(images_dir(data_dir, dataset))
        if self._image_splits is None:
            old = old_layout_dirs(data_dir, dataset)
            if old:
                raise OldLayoutError(
                    f"{old[0]} holds {dataset} in the layout before this version (a copy of "
                    f"every image per language); rebuild it with: python -m data.build "
                    f"{dataset} --manual_dir <release folder> --data_dir {data_dir} "
                    f"[--langs ...] (then delete {', '.join(old)})")
            raise NotBuiltError(f"{dataset} is not built in {data_dir}")
        self._caption_splits = read_splits(captions_dir(data_dir, dataset)) or {}

    def langs(self, split):
        """The languages whose captions of `split` are built."""
        prefix = f"{split}_"
        return sorted(name[len(prefix):] for name in self._caption_splits
                      if name.startswith(prefix))

    def metadata(self):
        """How the images were built: {"max_side": int or None, "jpeg_quality": int, ...}."""
        path = os.path.join(images_dir(self.data_dir, self.dataset), "metadata.json")
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            return {}

    def images(self, split):
        """The `ImageStore` of a split."""
        if split not in self._image_splits:
            raise NotBuiltError(f"{self.dataset} has no images of split {split!r} in "
                                f"{self.data_dir}")
        return ImageStore(Shards(images_dir(self.data_dir, self.dataset), self.dataset, split,
                                 self._image_splits[split]))

    def captions(self, split, lang):
        """The `CaptionTable` of one split and language."""
        name = f"{split}_{lang}"
        if name not in self._caption_splits:
            raise NotBuiltError(f"{self.dataset} has no {lang!r} captions of split {split!r} "
                                f"in {self.data_dir}")
        return CaptionTable(Shards(captions_dir(self.data_dir, self.dataset), self.dataset, name,
                                   self._caption_splits[name]))


class _Records:
    """Random access to the records of a split, each decoded into a tuple by `_row`."""

    def __init__(self, shards):
        self._shards = shards

    def __len__(self):
        return len(self._shards)

    def fetch(self, indices):
        """The rows at `indices` (see the subclass)."""
        return [self._row(records.decode(data)) for data in self._shards.read(indices)]

    @staticmethod
    def _row(record):
        raise NotImplementedError


class ImageStore(_Records):
    """The images of one split: `fetch` gives [(key, encoded image bytes)]."""

    @staticmethod
    def _row(record):
        return record["key"][0], record["image"][0]


class CaptionTable(_Records):
    """The captions of one split and language: `fetch` gives [(image index, key, captions)]."""

    @staticmethod
    def _row(record):
        return (record["image_index"][0], record["key"][0],
                tuple(c.decode("utf-8") for c in record["captions"]))
