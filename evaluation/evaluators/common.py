"""What every evaluator shares: the contract, decoding, and the caption loop.

An evaluator is built from one entry of `config.evals` (a name and a
ConfigDict with `type`, `every`, languages, decoding, ...) and a `Setup`
(what the trainer or the checkpoint tool hands it: vocabulary, prompt
settings, image size, and `make_predict_fn`, which compiles the decoder).
The contract:

- in the training loop, `run(params)` returns `{metric name: value}`;
- for the checkpoint tool (evaluation/evaluate.py), `evaluate(params,
  progress)` returns its results, `metrics(results)` the names and values
  `run` would log, and `write_outputs(out_dir, results, checkpoint)` writes
  its files into the results folder: a predictions file per language, the
  per-image scores and its report (`report`). The tool knows no evaluator
  class; each evaluator owns its files.

`CaptionEvaluator` does all of it for any caption metric: it decodes each
language of a `CaptionSet` (data/eval_sets.py) batch by batch, over the
params' mesh when there is one, scores each language on a CPU thread while
the next one decodes, and writes its outputs in the formats of formats/; a
subclass says which set, which scorer, which names.
"""

import concurrent.futures
import dataclasses
import functools
import math
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
from evaluation.analysis import report as report_lib
from formats import per_image as per_image_format
from formats import predictions as predictions_format
from model import decode


@dataclasses.dataclass(frozen=True)
class Decoding:
    """How captions are decoded: "greedy", or "beam" with T5X's length penalty alpha."""
    method: str = "greedy"
    beam_size: int = 4
    alpha: float = 0.6

    def __post_init__(self):
        if self.method not in ("greedy", "beam"):
            raise ValueError(f"unknown decoding {self.method!r}; known: greedy, beam")
        if isinstance(self.beam_size, bool) or not isinstance(self.beam_size, int) \
                or self.beam_size < 1:
            raise ValueError(f"beam size must be an integer >= 1, got {self.beam_size!r}")
        # NaN passes every comparison a beam makes and decodes nonsense without a word.
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) \
                or not math.isfinite(self.alpha) or self.alpha < 0:
            raise ValueError(f"length-penalty alpha must be a finite number >= 0, got "
                             f"{self.alpha!r}")

    @classmethod
    def from_config(cls, eval_config):
        """The `decode`, `beam_size` and `alpha` fields of an evaluator config (all optional)."""
        return cls(eval_config.get("decode", cls.method), eval_config.get("beam_size", 4),
                   eval_config.get("alpha", 0.6))


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


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """What the checkpoint tool tells each evaluator about the evaluated checkpoint.

    Attributes:
        step: the checkpoint's step.
        name: the model's name in reports (a table column, a legend label).
        workdir: the run's folder (absolute).
        config_name: the config file, recorded in reports, or None.
        metrics: every evaluator's metrics of this checkpoint (what metrics.json holds), for
            a report that shows other evaluators' numbers beside its own.
    """
    step: int
    name: str
    workdir: str
    config_name: str | None = None
    metrics: dict = dataclasses.field(default_factory=dict)


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


@dataclasses.dataclass
class LangResult:
    """Captions and scores of one language (per_image follows keys)."""
    keys: list
    captions: list
    per_image: np.ndarray
    corpus: float


class CaptionEvaluator:
    """Decodes every language of a CaptionSet and scores it; subclasses choose set and metric.

    Subclasses set `metric_prefix` (metric names are `<prefix><lang>` and
    `<prefix>avg`), `outputs_name` (its files in a results folder:
    `predictions_<outputs_name>_<lang>.jsonl`, `per_image_<outputs_name>.jsonl`,
    `scores_<outputs_name>.json`, `table_<outputs_name>.md`), `metric` and
    `title` (what its report calls the metric and the measurement) and
    `all_langs` (what `langs` may hold), and implement `make_scorers(langs)`;
    they may override `report`.

    Args:
        name: the evaluator's key in `config.evals`.
        eval_config: its ConfigDict (`every`, `batch_size`, `max_decode_len`,
            optional `decode`, `beam_size`, `alpha`).
        caption_set: the images and references (data/eval_sets.py).
        setup: a `Setup`.
        decoding: a `Decoding` instead of the config's.
    """
    metric_prefix = ""
    outputs_name = None  # "" for the results folder's own (XM3600's) files.
    metric = ""
    title = ""
    all_langs = ()

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

    def __init__(self, name, eval_config, caption_set, setup, decoding=None):
        if eval_config.batch_size < 1:
            raise ValueError(f"config.evals.{name}.batch_size must be >= 1, got "
                             f"{eval_config.batch_size}")
        self.name = name
        self.every = eval_config.every
        self.data = caption_set
        self.langs = caption_set.langs
        self.batch_size = eval_config.batch_size
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

    def evaluate(self, params, progress=None):
        """Decodes and scores every language: {lang: LangResult}.

        A language is scored on a CPU thread while the next one decodes.
        """
        captions, scored = {}, {}
        with concurrent.futures.ThreadPoolExecutor(1) as scoring:
            for lang in self.langs:
                captions[lang] = self.predict(params, lang, progress)
                scored[lang] = scoring.submit(self.scorers[lang], captions[lang])
            results = {}
            for lang in self.langs:
                corpus, per_image = scored[lang].result()
                results[lang] = LangResult(self.data.keys[lang], captions[lang], per_image,
                                           corpus)
            return results

    def metrics(self, results):
        """{"<prefix><lang>": corpus score, ..., "<prefix>avg": mean over languages}."""
        scores = {f"{self.metric_prefix}{lang}": r.corpus for lang, r in results.items()}
        scores[f"{self.metric_prefix}avg"] = float(np.mean(list(scores.values())))
        return scores

    def run(self, params):
        """Decodes and scores every language: {metric name: value}."""
        scores = self.metrics(self.evaluate(params))
        logging.info("%s: %s", self.name, scores)
        return scores

    @classmethod
    def scores_in(cls, metrics):
        """This evaluator's per-language scores in a metrics dict: {lang: value}."""
        return {lang: metrics[f"{cls.metric_prefix}{lang}"] for lang in cls.all_langs
                if f"{cls.metric_prefix}{lang}" in metrics}

    def write_outputs(self, out_dir, results, checkpoint):
        """Writes this evaluator's files into the results folder `out_dir`.

        A predictions file per language (formats/predictions.py), the per-image
        scores (formats/per_image.py; an image without a score, NaN, has no
        line) and the report (`report`).

        Args:
            out_dir: the results folder (it exists).
            results: what `evaluate` returned, {lang: LangResult}.
            checkpoint: a `Checkpoint`.

        Returns:
            {"predictions": {lang: path}, "per_image": path, and the report's
            {file kind: path}}.
        """
        if self.outputs_name is None:
            raise TypeError(f"{type(self).__name__} sets no outputs_name: the name of its files")
        rows = per_image_format.check({lang: dict(zip(r.keys, r.per_image.tolist(),
                                                      strict=True))
                                       for lang, r in results.items()})
        paths = {"predictions": {
            lang: predictions_format.write(
                os.path.join(out_dir, predictions_format.file_name(lang, self.outputs_name)),
                {lang: dict(zip(r.keys, r.captions, strict=True))})
            for lang, r in results.items()}}
        paths["per_image"] = per_image_format.write(
            os.path.join(out_dir, per_image_format.file_name(self.outputs_name)), rows)
        paths.update(self.report(out_dir, results, checkpoint))
        return paths

    def report_fields(self, scores, checkpoint):
        """Fields every report's scores file records beyond the scores: the paper's 35- and
        36-language averages, the decoding and the run's folder."""
        averages = report_lib.averages(scores)
        return {"avg_35": averages["avg_35"], "avg_36": averages["avg_36"],
                "decoding": dataclasses.asdict(self.decoding), "workdir": checkpoint.workdir}

    def report(self, out_dir, results, checkpoint):
        """Writes this evaluator's report: scores_<outputs_name>.json and table_<outputs_name>.md
        (evaluation/analysis/report.write_metric_report); returns {file kind: path}."""
        scores = {lang: r.corpus for lang, r in results.items()}
        scored = {lang: int(np.count_nonzero(~np.isnan(r.per_image)))
                  for lang, r in results.items()}
        return report_lib.write_metric_report(
            out_dir, self.outputs_name, self.metric, self.title, scores, scored,
            name=checkpoint.name, step=checkpoint.step, config=checkpoint.config_name,
            with_quz="quz" in self.all_langs, extra=self.report_fields(scores, checkpoint))
