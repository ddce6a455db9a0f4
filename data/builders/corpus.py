"""Writes COCO-35L and CC3M-35L in the layout of data/corpus.py: images once, captions per language.

The build streams and scales with the cores:

- Images are planned as shards (a list of files, or one img2dataset tar).
  Worker processes (all cores by default) check each image with a reduced
  decode (a corrupt JPEG stops the build, named, or is skipped and counted),
  optionally re-encode it at a maximum side, and write one ArrayRecord shard at
  a time, under a temporary name that becomes final when the shard is
  complete: a killed build resumes from the finished shards.
- Captions: while the workers write images, the main process reads each
  translation file once, streaming (data/jsonl.LineStream), and appends every
  caption it keeps to a spill file of its language on disk (key, caption
  number, text), so its memory does not grow with the number of lines. Once
  the images are written, a worker per language sorts that language's spill
  (16 bytes of memory per caption) and writes its caption table.
- TFDS's metadata (dataset_info.json, features.json) is written last, so a
  folder without it is an unfinished build.

data/builders/coco35l.py and cc3m35l.py say what the images and the captions
of each release are; `build` here does the rest.
"""

import concurrent.futures
import dataclasses
import hashlib
import io
import json
import logging
import mmap
import os
import shutil
import struct
import sys
import time

import numpy as np
from PIL import Image

import errors
from data import corpus, records

CORRUPT_IMAGE_POLICIES = ("stop", "skip")
# Input bytes per image shard of loose files (img2dataset tars are one shard each).
SHARD_BYTES = 128 << 20
# A caption spill entry: key, caption number, text length (the text is in a second file).
_SPILL_ENTRY = struct.Struct("<qii")
_SPILL_DTYPE = np.dtype([("key", "<i8"), ("n", "<i4"), ("length", "<i4")])
# Memory the caption-table workers may use together (each holds its language's index).
_TABLE_MEMORY = 1 << 30
_STATE = ".build"


class CorruptImageError(errors.InputError):
    """An image file exists but does not decode."""


@dataclasses.dataclass(frozen=True)
class ImageOptions:
    """How images are checked and stored.

    Attributes:
        corrupt_images: "stop" at a corrupt image (naming it) or "skip" and count it.
        max_side: re-encode images whose longer side exceeds this many pixels
            to that side (aspect kept); 0 stores the release's bytes unchanged.
        jpeg_quality: the quality of re-encoded JPEGs.
    """
    corrupt_images: str = "stop"
    max_side: int = 0
    jpeg_quality: int = 90

    def __post_init__(self):
        if self.corrupt_images not in CORRUPT_IMAGE_POLICIES:
            raise ValueError(f"unknown corrupt_images policy {self.corrupt_images!r}; known: "
                             f"{', '.join(CORRUPT_IMAGE_POLICIES)}")
        if self.max_side < 0 or 0 < self.max_side < 32:
            raise ValueError(f"max_side must be 0 (keep the images) or at least 32, got "
                             f"{self.max_side}")


@dataclasses.dataclass(frozen=True)
class ImageShard:
    """The inputs of one image shard: loose files [(key, path)] or one tar shard."""
    split: str
    shard: int
    num_shards: int
    files: tuple = ()
    tar: str = ""

    def fingerprint(self, options):
        """Changes when the inputs (names, sizes, times) or the image options change."""
        h = hashlib.sha1(repr(dataclasses.astuple(options)).encode())
        for _, path in self.files or ((None, self.tar),):
            st = os.stat(path)
            h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        return h.hexdigest()


def prepare_image(data, name, options):
    """The bytes to store for one image, or None to skip it (policy "skip").

    Every image is decoded (a reduced decode still reads every block), so a
    corrupt one is found at build time. An image larger than `max_side` is
    re-encoded at that side.

    Raises:
        CorruptImageError: the image does not decode (policy "stop"); names it.
    """
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            if options.max_side and max(width, height) > options.max_side:
                scale = options.max_side / max(width, height)
                size = (max(1, round(width * scale)), max(1, round(height * scale)))
                image.draft("RGB", size)  # Decodes at the smallest DCT scale >= size.
                small = image.convert("RGB").resize(size, Image.LANCZOS)
                out = io.BytesIO()
                small.save(out, "JPEG", quality=options.jpeg_quality)
                return out.getvalue()
            image.draft("RGB", (64, 64))
            image.load()
            return data
    except Exception as e:  # PIL raises many types for broken files.
        if options.corrupt_images == "stop":
            raise CorruptImageError(
                f"corrupt image {name}: {e} (to skip and count such images, build with "
                f"--corrupt_images skip, or train with --config.data.corrupt_images=skip)"
            ) from None
        return None


def _shard_items(shard):
    """(key, name, bytes) of the images of a shard, in order."""
    from data import cc3m35l_release

    if shard.tar:
        yield from cc3m35l_release.iter_tar(shard.tar)
        return
    for key, path in shard.files:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise FileNotFoundError(f"image file disappeared during the build: {path}") from None
        yield key, path, data


def write_image_shard(dataset, shard, out_dir, state_dir, options):
    """Writes one image shard (a worker task); returns its summary (also kept in state_dir).

    The shard is written under a temporary name and renamed when complete; its
    summary (keys in record order, bytes, skipped images, input fingerprint)
    goes to `state_dir`, which is how a resumed build knows it is done.
    """
    from array_record.python import array_record_module

    cpu = time.process_time()
    final = corpus.shard_path(out_dir, dataset, shard.split, shard.shard, shard.num_shards)
    temporary = final + ".incomplete"
    writer = array_record_module.ArrayRecordWriter(temporary, "group_size:1,uncompressed")
    keys, skipped, num_bytes, source_bytes = [], [], 0, 0
    try:
        for key, name, data in _shard_items(shard):
            source_bytes += len(data)
            stored = prepare_image(data, name, options)
            if stored is None:
                skipped.append(name)
                continue
            record = records.encode({"image": stored, "key": int(key)})
            writer.write(record)
            keys.append(int(key))
            num_bytes += len(record)
    except BaseException:
        writer.close()
        os.remove(temporary)
        raise
    writer.close()
    summary = {"split": shard.split, "shard": shard.shard, "keys": keys, "num_bytes": num_bytes,
               "source_bytes": source_bytes, "skipped": skipped,
               "fingerprint": shard.fingerprint(options), "cpu_s": time.process_time() - cpu}
    _write_json(_shard_summary_path(state_dir, shard), summary, replace_after=(temporary, final))
    return summary


def _shard_summary_path(state_dir, shard):
    return os.path.join(state_dir, f"images-{shard.split}-{shard.shard:05d}-of-"
                                   f"{shard.num_shards:05d}.json")


def _write_json(path, obj, replace_after=None):
    """Writes JSON atomically; `replace_after` = (src, dst) is renamed just before it."""
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(obj, f)
    if replace_after:
        os.replace(*replace_after)
    os.replace(path + ".tmp", path)


def finished_shard(shard, out_dir, dataset, state_dir, options):
    """The summary of a shard a previous run finished with the same inputs, else None."""
    final = corpus.shard_path(out_dir, dataset, shard.split, shard.shard, shard.num_shards)
    try:
        with open(_shard_summary_path(state_dir, shard), encoding="utf-8") as f:
            summary = json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    if not os.path.exists(final) or summary.get("fingerprint") != shard.fingerprint(options):
        return None
    return summary


def plan_shards(split, files=(), tars=()):
    """ImageShards of a split: one per tar, and loose files [(key, path)] in ~SHARD_BYTES runs."""
    groups, current, size = [], [], 0
    for key, path in files:
        current.append((key, path))
        size += os.path.getsize(path)
        if size >= SHARD_BYTES:
            groups.append(current)
            current, size = [], 0
    if current:
        groups.append(current)
    units = [dict(tar=t) for t in tars] + [dict(files=tuple(g)) for g in groups]
    return [ImageShard(split, i, len(units), **unit) for i, unit in enumerate(units)]


class Spill:
    """Per-language caption spill files of one split: an index (key, n, length) and the texts."""

    def __init__(self, folder, split, langs):
        os.makedirs(folder, exist_ok=True)
        self.folder, self.split = folder, split
        self.counts = dict.fromkeys(langs, 0)
        self._files = {}
        for lang in langs:
            index, text = self.paths(folder, split, lang)
            self._files[lang] = (open(index, "wb", buffering=1 << 18),
                                 open(text, "wb", buffering=1 << 18))

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


def write_caption_table(dataset, name, spill_paths, keys_path, out_dir):
    """Writes one caption table (a worker task) from its spill; returns its counts.

    Captions whose key has no image in the split are dropped (and counted);
    a repeated (key, caption number) keeps its last line, as reading the file
    into a dict would.
    """
    from array_record.python import array_record_module

    cpu = time.process_time()
    index = np.fromfile(spill_paths[0], dtype=_SPILL_DTYPE)
    starts = np.concatenate([[0], np.cumsum(index["length"], dtype=np.int64)])
    keys = np.load(keys_path)
    order = np.argsort(keys, kind="stable")
    pos = np.searchsorted(keys[order], index["key"])
    found = pos < len(keys)
    found[found] &= keys[order][pos[found]] == index["key"][found]
    image = np.where(found, order[np.minimum(pos, len(keys) - 1)], -1) if len(keys) else \
        np.full(len(index), -1)
    no_image = len(np.unique(index["key"][~found]))
    rows = np.flatnonzero(found)
    rows = rows[np.lexsort((rows, index["n"][rows], image[rows]))]  # image, n, file order
    if len(rows):
        last = np.ones(len(rows), bool)  # The last line of each (image, n).
        last[:-1] = (image[rows[1:]] != image[rows[:-1]]) | \
            (index["n"][rows[1:]] != index["n"][rows[:-1]])
        rows = rows[last]
    final = corpus.shard_path(out_dir, dataset, name, 0, 1)
    temporary = final + ".incomplete"
    writer = array_record_module.ArrayRecordWriter(temporary, "group_size:1")
    num_examples = num_bytes = 0
    image, text_start, text_end = image[rows], starts[rows], starts[rows + 1]
    groups = np.concatenate([[0], np.flatnonzero(np.diff(image)) + 1, [len(rows)]])
    with open(spill_paths[1], "rb") as f:
        text = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if starts[-1] else b""
        try:
            for a, b in zip(groups[:-1], groups[1:], strict=True):
                i = int(image[a])
                captions = [text[s:e] for s, e in zip(text_start[a:b], text_end[a:b],
                                                       strict=True)]
                record = records.encode({"image_index": i, "key": int(keys[i]),
                                         "captions": captions})
                writer.write(record)
                num_examples += 1
                num_bytes += len(record)
        finally:
            writer.close()
            if isinstance(text, mmap.mmap):
                text.close()
    os.replace(temporary, final)
    return {"name": name, "num_examples": num_examples, "num_bytes": num_bytes,
            "no_image": no_image, "num_captions": len(rows), "cpu_s": time.process_time() - cpu}


class NotEnoughSpaceError(errors.RunError):
    """The data directory's disk has less free space than the build needs."""


def sample_text(path, sample_bytes=1 << 22):
    """(lines per byte of the file on disk, mean bytes of a translation) from its beginning."""
    from data import coco35l_release, jsonl

    stream = jsonl.LineStream(path, coco35l_release.TRANSLATION_DECODER,
                              lambda where, line: None, chunk_size=1 << 20)
    lines = text = 0
    for _, row in stream:
        lines += 1
        text += len(row.translation_tokenized.encode("utf-8"))
        if stream.position >= min(sample_bytes, stream.size) and lines >= 100:
            position = stream.position
            break
    else:
        position = stream.size
    return lines / max(position, 1), text / max(lines, 1)


def caption_bytes(path, langs, file_langs=34):
    """About the bytes of the caption tables of `langs` (other than en) from a translation file."""
    translated = [lang for lang in langs if lang != "en"]
    if not path or not translated:
        return 0
    lines_per_byte, mean_text = sample_text(path)
    lines = os.path.getsize(path) * lines_per_byte * len(translated) / file_langs
    return int(lines * (mean_text + 24))


def image_bytes_estimate(source_bytes, num_images, options):
    """About the bytes the images take once stored (an upper bound when re-encoding)."""
    if not options.max_side:
        return source_bytes
    return min(source_bytes, int(num_images * options.max_side ** 2 * 0.75 * 0.5))


def check_free_space(data_dir, needed):
    """Raises NotEnoughSpaceError when `data_dir`'s disk has less than `needed` bytes free."""
    folder = data_dir
    while not os.path.exists(folder):
        folder = os.path.dirname(os.path.abspath(folder))
    free = shutil.disk_usage(folder).free
    if needed > free:
        raise NotEnoughSpaceError(
            f"not enough free space in {data_dir}: the build needs about {_size(needed)} "
            f"(images, caption tables and their temporary spill), {_size(free)} are free")


class _InProcess:
    """A stand-in for a process pool that runs each task when it is submitted (workers=0)."""

    def submit(self, fn, *args):
        future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args))
        except Exception as e:  # Delivered through the future, as a pool would.
            future.set_exception(e)
        return future

    def shutdown(self, wait=True, cancel_futures=False, kill=False):
        pass


def default_workers():
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _pool(workers):
    if workers == 0:
        return _InProcess()
    from data import workers as workers_lib

    return workers_lib.CallPool(workers)


def _size(n):
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1000


def _duration(seconds):
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Progress:
    """One progress line on stderr: images written, text read, elapsed time and ETA.

    On a terminal the line is redrawn every second; otherwise a line is printed
    every `every` seconds. Nothing is shown for builds shorter than `after` seconds.
    """

    def __init__(self, title, image_bytes, text_bytes, stream=None, every=30.0, after=3.0):
        self.title, self.stream = title, stream or sys.stderr
        self.image_total, self.text_total = image_bytes, text_bytes
        self.image_done = self.images = self.text_done = self.lines = 0
        self.stage = ""
        self._start = time.monotonic()
        self._tty = getattr(self.stream, "isatty", lambda: False)()
        self._every = 1.0 if self._tty else every
        self._after, self._last, self._shown = after, 0.0, False

    def line(self):
        elapsed = time.monotonic() - self._start
        parts = []
        rates = []
        if self.image_total:
            share = self.image_done / self.image_total
            parts.append(f"images {100 * share:.0f}% ({self.images:,}, "
                         f"{_size(self.image_done)} of {_size(self.image_total)})")
            rates.append(share)
        if self.text_total:
            share = self.text_done / self.text_total
            parts.append(f"text {100 * share:.0f}% ({self.lines / 1e6:.1f}M lines)")
            rates.append(share)
        if self.stage:
            parts.append(self.stage)
        share = min(rates) if rates else 0.0
        eta = f", ETA {_duration(elapsed * (1 - share) / share)}" if 0 < share < 1 else ""
        return f"{self.title}: {' | '.join(parts)} | {_duration(elapsed)}{eta}"

    def show(self, force=False):
        now = time.monotonic()
        if now - self._start < self._after and not (force and self._shown):
            return
        if not force and now - self._last < self._every:
            return
        self._last, self._shown = now, True
        end = "\r" if self._tty else "\n"
        print(self.line().ljust(100) if self._tty else self.line(), end=end, file=self.stream,
              flush=True)

    def done(self):
        if self._shown:
            self.show(force=True)
            if self._tty:
                print(file=self.stream)


@dataclasses.dataclass
class Release:
    """What data/builders/coco35l.py or cc3m35l.py tells `build` about a release.

    Attributes:
        dataset: "coco35l" or "cc3m35l".
        title: for messages ("COCO-35L").
        image_shards: fn(split) -> [ImageShard] of the split's images, plus a
            warning (str or "") about images it dropped (e.g. missing files).
        text_path: fn(split) -> the translation file a split's captions need
            (FileNotFoundError naming it if missing), or None if the
            requested languages need none.
        write_captions: fn(split, langs, spill, tick) -> [warning strings]:
            streams the split's captions of `langs` into `spill`, calling
            tick(bytes of the file read, lines) now and then.
        description: TFDS description of the dataset.
    """
    dataset: str
    title: str
    image_shards: object
    text_path: object
    write_captions: object
    description: str


IMAGE_FEATURES = "image"
CAPTION_FEATURES = "captions"


def _features(kind):
    import tensorflow_datasets as tfds

    if kind == IMAGE_FEATURES:
        return tfds.features.FeaturesDict({
            "image": tfds.features.Image(encoding_format="jpeg"),
            "key": tfds.features.Scalar(dtype=np.int64)})
    return tfds.features.FeaturesDict({
        "image_index": tfds.features.Scalar(dtype=np.int64),
        "key": tfds.features.Scalar(dtype=np.int64),
        "captions": tfds.features.Sequence(tfds.features.Text())})


def _write_metadata(folder, dataset, kind, splits, description, metadata=None):
    """TFDS's dataset_info.json and features.json for {split: (shard lengths, bytes)}."""
    import tensorflow_datasets as tfds

    infos = []
    for name, (lengths, num_bytes) in sorted(splits.items()):
        template = tfds.core.ShardedFileTemplate(
            data_dir=tfds.core.Path(folder), template="{DATASET}-{SPLIT}.{FILEFORMAT}-"
            "{SHARD_X_OF_Y}", dataset_name=dataset, split=name, filetype_suffix="array_record")
        infos.append(tfds.core.SplitInfo(name=name, shard_lengths=list(lengths),
                                         num_bytes=int(num_bytes), filename_template=template))
    kwargs = {"metadata": tfds.core.MetadataDict(metadata)} if metadata else {}
    tfds.folder_dataset.write_metadata(
        data_dir=folder, features=_features(kind), split_infos=infos, version=corpus.VERSION,
        check_data=False, description=description,
        homepage="https://google.github.io/crossmodal-3600/", **kwargs)


def _existing_splits(folder):
    """{split: (shard lengths, bytes)} of a TFDS folder's dataset_info.json."""
    try:
        with open(os.path.join(folder, "dataset_info.json"), encoding="utf-8") as f:
            info = json.load(f)
    except FileNotFoundError:
        return {}
    return {s["name"]: ([int(n) for n in s.get("shardLengths", [])], int(s.get("numBytes", 0)))
            for s in info["splits"]}


def _raise_failures(futures):
    for future in futures:
        if future.done() and not future.cancelled() and future.exception() is not None:
            raise future.exception()


def build(release, *, data_dir, langs, options=ImageOptions(), workers=None,
          splits=("train", "dev"), progress_stream=None):
    """Builds what is missing of `release` in `data_dir`: its images, and the captions of `langs`.

    Args:
        release: a `Release` (data/builders/coco35l.py or cc3m35l.py).
        data_dir: the data directory.
        langs: the languages whose caption tables to build (already built ones are kept).
        options: `ImageOptions`; must match the images' if those are built.
        workers: worker processes (default: the cores this process may use; 0:
            run every task in this process).
        splits: the splits to build.
        progress_stream: where the progress line goes (default stderr).

    Returns:
        A dict: images {split: count}, captions {split_lang: examples}, metadata (of
        the images), warnings [str], and (when something was built) timing: seconds
        and CPU-seconds of each stage, lines read, captions written.

    Raises:
        FileNotFoundError: a release file or folder is missing (named).
        CorruptImageError: a corrupt image with options.corrupt_images == "stop".
        ValueError: a malformed file (named at file:line), or a language with
            no captions in its translation file.
    """
    start = time.monotonic()
    dataset = release.dataset
    image_dir = corpus.images_dir(data_dir, dataset)
    caption_dir = corpus.captions_dir(data_dir, dataset)
    state_dir = os.path.join(data_dir, dataset, _STATE)
    images_built = corpus.read_splits(image_dir) is not None
    if images_built:
        _check_options(data_dir, dataset, options)
    built = _existing_splits(caption_dir)
    todo = {split: [lang for lang in langs if f"{split}_{lang}" not in built] for split in splits}
    todo = {split: split_langs for split, split_langs in todo.items() if split_langs}
    warnings = []
    if images_built and not todo:
        return _summary(data_dir, dataset, warnings)

    # Everything the build reads is found (or named as missing) before any work starts.
    shards = {} if images_built else {split: release.image_shards(split) for split in splits}
    for _, warning in shards.values():
        if warning:
            warnings.append(warning)
    text_paths = {split: release.text_path(split, split_langs)
                  for split, split_langs in todo.items()}
    os.makedirs(state_dir, exist_ok=True)
    os.makedirs(image_dir, exist_ok=True)
    os.makedirs(caption_dir, exist_ok=True)
    pending = [s for split_shards, _ in shards.values() for s in split_shards
               if finished_shard(s, image_dir, dataset, state_dir, options) is None]
    image_bytes = sum(os.path.getsize(p) for s in pending for p in
                      ([path for _, path in s.files] or [s.tar]))
    text_bytes = sum(os.path.getsize(p) for p in text_paths.values() if p)
    num_images = sum(len(s.files) or 10_000 for s in pending)  # img2dataset: 10k per tar.
    check_free_space(data_dir, image_bytes_estimate(image_bytes, num_images, options) + 2 * sum(
        caption_bytes(text_paths[split], split_langs) for split, split_langs in todo.items()))
    progress = Progress(dataset, image_bytes, text_bytes, stream=progress_stream)
    workers = default_workers() if workers is None else workers
    pool = _pool(workers)
    try:
        image_futures = [pool.submit(write_image_shard, dataset, s, image_dir, state_dir, options)
                         for s in pending]
        counted = set()

        def poll():
            _raise_failures(image_futures)
            for future in image_futures:
                if future.done() and id(future) not in counted:
                    counted.add(id(future))
                    summary = future.result()
                    progress.image_done += summary["source_bytes"]
                    progress.images += len(summary["keys"]) + len(summary["skipped"])
            progress.show()

        # The text pass runs here while the workers write images.
        text_done = lines_done = 0
        text_start, text_cpu = time.monotonic(), time.process_time()
        for split, split_langs in todo.items():
            spill = Spill(state_dir, split, split_langs)
            base, base_lines = text_done, lines_done

            def tick(position, lines, base=base, base_lines=base_lines):
                progress.text_done, progress.lines = base + position, base_lines + lines
                poll()

            try:
                warnings += release.write_captions(split, split_langs, spill, tick)
            finally:
                spill.close()
            empty = [lang for lang, count in spill.counts.items() if not count]
            if empty:
                raise ValueError(f"{text_paths[split] or release.title} has no {split} captions "
                                 f"in {', '.join(map(repr, empty))}, which the build needs")
            if text_paths[split]:
                text_done += os.path.getsize(text_paths[split])
            lines_done = progress.lines
        progress.text_done = progress.text_total
        timing = {"lines": lines_done, "text_s": time.monotonic() - text_start,
                  "text_cpu_s": time.process_time() - text_cpu}
        while not all(f.done() for f in image_futures):
            poll()
            concurrent.futures.wait(image_futures, timeout=1.0,
                                    return_when=concurrent.futures.FIRST_EXCEPTION)
        poll()
        timing["images_s"] = time.monotonic() - start
        timing["image_cpu_s"] = sum(f.result()["cpu_s"] for f in image_futures)
        tables_start = time.monotonic()
        if not images_built:
            warnings += _finish_images(release, shards, image_dir, state_dir, options)

        # Caption tables, a language per task, as many at once as memory allows.
        tasks = []
        for split, split_langs in todo.items():
            for lang in split_langs:
                paths = Spill.paths(state_dir, split, lang)
                tasks.append((os.path.getsize(paths[0]) * 4, f"{split}_{lang}", paths,
                              os.path.join(image_dir, f"keys_{split}.npy")))
        results, running = [], []
        for i, (memory, name, paths, keys_path) in enumerate(tasks):
            progress.stage = f"caption tables {i}/{len(tasks)}"
            while running and (len(running) >= max(workers, 1) or
                               sum(m for m, _ in running) + memory > _TABLE_MEMORY):
                done, _ = concurrent.futures.wait([f for _, f in running], timeout=1.0,
                                                  return_when=concurrent.futures.FIRST_COMPLETED)
                _raise_failures(done)
                running = [(m, f) for m, f in running if f not in done]
                progress.show()
            running.append((memory, pool.submit(write_caption_table, dataset, name, paths,
                                                keys_path, caption_dir)))
            results.append(running[-1][1])
        concurrent.futures.wait(results, return_when=concurrent.futures.FIRST_EXCEPTION)
        _raise_failures(results)
        progress.stage = f"caption tables {len(tasks)}/{len(tasks)}"
        tables = [f.result() for f in results]
        timing.update(tables_s=time.monotonic() - tables_start,
                      table_cpu_s=sum(t["cpu_s"] for t in tables),
                      captions=sum(t["num_captions"] for t in tables))
    except KeyboardInterrupt:
        pool.shutdown(kill=True)  # Now; a shard being written is written again on resume.
        raise
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)  # Running shards finish and are kept.
        raise
    pool.shutdown()
    progress.done()
    warnings += _finish_captions(release, tables, caption_dir, built)
    for split in todo:
        for lang in todo[split]:
            for path in Spill.paths(state_dir, split, lang):
                os.remove(path)
    try:
        os.rmdir(state_dir)  # Empty once the build is complete.
    except OSError:
        pass
    for warning in warnings:
        logging.warning("%s", warning)
    return {**_summary(data_dir, dataset, warnings),
            "timing": {**timing, "wall_s": time.monotonic() - start}}


def _check_options(data_dir, dataset, options):
    """The built images' max_side and quality must be the ones asked for."""
    built = corpus.Corpus(data_dir, dataset).metadata()
    wanted = {"max_side": options.max_side or None, "jpeg_quality": options.jpeg_quality}
    if options.max_side and {k: built.get(k) for k in wanted} != wanted or \
            not options.max_side and built.get("max_side"):
        raise ValueError(
            f"the images of {dataset} in {data_dir} were built with max_side="
            f"{built.get('max_side') or 0}, jpeg_quality={built.get('jpeg_quality')}; build "
            f"with those (--max_side {built.get('max_side') or 0}), or delete "
            f"{corpus.images_dir(data_dir, dataset)} to rebuild the images")


def _finish_images(release, shards, image_dir, state_dir, options):
    """Keys arrays and TFDS metadata of the images; removes stray shards. Returns warnings."""
    splits, warnings = {}, []
    expected = set()
    for split, (split_shards, _) in shards.items():
        summaries = [finished_shard(s, image_dir, release.dataset, state_dir, options)
                     for s in split_shards]
        keys = [k for s in summaries for k in s["keys"]]
        skipped = [name for s in summaries for name in s["skipped"]]
        if skipped:
            warnings.append(f"{release.title} {split}: skipped {len(skipped)} corrupt images, "
                            f"e.g. {', '.join(skipped[:5])}")
        duplicates = len(keys) - len(set(keys))
        if duplicates:
            warnings.append(f"{release.title} {split}: {duplicates} images repeat a key; "
                            f"captions refer to the first of each")
        np.save(os.path.join(image_dir, f"keys_{split}.npy"), np.asarray(keys, np.int64))
        splits[split] = ([len(s["keys"]) for s in summaries],
                         sum(s["num_bytes"] for s in summaries))
        expected |= {os.path.basename(corpus.shard_path(image_dir, release.dataset, split, s.shard,
                                                        s.num_shards)) for s in split_shards}
    for name in os.listdir(image_dir):  # Shards of an earlier plan (the inputs changed).
        if ".array_record-" in name and name not in expected:
            os.remove(os.path.join(image_dir, name))
    metadata = {"max_side": options.max_side or None, "jpeg_quality": options.jpeg_quality,
                "corrupt_images": options.corrupt_images}
    _write_metadata(image_dir, release.dataset, IMAGE_FEATURES, splits,
                    f"{release.description} Images, each stored once.", metadata)
    for split_shards, _ in shards.values():
        for s in split_shards:
            os.remove(_shard_summary_path(state_dir, s))
    return warnings


def _finish_captions(release, tables, caption_dir, built):
    """TFDS metadata of every built caption table; returns warnings about dropped captions."""
    splits = dict(built)
    no_image = {}
    for table in tables:
        splits[table["name"]] = ([table["num_examples"]], table["num_bytes"])
        if table["no_image"]:
            no_image[table["name"]] = table["no_image"]
    _write_metadata(caption_dir, release.dataset, CAPTION_FEATURES, splits,
                    f"{release.description} Captions per language, referring to the images "
                    f"by index.")
    if no_image:
        return [f"{release.title}: captioned images without a stored image (not downloaded, "
                f"missing or skipped as corrupt), per split and language: {no_image}"]
    return []


def _summary(data_dir, dataset, warnings):
    built = corpus.Corpus(data_dir, dataset)
    image_splits = corpus.read_splits(corpus.images_dir(data_dir, dataset))
    caption_splits = corpus.read_splits(corpus.captions_dir(data_dir, dataset)) or {}
    return {"images": {s: sum(n) for s, n in image_splits.items()},
            "captions": {s: sum(n) for s, n in caption_splits.items()},
            "metadata": built.metadata(), "warnings": warnings}


def remove_state(data_dir, dataset):
    """Deletes the build's scratch folder (spills, shard summaries) of `dataset`."""
    shutil.rmtree(os.path.join(data_dir, dataset, _STATE), ignore_errors=True)
