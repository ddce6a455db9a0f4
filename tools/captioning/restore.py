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

import jax
import ml_collections
import numpy as np
import sentencepiece as spm

from data import languages, tokenizer
from data import prompts as prompt_lib
from errors import InputError
from model import captioner
from training import checkpointing, run_config

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Vocabulary:
    """A SentencePiece model behind the interface the repository's code uses.

    `encode`, `decode` and `vocab_size` as seqio's SentencePieceVocabulary without extra
    ids (what data/tokenizer.get_vocabulary returns), so data/prompts.tokenize_prompt and
    data/tokenizer.detokenize take it, on sentencepiece alone: no TensorFlow to import.
    """

    def __init__(self, model_proto, name):
        """Args: the `.model` file's bytes; `name`, its path for messages."""
        self.model_proto = bytes(model_proto)
        self.name = name
        self._processor = spm.SentencePieceProcessor()
        try:
            self._processor.LoadFromSerializedProto(self.model_proto)
        except Exception as e:  # noqa: BLE001  sentencepiece raises RuntimeError/OSError kinds.
            raise InputError(f"{name}: not a SentencePiece model ({e})") from None
        ids = (self._processor.pad_id(), self._processor.eos_id(), self._processor.unk_id())
        if ids != (tokenizer.PAD_ID, tokenizer.EOS_ID, tokenizer.UNK_ID):
            raise InputError(f"{name}: special ids (pad, eos, unk) are {ids}, expected T5's "
                             f"{(tokenizer.PAD_ID, tokenizer.EOS_ID, tokenizer.UNK_ID)}")

    @classmethod
    def load(cls, path):
        """Reads a local `.model` file (or, through seqio, a `gs://` one).

        A relative path is read from the current folder, else from the repository's (where
        `make demo` trains): a run trained there is found from any folder.
        """
        if "://" in path:
            return cls(tokenizer.get_vocabulary(path).sp_model, path)
        found = next((p for p in (path, os.path.join(REPO, path)) if os.path.isfile(p)), path)
        try:
            with open(found, "rb") as f:
                return cls(f.read(), found)
        except FileNotFoundError:
            raise InputError(
                f"vocabulary {path} (the run's config.json vocab.path) not found; a relative "
                f"path is read from the current folder, else from the repository's "
                f"({REPO})") from None

    @property
    def vocab_size(self):
        return self._processor.get_piece_size()

    def encode(self, text):
        return self._processor.EncodeAsIds(text)

    def decode(self, ids):
        return self._processor.DecodeIds([int(i) for i in ids])


@dataclasses.dataclass(frozen=True)
class Run:
    """What the captioning tools need of a trained run.

    Attributes:
        workdir: the run's folder.
        step: the checkpoint's training step.
        best: whether it is the best evaluation's (checkpoints_best/).
        model: the Captioner module.
        params: its parameters.
        vocab: a `Vocabulary`.
        image_size: the model's input side in pixels.
        prompts: {language: int32 [max_prompt_len] LangId prompt}, in the run's order.
        max_len: decoding length (the run's data.max_target_len: its captions' bound).
    """
    workdir: str
    step: int
    best: bool
    model: Any
    params: Any
    vocab: Vocabulary
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


def _step(workdir, step):
    """(step, best) of `step` (None: the latest, "best", or a number), checked."""
    best = step == "best"
    if step is not None and not best:
        try:
            step = int(step)
        except ValueError:
            raise InputError(f"step {step!r}: expected a number or 'best'") from None
    available = checkpointing.steps(workdir, best)
    if not available:
        where = checkpointing.checkpoint_dir(workdir, best)
        raise InputError(f"no checkpoint in {where}: train first, or give the folder of a "
                         f"run that has one")
    if step is None or best:
        return available[-1], best
    if step not in available:
        raise InputError(f"no checkpoint of step {step} in {checkpointing.checkpoint_dir(workdir)}"
                         f"; available steps: {', '.join(map(str, available))}")
    return step, best


def _max_len(max_len, config):
    """The decoding length: `max_len` (an integer >= 1) or the run's data.max_target_len."""
    if max_len is None:
        return int(config.data.max_target_len)
    if isinstance(max_len, bool) or not isinstance(max_len, numbers.Integral) or max_len < 1:
        raise InputError(f"max_len must be an integer >= 1, got {max_len!r}")
    return int(max_len)


def _abstract_params(model):
    """The model's parameters as ShapeDtypeStructs on this process's first device."""
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device),
                        captioner.abstract_params(model, boxed=False))


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
    step, best = _step(workdir, step)
    vocab = Vocabulary.load(config.vocab.path)
    model = captioner.from_config(config.model, vocab.vocab_size)
    try:
        params = checkpointing.restore_params(workdir, _abstract_params(model), step, best)
    except (FileNotFoundError, checkpointing.CheckpointError) as e:
        raise InputError(str(e)) from None
    template = config.data.get("prompt_template", prompt_lib.DEFAULT_PROMPT_TEMPLATE)
    prompts = {lang: prompt_lib.tokenize_prompt(vocab, lang, template, config.data.max_prompt_len)
               for lang in langs}
    return Run(workdir=workdir, step=step, best=best, model=model,
               params=params, vocab=vocab, image_size=int(config.model.image_size),
               prompts={lang: np.asarray(p, np.int32) for lang, p in prompts.items()},
               max_len=max_len)
