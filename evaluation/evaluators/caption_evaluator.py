"""The caption evaluator: decodes a caption set in each language and scores the captions
(CIDEr-D unless a subclass scores otherwise). The contract: evaluation/evaluators/__init__.py.
"""

import concurrent.futures
import dataclasses
import functools
import os
from typing import Any

import jax
import numpy as np
from absl import logging
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import errors
from data import eval_sets, languages, tokenizer
from data.releases import xm3600 as xm3600_release
from evaluation import cider
from model import decode


@functools.lru_cache(maxsize=8)
def make_decoder(model, max_len, decoding):
    """A jit-compiled fn(params, images, prompts) -> tokens [batch, max_len]; cached, so that
    evaluators of one model (and the tool after the loop in one process) share compilations."""
    def fn(params, images, prompt):
        if decoding.method == "greedy":
            return decode.greedy(model, params, images, prompt, max_len=max_len)
        return decode.beam_search(model, params, images, prompt, max_len=max_len,
                                  beam_size=decoding.beam_size, alpha=decoding.alpha)[0]
    return jax.jit(fn)


@dataclasses.dataclass(frozen=True)
class Setup:
    """What every evaluator is given: the model (its captions decoded by `make_decoder`), the
    vocabulary, `config.data` and the image size."""
    model: Any
    vocab: Any
    data_config: Any
    image_size: int

    def caption_set_args(self, eval_config):
        """The keyword arguments of data/eval_sets.py's loaders for `eval_config`."""
        return dict(image_size=self.image_size, prompt_template=self.data_config.prompt_template,
                    max_prompt_len=self.data_config.max_prompt_len,
                    max_images=eval_config.get("max_images", None))


def _batch_sharding(params, batch_size):
    """Splits a batch over the params' 'data' axis; None (replicated) when it cannot."""
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


def corpus_and_per_image(score):
    """fn(captions) -> (corpus, per_image) of a `score` returning a result with both."""
    def fn(captions):
        result = score(captions)
        return result.corpus, result.per_image
    return fn


@dataclasses.dataclass(frozen=True)
class LangResult:
    """Captions and scores of one language (captions and per_image follow keys)."""
    keys: list
    captions: list
    per_image: np.ndarray  # float64; NaN where an image's score is undefined.
    corpus: float


class Results(dict):
    """What `run` returns: {metric name: value}, with `by_lang`: {lang: LangResult}."""

    def __init__(self, metrics, by_lang):
        super().__init__(metrics)
        self.by_lang = by_lang


class CaptionEvaluator:
    """Decodes every language of a caption set and scores it. A subclass sets `metric_prefix`,
    `outputs_name` ("" for XM3600's own files), `metric`, `title`, `all_langs` and `paper_column`;
    it may override `load`, `data_langs`, `make_scorers` and `check_config`."""
    metric_prefix = ""
    outputs_name = None
    metric = "cider-d"
    title = ""
    all_langs = tuple(languages.XM3600_LANGS)
    paper_column = None

    def __init__(self, name, eval_config, setup, *, langs=None, decoding=None):
        self.name, self.every, self.vocab = name, eval_config.every, setup.vocab
        self.batch_size, self.max_decode_len = eval_config.batch_size, eval_config.max_decode_len
        langs = self.config_langs(name, eval_config.langs if langs is None else langs)
        self.data = self.load(eval_config, setup, langs)
        self.langs = self.data.langs
        self.decoding = decoding or decode.Decoding.from_config(eval_config)
        self._predict = make_decoder(setup.model, eval_config.max_decode_len, self.decoding)
        self.scorers = dict(zip(self.langs, self.make_scorers(self.langs), strict=True))

    @classmethod
    def config_langs(cls, name, langs):
        """`langs` checked against `all_langs`, or a ValueError naming config.evals.<name>.langs."""
        with errors.reraised(ValueError, ValueError, f"config.evals.{name}.langs: "):
            return languages.check_langs(langs, known=cls.all_langs)

    @classmethod
    def check_config(cls, name, eval_config):
        pass

    @classmethod
    def metric_names_for(cls, langs):
        return [f"{cls.metric_prefix}{lang}" for lang in langs] + [f"{cls.metric_prefix}avg"]

    @classmethod
    def data_langs(cls, eval_config):
        """The languages of `all_langs` that the data has (FileNotFoundError, ValueError: named)."""
        references = xm3600_release.read_references(
            os.path.join(eval_config.data_dir, "captions.jsonl"))
        return tuple(lang for lang in cls.all_langs if lang in references.by_lang)

    def load(self, eval_config, setup, langs):
        """The `data.eval_sets.CaptionSet` of `langs`."""
        return eval_sets.load_xm3600(eval_config.data_dir, langs, setup.vocab,
                                     **setup.caption_set_args(eval_config))

    def make_scorers(self, langs):
        """[fn(captions) -> (corpus, per_image) for lang in langs]; CIDEr-D's prepare each
        language's references once (one thread per core) and then score new captions only."""
        return cider.map_languages(lambda lang: corpus_and_per_image(
            cider.CiderScorer(self.data.references[lang], lang).score), langs)

    @property
    def metric_names(self):
        return self.metric_names_for(self.langs)

    @property
    def num_images(self):
        return {lang: len(self.data.keys[lang]) for lang in self.langs}

    def predict(self, params, lang, progress=None):
        """Captions of every image of `lang`, in the set's order; progress(lang, done, of)."""
        rows, prompt = self.data.rows[lang], self.data.prompts[lang]
        n, bs = len(rows), self.batch_size
        sharding = _batch_sharding(params, bs)
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
            tokens = self._predict(params, images, prompts)  # [bs, max_len]
            if not getattr(tokens, "is_fully_addressable", True):  # Multi-process.
                tokens = multihost_utils.process_allgather(tokens, tiled=True)
            captions += tokenizer.detokenize(self.vocab, np.asarray(tokens))[:valid]
            if progress is not None:
                progress(lang, len(captions), n)
        return captions

    def run(self, params, progress=None):
        """`Results`: {"<prefix><lang>": corpus score, ..., "<prefix>avg": their mean}."""
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
