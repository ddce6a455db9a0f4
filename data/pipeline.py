"""Input pipeline: training batches from COCO-35L or CC3M-35L, and the LangId prompts.

Training batches are numpy dicts of this process's share of a global batch:

    image    uint8   [b, H, W, 3]  pixels; the model maps them to [-1, 1] on the
                                   accelerator (model/captioner.unit_range)
    prompt   int32   [b, Lp]       LangId prompt ids, EOS, then 0-padding
    targets  int32   [b, Lt]       caption ids, EOS, then 0-padding

The LangId prompt and the tokenisation are data/batches.py's (re-exported
here for the readers of the prompts: the evaluators, the seqio tasks).

The example order is a pure function of (seed, step) (data/sampling.py), so a
run resumed at `start_step` sees the same batches as an uninterrupted one, and
images are decoded only for the steps actually produced. A batch is made
whole by one `batches.BatchMaker` (fetch, decode, stack, tokenise); worker processes
(data/batch_workers.py) make different steps in parallel, so one training process's
input throughput grows with its cores. With `num_workers=0` a thread of this
process makes them instead (decoding on a thread pool), for debugging.
"""

import concurrent.futures
import os
import queue
import threading

from data import batches, sampling, sources
from data import images as image_lib
from data.batches import (  # noqa: F401  (the prompt and tokenisation API, re-exported)
    DEFAULT_PROMPT_TEMPLATE,
    SentencePieceEncoder,
    prompt_text,
    tokenize_prompt,
    tokenize_targets,
)


def _produce(out, stop, make_batch, step):
    """Puts (batch, None) or (None, error) for step, step + 1, ... into `out`."""
    while not stop.is_set():
        try:
            item = (make_batch(step), None)
        except Exception as e:  # Re-raised in the consumer's thread.
            item = (None, e)
        while not stop.is_set():
            try:
                out.put(item, timeout=0.1)
                break
            except queue.Full:
                continue
        if item[1] is not None:
            return
        step += 1


class _Prefetcher:
    """Iterates over `make_batch(step)` for step = start, start + 1, ... made in a thread.

    The thread holds no reference to this object, so dropping the iterator
    stops the thread (through __del__) as well as close() does.
    """

    def __init__(self, make_batch, start_step, depth, pool):
        self._queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._pool = pool
        threading.Thread(target=_produce, args=(self._queue, self._stop, make_batch, start_step),
                         daemon=True).start()

    def __iter__(self):
        return self

    def __next__(self):
        if self._stop.is_set():
            raise StopIteration
        batch, error = self._queue.get()
        if error is not None:
            self.close()
            raise error
        return batch

    def close(self):
        """Stops the background thread and the decoding threads."""
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __del__(self):
        try:
            self.close()
        except Exception:  # pylint: disable=broad-except
            pass  # At interpreter exit the queue/futures modules may be gone.


def check_image_files(per_lang, num_threads=None):
    """Decodes once every image that the sources read from files (data.reader=files).

    The built datasets were checked when they were built; the release files are
    read as they are, so without this a corrupt JPEG would stop a run only at the
    first step whose batch holds it, after the first evaluation. Decoded at the
    smallest DCT scale: 0.4 s for the demo's 2,000 images (64 x 64) on 2 cores.

    Returns:
        The number of images checked.

    Raises:
        images.ImageError, FileNotFoundError: for the first bad file, in path order.
    """
    names = {}
    for source in per_lang:
        if isinstance(source, sources.FileSource):
            for item in source.fetch(range(len(source))):
                names.setdefault(item.path, item.name)
    pool = concurrent.futures.ThreadPoolExecutor(num_threads or available_cores())
    try:
        for _ in pool.map(lambda path: image_lib.read_pixels(path, 1, name=names[path]),
                          sorted(names)):
            pass
    finally:
        pool.shutdown(cancel_futures=True)
    return len(names)


def available_cores():
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def train_iterator(data_config, vocab, *, global_batch_size, image_size, seed, start_step=0,
                   process_index=0, process_count=1, build=False, check_images=True):
    """Yields this process's share of each global training batch, forever.

    Args:
        data_config: ConfigDict with dataset ("coco35l" | "cc3m35l"),
            manual_dir, langs, mixture ("uniform" | "proportional"),
            prompt_template, max_prompt_len, max_target_len, augment (bool);
            optional: reader, tfds_data_dir, corrupt_images (see
            data/sources.py), num_workers (processes making batches; default:
            one per core; 0: a thread of this process, decoding on
            `num_threads` threads) and prefetch (batches made ahead, default 2).
        vocab: a `tokenizer.Vocabulary` (data/tokenizer.get_vocabulary) or a
            `SentencePieceEncoder`.
        global_batch_size: examples per step over all processes.
        image_size: side of the square model input in pixels.
        seed: the order and augmentation are a function of (seed, step).
        start_step: the first step to yield (for resuming).
        process_index, process_count: this process and the number of processes;
            each takes a disjoint slice of every global batch.
        build: build the dataset's missing parts first (single process only;
            see data/sources.ensure_built); otherwise they are an error.
        check_images: with reader "files", decode every image once first
            (`check_image_files`), so that a corrupt one is an error here.

    Returns:
        An iterator of dicts image [b, H, W, 3] uint8, prompt [b, Lp] int32,
        targets [b, Lt] int32, with b = global_batch_size // process_count;
        call its close() to stop its workers early.
    """
    sampling.process_slice(0, global_batch_size, process_index, process_count)  # Validates.
    sources.ensure_built(data_config, build=build and process_count == 1)
    config = data_config.to_dict() if hasattr(data_config, "to_dict") else dict(data_config)
    spec = {"data_config": config, "encoder": batches.sentencepiece_encoder(vocab),
            "global_batch_size": global_batch_size, "image_size": image_size, "seed": seed,
            "process_index": process_index, "process_count": process_count}
    opened = sources.open_sources(config, "train")
    _, per_lang = opened
    if check_images:
        check_image_files(per_lang, config.get("num_threads", None))
    spec["sizes"] = [len(s) for s in per_lang]
    sampling.Sampler(spec["sizes"], config.get("mixture", None) or "uniform", seed)  # Validates.
    num_workers = config.get("num_workers", None)
    num_workers = available_cores() if num_workers is None else int(num_workers)
    depth = max(int(config.get("prefetch", None) or 2), 1)
    if num_workers > 0:
        from data import batch_workers

        return batch_workers.WorkerPool(spec, num_workers, start_step, depth + num_workers)
    maker = batches.BatchMaker(spec, opened)
    pool = concurrent.futures.ThreadPoolExecutor(config.get("num_threads", None)
                                                 or available_cores())
    return _Prefetcher(lambda step: maker.make(step, map_fn=pool.map), start_step, depth, pool)
