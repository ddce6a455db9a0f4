"""The evaluator contract, and `CaptionEvaluator`, which implements it for any caption metric.

An evaluator is built by name from one entry of `config.evals` (a name and a ConfigDict with
`type`, `every`, languages, decoding, ...) and a `Setup` (what the trainer or the checkpoint
tool hands it: vocabulary, prompt settings, image size, and `make_predict_fn`, which compiles
the decoder); `run(params)` decodes and scores, and returns `{metric name: value}`, which
the training loop logs as it is. What the numbers come from (per language: the image keys,
the captions, the per-image scores) rides along on that dict (`Results.by_lang`) for the
checkpoint tool, which writes the results folder and the reports (evaluation/evaluate.py,
evaluation/results_folder.py); an evaluator writes no file.

`CaptionEvaluator` decodes each language of a `CaptionSet` (data/eval_sets.py) batch by batch,
over the params' mesh when there is one, and scores each language on a CPU thread while the
next one decodes; a subclass says which set, which scorer, which names.
"""

import concurrent.futures
import dataclasses
import functools
import os
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from absl import logging
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from data import eval_sets, languages, tokenizer
from data import prompts as prompt_lib
from data.releases import xm3600 as xm3600_release
from model import decode
from model.decode import Decoding


@functools.lru_cache(maxsize=8)
def make_decoder(model, max_len, decoding):
    """Returns a jit-compiled fn(params, images, prompt) -> tokens [batch, max_len].

    Cached, so that evaluators of the same model (XM3600 and COCO-dev, or the
    in-loop ones and then the tool in the same process) share compilations.
    """
    if decoding.method == "greedy":
        def fn(params, images, prompt):
            return decode.greedy(model, params, images, prompt, max_len=max_len)
    else:
        def fn(params, images, prompt):
            tokens, _ = decode.beam_search(model, params, images, prompt, max_len=max_len,
                                           beam_size=decoding.beam_size, alpha=decoding.alpha)
            return tokens
    return jax.jit(fn)


@dataclasses.dataclass(frozen=True)
class Setup:
    """What the trainer (or the checkpoint tool) gives every evaluator.

    Attributes:
        vocab: the `tokenizer.Vocabulary` of the targets (prompts, detokenization).
        data_config: `config.data` (prompt template and length).
        image_size: the model's input resolution.
        make_predict_fn: (max_len, Decoding) -> jit-compiled
            fn(params, images [b, H, W, 3], prompts [b, Lp]) -> tokens [b, max_len].
    """
    vocab: Any
    data_config: Any
    image_size: int
    make_predict_fn: Callable

    @classmethod
    def for_model(cls, model, vocab, data_config, image_size):
        """The setup of a Captioner: its cached greedy / beam decoders."""
        return cls(vocab, data_config, image_size, functools.partial(make_decoder, model))

    @property
    def prompt_template(self):
        return self.data_config.get("prompt_template", prompt_lib.DEFAULT_PROMPT_TEMPLATE)


def load_xm3600_set(eval_config, setup, langs):
    """The XM3600 CaptionSet of an evaluator config (`data_dir`, `max_images`) in `langs`."""
    return eval_sets.load_xm3600(
        eval_config.data_dir, langs, setup.vocab, image_size=setup.image_size,
        prompt_template=setup.prompt_template, max_prompt_len=setup.data_config.max_prompt_len,
        max_images=eval_config.get("max_images", None))


def batch_sharding(params, batch_size):
    """NamedSharding splitting a batch over the 'data' axis of the params' mesh, or None.

    None (inputs replicated, as numpy) when the params are not on a mesh with
    a 'data' axis or `batch_size` does not divide by its size.
    """
    leaves = jax.tree.leaves(params)
    sharding = getattr(leaves[0], "sharding", None) if leaves else None
    if not isinstance(sharding, NamedSharding) or "data" not in sharding.mesh.axis_names:
        return None
    if batch_size % sharding.mesh.shape["data"]:
        logging.log_first_n(logging.WARNING, "eval batch %d does not divide by the %d data "
                            "devices: every device decodes the whole batch", 1, batch_size,
                            sharding.mesh.shape["data"])
        return None
    return NamedSharding(sharding.mesh, P("data"))


def _to_host(tokens):
    """A (possibly multi-process) global array as numpy on every process."""
    if getattr(tokens, "is_fully_addressable", True):
        return np.asarray(tokens)
    return np.asarray(multihost_utils.process_allgather(tokens, tiled=True))



@dataclasses.dataclass(frozen=True)
class LangResult:
    """Captions and scores of one language (captions and per_image follow keys)."""
    keys: list
    captions: list
    per_image: np.ndarray  # float64; NaN where an image's score is undefined.
    corpus: float


class Results(dict):
    """What `run` returns: {metric name: value}, which the training loop logs as it is.

    Attributes:
        by_lang: {lang: LangResult}, what the numbers come from (for the checkpoint tool).
    """

    def __init__(self, metrics, by_lang):
        super().__init__(metrics)
        self.by_lang = by_lang


class CaptionEvaluator:
    """Decodes every language of a CaptionSet and scores it; subclasses choose set and metric.

    Subclasses set `metric_prefix` (metric names are `<prefix><lang>` and `<prefix>avg`),
    `outputs_name` (the name of its files in a results folder: "" for XM3600's own,
    `predictions_<lang>.jsonl`; else `predictions_<outputs_name>_<lang>.jsonl`, ...),
    `metric` and `title` (what its report calls the metric and the measurement),
    `all_langs` (what `langs` may hold) and, for the paper's CIDEr-D columns,
    `paper_column` ("xm3600" or "coco_dev": the report puts them beside the paper's
    baselines, Table 8); they implement `make_scorers(langs)`, and override `data_langs`
    when their data is not XM3600's.

    Args:
        name: the evaluator's key in `config.evals`.
        eval_config: its ConfigDict (`every`, `batch_size`, `max_decode_len`,
            optional `decode`, `beam_size`, `alpha`).
        caption_set: the images and references (data/eval_sets.py).
        setup: a `Setup`.
        decoding: a `Decoding` instead of the config's.
    """
    metric_prefix = ""
    outputs_name = None
    metric = ""
    title = ""
    all_langs = ()
    paper_column = None

    @classmethod
    def config_langs(cls, name, langs):
        """`langs` checked against `all_langs`, or a ValueError naming config.evals.<name>.langs."""
        try:
            return languages.check_langs(langs, known=cls.all_langs)
        except ValueError as e:
            raise ValueError(f"config.evals.{name}.langs: {e}") from None

    @classmethod
    def check_config(cls, name, eval_config):
        """Checks the evaluator's own fields without loading anything (ValueError naming one)."""

    @classmethod
    def metric_names_for(cls, langs):
        """The names `run` returns for `langs`."""
        return [f"{cls.metric_prefix}{lang}" for lang in langs] + [f"{cls.metric_prefix}avg"]

    @classmethod
    def data_langs(cls, eval_config):
        """The languages of `all_langs` that the evaluator's data has (XM3600's, `data_dir`).

        Raises:
            FileNotFoundError, ValueError: no or a malformed captions.jsonl (named).
        """
        references = xm3600_release.read_references(
            os.path.join(eval_config.data_dir, "captions.jsonl"))
        return tuple(lang for lang in cls.all_langs if lang in references.by_lang)

    def __init__(self, name, eval_config, caption_set, setup, decoding=None):
        if eval_config.batch_size < 1:
            raise ValueError(f"config.evals.{name}.batch_size must be >= 1, got "
                             f"{eval_config.batch_size}")
        self.name = name
        self.every = eval_config.every
        self.data = caption_set
        self.langs = caption_set.langs
        self.batch_size = eval_config.batch_size
        self.max_decode_len = eval_config.max_decode_len
        self.vocab = setup.vocab
        self.decoding = decoding or Decoding.from_config(eval_config)
        self._predict = setup.make_predict_fn(eval_config.max_decode_len, self.decoding)
        self.scorers = dict(zip(self.langs, self.make_scorers(self.langs), strict=True))

    def make_scorers(self, langs):
        """[scorer(captions) -> (corpus, per_image) for lang in langs]."""
        raise NotImplementedError

    @property
    def metric_names(self):
        """The names `run` returns."""
        return self.metric_names_for(self.langs)

    @property
    def num_images(self):
        """{lang: number of images scored}."""
        return {lang: len(self.data.keys[lang]) for lang in self.langs}

    def predict(self, params, lang, progress=None):
        """Captions (strings) for every image of `lang`, in the set's order.

        Args:
            params: the model parameters (sharded or not).
            lang: one of `self.langs`.
            progress: optional callback(lang, images done, images of lang) after each batch.
        """
        rows = self.data.rows[lang]
        prompt = self.data.prompts[lang]
        n, bs = len(rows), self.batch_size
        sharding = batch_sharding(params, bs)
        captions = []
        for start in range(0, n, bs):
            batch_rows = rows[start:start + bs]
            valid = len(batch_rows)
            # Pad the last batch (repeating its last image) so one compiled shape serves all.
            batch_rows = np.concatenate([batch_rows, np.repeat(batch_rows[-1:], bs - valid)])
            images = self.data.images[batch_rows]  # [bs, H, W, 3]
            prompts = np.tile(prompt[None], (bs, 1))  # [bs, Lp]
            if sharding is not None:
                images, prompts = (
                    jax.make_array_from_callback(x.shape, sharding, lambda i, x=x: x[i])
                    for x in (images, prompts))
            tokens = _to_host(self._predict(params, images, prompts))  # [bs, max_len]
            captions += tokenizer.detokenize(self.vocab, tokens)[:valid]
            if progress is not None:
                progress(lang, len(captions), n)
        return captions

    def run(self, params, progress=None):
        """Decodes and scores every language (a language is scored on a CPU thread while the
        next one decodes).

        Args:
            params: the model parameters (sharded or not).
            progress: optional callback(lang, images done, images of lang) after each batch.

        Returns:
            `Results`: {"<prefix><lang>": corpus score, ..., "<prefix>avg": their mean},
            with `by_lang`.
        """
        captions, scored, by_lang = {}, {}, {}
        with concurrent.futures.ThreadPoolExecutor(1) as scoring:
            for lang in self.langs:
                captions[lang] = self.predict(params, lang, progress)
                scored[lang] = scoring.submit(self.scorers[lang], captions[lang])
            for lang in self.langs:
                corpus, per_image = scored[lang].result()
                by_lang[lang] = LangResult(self.data.keys[lang], captions[lang], per_image,
                                           corpus)
        metrics = {f"{self.metric_prefix}{lang}": r.corpus for lang, r in by_lang.items()}
        metrics[f"{self.metric_prefix}avg"] = float(np.mean(list(metrics.values())))
        logging.info("%s: %s", self.name, metrics)
        return Results(metrics, by_lang)
