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
    file = run_config.path(workdir)
    try:
        saved = run_config.load(workdir)
    except run_config.SavedConfigError as e:
        raise InputError(str(e)) from None
    if saved is None:
        raise InputError(f"{workdir} has no config.json: not a run folder written by train.py")
    config = ml_collections.ConfigDict(saved)
    try:  # train.py checked it when it wrote it: what fails here was edited since.
        _check_types(config)
        run_config.check(config)
        captioner.captioner_config(config.model)
        langs = run_langs(config)
    except (ValueError, TypeError, AttributeError, KeyError) as e:
        raise InputError(f"{file}: {e}") from None
    return config, langs


def _check_types(config):
    """What run_config.check takes as given: the vocabulary's path and the languages' lists."""
    path = config.vocab.path
    if not isinstance(path, str) or not path:
        raise run_config.ConfigError(f"config.vocab.path={path!r}; expected the vocabulary "
                                     f"file's path")
    lists = {"data.langs": config.data.langs}
    lists.update((f"evals.{name}.langs", config.evals[name].get("langs", ()))
                 for name in config.get("evals", {}))
    for key, value in lists.items():
        if isinstance(value, str) or not isinstance(value, (list, tuple)) or \
                not all(isinstance(lang, str) for lang in value):
            raise run_config.ConfigError(f"config.{key}={value!r}; expected a list of "
                                         f"language codes")


def max_len_bound(config):
    """The longest decoding a run allows: the longest it trained (data.max_target_len) or
    evaluated (evals.*.max_decode_len) at."""
    lengths = [config.data.max_target_len]
    lengths += [evaluator.get("max_decode_len", None)
                for evaluator in config.get("evals", {}).values()]
    return max(n for n in lengths if isinstance(n, int) and not isinstance(n, bool))


def _max_len(max_len, config):
    """The decoding length: `max_len` (an integer >= 1, at most `max_len_bound`) or the run's
    data.max_target_len."""
    if max_len is None:
        return int(config.data.max_target_len)
    if isinstance(max_len, bool) or not isinstance(max_len, numbers.Integral) or max_len < 1:
        raise InputError(f"max_len must be an integer >= 1, got {max_len!r}")
    bound = max_len_bound(config)
    if max_len > bound:
        raise InputError(f"max_len {max_len} is longer than the run was trained or evaluated "
                         f"for (at most {bound}: its data.max_target_len and evals' "
                         f"max_decode_len)")
    return int(max_len)


def restore(workdir, step=None, *, max_len=None):
    """Reads a run's captioner: its config, vocabulary and the parameters of a checkpoint
    (only those: no optimizer is built and its state is not read).

    Args:
        workdir: the run's folder.
        step: None (the latest checkpoint), "best" (checkpoints_best/'s) or a step number.
        max_len: decoding length (default: the run's data.max_target_len; at most
            `max_len_bound`).

    Returns:
        A `Run`.

    Raises:
        InputError: no such folder, no config.json or a bad value in it (hand-edited), no
            (such) checkpoint, a damaged or incompatible checkpoint, the vocabulary is
            missing, or a bad max_len.
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
    try:
        run_config.check_vocab(config, vocab)
    except run_config.ConfigError as e:
        raise InputError(f"{run_config.path(workdir)}: {e}") from None
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
