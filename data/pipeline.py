"""Input pipeline: training batches from COCO-35L or CC3M-35L, and the LangId prompts.

Training batches are numpy dicts of this process's share of a global batch:

    image    float32 [b, H, W, 3]  in [-1, 1]
    prompt   int32   [b, Lp]       LangId prompt ids, EOS, then 0-padding
    targets  int32   [b, Lt]       caption ids, EOS, then 0-padding

The LangId prompt is the only text the encoder sees (after the image vector);
it tells the decoder which language to write. Its default template "<2{lang}>"
(e.g. "<2hi>") is the target-language tag convention of multilingual NMT
(Johnson et al., 2017), which mT5's vocabulary splits into a few ordinary
pieces; any template with "{lang}" can be configured instead.

The example order is a pure function of (seed, step) (data/sampling.py), so a
run resumed at `start_step` sees the same batches as an uninterrupted one, and
images are decoded only for the steps actually produced.
"""

import concurrent.futures
import os
import queue
import threading

import numpy as np

from data import images as image_lib
from data import sampling, sources, tokenizer

DEFAULT_PROMPT_TEMPLATE = "<2{lang}>"


def prompt_text(lang, template=DEFAULT_PROMPT_TEMPLATE):
    """The LangId prompt for `lang`, e.g. "<2es>" with the default template.

    Args:
        lang: language code.
        template: a format string with a "{lang}" field.
    """
    if "{lang}" not in template:
        raise ValueError(f"prompt template {template!r} has no '{{lang}}' field")
    return template.format(lang=lang)


def tokenize_prompt(vocab, lang, template, max_len):
    """Prompt ids followed by EOS and 0-padding: int32 [max_len].

    Raises:
        ValueError: the prompt does not fit in `max_len` (truncating it would
            cut the language id, so this is a config error).
    """
    ids = list(vocab.encode(prompt_text(lang, template))) + [tokenizer.EOS_ID]
    if len(ids) > max_len:
        raise ValueError(
            f"prompt {prompt_text(lang, template)!r} is {len(ids)} tokens with EOS, more "
            f"than max_prompt_len={max_len}")
    out = np.zeros([max_len], np.int32)
    out[:len(ids)] = ids
    return out


def tokenize_targets(vocab, texts, max_len):
    """Caption ids, EOS and 0-padding: int32 [len(texts), max_len].

    Long captions are truncated to max_len - 1 ids so that EOS always fits.
    """
    out = np.zeros([len(texts), max_len], np.int32)
    for i, text in enumerate(texts):
        ids = list(vocab.encode(text))[:max_len - 1] + [tokenizer.EOS_ID]
        out[i, :len(ids)] = ids
    return out


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


def train_iterator(data_config, vocab, *, global_batch_size, image_size, seed, start_step=0,
                   process_index=0, process_count=1):
    """Yields this process's share of each global training batch, forever.

    Args:
        data_config: ConfigDict with dataset ("coco35l" | "cc3m35l"),
            manual_dir, langs, mixture ("uniform" | "proportional"),
            prompt_template, max_prompt_len, max_target_len, augment (bool);
            optional: reader, tfds_data_dir, tfds_config, corrupt_images (see
            data/sources.open_sources), num_threads (decoding threads,
            default: CPU count) and prefetch (batches made ahead, default 2).
        vocab: a seqio vocabulary (data/tokenizer.get_vocabulary).
        global_batch_size: examples per step over all processes.
        image_size: side of the square model input in pixels.
        seed: the order and augmentation are a function of (seed, step).
        start_step: the first step to yield (for resuming).
        process_index, process_count: this process and the number of processes;
            each takes a disjoint slice of every global batch.

    Returns:
        An iterator of dicts image [b, H, W, 3] float32, prompt [b, Lp] int32,
        targets [b, Lt] int32, with b = global_batch_size // process_count;
        call its close() to stop the prefetch thread early.
    """
    langs, per_lang = sources.open_sources(data_config, "train",
                                           allow_build=process_count == 1)
    template = data_config.get("prompt_template", DEFAULT_PROMPT_TEMPLATE)
    prompts = np.stack([tokenize_prompt(vocab, lang, template, data_config.max_prompt_len)
                        for lang in langs])  # [num_langs, Lp]
    sampler = sampling.Sampler([len(s) for s in per_lang], data_config.get("mixture", "uniform"),
                               seed)
    augment = bool(data_config.get("augment", False))
    max_target_len = data_config.max_target_len
    sampling.process_slice(0, global_batch_size, process_index, process_count)  # Validates.
    pool = concurrent.futures.ThreadPoolExecutor(
        data_config.get("num_threads", None) or os.cpu_count() or 1)

    def load_image(position, item):
        crop = None
        if augment:
            crop = image_lib.random_crop(np.random.default_rng([seed, 7, int(position)]))
        if item.data is None:
            return image_lib.read(item.path, image_size, crop=crop, name=item.name)
        return image_lib.decode(item.data, image_size, crop=crop, name=item.name)

    def make_batch(step):
        start, count = sampling.process_slice(step, global_batch_size, process_index,
                                              process_count)
        lang_idx, example_idx, draws = sampler.sample(start, count)
        chosen = [None] * count
        for lang in np.unique(lang_idx):  # One batched read per language.
            where = np.flatnonzero(lang_idx == lang)
            for i, item in zip(where, per_lang[lang].fetch(example_idx[where]), strict=True):
                chosen[i] = item
        pixels = list(pool.map(load_image, range(start, start + count), chosen))
        texts = [x.captions[sampling.reference_index(d, len(x.captions))]
                 for x, d in zip(chosen, draws, strict=True)]
        return {
            "image": np.stack(pixels),  # [b, H, W, 3]
            "prompt": prompts[lang_idx],  # [b, Lp]
            "targets": tokenize_targets(vocab, texts, max_target_len),  # [b, Lt]
        }

    return _Prefetcher(make_batch, start_step, data_config.get("prefetch", 2), pool)
