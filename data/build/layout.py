"""The built COCO-35L and CC3M-35L: where `python -m tools.build_data` writes them, and reading
them.

Two TFDS datasets of ArrayRecord shards under the data directory: <dataset>/images/2.0.0/
(splits train, dev: a record per image, features image, key; keys_<split>.npy) and
<dataset>/captions/2.0.0/ (splits <split>_<lang>: a record per captioned image, features
image_index, key, captions). Read here without TensorFlow.
"""

import contextlib
import json
import os

import numpy as np

import errors
from data.build import records

DATASETS = ("coco35l", "cc3m35l")
VERSION = "2.0.0"
FILE_TEMPLATE = "{dataset}-{split}.array_record-{shard:05d}-of-{num_shards:05d}"
IMAGE_OPTIONS = "group_size:1,uncompressed"  # JPEG bytes do not compress.
# An example decompresses its record's whole chunk, and a caption alone costs more in chunk
# overhead than in text: chunks of 32, transposed (tags and lengths compress apart from text).
CAPTION_OPTIONS = "group_size:32,transpose:true,zstd:9"


class NotBuiltError(errors.InputError):
    """A dataset, or some of its languages, is not built in the data directory."""


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


@contextlib.contextmanager
def writing(path, options):
    """`write(record)` (records.encode's dict; returns its bytes) into a new ArrayRecord shard at
    `path`, written under a temporary name and renamed to `path` once the block ends without error
    (removed on one)."""
    from array_record.python import array_record_module

    temporary = path + ".incomplete"
    writer = array_record_module.ArrayRecordWriter(temporary, options)

    def write(record):
        data = records.encode(record)
        writer.write(data)
        return len(data)

    try:
        yield write
    except BaseException:
        writer.close()
        os.remove(temporary)
        raise
    writer.close()
    os.replace(temporary, path)


def read_splits(folder, num_bytes=False):
    """{split name: [records per shard]} (with `num_bytes`: (that, bytes)) from a TFDS folder's
    dataset_info.json, or None."""
    if (info := _json(os.path.join(folder, "dataset_info.json"))) is None:
        return None
    return {s["name"]: ([int(n) for n in s.get("shardLengths", [])], int(s.get("numBytes", 0)))
            if num_bytes else [int(n) for n in s.get("shardLengths", [])] for s in info["splits"]}


def _json(path):
    """The JSON value of the file at `path`, or None if there is none."""
    with contextlib.suppress(FileNotFoundError), open(path, encoding="utf-8") as f:
        return json.load(f)
    return None


def image_row(record):
    """(key, encoded image bytes) of an image record."""
    return record["key"][0], record["image"][0]


def caption_row(record):
    """(image index, key, captions) of a caption record."""
    return (record["image_index"][0], record["key"][0],
            tuple(c.decode("utf-8") for c in record["captions"]))


class Table:
    """The records of one split (ArrayRecord shards) by index, each decoded by `row`.
    Picklable: readers open in the reading process (Grain's workers open their own)."""

    def __init__(self, folder, dataset, split, shard_lengths, row):
        self._paths = [shard_path(folder, dataset, split, i, len(shard_lengths))
                       for i in range(len(shard_lengths))]
        self._starts = np.cumsum([0, *shard_lengths])  # [num_shards + 1]
        self._row, self._readers = row, {}

    def __len__(self):
        return int(self._starts[-1])

    def __getstate__(self):
        return {**self.__dict__, "_readers": {}}

    def __getitem__(self, index):
        if not 0 <= index < len(self):
            raise IndexError(f"record index {index} out of range [0, {len(self)})")
        shard = int(np.searchsorted(self._starts, index, side="right")) - 1
        if shard not in self._readers:
            from array_record.python import array_record_module

            self._readers[shard] = array_record_module.ArrayRecordReader(
                self._paths[shard], "readahead_buffer_size:0,max_parallelism:0")
        reader = self._readers[shard]
        reader.seek(int(index - self._starts[shard]))
        return self._row(records.decode(reader.read()))

    def read(self, indices):
        """The rows at `indices`, one by one (the parallelism is the worker processes')."""
        return [self[index] for index in indices]


class Built:
    """A built COCO-35L or CC3M-35L (a name of DATASETS: the config schema and build.release
    check it) in `data_dir`; NotBuiltError if its images are not."""

    def __init__(self, data_dir, dataset):
        self.data_dir, self.dataset = data_dir, dataset
        self.image_splits = read_splits(images_dir(data_dir, dataset))
        if self.image_splits is None:
            raise NotBuiltError(f"{dataset} is not built in {data_dir}")
        self.caption_splits = read_splits(captions_dir(data_dir, dataset)) or {}

    def langs(self, split):
        """The languages whose captions of `split` are built."""
        return sorted(name.removeprefix(f"{split}_") for name in self.caption_splits
                      if name.startswith(f"{split}_"))

    def metadata(self):
        """How the images were built: {"max_side": int or None, "jpeg_quality": int, ...}."""
        return _json(os.path.join(images_dir(self.data_dir, self.dataset), "metadata.json")) or {}

    def images(self, split):
        """The images of a split: `Table` of (key, encoded image bytes)."""
        return self._table(images_dir, self.image_splits, split, image_row,
                           f"images of split {split!r}")

    def captions(self, split, lang):
        """The caption table of a split and language: `Table` of (image index, key, captions)."""
        return self._table(captions_dir, self.caption_splits, f"{split}_{lang}", caption_row,
                           f"{lang!r} captions of split {split!r}")

    def _table(self, folder, splits, name, row, what):
        if name not in splits:
            raise NotBuiltError(f"{self.dataset} has no {what} in {self.data_dir}")
        return Table(folder(self.data_dir, self.dataset), self.dataset, name, splits[name], row)
