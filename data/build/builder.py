"""Builds COCO-35L and CC3M-35L in the layout of layout.py: images once, captions per language.

Worker processes write the image shards while this process spills the captions; then a
worker per language writes its caption table, as many at once as TABLE_MEMORY allows. TFDS's
metadata is written last (a folder without it is unfinished); a killed build resumes.
"""

import contextlib
import dataclasses
import logging
import multiprocessing
import multiprocessing.pool
import os
import shutil
import time

import numpy as np

import errors
import files
from data import worker_processes
from data.build import caption_tables, image_shards, layout
from data.build.progress import Progress, size_text

# Memory the caption-table workers may use together (each at its true bytes per caption),
# besides the workers' own (~40 MB each, before a task).
TABLE_MEMORY = 768 << 20
_STATE = ".build"
SPLITS = ("train", "dev")
TICK_ITEMS = 1 << 16  # The captions or lines between progress updates.


class NotEnoughSpaceError(errors.RunError):
    """The data directory's disk has less free space than the build needs."""


@dataclasses.dataclass
class Release:
    """What coco35l_plan.py or cc3m35l_plan.py tells `build` about a release.
    image_shards(split) -> ([ImageShard], warning or ""); text_path(split, langs) -> the translation
    file the captions need, or None; write_captions(split, langs, spill, tick) -> [warnings],
    streaming the captions into `spill`, calling tick(file bytes read, lines) (through `ticked`:
    the last tick counts the whole file)."""
    dataset: str
    title: str
    image_shards: object
    text_path: object
    write_captions: object
    description: str


@dataclasses.dataclass
class _Plan:
    """What a build has to do (and where)."""
    release: Release
    options: image_shards.ImageOptions
    image_dir: str
    caption_dir: str
    state_dir: str
    todo: dict          # {split: [languages whose caption table to write]}
    built: dict         # {caption split: (shard lengths, bytes)} already built
    shards: dict        # {split: ([ImageShard], warning)}; empty when the images are built
    text_paths: dict    # {split: translation file or None}
    pending: list       # the image shards to write

    def spills(self):
        """{(split, lang): spill paths} of the caption tables to write."""
        return {(split, lang): caption_tables.Spill.paths(self.state_dir, split, lang)
                for split, split_langs in self.todo.items() for lang in split_langs}


def ticked(items, stream, tick):
    """`items` read from `stream` (a jsonl.LineStream), calling tick(file bytes read, items) every
    TICK_ITEMS items and (bytes, lines) at the end."""
    for count, item in enumerate(items, start=1):
        if count % TICK_ITEMS == 0:
            tick(stream.position, count)
        yield item
    tick(stream.size, stream.lines)


def caption_bytes(path, langs):
    """About the bytes of the caption tables of `langs` (but en) from a translation file (an
    upper bound: uncompressed text plus a record's overhead), from its first 4 MB."""
    from data import jsonl
    from data.releases import coco35l

    if not path or not (translated := [lang for lang in langs if lang != "en"]):
        return 0
    stream = jsonl.LineStream(path, coco35l.TRANSLATION_DECODER,
                              lambda where, line: None, chunk_size=1 << 20)
    lines, text, position = 0, 0, stream.size
    for lines, (_, row) in enumerate(stream, start=1):
        text += len(row.translation_tokenized.encode("utf-8"))
        if stream.position >= min(1 << 22, stream.size) and lines >= 100:
            position = stream.position
            break
    # The file holds 34 languages' lines; a caption takes its text and a record's overhead.
    captions = stream.size * (lines / max(position, 1)) * len(translated) / 34
    return int(captions * (text / max(lines, 1) + 24))


def estimate_bytes(release, langs, images=True):
    """About the disk a build of `langs` (and of the images, if `images`) takes."""
    total = 0
    for split in SPLITS:
        if images:
            total += sum(s.input_bytes() for s in release.image_shards(split)[0])
        total += caption_bytes(release.text_path(split, langs), langs)
    return total


def check_free_space(data_dir, needed):
    """Raises NotEnoughSpaceError when `data_dir`'s disk has less than `needed` bytes free."""
    folder = data_dir
    while not os.path.exists(folder):
        folder = os.path.dirname(os.path.abspath(folder))
    if needed > (free := shutil.disk_usage(folder).free):
        raise NotEnoughSpaceError(
            f"not enough free space in {data_dir}: the build needs about {size_text(needed)} "
            f"(images, caption tables and their temporary spill), {size_text(free)} are free")


def _pool(workers):
    """A pool of `workers` spawned processes (data/worker_processes.py), or for 0 one thread of
    this process."""
    if workers == 0:
        return multiprocessing.pool.ThreadPool(1)
    with worker_processes.starting():
        return multiprocessing.get_context("spawn").Pool(
            workers, initializer=worker_processes.build_worker_init, initargs=(os.getpid(),))


def _finished(result):
    """Whether a task is done (its error raised here)."""
    if not result.ready():
        return False
    result.get()
    return True


def build(release, *, data_dir, langs, options, workers=None):
    """Builds what is missing of `release` in `data_dir`: its images, and the captions of `langs`.

    `options` (image_shards.ImageOptions) must match built images'; `workers` defaults to
    the usable cores (0: in this process). Returns {images: {split: n}, captions: {split_lang:
    n}, metadata, warnings, timing (if something was built)}. Raises FileNotFoundError (named),
    CorruptImageError ("stop"), ValueError (file:line, or a language without captions).
    """
    start = time.monotonic()
    if (plan := _plan(release, data_dir, langs, options, SPLITS)) is None:
        return _summary(data_dir, release.dataset, [])
    image_bytes = sum(s.input_bytes() for s in plan.pending)
    text_bytes = sum(os.path.getsize(p) for p in plan.text_paths.values() if p)
    stored = image_bytes
    if options.max_side:  # At most the re-encoded size (img2dataset: 10k images a tar).
        num_images = sum(len(s.files) or 10_000 for s in plan.pending)
        stored = min(image_bytes, int(num_images * options.max_side ** 2 * 0.75 * 0.5))
    check_free_space(data_dir, stored + 2 * sum(
        caption_bytes(plan.text_paths[split], split_langs)
        for split, split_langs in plan.todo.items()))
    progress = Progress(release.title, image_bytes, text_bytes)
    workers = worker_processes.available_cores() if workers is None else workers
    warnings = [warning for _, warning in plan.shards.values() if warning]
    pool = _pool(workers)
    try:
        timing = _images_and_spills(pool, plan, progress, warnings)
        timing["images_s"] = time.monotonic() - start
        if plan.shards:
            warnings += _finish_images(plan)
        # Idle, the image stage's workers hold ~65 MB each.
        if (table_workers := _table_workers(plan, workers)) < workers:
            pool.close()
            pool.join()
            pool = _pool(table_workers)
        tables, table_timing = _caption_tables(pool, plan, max(table_workers, 1), progress)
    except BaseException:
        pool.terminate()  # An error or Ctrl-C: a shard being written is rewritten on resume.
        raise
    pool.close()
    pool.join()
    progress.done()
    warnings += _finish_captions(plan, tables)
    _remove_state(plan)
    for warning in warnings:
        logging.warning("%s", warning)
    return {**_summary(data_dir, release.dataset, warnings),
            "timing": {**timing, **table_timing, "wall_s": time.monotonic() - start}}


def _plan(release, data_dir, langs, options, splits):
    """What is missing of `release` in `data_dir` (None: nothing); checks every input first."""
    dataset = release.dataset
    image_dir = layout.images_dir(data_dir, dataset)
    caption_dir = layout.captions_dir(data_dir, dataset)
    state_dir = os.path.join(data_dir, dataset, _STATE)
    if images_built := (layout.read_splits(image_dir) is not None):
        _check_options(data_dir, dataset, options)
    built = layout.read_splits(caption_dir, num_bytes=True) or {}
    todo = {split: [lang for lang in langs if f"{split}_{lang}" not in built] for split in splits}
    todo = {split: split_langs for split, split_langs in todo.items() if split_langs}
    if images_built and not todo:
        return None
    # Everything the build reads is found (or named as missing) before any work starts.
    shards = {} if images_built else {split: release.image_shards(split) for split in splits}
    text_paths = {split: release.text_path(split, split_langs)
                  for split, split_langs in todo.items()}
    for folder in (state_dir, image_dir, caption_dir):
        os.makedirs(folder, exist_ok=True)
    pending = [s for split_shards, _ in shards.values() for s in split_shards
               if image_shards.finished_shard(s, image_dir, dataset, state_dir, options) is None]
    return _Plan(release, options, image_dir, caption_dir, state_dir, todo, built, shards,
                 text_paths, pending)


def _images_and_spills(pool, plan, progress, warnings):
    """Stage 1: the image shards in the pool while this process spills the captions; its timing."""
    tasks = [pool.apply_async(image_shards.write_image_shard,
                              (plan.release.dataset, s, plan.image_dir, plan.state_dir,
                               plan.options)) for s in plan.pending]
    counted = set()

    def poll():
        for i, task in enumerate(tasks):
            if i not in counted and _finished(task):
                counted.add(i)
                summary = task.get()
                # The bytes the total counts: a tar's, not its JPEGs' (tiny ones stayed at 18%).
                progress.image_done += plan.pending[i].input_bytes()
                progress.images += len(summary["keys"]) + len(summary["skipped"])
        progress.show()

    text_start, text_cpu = time.monotonic(), time.process_time()
    for split, split_langs in plan.todo.items():
        # The earlier files' bytes: their last tick (`ticked`'s) counted each whole.
        base, base_lines = progress.text_done, progress.lines

        def tick(position, lines, base=base, base_lines=base_lines):
            progress.text_done, progress.lines = base + position, base_lines + lines
            poll()

        with contextlib.closing(caption_tables.Spill(plan.state_dir, split, split_langs)) as spill:
            warnings += plan.release.write_captions(split, split_langs, spill, tick)
        if empty := [lang for lang, count in spill.counts.items() if not count]:
            raise ValueError(f"{plan.text_paths[split] or plan.release.title} has no {split} "
                             f"captions in {', '.join(map(repr, empty))}, which the build needs")
    progress.text_done = progress.text_total
    timing = {"lines": progress.lines, "text_s": time.monotonic() - text_start,
              "text_cpu_s": time.process_time() - text_cpu}
    for task in tasks:
        while not _finished(task):
            poll()
            task.wait(1.0)
    poll()
    timing["image_cpu_s"] = sum(task.get()["cpu_s"] for task in tasks)
    return timing


def _table_workers(plan, workers):
    """Stage 2's workers: as many as the largest tables that fit TABLE_MEMORY at once (more would
    sit idle holding memory)."""
    largest = max((caption_tables.table_memory(paths[0]) for paths in plan.spills().values()),
                  default=0)
    return min(workers, max(1, TABLE_MEMORY // max(largest, 1)))


def _caption_tables(pool, plan, workers, progress):
    """Stage 2: a caption table per language, as many at once as TABLE_MEMORY allows; returns
    (the tables' counts, timing)."""
    start = time.monotonic()
    tasks = [(caption_tables.table_memory(paths[0]), f"{split}_{lang}", paths,
              os.path.join(plan.image_dir, f"keys_{split}.npy"))
             for (split, lang), paths in plan.spills().items()]
    started = []  # (memory, task) of the tables started
    total_memory = sum(memory for memory, *_ in tasks) or 1

    def show():  # The finished tables, and their share of the work (memory ~ captions).
        done = [memory for memory, task in started if _finished(task)]
        progress.set_stage(f"caption tables {len(done)}/{len(tasks)}", sum(done) / total_memory)
        progress.show()

    for memory, name, paths, keys_path in tasks:
        while True:  # A table larger than the budget runs alone.
            running = [(m, task) for m, task in started if not _finished(task)]
            if not running or (len(running) < workers and
                                sum(m for m, _ in running) + memory <= TABLE_MEMORY):
                break
            running[0][1].wait(0.2)
            show()
        started.append((memory, pool.apply_async(
            caption_tables.write_caption_table,
            (plan.release.dataset, name, paths, keys_path, plan.caption_dir))))
    for _, task in started:
        while not _finished(task):
            task.wait(0.2)
            show()
    tables = [task.get() for _, task in started]
    show()
    return tables, {"tables_s": time.monotonic() - start, "table_workers": workers,
                    "table_cpu_s": sum(t["cpu_s"] for t in tables),
                    "captions": sum(t["num_captions"] for t in tables)}


def _write_metadata(folder, dataset, images, splits, description, metadata=None):
    """TFDS's dataset_info.json and features.json of the image (`images`) or caption tables,
    for {split: (shard lengths, bytes)}."""
    import tensorflow_datasets as tfds

    key = tfds.features.Scalar(dtype=np.int64)
    features = tfds.features.FeaturesDict(
        {"image": tfds.features.Image(encoding_format="jpeg"), "key": key} if images else
        {"image_index": tfds.features.Scalar(dtype=np.int64), "key": key,
         "captions": tfds.features.Sequence(tfds.features.Text())})

    infos = [tfds.core.SplitInfo(
        name=name, shard_lengths=list(lengths), num_bytes=int(num_bytes),
        filename_template=tfds.core.ShardedFileTemplate(
            data_dir=tfds.core.Path(folder), template="{DATASET}-{SPLIT}.{FILEFORMAT}-"
            "{SHARD_X_OF_Y}", dataset_name=dataset, split=name, filetype_suffix="array_record"))
        for name, (lengths, num_bytes) in sorted(splits.items())]
    tfds.folder_dataset.write_metadata(
        data_dir=folder, features=features, split_infos=infos, version=layout.VERSION,
        check_data=False, description=description,
        homepage="https://google.github.io/crossmodal-3600/",
        metadata=tfds.core.MetadataDict(metadata) if metadata else None)


def _check_options(data_dir, dataset, options):
    """The built images' max_side and quality must be the ones asked for."""
    built = layout.Built(data_dir, dataset).metadata()
    side, quality = built.get("max_side") or 0, built.get("jpeg_quality")
    if side != options.max_side or options.max_side and quality != options.jpeg_quality:
        raise ValueError(
            f"the images of {dataset} in {data_dir} were built with max_side={side}, "
            f"jpeg_quality={quality}; build with those (--max_side {side}), or delete "
            f"{layout.images_dir(data_dir, dataset)} to rebuild the images")


def _finish_images(plan):
    """Keys arrays and TFDS metadata of the images; removes stray shards. Returns warnings."""
    release, splits, warnings, expected = plan.release, {}, [], set()
    for split, (split_shards, _) in plan.shards.items():
        summaries = [image_shards.finished_shard(s, plan.image_dir, release.dataset,
                                                 plan.state_dir, plan.options)
                     for s in split_shards]
        keys = [k for s in summaries for k in s["keys"]]
        if skipped := [name for s in summaries for name in s["skipped"]]:
            warnings.append(f"{release.title} {split}: skipped {len(skipped)} corrupt images, "
                            f"e.g. {', '.join(skipped[:5])}")
        if duplicates := len(keys) - len(set(keys)):
            warnings.append(f"{release.title} {split}: {duplicates} images repeat a key; "
                            f"captions refer to the first of each")
        with files.replacing(os.path.join(plan.image_dir, f"keys_{split}.npy"), "wb") as f:
            np.save(f, np.asarray(keys, np.int64))
        splits[split] = ([len(s["keys"]) for s in summaries],
                         sum(s["num_bytes"] for s in summaries))
        expected |= {os.path.basename(s.path(plan.image_dir, release.dataset))
                     for s in split_shards}
    for name in os.listdir(plan.image_dir):  # Shards of an earlier plan (the inputs changed).
        if ".array_record-" in name and name not in expected:
            os.remove(os.path.join(plan.image_dir, name))
    metadata = {"max_side": plan.options.max_side or None,
                "jpeg_quality": plan.options.jpeg_quality,
                "corrupt_images": plan.options.corrupt_images}
    _write_metadata(plan.image_dir, release.dataset, True, splits,
                    f"{release.description} Images, each stored once.", metadata)
    for split_shards, _ in plan.shards.values():
        for s in split_shards:
            os.remove(image_shards.summary_path(plan.state_dir, s))
    return warnings


def _finish_captions(plan, tables):
    """TFDS metadata of every built caption table; returns warnings about dropped captions."""
    splits = {**plan.built, **{t["name"]: ([t["num_examples"]], t["num_bytes"]) for t in tables}}
    no_image = {t["name"]: t["no_image"] for t in tables if t["no_image"]}
    _write_metadata(plan.caption_dir, plan.release.dataset, False, splits,
                    f"{plan.release.description} Captions per language, referring to the "
                    f"images by index.")
    return [f"{plan.release.title}: captioned images without a stored image (not downloaded, "
            f"missing or skipped as corrupt), per split and language: {no_image}"
            ] if no_image else []


def _remove_state(plan):
    """Deletes the spills; the state folder goes once it is empty (the build is complete)."""
    for paths in plan.spills().values():
        for path in paths:
            os.remove(path)
    with contextlib.suppress(OSError):
        os.rmdir(plan.state_dir)


def _summary(data_dir, dataset, warnings):
    built = layout.Built(data_dir, dataset)
    return {"images": {s: sum(n) for s, n in built.image_splits.items()},
            "captions": {s: sum(n) for s, n in built.caption_splits.items()},
            "metadata": built.metadata(), "warnings": warnings}
