"""A trained run's captioner, read from its folder: config.json, the vocabulary, a checkpoint.

train.py writes `<workdir>/config.json` (the resolved config) and orbax checkpoints in
`<workdir>/checkpoints/<step>` and `<workdir>/checkpoints_best/<step>`; that is all the
captioning tools need, read through the core's `training.run.Run`.
"""

import dataclasses
import numbers
from typing import Any

import numpy as np

from data import languages, tokenizer
from data import prompts as prompt_lib
from errors import InputError
from model import decode
from training import checkpointing, run_config
from training import run as run_lib


@dataclasses.dataclass(frozen=True)
class Run:
    """What the captioning tools need of a trained run.

    Attributes:
        workdir: the run's folder.
        step: the checkpoint's training step.
        best: whether it is the best evaluation's (checkpoints_best/).
        model: the Captioner module.
        params: its parameters.
        vocab: its `tokenizer.Vocabulary`.
        image_size: the model's input side in pixels.
        prompts: {language: int32 [max_prompt_len] LangId prompt}, in the run's order.
        max_len: decoding length (the run's data.max_target_len: its captions' bound).
    """
    workdir: str
    step: int
    best: bool
    model: Any
    params: Any
    vocab: tokenizer.Vocabulary
    image_size: int
    prompts: dict
    max_len: int


def run_langs(config):
    """The languages a run knows: those it trained on, then those it evaluated."""
    found = list(config.data.langs)
    for name in config.get("evals", {}):
        found += list(config.evals[name].get("langs", ()))
    return languages.check_langs(list(dict.fromkeys(found)))


def _max_len(max_len, config):
    """The decoding length: `max_len` (an integer >= 1, at most `run.max_len_bound`) or the run's
    data.max_target_len."""
    if max_len is None:
        return int(config.data.max_target_len)
    if isinstance(max_len, bool) or not isinstance(max_len, numbers.Integral) or max_len < 1:
        raise InputError(f"max_len must be an integer >= 1, got {max_len!r}")
    too_long = decode.length_problem(max_len, run_lib.max_len_bound(config))
    if too_long:
        raise InputError(f"max_len {too_long}")
    return int(max_len)


def restore(workdir, step=None, *, max_len=None):
    """Reads a run's captioner: its config, vocabulary and the parameters of a checkpoint
    (only those: no optimizer is built and its state is not read).

    Args:
        workdir: the run's folder.
        step: None (the latest checkpoint), "best" (checkpoints_best/'s) or a step number.
        max_len: decoding length (default: the run's data.max_target_len; at most
            `run.max_len_bound`).

    Returns:
        A `Run`.

    Raises:
        InputError: no such folder, no config.json or a bad value in it (hand-edited), no
            (such) checkpoint, a damaged or incompatible checkpoint, the vocabulary is
            missing, or a bad max_len.
    """
    opened = run_lib.Run.open(workdir)
    config, vocab, model = opened.config, opened.vocab, opened.model
    try:
        langs = run_langs(config)
    except ValueError as e:
        raise InputError(f"{run_config.path(workdir)}: {e}") from None
    max_len = _max_len(max_len, config)
    try:
        step = checkpointing.parse_step(step)
    except ValueError as e:
        raise InputError(str(e)) from None
    best = step == "best"
    none = (f"no checkpoint in {checkpointing.checkpoint_dir(workdir, best)}: train first, or "
            f"give the folder of a run that has one")
    if not checkpointing.steps(workdir, best):
        raise InputError(none)
    try:
        params, step = opened.restore(step, abstract=opened.abstract_params(sharded=False))
    except (FileNotFoundError, checkpointing.CheckpointError) as e:
        raise InputError(str(e)) from None
    if params is None:  # Deleted since.
        raise InputError(none)
    template = config.data.get("prompt_template", prompt_lib.DEFAULT_PROMPT_TEMPLATE)
    prompts = {lang: prompt_lib.tokenize_prompt(vocab, lang, template, config.data.max_prompt_len)
               for lang in langs}
    return Run(workdir=workdir, step=step, best=best, model=model,
               params=params, vocab=vocab, image_size=int(config.model.image_size),
               prompts={lang: np.asarray(p, np.int32) for lang, p in prompts.items()},
               max_len=max_len)
