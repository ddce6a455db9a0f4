"""The images of a build, one ArrayRecord shard per worker task: checked, maybe re-encoded, written.

A shard is ~SHARD_BYTES of loose files or one img2dataset tar. Each image is decoded at a
reduced scale (a corrupt one stops the build, named, or is skipped and counted) and
re-encoded at `max_side` if asked; the shard is written under a temporary name, then its
summary (keys in record order) goes beside the build's state, so a killed build resumes.
"""

import dataclasses
import hashlib
import io
import json
import os
import time

from PIL import Image

import errors
import files
from data.build import layout

CORRUPT_IMAGE_POLICIES = ("stop", "skip")
# Input bytes per image shard of loose files (img2dataset tars are one shard each).
SHARD_BYTES = 128 << 20


class CorruptImageError(errors.InputError):
    """An image file exists but does not decode."""


@dataclasses.dataclass(frozen=True)
class ImageOptions:
    """How images are checked ("stop" at a corrupt one or "skip" it) and stored (`max_side`:
    re-encode longer sides to it at `jpeg_quality`, aspect kept; 0: the release's bytes)."""
    corrupt_images: str = "stop"
    max_side: int = 0
    jpeg_quality: int = 90

    def __post_init__(self):
        if self.corrupt_images not in CORRUPT_IMAGE_POLICIES:  # The Python API's callers too.
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

    def path(self, folder, dataset):
        """Where the shard goes in `folder` (layout.shard_path)."""
        return layout.shard_path(folder, dataset, self.split, self.shard, self.num_shards)

    def input_bytes(self):
        """The bytes of its input files."""
        return sum(os.path.getsize(p) for p in [path for _, path in self.files] or [self.tar])


def prepare_image(data, name, options):
    """The bytes to store for one image, or None to skip it ("skip" policy).
    Every image is decoded (a reduced decode still reads every block), so corrupt ones are found at
    build time: CorruptImageError names it under "stop"."""
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
    from data.releases import cc3m35l

    yield from cc3m35l.iter_tar(shard.tar) if shard.tar else ()
    for key, path in shard.files:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise FileNotFoundError(f"image file disappeared during the build: {path}") from None
        yield key, path, data


def summary_path(state_dir, shard):
    """Where the summary of a finished shard is kept (its presence marks it finished)."""
    return os.path.join(state_dir, f"images-{shard.split}-{shard.shard:05d}-of-"
                                   f"{shard.num_shards:05d}.json")


def write_image_shard(dataset, shard, out_dir, state_dir, options):
    """Writes one image shard (a worker task); returns its summary (keys in record order, bytes,
    skipped images, input fingerprint), also kept in state_dir."""
    cpu = time.process_time()
    keys, skipped, num_bytes = [], [], 0
    with layout.writing(shard.path(out_dir, dataset), layout.IMAGE_OPTIONS) as write:
        for key, name, data in _shard_items(shard):
            if (stored := prepare_image(data, name, options)) is None:
                skipped.append(name)
                continue
            num_bytes += write({"image": stored, "key": int(key)})
            keys.append(int(key))
    summary = {"split": shard.split, "shard": shard.shard, "keys": keys, "num_bytes": num_bytes,
               "skipped": skipped, "fingerprint": shard.fingerprint(options),
               "cpu_s": time.process_time() - cpu}
    # The shard is complete (renamed in) before its summary says so.
    files.write_json(summary_path(state_dir, shard), summary, indent=None)
    return summary


def finished_shard(shard, out_dir, dataset, state_dir, options):
    """The summary of a shard a previous run finished with the same inputs, else None."""
    try:
        with open(summary_path(state_dir, shard), encoding="utf-8") as f:
            summary = json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    fresh = os.path.exists(shard.path(out_dir, dataset))
    return summary if fresh and summary.get("fingerprint") == shard.fingerprint(options) else None


def plan_shards(split, loose=(), tars=()):
    """ImageShards of a split: one per tar, and loose files [(key, path)] in ~SHARD_BYTES runs."""
    groups, size = [], SHARD_BYTES
    for key, path in loose:
        if size >= SHARD_BYTES:  # The last group is full: a new one.
            groups.append([])
            size = 0
        groups[-1].append((key, path))
        size += os.path.getsize(path)
    units = [dict(tar=t) for t in tars] + [dict(files=tuple(g)) for g in groups]
    return [ImageShard(split, i, len(units), **unit) for i, unit in enumerate(units)]
