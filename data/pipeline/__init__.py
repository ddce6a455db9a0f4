"""The training input: `train_iterator`, a Grain pipeline of this process's batches.

A batch: image uint8 [b, H, W, 3] (mapped to [-1, 1] on the accelerator), prompt int32
[b, Lp] (LangId) and targets int32 [b, Lt] (ids ending in EOS, then 0). A step's examples are
a pure function of (seed, step, process) (sampling.py), with no iterator state; Grain's worker
processes read, decode and tokenize them (worker w of W makes steps w, w + W, ...).
"""

import errno
import functools
import multiprocessing
import os
import time

import grain
import numpy as np
from absl import flags

from data import build as build_lib
from data import images, languages, prompts, tokenizer, worker_processes
from data.pipeline import packing, sampling

_ENDLESS = 1 << 62  # Steps in the stream: more than any run takes.


def batch_shapes(batch_size, image_size, data_config, layout=None):
    """{name: (shape, dtype)} of the batches: what the train step compiles for before the first;
    with a packing.Layout, of packed batches (`packing.pack`'s arrays and the images)."""
    image = ((batch_size, image_size, image_size, 3), np.uint8)
    if layout is not None:
        return {"image": image, **{name: (shape, np.int32)
                                   for name, shape in packing.shapes(layout, batch_size).items()}}
    return {"image": image, "prompt": ((batch_size, data_config["max_prompt_len"]), np.int32),
            "targets": ((batch_size, data_config["max_target_len"]), np.int32)}


class Batch:
    """Makes batch `step * process_count + process_index`: this process's share of a step.
    Small to send to a worker (one pipe write, which an exit cannot cut short); each process opens
    the tables and vocabulary at its first batch. In a worker, arrays are in shared memory."""

    def __init__(self, config, vocab_path, sampler, *, image_size, global_batch_size,
                 process_count, shared_memory=False, layout=None):
        self.config, self.vocab_path, self.sampler = config, vocab_path, sampler
        self.image_size, self.shared_memory, self.layout = image_size, shared_memory, layout
        self.global_batch_size, self.process_count = global_batch_size, process_count
        self._opened = None

    def __getstate__(self):
        return {**self.__dict__, "_opened": None}

    def open(self, tables=None):
        """(caption tables, image table, vocabulary, prompt ids [num_langs, Lp]), opened once
        (or from `open_tables`'s `tables`)."""
        if self._opened is None:
            captions, image_table = tables or open_tables(self.config)
            if [len(table) for table in captions] != self.sampler.num_examples:
                raise RuntimeError(f"the training data changed while it was read: examples "
                                   f"per language {[len(table) for table in captions]}, "
                                   f"expected {self.sampler.num_examples}")
            vocab = tokenizer.get_vocabulary(self.vocab_path)
            template = self.config.get("prompt_template") or prompts.DEFAULT_PROMPT_TEMPLATE
            prompt_ids = np.stack([prompts.tokenize_prompt(vocab, lang, template,
                                                           self.config["max_prompt_len"])
                                   for lang in settings(self.config)[1]])
            self._opened = captions, image_table, vocab, prompt_ids
        return self._opened

    def __call__(self, index):
        captions, image_table, vocab, prompt_ids = self.open()
        step, process = divmod(index, self.process_count)
        local = self.global_batch_size // self.process_count
        start = step * self.global_batch_size + process * local  # This process's positions.
        picks = [self.sampler.example(p) for p in range(start, start + local)]
        # The records first, then the decoding: 5% less CPU an example than reading each beside
        # its image's decoding.
        rows, targets = _read(captions, picks)
        jpegs = {index: image_table[index][1] for index in sorted({r[0] for r in rows.values()})}
        new = grain.multiprocessing.SharedMemoryArray if self.shared_memory else np.empty
        batch = {name: new(shape, dtype) for name, (shape, dtype)
                 in batch_shapes(local, self.image_size, self.config, self.layout).items()}
        image = batch["image"]
        # Shared memory is written by write calls, not stores into its mapping: the kernel
        # then fills each fresh page without a fault and a zeroing (half the cost, 3% of all).
        fd = getattr(getattr(image, "shm", None), "_fd", None)  # POSIX SharedMemory's.
        try:
            for i in range(local):
                image_index, key, _ = rows[i]
                pixels = images.decode_pixels(
                    jpegs[image_index], self.image_size,
                    name=f"key {key} ({self.config['dataset']} train image {image_index})")
                if fd is None:
                    image[i] = pixels
                elif os.pwrite(fd, pixels, i * pixels.nbytes) != pixels.nbytes:
                    raise OSError(errno.ENOSPC, f"shared memory is full: {pixels.nbytes} bytes "
                                  f"of an image did not fit in /dev/shm ({image.shm.name})")
        except BaseException:  # A bad image, a full /dev/shm: the batch's memory goes now.
            for array in batch.values() if self.shared_memory else ():
                array.shm.unlink()
            raise
        text = {"prompt": prompt_ids[[lang for lang, _, _ in picks]],
                "targets": prompts.tokenize_targets(vocab, targets, self.config["max_target_len"])}
        if self.layout is not None:
            text = packing.pack(text["prompt"], text["targets"], self.layout, process * local)
        for name, array in text.items():
            batch[name][...] = array
        return batch

    def lengths(self, count):
        """(prompt, caption) lengths with EOS of the stream's first `count` examples."""
        captions, _, vocab, prompt_ids = self.open()
        picks = [self.sampler.example(p) for p in range(count)]
        targets = prompts.tokenize_targets(vocab, _read(captions, picks)[1],
                                           self.config["max_target_len"])
        return (prompt_ids[[p[0] for p in picks]] != 0).sum(1), (targets != 0).sum(1)


def _read(captions, picks):
    """({pick: caption row}, the drawn reference of each pick) of `picks` [(language, example,
    draw)]: the rows read in table order (a chunk of 32 decompresses once)."""
    rows = {i: captions[lang][example] for i, (lang, example, _)
            in sorted(enumerate(picks), key=lambda pick: pick[1][:2])}
    return rows, [rows[i][2][sampling.reference_index(draw, len(rows[i][2]))]
                  for i, (_, _, draw) in enumerate(picks)]


class Batches:
    """Iterator over this process's batches (`workers`: its processes); `close()` stops them."""

    def __init__(self, dataset, num_workers):
        batches = dataset.to_iter_dataset(grain.ReadOptions(num_threads=0,
                                                            prefetch_buffer_size=0))
        if num_workers:
            batches = batches.mp_prefetch(
                grain.MultiprocessingOptions(num_workers=num_workers),
                worker_init_fn=functools.partial(worker_processes.worker_init,
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
        """Stops the workers and frees their shared memory (also when dropped)."""
        if getattr(self, "_iterator", None) is not None:
            self._iterator.close()
            self._iterator = None  # Freed now, not at the interpreter's exit.

    __del__ = close


def settings(data_config):
    """(dataset, languages, data_dir) of `config.data`; data_dir defaults to `tfds` beside the
    release folder."""
    langs = languages.check_langs(data_config["langs"], known=languages.TRAIN_35L_LANGS,
                                  what="training language")
    data_dir = data_config.get("tfds_data_dir", None) or os.path.join(
        os.path.dirname(os.path.abspath(data_config["manual_dir"])), "tfds")
    return data_config["dataset"], langs, data_dir


def open_tables(data_config):
    """The training split's caption `layout.Table` of each configured language, and its images."""
    built = ensure_built(data_config)
    return ([built.captions("train", lang) for lang in settings(data_config)[1]],
            built.images("train"))


def ensure_built(data_config, build=False):
    """The `layout.Built` of the configured dataset once its languages are built (here if `build`,
    else a NotBuiltError with the build command)."""
    dataset, langs, data_dir = settings(data_config)
    return build_lib.ensure_built(
        dataset, manual_dir=data_config["manual_dir"], data_dir=data_dir, langs=langs,
        build=build, corrupt_images=data_config.get("corrupt_images", None) or "stop")


def _batch(data_config, vocab, seed, **kwargs):
    """The opened `Batch` (`kwargs`: its options) of `config.data`'s stream of `seed`."""
    config = data_config.to_dict() if hasattr(data_config, "to_dict") else dict(data_config)
    tables = open_tables(config)
    sampler = sampling.Sampler([len(table) for table in tables[0]], seed)
    batch = Batch(config, vocab.path, sampler, **kwargs)
    batch.open(tables)  # Checks the prompts here; makes the batches if no workers.
    return batch


def sample_lengths(data_config, vocab, seed, count):
    """(prompt, caption) lengths with EOS of the first `count` examples of the training stream
    (of `seed`): the sample packing.layout derives the rows from."""
    return _batch(data_config, vocab, seed, image_size=1, global_batch_size=count,
                  process_count=1).lengths(count)


def train_iterator(data_config, vocab, *, global_batch_size, image_size, seed, start_step=0,
                   process_index=0, process_count=1, layout=None):
    """This process's share of each global training batch, forever: a started `Batches`.
    `data_config` is `config.data` (num_workers: None = one per core, 0 = this process);
    `process_index` of `process_count` takes a disjoint slice of every global batch of
    `global_batch_size`; `start_step` resumes; a packing.Layout packs the batches. Raises
    layout.NotBuiltError for a missing build."""
    sampling.local_batch_size(global_batch_size, process_index, process_count)  # Checks them.
    num_workers = data_config.get("num_workers", None)
    num_workers = worker_processes.available_cores() if num_workers is None else num_workers
    batch = _batch(data_config, vocab, seed, image_size=image_size,
                   global_batch_size=global_batch_size, process_count=process_count,
                   shared_memory=num_workers > 0, layout=layout)
    dataset = (grain.MapDataset.range(_ENDLESS)[process_index::process_count]
               [start_step:]  # Resuming is a slice: no iterator state.
               .map(batch))
    return Batches(dataset, int(num_workers))
