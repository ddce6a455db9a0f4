"""XM3600 evaluation: decode captions in each language and score them with CIDEr-D.

`Evaluator` is the in-loop callback of `train.py`: it loads the evaluation
split and prepares the CIDEr references of every language once, then each
`run(params)` decodes all images in every language with the jit-compiled
greedy decoder and returns `eval/cider_d/<lang>` and `eval/cider_d/avg`.
"""

import functools

import jax
import numpy as np
from absl import logging

from data import languages
from data import pipeline
from eval import cider
from model import decode


def detokenize(vocab, tokens):
    """Token ids [batch, length] -> strings, cut at the first EOS (id 1), pads dropped."""
    texts = []
    for row in np.asarray(tokens):
        ids = row.tolist()
        if 1 in ids:
            ids = ids[:ids.index(1)]
        texts.append(vocab.decode([i for i in ids if i > 1]))
    return texts


class Evaluator:
    """Decodes and scores the XM3600 split of `config.evals.xm3600`.

    Args:
        eval_config: `config.evals.xm3600` (data_dir, langs, batch_size,
            max_decode_len, max_images).
        data_config: `config.data` (prompt template and length).
        model: the Captioner.
        vocab: the seqio vocabulary of the targets.
        image_size: the model's input resolution.
    """

    def __init__(self, eval_config, data_config, model, vocab, image_size):
        self.langs = languages.check_langs(eval_config.langs)
        self.batch_size = eval_config.batch_size
        self.vocab = vocab
        self.sets, self.scorers = {}, {}
        for lang in self.langs:
            self.sets[lang] = pipeline.xm3600_eval_set(
                eval_config.data_dir, lang, vocab, image_size=image_size,
                prompt_template=data_config.prompt_template,
                max_prompt_len=data_config.max_prompt_len,
                max_images=eval_config.max_images)
            self.scorers[lang] = cider.CiderScorer(self.sets[lang].references, lang)
        self._greedy = jax.jit(functools.partial(
            decode.greedy, model, max_len=eval_config.max_decode_len))

    def predict(self, params, lang):
        """Greedy captions (strings) for every image of `lang`, in the split's order."""
        eval_set = self.sets[lang]
        n, bs = len(eval_set.keys), self.batch_size
        captions = []
        for start in range(0, n, bs):
            images = eval_set.images[start:start + bs]
            prompt = eval_set.prompt[start:start + bs]
            valid = len(images)
            if valid < bs:  # Pad the last batch so that one compiled shape serves all.
                pad = bs - valid
                images = np.concatenate([images, np.repeat(images[-1:], pad, 0)])
                prompt = np.concatenate([prompt, np.repeat(prompt[-1:], pad, 0)])
            tokens = self._greedy(params, images, prompt)
            captions += detokenize(self.vocab, tokens)[:valid]
        return captions

    def run(self, params):
        """Returns {"eval/cider_d/<lang>": score, ..., "eval/cider_d/avg": mean}."""
        scores = {}
        for lang in self.langs:
            result = self.scorers[lang].score(self.predict(params, lang))
            scores[f"eval/cider_d/{lang}"] = result.corpus
        scores["eval/cider_d/avg"] = float(np.mean(list(scores.values())))
        logging.info("XM3600 CIDEr-D: %s", scores)
        return scores
