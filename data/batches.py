"""One training batch, made from nothing but its step: LangId prompts, tokenised captions, pixels.

`BatchMaker.make(step)` fetches the step's examples (data/sampling.py picks
them, data/sources.py reads them), decodes and resizes their images, stacks
them and tokenises the prompts and captions: everything a batch needs, so
that worker processes (data/batch_workers.py) can make different steps in parallel
and the trainer only has to take them in order (data/pipeline.py). The
tokeniser is SentencePiece itself, from the model's serialized bytes: no
seqio, no TensorFlow in the workers.

The LangId prompt is the only text the encoder sees (after the image vector);
it tells the decoder which language to write. Its default template "<2{lang}>"
(e.g. "<2hi>") is the target-language tag convention of multilingual NMT
(Johnson et al., 2017), which mT5's vocabulary splits into a few ordinary
pieces; any template with "{lang}" can be configured instead.
"""

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

    Args:
        vocab: anything with `encode(text) -> ids` (a seqio vocabulary, or
            `SentencePieceEncoder`).

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


def tokenize_targets(vocab, texts, max_len, out=None):
    """Caption ids, EOS and 0-padding: int32 [len(texts), max_len] (written into `out` if given).

    Long captions are truncated to max_len - 1 ids so that EOS always fits.
    """
    if out is None:
        out = np.zeros([len(texts), max_len], np.int32)
    else:
        out[...] = 0
    for i, text in enumerate(texts):
        ids = list(vocab.encode(text))[:max_len - 1] + [tokenizer.EOS_ID]
        out[i, :len(ids)] = ids
    return out


class SentencePieceEncoder:
    """`encode` of a SentencePiece model given as its serialized bytes (no seqio, no TensorFlow).

    Gives the ids of `seqio.SentencePieceVocabulary.encode` for the same model.
    """

    def __init__(self, model_proto):
        import sentencepiece as spm

        self.model_proto = model_proto
        self._processor = spm.SentencePieceProcessor(model_proto=model_proto)

    def encode(self, text):
        return self._processor.EncodeAsIds(text)

    def __reduce__(self):
        return SentencePieceEncoder, (self.model_proto,)


def sentencepiece_encoder(vocab):
    """A `SentencePieceEncoder` of a vocabulary (data/tokenizer.get_vocabulary's)."""
    if isinstance(vocab, SentencePieceEncoder):
        return vocab
    return SentencePieceEncoder(vocab.tokenizer.serialized_model_proto())


class BatchMaker:
    """Makes this process's share of global batch `step`, from nothing but the step.

    Picklable through `spec` (worker processes build their own from it).

    Args:
        spec: dict with data_config (dict: see `train_iterator`), encoder (a
            `SentencePieceEncoder`), global_batch_size, image_size, seed,
            process_index, process_count, sizes (examples per language, in the
            order of the configured languages).
        opened: the (langs, sources) of data/sources.open_sources, if already open.
    """

    def __init__(self, spec, opened=None):
        self.spec = spec
        config = spec["data_config"]
        self.langs, self.sources = opened or sources.open_sources(config, "train")
        sizes = [len(s) for s in self.sources]
        if sizes != list(spec["sizes"]):
            raise RuntimeError(f"the training data changed while it was read: examples per "
                               f"language {sizes}, expected {list(spec['sizes'])}")
        template = config.get("prompt_template", None) or DEFAULT_PROMPT_TEMPLATE
        self.encoder = spec["encoder"]
        self.prompts = np.stack([tokenize_prompt(self.encoder, lang, template,
                                                 config["max_prompt_len"])
                                 for lang in self.langs])  # [num_langs, Lp]
        self.sampler = sampling.Sampler(sizes, config.get("mixture", None) or "uniform",
                                        spec["seed"])
        self.augment = bool(config.get("augment", False))

    @staticmethod
    def shapes_of(spec):
        """{feature: (shape, dtype)} of a batch of `spec`."""
        config, size = spec["data_config"], spec["image_size"]
        local = spec["global_batch_size"] // spec["process_count"]
        return {"image": ((local, size, size, 3), np.uint8),
                "prompt": ((local, config["max_prompt_len"]), np.int32),
                "targets": ((local, config["max_target_len"]), np.int32)}

    def shapes(self):
        """{feature: (shape, dtype)} of a batch."""
        return self.shapes_of(self.spec)

    def _pixels(self, position, item):
        crop = None
        if self.augment:
            crop = image_lib.random_crop(np.random.default_rng([self.spec["seed"], 7,
                                                                int(position)]))
        size = self.spec["image_size"]
        if item.data is None:
            return image_lib.read_pixels(item.path, size, crop=crop, name=item.name)
        return image_lib.decode_pixels(item.data, size, crop=crop, name=item.name)

    def make(self, step, out=None, map_fn=map):
        """The batch of `step`: {image, prompt, targets} (written into the arrays `out` if given).

        Args:
            step: the global step.
            out: optional {feature: array} of `shapes()` to fill.
            map_fn: how to map the image decoding over the batch (e.g. a thread
                pool's `map`).
        """
        if out is None:
            out = {k: np.empty(shape, dtype) for k, (shape, dtype) in self.shapes().items()}
        start, count = sampling.process_slice(step, self.spec["global_batch_size"],
                                              self.spec["process_index"],
                                              self.spec["process_count"])
        lang_idx, example_idx, draws = self.sampler.sample(start, count)
        chosen = [None] * count
        for lang in np.unique(lang_idx):  # One batched read per language.
            where = np.flatnonzero(lang_idx == lang)
            for i, item in zip(where, self.sources[lang].fetch(example_idx[where]), strict=True):
                chosen[i] = item
        for i, pixels in enumerate(map_fn(self._pixels, range(start, start + count), chosen)):
            out["image"][i] = pixels
        out["prompt"][...] = self.prompts[lang_idx]
        texts = [x.captions[sampling.reference_index(d, len(x.captions))]
                 for x, d in zip(chosen, draws, strict=True)]
        tokenize_targets(self.encoder, texts, self.spec["data_config"]["max_target_len"],
                         out=out["targets"])
        return out
