"""A run's folder opened: its config (config.json, checked by the schema), its vocabulary, its
model, the abstract trees its checkpoints are read into, and `restore`. train.py, the checkpoint
tool, the captioning tools and `config.init.checkpoint` open a run through it.

Paths inside config.json (the vocabulary's) are as the run was launched: a relative one is read
from the current folder, else from the repository's (where `make demo` trains).
"""

import os

import errors
from data import tokenizer
from model import captioner
from training import checkpointing, run_config
from training import state as state_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SAVED_FIX = ("set vocab.path in the run's config.json to the copy (the same as "
              "--config.vocab.path=/local/copy.model for train.py)")


def vocabulary(path, saved=False):
    """The vocabulary of config.vocab.path; every error is one errors.InputError naming it.
    `saved`: the path as a run's config.json holds it (a relative one not found from the current
    folder is read from the repository's)."""
    if saved and isinstance(path, str) and "://" not in path:
        path = next((p for p in (path, os.path.join(REPO, path)) if os.path.isfile(p)), path)
    try:
        return tokenizer.get_vocabulary(path, *([_SAVED_FIX] if saved else []))
    except (FileNotFoundError, errors.InputError) as e:
        if not saved:
            raise errors.InputError(f"config.vocab.path: {e}") from None
        if isinstance(e, FileNotFoundError):
            raise errors.InputError(
                f"vocabulary {path} (the run's config.json vocab.path) not found; a relative "
                f"path is read from the current folder, else from the repository's "
                f"({REPO})") from None
        raise


def read_config(workdir):
    """The config of the run in `workdir` (its config.json), checked by the schema; bad or
    missing: errors.InputError naming the file."""
    if not os.path.isdir(workdir):
        raise errors.InputError(f"run folder {workdir} not found")
    saved = run_config.load(workdir)  # SavedConfigError: an InputError naming the file.
    if saved is None:
        raise errors.InputError(f"{workdir} has no config.json: not a run folder written by "
                                f"train.py")
    config = run_config.from_saved(saved)
    # train.py checked it when it wrote it: what fails here was edited since.
    with errors.reraised(errors.InputError, (ValueError, TypeError, AttributeError, KeyError),
                         f"{run_config.path(workdir)}: "):
        run_config.check(config)
    return config


def max_len_bound(config):
    """The longest decoding a run allows: the longest it trained (data.max_target_len) or
    evaluated (evals.*.max_decode_len) at."""
    return max([config.data.max_target_len,
                *(evaluator.max_decode_len for evaluator in config.get("evals", {}).values())])


class Run:
    """A run: its folder, config, vocabulary and model (`Run.open` reads them from the folder)."""

    def __init__(self, workdir, config, vocab):
        self.workdir, self.config, self.vocab = workdir, config, vocab
        self.model = captioner.from_config(config.model, vocab.vocab_size)

    @classmethod
    def open(cls, workdir):
        """The run of `workdir` as its config.json says (errors.InputError when it cannot)."""
        config = read_config(workdir)
        vocab = vocabulary(config.vocab.path, saved=True)
        with errors.reraised(errors.InputError, run_config.ConfigError,
                             f"{run_config.path(workdir)}: "):
            run_config.check_vocab(config, vocab)
        return cls(workdir, config, vocab)

    def abstract_params(self, sharded=True):
        """The parameters as ShapeDtypeStructs: over the config's mesh, or on one device."""
        return state_lib.abstract_params(self.model, self.config if sharded else None)

    def restore(self, step=None, *, abstract=None, **options):
        """(tree, step) of checkpoint `step` (None: the newest; "best"), read into `abstract`
        (default: the sharded parameters, the optimizer's state not read); `options` and errors
        as `checkpointing.restore`'s."""
        abstract = self.abstract_params() if abstract is None else abstract
        return checkpointing.restore(self.workdir, abstract, step, **options)
