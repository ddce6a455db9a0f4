"""A run's config: checked before any work, saved with the run, compared on resume.

`check` looks at every training field that can be wrong without loading
anything (the model's, the data's, the optimizer's, the loop's), so a typo
costs a one-line error naming the key rather than minutes of start-up and a
traceback. Resuming a checkpoint with another model, optimizer, data or seed
would either fail deep inside orbax (shapes) or, worse, silently train
something else. So the fields below must equal those of the saved
`config.json`, unless the user passes `--allow_config_change`.
"""

import dataclasses
import json
import math
import os
import re

from absl import flags

import errors
import files
from data import languages
from data import prompts as prompt_lib
from data.build import layout
from data.build.image_shards import CORRUPT_IMAGE_POLICIES
from model import captioner
from model.upstream import trees
from training import crash_points

# Dotted prefixes of fields that change the state's shapes, the data order or the maths.
INCOMPATIBLE = ("model", "optimizer", "vocab", "data", "seed", "batch_size", "lr", "z_loss",
                "label_smoothing", "init")


def _flatten(tree):
    """{"model.t5.emb_dim": 32, ...} of a nested dict."""
    return {path.replace(trees.SEP, "."): v for path, v in trees.flatten_tree(tree).items()}


def _normalize(value):
    return list(value) if isinstance(value, tuple) else value


# Fields under those prefixes that change neither shapes nor maths (how to react to a bad
# image, how many processes decode them, what a rematerialized layer keeps).
MAY_CHANGE = ("data.corrupt_images", "data.num_workers", "model.remat_policy")


# Fields that are gone, saved by earlier runs, with the values that gave what every run does
# now: the release files read as they are or built (the same examples), languages taking
# turns, no crops. A run saved with one of them resumes as it was.
RETIRED = {"data.reader": ("tfds", "files"), "data.mixture": ("uniform",),
           "data.augment": (False,)}


def incompatible_changes(saved, current):
    """Returns ["field: saved -> current", ...] for fields of INCOMPATIBLE that differ."""
    saved, current = _flatten(saved), _flatten(current)
    changes = []
    for name in sorted(set(saved) | set(current)):
        if name.split(".")[0] not in INCOMPATIBLE or name in MAY_CHANGE:
            continue
        if name not in current and saved[name] in RETIRED.get(name, ()):
            continue
        old, new = _normalize(saved.get(name)), _normalize(current.get(name))
        if old != new:
            changes.append(f"{name}: {old!r} -> {new!r}")
    return changes


def path(workdir):
    return os.path.join(workdir, "config.json")


class ConfigError(errors.InputError):
    """A config field is wrong; the message names it (`config.<key>`)."""


class SavedConfigError(errors.RunError):
    """A run's config.json cannot be read (the message names it, and where it is broken)."""


def load(workdir):
    """The saved config as a dict, or None when the run has none.

    Raises:
        SavedConfigError: config.json is unreadable, not JSON (naming the line and
            column), or not a JSON object.
    """
    file = path(workdir)
    if not os.path.lexists(file):
        return None
    try:
        with open(file, encoding="utf-8") as f:
            saved = json.load(f)
    except json.JSONDecodeError as e:
        raise SavedConfigError(f"{file}: not valid JSON (line {e.lineno} column {e.colno}: "
                               f"{e.msg})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SavedConfigError(f"{file}: cannot read it ({getattr(e, 'strerror', None) or e})") \
            from None
    if not isinstance(saved, dict):
        raise SavedConfigError(f"{file}: not a JSON object")
    return saved


class ResumeRefused(errors.RunError):
    """The checkpoints of a workdir cannot be resumed with this config (the message says
    what to do)."""


def check_resume(config, workdir, checkpoints, allow_change):
    """Checks the config a run resumes its checkpoints with against its config.json.

    A field that matters (INCOMPATIBLE) that differs, or a config.json that is missing or
    unreadable, refuses the resume unless `allow_change` adopts the command line's config.

    Args:
        config: the command line's config.
        workdir: the run's folder.
        checkpoints: where its checkpoints are (for the message).
        allow_change: --allow_config_change.

    Returns:
        (the changed fields allowed, the warning lines to show).

    Raises:
        ResumeRefused: naming the fields or the file, and what to do.
    """
    try:
        saved = load(workdir)
        if saved is None:
            raise SavedConfigError(f"{path(workdir)}: missing beside the checkpoints in "
                                   f"{checkpoints}")
    except SavedConfigError as e:
        if not allow_change:
            raise ResumeRefused(
                f"{e}; the checkpoints cannot be checked against the config. Restore it, or "
                f"pass --allow_config_change to resume with the command line's config") \
                from None
        return [], [f"warning: {e}; resuming with the command line's config (allowed)"]
    changes = incompatible_changes(saved, config.to_dict())
    if changes and not allow_change:
        raise ResumeRefused(
            f"{workdir} holds checkpoints of a run with another config; changed fields: "
            + "; ".join(changes)
            + ". Use another --workdir, or pass --allow_config_change to resume anyway.")
    return changes, [f"warning: config changed since the checkpoint (allowed): {change}"
                     for change in changes]


def save(workdir, config):
    """Writes the resolved config whole (files.py): a crash leaves the old file or the new one."""
    files.write_text(path(workdir), config.to_json(indent=2))
    crash_points.passed("config.json")


SCHEDULES = ("rsqrt", "constant")


@dataclasses.dataclass(frozen=True)
class Range:
    """The finite numbers from `low` to `high`; `open_low`/`open_high` leave an end out."""
    low: float
    high: float = math.inf
    open_low: bool = False
    open_high: bool = True

    def __contains__(self, x):
        return (math.isfinite(x) and (self.low < x if self.open_low else self.low <= x)
                and (x < self.high if self.open_high else x <= self.high))

    def __str__(self):
        if self.high == math.inf:
            return f"{'>' if self.open_low else '>='} {self.low:g}"
        return (f"in {'(' if self.open_low else '['}{self.low:g}, "
                f"{self.high:g}{')' if self.open_high else ']'}")


POSITIVE, FRACTION = Range(0, open_low=True), Range(0, 1)
# The numeric training fields and the values each may take. Integers: (key, lowest value);
# numbers: (key, Range). OPTIONAL ones may be None or absent (= a default: the tower
# variant's size, one batch worker per core, no update clipping, ...).
INTS = (("seed", 0), ("total_steps", 0), ("batch_size", 1), ("grad_accum_steps", 1),
        ("log_every", 0), ("checkpoint.every", 0), ("checkpoint.keep", 1),
        ("data.max_prompt_len", 1), ("data.max_target_len", 1), ("model.image_size", 1))
OPTIONAL_INTS = (("data.num_workers", 0),
                 *((f"model.vit.{k}", 1) for k in ("width", "depth", "mlp_dim", "num_heads")),
                 *((f"model.t5.{k}", 1) for k in ("emb_dim", "num_heads", "head_dim", "mlp_dim",
                                                  "num_encoder_layers", "num_decoder_layers",
                                                  "vocab_size")))
NUMBERS = (("lr.base", POSITIVE), ("optimizer.decay_rate", POSITIVE),
           ("label_smoothing", FRACTION), ("z_loss", Range(0)))
OPTIONAL_NUMBERS = (("optimizer.clipping_threshold", POSITIVE), ("model.dropout", FRACTION),
                    ("model.vit.dropout", FRACTION))
_ABSENT = object()


def _get(config, key):
    """The value of a dotted `key`, or _ABSENT."""
    value = config
    for part in key.split("."):
        if not hasattr(value, "get"):
            return _ABSENT
        value = value.get(part, _ABSENT)
    return value


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _check_int(config, key, low, optional=False):
    value = _get(config, key)
    if optional and value in (None, _ABSENT):
        return
    if not _is_int(value) or value < low:
        value = None if value is _ABSENT else value
        raise ConfigError(f"config.{key}={value!r}; expected an integer >= {low}")


def _check_number(config, key, allowed, optional=False):
    value = _get(config, key)
    if optional and value in (None, _ABSENT):
        return
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value not in allowed:
        value = None if value is _ABSENT else value
        raise ConfigError(f"config.{key}={value!r}; expected a finite number {allowed}")


def _check_choice(value, key, known):
    if value not in known:
        raise ConfigError(f"config.{key}={value!r}; known: {', '.join(known)}")


def _check_mesh(mesh):
    for axis in ("data", "model"):
        value = mesh.get(axis, None)
        if not _is_int(value) or not (value == -1 or value >= 1):
            raise ConfigError(f"config.mesh.{axis}={value!r}; expected an integer >= 1, or -1 "
                              f"(the devices the other axis leaves)")
    if mesh.data == mesh.model == -1:
        raise ConfigError("config.mesh.data and config.mesh.model are both -1; at most one "
                          "axis may take the devices the other leaves")


def _check_data(data):
    _check_choice(data.dataset, "data.dataset", layout.DATASETS)
    _check_choice(data.corrupt_images, "data.corrupt_images", CORRUPT_IMAGE_POLICIES)
    template = data.prompt_template
    try:
        prompt_lib.prompt_text("en", template)
    except (ValueError, KeyError, IndexError) as e:
        reason = str(e) if isinstance(e, ValueError) else f"unknown field {e}"
        raise ConfigError(f"config.data.prompt_template={template!r}: {reason}; write "
                          f"'{{lang}}' where the language code goes") from None
    data_dir = data.tfds_data_dir
    if data_dir and os.path.exists(data_dir) and not os.path.isdir(data_dir):
        raise ConfigError(f"config.data.tfds_data_dir={data_dir!r} is a file, not a folder")
    try:
        languages.check_langs(data.langs, known=languages.TRAIN_35L_LANGS,
                              what="training language")
    except ValueError as e:
        raise ConfigError(f"config.data.langs: {e}") from None


def check(config):
    """Checks the training fields of `config` (not `evals`: evaluation/evaluators checks those).

    Every number against its range (INTS, NUMBERS, ...: NaN and inf are never allowed),
    every choice against the known ones, the model's fields by building its config.
    What needs the vocabulary is checked by `check_vocab`, and whether config.mesh fits
    the devices by train.py, once they are known (still before any work).

    Raises:
        ConfigError: naming the first field at fault and what it may be.
    """
    for key, low in INTS:
        _check_int(config, key, low)
    for key, low in OPTIONAL_INTS:
        _check_int(config, key, low, optional=True)
    for key, allowed in NUMBERS:
        _check_number(config, key, allowed)
    for key, allowed in OPTIONAL_NUMBERS:
        _check_number(config, key, allowed, optional=True)
    _check_choice(config.lr.schedule, "lr.schedule", SCHEDULES)
    if config.lr.schedule == "rsqrt":  # The constant schedule ignores constant_steps.
        _check_int(config, "lr.constant_steps", 1)
    _check_mesh(config.mesh)
    _check_data(config.data)
    try:
        captioner.captioner_config(config.model)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def check_vocab(config, vocab):
    """Checks the fields that depend on the vocabulary, right after loading it.

    Args:
        config: the run's config.
        vocab: its vocabulary (`vocab_size`, `encode`).

    Raises:
        ConfigError: naming the field at fault.
    """
    size = config.model.t5.vocab_size
    if size is not None and size < vocab.vocab_size:
        raise ConfigError(f"config.model.t5.vocab_size={size} is smaller than the vocabulary "
                          f"{config.vocab.path} ({vocab.vocab_size} ids); leave it unset "
                          f"(None) for the vocabulary's size")
    template = config.data.prompt_template
    langs = dict.fromkeys([*config.data.langs, *(lang for evaluator in config.evals.values()
                                                 for lang in evaluator.get("langs", ()))])
    for lang in langs:
        prompt = prompt_lib.prompt_text(lang, template)
        tokens = len(vocab.encode(prompt)) + 1  # + EOS
        if tokens > config.data.max_prompt_len:
            raise ConfigError(f"config.data.max_prompt_len={config.data.max_prompt_len} is too "
                              f"short for the prompt {prompt!r} ({tokens} tokens with EOS)")


def parse_flags(flag_values, argv, config_flag="config"):
    """Parses `argv` into `flag_values` and loads the config, as one ConfigError on bad input.

    ml_collections reports a misspelled `--config.<field>` or a config file that
    does not load with a traceback from deep inside it; this names the flag.

    Returns:
        What `flag_values(argv)` returns (the arguments left over).

    Raises:
        ConfigError: the flag or config file at fault, and why.
    """
    try:
        rest = flag_values(argv)
    except flags.Error as e:
        if str(e).startswith(f"flag --{config_flag}="):  # The config file raised.
            raise _cannot_load(argv, config_flag, e) from None
        lines = [line for line in str(e).splitlines() if line.strip()]
        raise ConfigError(lines[0] if len(lines) < 3 else f"{lines[0]} {lines[-1].strip()}") \
            from None
    except AttributeError as e:
        if "get_config" in str(e):
            raise _cannot_load(argv, config_flag, "it defines no get_config()") from None
        raise ConfigError(_unknown_field_message(e, argv, config_flag)) from None
    except KeyError as e:
        raise ConfigError(_unknown_field_message(e, argv, config_flag)) from None
    except Exception as e:  # noqa: BLE001  A config file that fails to import, for one.
        raise _cannot_load(argv, config_flag, f"{type(e).__name__}: {e}") from None
    if flag_values[config_flag].value is not None:
        try:
            flag_values[config_flag].value.to_dict()
        except Exception as e:  # noqa: BLE001  ml_collections defers a missing file's error.
            raise _cannot_load(argv, config_flag, e) from None
    return rest


def _cannot_load(argv, config_flag, error):
    """'--config=<file>: cannot load it: <the last line of what loading it raised>'."""
    given = ""
    for arg, following in zip(argv, [*argv[1:], ""], strict=True):
        if arg == f"--{config_flag}" or arg.startswith(f"--{config_flag}="):
            given = arg.split("=", 1)[1] if "=" in arg else following
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    cause = lines[-1].split("earlier failure to load: ")[-1] if lines else type(error).__name__
    return ConfigError(f"--{config_flag}={given}: cannot load it: {cause}")


def _unknown_field_message(error, argv, config_flag):
    """'--config.total_step=20: no such field (did you mean total_steps?)' from ml_collections'."""
    text = str(error).replace("\\n", "\n").replace("\\'", "'")
    fields = re.findall(r"'([A-Za-z_][\w]*)'", text)
    suggestion = re.search(r'Did you mean "([^"]+)"', text)
    culprit = next((arg for arg in argv if arg.startswith(f"--{config_flag}.") and fields
                    and fields[0] in arg.split("=")[0].split(".")), None)
    where = culprit or f"a --{config_flag}.<field> flag"
    hint = f" (did you mean {suggestion.group(1)}?)" if suggestion else ""
    name = fields[0] if fields else text
    return f"{where}: the config has no field {name!r}{hint}"
