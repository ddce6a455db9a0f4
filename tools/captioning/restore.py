"""A trained run's captioner, read from its folder: config.json, the vocabulary, a checkpoint.

train.py writes `<workdir>/config.json` (the resolved config) and orbax checkpoints in
`<workdir>/checkpoints/<step>` and `<workdir>/checkpoints_best/<step>`; that is all the
captioning tools need. Paths inside config.json (the vocabulary's) are as the run was
launched: a relative one is read from the current folder, else from the repository's.
"""

import dataclasses
import numbers
import os
from typing import Any

import ml_collections
import numpy as np

from data import languages, tokenizer
from data import prompts as prompt_lib
from errors import InputError
from model import captioner
from training import checkpointing, run_config
from training import state as state_lib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_vocabulary(path):
    """The run's vocabulary (`tokenizer.get_vocabulary`); a relative path is read from the
    current folder, else from the repository's (where `make demo` trains): a run trained
    there is found from any folder."""
    if "://" not in path:
        path = next((p for p in (path, os.path.join(REPO, path)) if os.path.isfile(p)), path)
    try:
        return tokenizer.get_vocabulary(
            path, fix="set vocab.path in the run's config.json to the copy (the same as "
                      "--config.vocab.path=/local/copy.model for train.py)")
    except FileNotFoundError:
        raise InputError(
            f"vocabulary {path} (the run's config.json vocab.path) not found; a relative "
            f"path is read from the current folder, else from the repository's "
            f"({REPO})") from None


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


def _read_config(workdir):
    if not os.path.isdir(workdir):
        raise InputError(f"run folder {workdir} not found")
    try:
        saved = run_config.load(workdir)
    except ValueError as e:  # json.JSONDecodeError
        raise InputError(f"{run_config.path(workdir)} is not valid JSON: {e}") from None
    if saved is None:
        raise InputError(f"{workdir} has no config.json: not a run folder written by train.py")
    config = ml_collections.ConfigDict(saved)
    try:
        captioner.captioner_config(config.model)
        langs = run_langs(config)
    except (ValueError, AttributeError, KeyError) as e:
        raise InputError(f"{run_config.path(workdir)}: {e}") from None
    return config, langs


def _max_len(max_len, config):
    """The decoding length: `max_len` (an integer >= 1) or the run's data.max_target_len."""
    if max_len is None:
        return int(config.data.max_target_len)
    if isinstance(max_len, bool) or not isinstance(max_len, numbers.Integral) or max_len < 1:
        raise InputError(f"max_len must be an integer >= 1, got {max_len!r}")
    return int(max_len)


def restore(workdir, step=None, *, max_len=None):
    """Reads a run's captioner: its config, vocabulary and the parameters of a checkpoint
    (only those: no optimizer is built and its state is not read).

    Args:
        workdir: the run's folder.
        step: None (the latest checkpoint), "best" (checkpoints_best/'s) or a step number.
        max_len: decoding length (default: the run's data.max_target_len).

    Returns:
        A `Run`.

    Raises:
        InputError: no such folder, no config.json, no (such) checkpoint, a damaged or
            incompatible checkpoint, the vocabulary is missing, or a bad max_len.
    """
    config, langs = _read_config(workdir)
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
    vocab = load_vocabulary(config.vocab.path)
    model = captioner.from_config(config.model, vocab.vocab_size)
    try:
        params, step = checkpointing.restore(workdir, state_lib.abstract_params(model), step)
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
