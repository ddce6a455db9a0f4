"""The Python API: caption images in any of a model's languages, from a run or an export.

    from tools.captioning import Captioner, Decoding
    captioner = Captioner.from_run("runs/demo")            # or step="best", step=750
    for c in captioner.caption(["photo.jpg"], langs="en,es,hi,zh",
                               decode=Decoding("beam", beam_size=4)):
        print(c.image, c.lang, c.log_prob, c.text)

`Captioner.from_exported("demo_captioner.npz")` gives the same captions from a file written
by tools/captioning/export.py. Images go in batches of (image, language) rows, all of one shape
(the last batch padded), so one compilation serves a whole list; a list shorter than a batch
goes in the next power of two of rows.
"""

import collections.abc
import dataclasses
import functools
import json
import os

import jax
import numpy as np
from PIL import Image

from data import languages, tokenizer
from errors import InputError
from formats import predictions as predictions_format
from model import decode as decode_lib
from model.decode import Decoding
from tools.captioning import decoding as decoding_lib
from tools.captioning import export, inputs, restore
from training import compilation_cache as cache_lib

ON_ERROR = ("stop", "skip")


@dataclasses.dataclass(frozen=True)
class Caption:
    """One caption of one image in one language.

    Attributes:
        image: the image's path (or the name given with its bytes, "image[i]" without one).
        lang: the language code.
        text: the caption.
        log_prob: its log-probability under the model (sum over its tokens and EOS).
        tokens: its token ids, up to and including EOS.
    """
    image: str
    lang: str
    text: str
    log_prob: float
    tokens: tuple

    @property
    def key(self):
        """The image's key in a predictions file: its file name without the extension, as
        XM3600's images are named (`images/<key>.jpg`)."""
        return os.path.splitext(os.path.basename(self.image))[0]

    def line(self):
        """A predictions file's line (formats/predictions.py: image/key, lang, caption), with
        the image's path and the log-probability, which its readers ignore."""
        return predictions_format.line(self.key, self.lang, self.text, image=self.image,
                                       log_prob=round(self.log_prob, 4))

    def record(self):
        """The JSON object of `line()`."""
        return json.loads(self.line())


def use_compilation_cache(setting, workdir=None):
    """Turns JAX's persistent compilation cache on as the checkpoint tool does.

    Args:
        setting: None (a cache jax already uses, else `training/compilation_cache`'s
            default: $JAX_COMPILATION_CACHE_DIR, else <workdir>/compilation_cache, else
            ~/.cache/xm3600/jax), "none" (off), or the cache's folder.
        workdir: the run's folder, or None (an export).
    """
    if setting is None and cache_lib.current_dir():
        return
    cache_lib.enable_from_flag(setting, workdir)


@functools.lru_cache(maxsize=16)
def _jitted(model, program, max_len):
    """predict_fn of a `decoding.program(...)`, jitted: one per model and program, so that every
    captioner of a run (its other steps, its best) shares the compilations."""
    return jax.jit(decoding_lib.predict_fn(model, program, max_len))


class _RunPrograms:
    """The decodings of a restored run: predict_fn jitted per program, on demand."""

    def __init__(self, run):
        self.run = run

    def default(self, method):
        return Decoding(method)

    def check(self, decoding):
        decoding_lib.check_logits(decoding, self.run.model.config.t5.vocab_size)
        return decoding

    def check_size(self, decoding, batch_size):
        decoding.check_size(self.run.model.config, batch_size, self.run.max_len,
                            self.run.max_len, decode_lib.memory_bytes())

    def __call__(self, decoding, images, prompts, rng):
        fn = _jitted(self.run.model, decoding_lib.program(decoding), self.run.max_len)
        return fn(self.run.params, images, prompts, rng)


class _ExportedPrograms:
    """The decodings of an exported file: its programs, with their fixed settings."""

    def __init__(self, exported):
        self.exported = exported
        self._calls = {m: jax.jit(p.call) for m, p in exported.programs.items()}

    def default(self, method):
        programs = self.exported.manifest["programs"]
        return Decoding(method, **programs.get(method, {}))

    def check(self, decoding):
        programs = self.exported.manifest["programs"]
        if decoding.method not in programs:
            raise InputError(f"{self.exported.path} has no {decoding.method} program; it has "
                             f"{', '.join(programs)}")
        fixed = dataclasses.replace(decoding, **programs[decoding.method])
        if fixed != decoding:
            raise InputError(f"{self.exported.path} was exported with "
                             f"{fixed.describe(seed=False)}, not "
                             f"{decoding.describe(seed=False)}: export the run again with "
                             f"these settings (python -m tools.captioning.export)")
        return decoding

    def check_size(self, decoding, batch_size):
        """Nothing: the file holds no model config to size a decoding by."""

    def __call__(self, decoding, images, prompts, rng):
        return self._calls[decoding.method](self.exported.params, images, prompts, rng)


def _items(images):
    """`images` as a list of images: one image (a path, bytes, a PIL image, pixels) is a list
    of one, a 4-d array [n, H, W, C] a list of n; anything else is iterated."""
    if isinstance(images, (str, os.PathLike, bytes, Image.Image)):
        return [images]
    if isinstance(images, np.ndarray):
        return list(images) if images.ndim == 4 else [images]
    if not isinstance(images, collections.abc.Iterable):
        raise InputError(f"images: expected an image or a list of images (paths, bytes, (name, "
                         f"bytes) pairs, PIL images, uint8 pixels), got {type(images).__name__}")
    return list(images)


def _named(image, index):
    """(name, path, bytes, PIL image or pixels) of an `images` item."""
    if isinstance(image, tuple) and len(image) == 2 and isinstance(image[1], bytes):
        return str(image[0]), image[1]
    if isinstance(image, (str, os.PathLike)):
        return os.fspath(image), image
    if isinstance(image, (bytes, Image.Image, np.ndarray)):
        return f"image[{index}]", image
    raise InputError(f"images[{index}]: expected a path, bytes, a (name, bytes) pair, a PIL "
                     f"image or uint8 pixels, got {type(image).__name__}")


def _bucket(rows):
    """The power of two at or above `rows`: the batch of a short list.

    Fewer rows than `batch_size` go in a batch of this size, not of `batch_size` (less
    padding) nor of `rows` (one compilation per count); at most half of it is padding.
    """
    return 1 << max(0, rows - 1).bit_length()


class Captioner:
    """Captions images with a trained captioner; see the module docstring.

    Build it with `from_run` or `from_exported`.

    Attributes:
        langs: the languages it can write, in the run's order.
        image_size: its input side in pixels.
        max_len: its decoding length.
        source: what it was read from, for people ("step 1000 of runs/demo").
    """

    def __init__(self, programs, vocab, prompts, image_size, max_len, source):
        self._programs = programs
        self.vocab = vocab
        self._prompts = prompts
        self.langs = tuple(prompts)
        self.image_size = image_size
        self.max_len = max_len
        self.source = source

    @classmethod
    def from_run(cls, workdir, step=None, *, max_len=None, compilation_cache=None):
        """The captioner of a run's checkpoint.

        Args:
            workdir: the run's folder (config.json, checkpoints/).
            step: None (the latest checkpoint), "best" (checkpoints_best/) or a step.
            max_len: decoding length (default: the run's data.max_target_len).
            compilation_cache: see `use_compilation_cache`.

        Raises:
            InputError: see tools/captioning/restore.restore.
        """
        run = restore.restore(workdir, step, max_len=max_len)
        use_compilation_cache(compilation_cache, workdir)
        best = " (best)" if run.best else ""
        return cls(_RunPrograms(run), run.vocab, run.prompts, run.image_size, run.max_len,
                   f"step {run.step}{best} of {workdir}")

    @classmethod
    def from_exported(cls, path, *, compilation_cache=None):
        """The captioner of a file written by tools/captioning/export.py.

        Args:
            path: the file.
            compilation_cache: see `use_compilation_cache`.

        Raises:
            InputError: see tools/captioning/export.load.
        """
        exported = export.load(path)
        use_compilation_cache(compilation_cache)
        info = exported.manifest
        prompts = {lang: np.asarray(ids, np.int32) for lang, ids in info["prompts"].items()}
        source = info["source"]
        return cls(_ExportedPrograms(exported), exported.vocab, prompts, info["image"]["size"],
                   info["max_len"], f"{path} (step {source['step']} of {source['workdir']})")

    def check_langs(self, langs):
        """`langs` ("all", "en,es", or codes) as a tuple of this model's languages, each
        once (a repeated code counts once, where it first appears).

        Raises:
            InputError: an unknown code (the message lists the known ones), or none.
        """
        if langs == "all":
            return self.langs
        if not isinstance(langs, str) and isinstance(langs, collections.abc.Iterable):
            langs = list(langs)  # Once: an iterator is read here.
        if not isinstance(langs, str) and not (isinstance(langs, list)
                                               and all(isinstance(l, str) for l in langs)):
            raise InputError(f"langs: expected \"all\", \"en,es\" or a sequence of language "
                             f"codes, got {type(langs).__name__}")
        try:
            return tuple(dict.fromkeys(languages.check_langs(langs, known=self.langs)))
        except ValueError as e:
            raise InputError(str(e)) from None

    @property
    def settings_fixed(self):
        """Whether the decodings' settings are fixed (an export's: one program each)."""
        return isinstance(self._programs, _ExportedPrograms)

    def default_decoding(self, method):
        """`method`'s Decoding with this model's default settings (an export's: its own)."""
        return self._programs.default(method)

    def check_decoding(self, decode):
        """`decode` (a Decoding, or a method name: its default settings) as a Decoding this
        model can run."""
        if not isinstance(decode, Decoding):
            decode = self.default_decoding(decode)  # An export's: its program's settings.
        return self._programs.check(decode)

    def check_size(self, decoding, batch_size, rows):
        """The batch size of `rows` (image, language) rows captioned at most `batch_size` at a
        time, checked before anything is allocated: DecodingError naming "batch_size" or
        "beam_size" when `decoding` (a Decoding) of such a batch exceeds the memory here."""
        batch_size = min(batch_size, _bucket(rows))
        self._programs.check_size(decoding, batch_size)
        return batch_size

    def caption(self, images, langs="en", decode="greedy", **kwargs):
        """Captions of every image in every language, image by image: a list of `Caption`.

        Args and Raises: as `iter_captions`.
        """
        return list(self.iter_captions(images, langs, decode, **kwargs))

    def iter_captions(self, images, langs="en", decode="greedy", *, batch_size=16,
                      on_error="stop", skipped=None):
        """Yields a `Caption` per image and language, in that order, as batches finish.

        Args:
            images: an image or a list of them: paths, encoded bytes, (name, bytes) pairs,
                PIL images, uint8 pixels [H, W(, 3|4)] (a 4-d array: one image per row).
            langs: "all", "en,es", or a sequence of codes.
            decode: a `Decoding`, or "greedy" | "beam" | "sample" with default settings.
            batch_size: (image, language) rows per batch.
            on_error: "stop" (raise on an unreadable image, after yielding the captions
                of the images before it) or "skip" it.
            skipped: called as skipped(name, message) for each skipped image.

        Raises:
            InputError: bad arguments; an unreadable image with on_error="stop".
        """
        langs = self.check_langs(langs)
        decoding = self.check_decoding(decode)
        if on_error not in ON_ERROR:
            raise InputError(f"on_error {on_error!r}; known: {', '.join(ON_ERROR)}")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise InputError(f"batch size must be an integer >= 1, got {batch_size!r}")
        if skipped is not None and not callable(skipped):
            raise InputError(f"skipped: expected a function skipped(name, message) or None, got "
                             f"{type(skipped).__name__}")
        images = [_named(image, i) for i, image in enumerate(_items(images))]
        batch_size = self.check_size(decoding, batch_size, len(images) * len(langs))
        rows, batch_index = [], 0
        for name, source in images:
            try:
                pixels = inputs.model_input(source, self.image_size, name)
            except InputError as e:
                if on_error == "stop":
                    yield from self._decode(rows, batch_size, decoding, batch_index)
                    raise
                if skipped is not None:
                    skipped(name, str(e))
                continue
            for lang in langs:
                rows.append((name, pixels, lang))
                if len(rows) == batch_size:
                    yield from self._decode(rows, batch_size, decoding, batch_index)
                    rows, batch_index = [], batch_index + 1
        yield from self._decode(rows, batch_size, decoding, batch_index)

    def _decode(self, rows, batch_size, decoding, batch_index):
        """Captions of `rows` [(name, pixels, lang)], decoded as one batch of batch_size."""
        if not rows:
            return
        padded = rows + [rows[-1]] * (batch_size - len(rows))
        images = np.stack([pixels for _, pixels, _ in padded])  # [b, S, S, 3]
        prompts = np.stack([self._prompts[lang] for _, _, lang in padded])  # [b, Lp]
        tokens, log_probs = self._programs(decoding, images, prompts,
                                           decoding_lib.rng_data(decoding.seed or 0, batch_index))
        tokens, log_probs = np.asarray(tokens), np.asarray(log_probs)
        texts = tokenizer.detokenize(self.vocab, tokens[:len(rows)])
        for (name, _, lang), row, text, log_prob in zip(rows, tokens, texts, log_probs,
                                                        strict=False):
            ids = row.tolist()
            ids = ids[:ids.index(tokenizer.EOS_ID) + 1] if tokenizer.EOS_ID in ids else ids
            yield Caption(name, lang, text, float(log_prob), tuple(ids))
