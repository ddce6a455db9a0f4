"""The caption tables of a build: captions spilled to disk while the text is read, then sorted.

This process streams each translation file once into a spill per language (`Spill`), so its
memory does not grow with the lines; then a worker per language sorts the spill by image and
writes the table (`write_caption_table`) within `table_memory` bytes.
"""

import os
import struct
import time

import numpy as np

from data.build import layout

# A caption spill entry: key, caption number, text length (the text is in a second file).
_SPILL_ENTRY = struct.Struct("<qii")
_SPILL_DTYPE = np.dtype([("key", "<i8"), ("n", "<i4"), ("length", "<i4")])
# Peak memory of `write_caption_table` per spilled caption above the worker's own (measured
# 63-66 B, 0.6-3.3 M captions).
BYTES_PER_CAPTION = 72


class Spill:
    """Per-language caption spill files of one split: an index (key, n, length) and the texts."""

    def __init__(self, folder, split, langs):
        self.counts = dict.fromkeys(langs, 0)
        self._files = {lang: tuple(open(path, "wb", buffering=1 << 18)
                                   for path in self.paths(folder, split, lang)) for lang in langs}

    @staticmethod
    def paths(folder, split, lang):
        """(index path, text path) of one language's spill."""
        stem = os.path.join(folder, f"spill-{split}_{lang}")
        return stem + ".idx", stem + ".txt"

    def add(self, lang, key, n, text):
        """Appends caption number `n` of record `key` in `lang`."""
        data = text.encode("utf-8")
        index, texts = self._files[lang]
        index.write(_SPILL_ENTRY.pack(key, n, len(data)))
        texts.write(data)
        self.counts[lang] += 1

    def close(self):
        for index, text in self._files.values():
            index.close()
            text.close()


def table_memory(index_path):
    """The memory `write_caption_table` needs for a spill index (the scheduler's budget)."""
    return os.path.getsize(index_path) // _SPILL_DTYPE.itemsize * BYTES_PER_CAPTION


def _image_of_each_caption(spill_keys, keys):
    """The image (record index, int32) of each spilled caption's key, -1 if none; a repeated key
    refers to its first image."""
    if not len(keys):
        return np.full(len(spill_keys), -1, np.int32)
    by_key = np.argsort(keys, kind="stable")
    sorted_keys = keys[by_key]
    pos = np.searchsorted(sorted_keys, spill_keys)
    np.minimum(pos, len(keys) - 1, out=pos)
    image = by_key.astype(np.int32)[pos]
    image[sorted_keys[pos] != spill_keys] = -1
    return image


def _table_order(index, image):
    """The spill rows of the table in order: by image, caption number, then file order;
    of a repeated (image, caption number) only the last line, as a dict of the file keeps."""
    found = np.flatnonzero(image >= 0)
    stride = int(index["n"].max(initial=0)) + 1
    # (image, caption number) above, the file row below: one int64 each, sorted in place.
    packed = (image[found].astype(np.int64) * stride + index["n"][found]) << 32
    packed |= found
    del found
    packed.sort()
    key = packed >> 32
    last = np.append(key[1:] != key[:-1], True)
    del key
    return packed[last] & 0xFFFFFFFF


def write_caption_table(dataset, name, spill_paths, keys_path, out_dir):
    """Writes one caption table (a worker task) from its spill; returns its counts.
    Captions whose key has no image in the split are dropped (and counted)."""
    cpu = time.process_time()
    index = np.fromfile(spill_paths[0], dtype=_SPILL_DTYPE)
    keys = np.load(keys_path)
    image = _image_of_each_caption(index["key"], keys)
    no_image = len(np.unique(index["key"][image < 0]))
    rows = _table_order(index, image)
    image, lengths = image[rows], index["length"][rows]
    ends = np.cumsum(index["length"], dtype=np.int64)[rows]  # Where each text ends.
    del index, rows
    num_bytes = 0
    groups = np.flatnonzero(np.diff(image, prepend=-1, append=-1))  # Each image's first row.
    with open(spill_paths[1], "rb") as texts, layout.writing(
            layout.shard_path(out_dir, dataset, name, 0, 1), layout.CAPTION_OPTIONS) as write:
        for a, b in zip(groups[:-1], groups[1:], strict=True):
            captions = [os.pread(texts.fileno(), int(n), int(e - n))
                        for n, e in zip(lengths[a:b], ends[a:b], strict=True)]
            i = int(image[a])
            num_bytes += write({"image_index": i, "key": int(keys[i]), "captions": captions})
    return {"name": name, "num_examples": max(len(groups) - 1, 0), "num_bytes": num_bytes,
            "no_image": no_image, "num_captions": len(image),
            "cpu_s": time.process_time() - cpu}
