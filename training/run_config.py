"""A run's config: its fields, defined once in FIELDS (`schema()` builds the ConfigDict every
config file starts from), checked before any work (one line naming the key), saved with the run,
and compared on resume: another value of a "fixed" field needs `--allow_config_change`."""

import ast
import dataclasses
import functools
import json
import math
import os
import re

import ml_collections
from absl import flags
from ml_collections import config_dict

import crash_points
import errors
import files
from data import languages
from data import prompts as prompt_lib
from data.build import layout
from data.build.image_shards import CORRUPT_IMAGE_POLICIES
from model import captioner, layers
from model.upstream import trees


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


N0, N1 = Range(0), Range(1)  # Integers >= 0, >= 1.
POSITIVE, FRACTION = Range(0, open_low=True), Range(0, 1)


@dataclasses.dataclass(frozen=True)
class Field:
    """One row of FIELDS: dotted name; default (a type: None until set); values (a Range, a tuple
    of choices, or None: checked by what reads it); flags: "optional" (None means a default),
    "fixed" (a resume refuses another value), "step" (the train step reads it)."""
    name: str
    default: object
    values: object
    flags: str
    comment: str

    def has(self, flag):
        return flag in self.flags.split()


def evaluator_rows(name, kind=str, data_field=None, data=""):
    """The FIELDS rows of the evaluator config.evals.<name> (evaluation/evaluators/): those
    every one has, and with `data_field` the row of its data."""
    rows = (
        ("type", kind, None, "", "The evaluator (evaluation/evaluators/__init__.py)."),
        *([(data_field, str, None, "", data)] if data_field else []),
        ("langs", tuple, None, "", "The languages it scores in the loop."),
        ("every", int, N0, "", "Steps between runs in the loop (and at step 0 and the last); "
                               "0: only `python -m evaluation.evaluate`."),
        ("batch_size", int, N1, "", "Images per decoding batch (split over devices)."),
        ("max_decode_len", int, N1, "", "Caption tokens decoded."),
        ("max_images", int, N1, "optional", "None: every image of the split."),
        ("decode", "greedy", None, "", '"greedy" or "beam" (model/decode.py checks them).'),
        ("beam_size", int, None, "optional", 'Beams of "beam"; None: 4.'),
        ("alpha", float, None, "optional", 'T5X\'s length penalty of "beam"; None: 0.6.'),
    )
    return tuple((f"evals.{name}.{key}", *rest) for key, *rest in rows)


_OPT, _SIZE = "fixed optional", "None: the variant's."
FIELDS = tuple(Field(*row) for row in (
    ("seed", 0, N0, "fixed", "The initialization and the data order follow from it."),
    ("total_steps", int, N0, "", "Training steps."),
    ("batch_size", int, N1, "fixed", "Global batch, split over devices and processes."),
    ("grad_accum_steps", 1, N1, "step", "Micro-batches per step: the same maths, less memory."),
    ("log_every", 100, N0, "", "Steps between training records in metrics.jsonl."),
    # Adafactor (training/optimizer.py) at `base`, constant for `constant_steps`, then
    # base * sqrt(constant_steps / step) ("rsqrt", the paper's Sec. 3.2), or "constant".
    ("lr.base", float, POSITIVE, "fixed step", "Peak learning rate."),
    ("lr.constant_steps", int, N1, "fixed step", "Steps at `base` (rsqrt only)."),
    ("lr.schedule", "rsqrt", ("rsqrt", "constant"), "fixed step", "The decay after them."),
    ("optimizer.clipping_threshold", 1.0, POSITIVE, "fixed step optional",
     "Adafactor's update clipping (T5X default); None: none."),
    ("optimizer.decay_rate", 0.8, POSITIVE, "fixed step",
     "Second-moment decay exponent (T5X default)."),
    ("label_smoothing", 0.0, FRACTION, "fixed step", "T5X finetuning default; the paper's none."),
    ("z_loss", 1e-4, Range(0), "fixed step", "T5X's auxiliary log(Z)^2 loss."),
    ("vocab.path", str, None, "fixed", "SentencePiece model."),
    # The training data and how batches are made (data/pipeline/).
    ("data.dataset", str, layout.DATASETS, "fixed", "The release (data/releases/)."),
    ("data.manual_dir", str, None, "fixed", "The release files (TFDS manual_dir)."),
    ("data.tfds_data_dir", "", None, "fixed",
     'Where `python -m tools.build_data` wrote it; "": beside manual_dir.'),
    ("data.num_workers", int, N0, "optional", "Processes making batches; None: one per core."),
    ("data.langs", tuple, None, "fixed", "The training languages."),
    ("data.prompt_template", "<2{lang}>", None, "fixed", "The LangId string fed to the encoder."),
    ("data.max_prompt_len", int, Range(1, 512, open_high=False), "fixed",
     "Prompt tokens with EOS (a LangId prompt needs a few)."),
    ("data.max_target_len", int, Range(1, 1024, open_high=False), "fixed",
     "Caption tokens with EOS (mT5's pretraining lengths bound it)."),
    ("data.corrupt_images", "stop", CORRUPT_IMAGE_POLICIES, "", "A JPEG that does not decode."),
    ("data.pack", False, None, "", "Several examples' text per row (data/pipeline/packing.py)"),
    # The captioner (model/captioner.py).
    ("model.image_size", int, N1, "fixed", "ViT input side in pixels."),
    ("model.fusion", "pooled", captioner.FUSIONS, "fixed",
     "The paper's: one pooled image vector + LangId."),
    ("model.dtype", "float32", tuple(captioner.DTYPES), "fixed",
     "Activations; parameters are float32."),
    ("model.dropout", 0.0, FRACTION, _OPT, "mT5 dropout."),
    ("model.scan", False, None, "fixed",
     "nn.scan over layers: one compiled layer per stack (same checkpoints; faster compiles)."),
    ("model.remat", False, None, "fixed", "Recompute layer activations in the backward pass."),
    ("model.remat_policy", "full", tuple(layers.REMAT_POLICIES), "",
     'What remat keeps: "full" nothing (least memory), "dots" the matmul outputs.'),
    ("model.vit.variant", str, None, "fixed", 'big_vision size/patch name ("B/16", "mu/16").'),
    ("model.vit.pool", str, None, "fixed", '"tok" ([cls] token) or "map" (MAP head).'),
    ("model.vit.posemb", "learn", None, "fixed", "Learned position embeddings."),
    ("model.vit.dropout", float, FRACTION, _OPT, "None: the variant's (none)."),
    *((f"model.vit.{k}", int, N1, _OPT, _SIZE)
      for k in ("width", "depth", "mlp_dim", "num_heads")),
    ("model.t5.variant", str, None, "fixed", 'T5X size name ("mt5-base", "t5-tiny"; model/t5.py).'),
    *((f"model.t5.{k}", int, N1, _OPT, _SIZE) for k in (
        "emb_dim", "num_heads", "head_dim", "mlp_dim", "num_encoder_layers", "num_decoder_layers")),
    ("model.t5.vocab_size", int, N1, _OPT, "None: the vocabulary's, padded to a multiple of 128."),
    # Pretrained parameters; "": none.
    ("init.mt5", "", None, "fixed", "T5X checkpoint of the text tower."),
    ("init.vit", "", None, "fixed", "big_vision .npz of the image tower."),
    ("init.checkpoint", "", None, "fixed", "Another run (its workdir or checkpoints/<step>)."),
    *evaluator_rows("xm3600", "xm3600_cider", "data_dir", "captions.jsonl + images/."),
    *evaluator_rows("coco_dev", "coco_dev_cider", "manual_dir", "The COCO-35L release."),
    ("checkpoint.every", int, N0, "", "Steps between checkpoints (and the last step)."),
    ("checkpoint.keep", 3, N1, "", "How many of the newest are kept."),
    ("checkpoint.best_metric", "eval/cider_d/avg", None, "",
     "checkpoints_best/ keeps the highest of this."),
    # The device mesh (train.py checks that it fits the devices).
    ("mesh.data", -1, N1, "auto step", "Devices on the data axis; -1: what `model` leaves."),
    ("mesh.model", 1, N1, "auto step", "Devices on the model (tensor-parallel) axis."),
    ("mesh.fsdp", False, None, "step", "Also shard parameters' embed axis over `data`."),
))
BY_NAME = {field.name: field for field in FIELDS}


def groups(flag):
    """The top-level names (seed, lr, ...) of the fields with `flag`, in FIELDS' order."""
    return tuple(dict.fromkeys(f.name.split(".")[0] for f in FIELDS if f.has(flag)))


STEP_FIELDS = groups("step")  # What train.py's compiled step reads of the config.


def schema():
    """Every field of a run's config with its default (unlocked, for a config to fill in)."""
    # A placeholder, not None: None could not be set from the command line.
    defaults = {f.name.replace(".", trees.SEP): config_dict.placeholder(f.default)
                if isinstance(f.default, type) else f.default for f in FIELDS}
    return ml_collections.ConfigDict(trees.unflatten_tree(defaults))


def _flatten(tree):
    """{"model.t5.emb_dim": 32, ...} of a nested dict (tuples as the lists JSON reads)."""
    return {path.replace(trees.SEP, "."): list(v) if isinstance(v, tuple) else v
            for path, v in trees.flatten_tree(tree).items()}


# Fields that are gone, saved by earlier runs, with the values that gave what every run does
# now: the release files read as they are or built (the same examples), languages taking
# turns, no crops. A run saved with one of them resumes as it was.
RETIRED = {"data.reader": ("tfds", "files"), "data.mixture": ("uniform",),
           "data.augment": (False,)}
_FIXED_GROUPS = groups("fixed")


def _fixed(name):
    """Whether a resume refuses another value of `name` (one FIELDS has not: of its group)."""
    field = BY_NAME.get(name)
    return field.has("fixed") if field else name.split(".")[0] in _FIXED_GROUPS


def incompatible_changes(saved, current):
    """Returns ["field: saved -> current", ...] for the "fixed" fields that differ."""
    saved, current = _flatten(saved), _flatten(current)
    retired = {name for name, value in saved.items()
               if name not in current and value in RETIRED.get(name, ())}
    return [f"{name}: {saved.get(name)!r} -> {current.get(name)!r}"
            for name in sorted(set(saved) | set(current))
            if _fixed(name) and name not in retired and saved.get(name) != current.get(name)]


def path(workdir):
    return os.path.join(workdir, "config.json")


class ConfigError(errors.InputError):
    """A config field is wrong; the message names it (`config.<key>`)."""


class SavedConfigError(errors.InputError):
    """A run's config.json cannot be read (the message names it, and where it is broken)."""


def load(workdir):
    """The saved config as a dict, or None when the run has none (SavedConfigError)."""
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


def from_saved(saved):
    """The ConfigDict of a saved config (JSON's lists as the tuples the config files give)."""
    def tuples(value):
        if isinstance(value, dict):
            return {k: tuples(v) for k, v in value.items()}
        return tuple(map(tuples, value)) if isinstance(value, list) else value
    return ml_collections.ConfigDict(tuples(saved))


class ResumeRefused(errors.RunError):
    """The checkpoints of a workdir cannot be resumed with this config (the message says why)."""


def check_resume(config, workdir, allow_change):
    """Checks `config` against the config.json of the run it resumes.
    A differing "fixed" field, or a missing or unreadable config.json, raises ResumeRefused
    unless `allow_change`. Returns (the changed fields allowed, the warning lines)."""
    try:
        saved = load(workdir)
        if saved is None:
            raise SavedConfigError(f"{path(workdir)}: missing beside the run's checkpoints")
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


_ABSENT = object()


def _get(config, key):
    """The value of a dotted `key`, or _ABSENT."""
    def child(node, part):
        return node.get(part, _ABSENT) if hasattr(node, "get") else _ABSENT

    return functools.reduce(child, key.split("."), config)


_KINDS = {str: (str, "a string"), bool: (bool, "True or False"),
          tuple: ((tuple, list), "a list of strings")}


def check_value(field, value):
    """ConfigError unless `value` is one `field` allows: its type, range or choices (_ABSENT:
    its default, when it has one)."""
    if value is _ABSENT and not isinstance(field.default, type):
        return
    value = None if value is _ABSENT else value
    if value is None and field.has("optional"):
        return
    kind = field.default if isinstance(field.default, type) else type(field.default)
    if isinstance(field.values, Range):
        if field.has("auto") and value == -1 and type(value) is int:
            return
        types, what = (int, "an integer") if kind is int else ((int, float), "a finite number")
        if not isinstance(value, types) or isinstance(value, bool) or value not in field.values:
            raise ConfigError(f"config.{field.name}={value!r}; expected {what} {field.values}"
                              f"{', or -1' if field.has('auto') else ''}")
    elif isinstance(field.values, tuple):
        if value not in field.values:
            raise ConfigError(f"config.{field.name}={value!r}; known: {', '.join(field.values)}")
    elif kind in _KINDS:
        types, what = _KINDS[kind]
        if not isinstance(value, types) or (kind is tuple and not all(
                isinstance(item, str) for item in value)):
            raise ConfigError(f"config.{field.name}={value!r}; expected {what}")


def check_evaluator(name, eval_config):
    """Checks the fields every evaluator has of config.evals.<name> (ConfigError)."""
    fields = [f for f in FIELDS if f.name.startswith(f"evals.{name}.")] or [
        Field(*row) for row in evaluator_rows(name)]
    for field in fields:
        check_value(field, eval_config.get(field.name.rsplit(".", 1)[1], _ABSENT))


def _check_data(data):
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
    with errors.reraised(ConfigError, ValueError, "config.data.langs: "):
        languages.check_langs(data.langs, known=languages.TRAIN_35L_LANGS,
                              what="training language")


def check(config):
    """Checks `config`'s fields against FIELDS, the mesh, data and model (ConfigError)."""
    for field in FIELDS:
        if field.name.startswith("evals.") or (
                field.name == "lr.constant_steps" and config.lr.schedule != "rsqrt"):
            continue  # The evaluators below; the constant schedule ignores constant_steps.
        check_value(field, _get(config, field.name))
    for name, eval_config in config.get("evals", {}).items():
        check_evaluator(name, eval_config)
    if config.mesh.data == config.mesh.model == -1:
        raise ConfigError("config.mesh.data and config.mesh.model are both -1; at most one "
                          "axis may take the devices the other leaves")
    _check_data(config.data)
    with errors.reraised(ConfigError, ValueError):
        captioner.captioner_config(config.model)


def check_vocab(config, vocab):
    """Checks the fields that depend on the vocabulary (`vocab_size`, `encode`) once loaded."""
    size = config.model.t5.vocab_size
    if size is not None and size < vocab.vocab_size:
        raise ConfigError(f"config.model.t5.vocab_size={size} is smaller than the vocabulary "
                          f"{config.vocab.path} ({vocab.vocab_size} ids); leave it unset "
                          f"(None) for the vocabulary's size")
    langs = dict.fromkeys([*config.data.langs, *(lang for evaluator in config.evals.values()
                                                 for lang in evaluator.get("langs", ()))])
    for lang in langs:
        prompt = prompt_lib.prompt_text(lang, config.data.prompt_template)
        tokens = len(vocab.encode(prompt)) + 1  # + EOS
        if tokens > config.data.max_prompt_len:
            raise ConfigError(f"config.data.max_prompt_len={config.data.max_prompt_len} is too "
                              f"short for the prompt {prompt!r} ({tokens} tokens with EOS)")


def parse_flags(flag_values, argv, config_flag="config"):
    """Parses `argv` into `flag_values` and loads the config; returns the arguments left.
    A misspelled `--config.<field>` or a config file that does not load is one ConfigError."""
    try:
        rest = flag_values(argv)
    except flags.Error as e:
        if str(e).startswith(f"flag --{config_flag}="):  # The config file raised.
            raise _cannot_load(argv, config_flag, e) from None
        lines = [line for line in str(e).splitlines() if line.strip()]
        raise ConfigError(lines[0] if len(lines) < 3 else f"{lines[0]} {lines[-1].strip()}") \
            from None
    except (AttributeError, KeyError) as e:
        if isinstance(e, AttributeError) and "get_config" in str(e):
            raise _cannot_load(argv, config_flag, "it defines no get_config()") from None
        raise ConfigError(_unknown_field_message(e, argv, config_flag)) from None
    except Exception as e:  # noqa: BLE001  A config file that fails to import, for one.
        raise _cannot_load(argv, config_flag, f"{type(e).__name__}: {e}") from None
    if flag_values[config_flag].value is not None:
        try:
            flag_values[config_flag].value.to_dict()
        except Exception as e:  # noqa: BLE001  ml_collections defers a missing file's error.
            raise _cannot_load(argv, config_flag, e) from None
        _lists_from_argv(flag_values[config_flag].value, argv, config_flag)
    return rest


def _lists_from_argv(config, argv, config_flag):
    """A tuple field given as `--config.<field>=a,b,c` is (a, b, c), and the last such flag
    replaces the others, as absl reads a list flag (ml_collections appends the flags' values)."""
    for name, value in _given(argv, f"{config_flag}.").items():
        *parents, key = name.split(".")
        node = _get(config, ".".join(parents)) if parents else config
        if not isinstance(node.get(key), tuple):
            continue
        literal = value.lstrip().startswith(("(", "["))
        with errors.reraised(ConfigError, (ValueError, SyntaxError, TypeError),
                             f"--{config_flag}.{name}={value}: not a list (", ")"):
            items = ast.literal_eval(value) if literal else value.split(",")
            node[key] = tuple(item.strip() if isinstance(item, str) else item for item in items
                              if item != "")


def _given(argv, prefix):
    """{name: value} of the flags `--<prefix><name>=<value>` (or `... <value>`) in `argv`; the
    last of a name wins."""
    given = {}
    for arg, following in zip(argv, [*argv[1:], ""], strict=True):
        if arg.startswith(f"--{prefix}"):
            name, equals, value = arg[2 + len(prefix):].partition("=")
            given[name] = value if equals else following
    return given


def _cannot_load(argv, config_flag, error):
    """'--config=<file>: cannot load it: <the last line of what loading it raised>'."""
    given = _given(argv, config_flag).get("", "")
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    cause = lines[-1].split("earlier failure to load: ")[-1] if lines else type(error).__name__
    return ConfigError(f"--{config_flag}={given}: cannot load it: {cause}")


def _unknown_field_message(error, argv, config_flag):
    """'--config.total_step=20: no such field (did you mean total_steps?)' from ml_collections'."""
    text = str(error).replace("\\n", "\n").replace("\\'", "'")
    fields = re.findall(r"'([A-Za-z_][\w]*)'", text)
    suggestion = re.search(r'Did you mean "([^"]+)"', text)
    where = next((arg for arg in argv if arg.startswith(f"--{config_flag}.") and fields
                  and fields[0] in arg.split("=")[0].split(".")), f"a --{config_flag}.<field> flag")
    hint = f" (did you mean {suggestion.group(1)}?)" if suggestion else ""
    name = fields[0] if fields else text
    return f"{where}: the config has no field {name!r}{hint}"
