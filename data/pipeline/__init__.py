"""The training input: read this first; batches come from `train_iterator`, a Grain pipeline.

Training batches are numpy dicts of this process's share of a global batch:

    image    uint8   [b, H, W, 3]  pixels; the model maps them to [-1, 1] on the
                                   accelerator (model/captioner.unit_range)
    prompt   int32   [b, Lp]       LangId prompt ids, EOS, then 0-padding (data/prompts.py)
    targets  int32   [b, Lt]       caption ids, EOS, then 0-padding

The pipeline is a Grain `MapDataset` over the (step, process) pairs of the run, in step
order: Grain's sharding gives this process its own, a slice starts them at the resumed step
(no iterator state: a step's examples are a pure function of (seed, step, process)), and
each becomes its `Batch`: the examples at the step's positions (their language, image and
reference from sampling.py), read from sources.py (one read a language), decoded, resized
and tokenised. Grain's worker processes make the batches (`mp_prefetch`: worker w of W
makes steps w, w + W, ...) and hand them over in shared memory, so one training process's
input grows with its cores. The workers start when the iterator is made, which train.py
does before it initializes the model, so that the first batch is ready when the first step
compiles.
"""

import concurrent.futures
import errno
import functools
import multiprocessing
import os
import time

import grain
import numpy as np
from absl import flags

from data import images, prompts, tokenizer, worker_processes
from data.pipeline import sampling, sources

_ENDLESS = 1 << 62  # Steps in the stream: more than any run takes.


def batch_shapes(batch_size, image_size, data_config):
    """{name: (shape, dtype)} of the batches made here: what the train step compiles for
    before the first batch exists."""
    return {"image": ((batch_size, image_size, image_size, 3), np.uint8),
            "prompt": ((batch_size, data_config["max_prompt_len"]), np.int32),
            "targets": ((batch_size, data_config["max_target_len"]), np.int32)}


class Batch:
    """The batch of index `step * process_count + process_index` of Grain's order: this
    process's share of that step, {image, prompt, targets} arrays.

    Small to send to the worker processes (the config and the vocabulary's path, not the
    model's bytes nor a release's captions), so that each is sent in one pipe write, which
    an exit cannot cut short; each process opens the sources and the vocabulary itself, at
    its first batch (`open`). In a worker the arrays are made in shared memory, where Grain
    hands them over without a copy.
    """

    def __init__(self, config, vocab_path, sampler, *, image_size, seed, global_batch_size,
                 process_count, shared_memory=False):
        self.config, self.vocab_path, self.sampler = config, vocab_path, sampler
        self.image_size, self.seed, self.shared_memory = image_size, seed, shared_memory
        self.global_batch_size, self.process_count = global_batch_size, process_count
        self._opened = None

    def __getstate__(self):
        return {**self.__dict__, "_opened": None}

    def open(self, per_lang=None):
        """(sources, vocabulary, prompt ids [num_langs, Lp]) of this process, opened once."""
        if self._opened is None:
            if per_lang is None:
                per_lang = sources.open_sources(self.config, "train")[1]
            if [len(s) for s in per_lang] != self.sampler.num_examples:
                raise RuntimeError(f"the training data changed while it was read: examples "
                                   f"per language {[len(s) for s in per_lang]}, expected "
                                   f"{self.sampler.num_examples}")
            vocab = tokenizer.get_vocabulary(self.vocab_path)
            template = self.config.get("prompt_template", None) or \
                prompts.DEFAULT_PROMPT_TEMPLATE
            prompt_ids = np.stack([prompts.tokenize_prompt(vocab, lang, template,
                                                           self.config["max_prompt_len"])
                                   for lang in sources.langs(self.config)])
            self._opened = per_lang, vocab, prompt_ids
        return self._opened

    def _pixels(self, item, position):
        crop = None
        if self.config.get("augment", False):
            crop = images.random_crop(np.random.default_rng([self.seed, 7, position]))
        if item.data is None:
            return images.read_pixels(item.path, self.image_size, crop=crop, name=item.name)
        return images.decode_pixels(item.data, self.image_size, crop=crop, name=item.name)

    def __call__(self, index):
        per_lang, vocab, prompt_ids = self.open()
        step, process = divmod(index, self.process_count)
        local = self.global_batch_size // self.process_count
        start = step * self.global_batch_size + process * local  # This process's positions.
        picks = [self.sampler.example(p) for p in range(start, start + local)]
        langs = np.array([lang for lang, _, _ in picks])
        items = [None] * local
        for lang in np.unique(langs):  # One read of each language's records.
            where = np.flatnonzero(langs == lang)
            for i, item in zip(where, per_lang[lang].items([picks[i][1] for i in where]),
                               strict=True):
                items[i] = item
        new = grain.multiprocessing.SharedMemoryArray if self.shared_memory else np.empty
        batch = {name: new(shape, dtype) for name, (shape, dtype)
                 in batch_shapes(local, self.image_size, self.config).items()}
        image = batch["image"]
        # Shared memory is written by write calls, not stores into its mapping: the kernel
        # then fills each fresh page without a fault and a zeroing (half the cost, 3% of all).
        fd = getattr(getattr(image, "shm", None), "_fd", None)  # POSIX SharedMemory's.
        try:
            for i, item in enumerate(items):
                pixels = self._pixels(item, start + i)
                if fd is None:
                    image[i] = pixels
                elif os.pwrite(fd, pixels, i * pixels.nbytes) != pixels.nbytes:
                    raise OSError(errno.ENOSPC, f"shared memory is full: {pixels.nbytes} bytes "
                                  f"of an image did not fit in /dev/shm ({image.shm.name})")
        except BaseException:  # A bad image, a full /dev/shm: the batch's memory goes now.
            for array in batch.values() if self.shared_memory else ():
                array.shm.unlink()
            raise
        batch["prompt"][...] = prompt_ids[langs]
        batch["targets"][...] = prompts.tokenize_targets(
            vocab, [item.captions[sampling.reference_index(draw, len(item.captions))]
                    for item, (_, _, draw) in zip(items, picks, strict=True)],
            self.config["max_target_len"])
        return batch


class Batches:
    """Iterator over this process's batches, from Grain's; `close()` stops its workers.

    Attributes:
        workers: the worker processes (`multiprocessing.Process`), started.
    """

    def __init__(self, dataset, num_workers):
        batches = dataset.to_iter_dataset(grain.ReadOptions(num_threads=0,
                                                            prefetch_buffer_size=0))
        if num_workers:
            batches = batches.mp_prefetch(
                grain.MultiprocessingOptions(num_workers=num_workers),
                worker_init_fn=functools.partial(worker_processes.input_worker_init,
                                                 os.getpid()))
        self._iterator = iter(batches)
        self.workers = []
        if num_workers:
            if not flags.FLAGS.is_parsed():  # Outside absl.app (tests, tools): the default.
                flags.FLAGS["grain_enable_multiprocess_worker_profiling"].present = True
            before = set(multiprocessing.active_children())
            with worker_processes.starting():
                self._iterator.get_state()  # Grain makes its per-worker iterators, and
                self._iterator.start_prefetch()  # starts their processes now, not at next().
                # In threads of its own: all are started (spawned and sent their dataset)
                # before this returns, so that an exit from here on never cuts a start short.
                deadline = time.monotonic() + 10
                while len(self.workers) < num_workers and time.monotonic() < deadline:
                    time.sleep(0.01)
                    self.workers = list(set(multiprocessing.active_children()) - before)

    def __iter__(self):
        return self

    def __next__(self):
        if self._iterator is None:
            raise StopIteration
        return next(self._iterator)

    def close(self):
        """Stops the workers and frees their shared memory (also when the iterator is dropped)."""
        if getattr(self, "_iterator", None) is not None:
            self._iterator.close()
            self._iterator = None  # Freed now, not at the interpreter's exit.

    def __del__(self):
        self.close()


def check_image_files(per_lang):
    """Decodes once every image that the sources read from files (data.reader=files).

    The built datasets were checked when they were built; the release files are read as
    they are, so without this a corrupt JPEG would stop a run only at the first step whose
    batch holds it, after the first evaluation. Decoded at the smallest DCT scale: 0.4 s
    for the demo's 2,000 images (64 x 64) on 2 cores.

    Returns:
        The number of images checked.

    Raises:
        images.ImageError, FileNotFoundError: for the first bad file, in path order.
    """
    names = {}
    for source in per_lang:
        if isinstance(source, sources.FileSource):
            for i in range(len(source)):
                names.setdefault(source[i].path, source[i].name)
    pool = concurrent.futures.ThreadPoolExecutor(worker_processes.available_cores())
    try:
        for _ in pool.map(lambda path: images.read_pixels(path, 1, name=names[path]),
                          sorted(names)):
            pass
    finally:
        pool.shutdown(cancel_futures=True)
    return len(names)


def train_iterator(data_config, vocab, *, global_batch_size, image_size, seed, start_step=0,
                   process_index=0, process_count=1, build=False, check_images=True):
    """Yields this process's share of each global training batch, forever.

    Args:
        data_config: ConfigDict with dataset ("coco35l" | "cc3m35l"), manual_dir, langs,
            mixture ("uniform" | "proportional"), prompt_template, max_prompt_len,
            max_target_len, augment (bool); optional: reader, tfds_data_dir,
            corrupt_images (see data/pipeline/sources.py) and num_workers (processes
            making batches; default: one per core; 0: this process, at `next()`).
        vocab: the `tokenizer.Vocabulary` (data/tokenizer.get_vocabulary's).
        global_batch_size: examples per step over all processes.
        image_size: side of the square model input in pixels.
        seed: the order and augmentation are a function of (seed, step).
        start_step: the first step to yield (for resuming).
        process_index, process_count: this process and the number of processes;
            each takes a disjoint slice of every global batch.
        build: build the dataset's missing parts first (single process only;
            see sources.ensure_built); otherwise they are an error.
        check_images: with reader "files", decode every image once first
            (`check_image_files`), so that a corrupt one is an error here.

    Returns:
        A `Batches` iterator of dicts image [b, H, W, 3] uint8, prompt [b, Lp] int32,
        targets [b, Lt] int32, with b = global_batch_size // process_count; its
        worker processes have started.
    """
    sampling.local_batch_size(global_batch_size, process_index, process_count)  # Checks them.
    config = data_config.to_dict() if hasattr(data_config, "to_dict") else dict(data_config)
    sources.ensure_built(config, build=build and process_count == 1)
    _, per_lang = sources.open_sources(config, "train")
    if check_images:
        check_image_files(per_lang)
    sampler = sampling.Sampler([len(s) for s in per_lang], config.get("mixture", None)
                               or "uniform", seed)
    num_workers = config.get("num_workers", None)
    num_workers = worker_processes.available_cores() if num_workers is None else num_workers
    batch = Batch(config, vocab.path, sampler, image_size=image_size, seed=seed,
                  global_batch_size=global_batch_size, process_count=process_count,
                  shared_memory=num_workers > 0)
    batch.open(per_lang)  # Checks the prompts here; makes the batches if no workers.
    shard = grain.sharding.ShardOptions(shard_index=process_index, shard_count=process_count)
    dataset = (grain.MapDataset.range(_ENDLESS)[shard.shard_index::shard.shard_count]
               [start_step:]  # Resuming is a slice: no iterator state.
               .map(batch))
    return Batches(dataset, int(num_workers))
