"""Evaluators, which the training loop and the checkpoint tool run by name.

`config.evals` maps a name to a ConfigDict: `type`, `every` (0: only on request), `batch_size`,
`max_decode_len`, `max_images`, `langs`, optional decoding fields, and the evaluator's own. `type`
is a key of `EVALUATORS` or a "module:Class" path. The class is built as `cls(name, eval_config,
setup, langs=None, decoding=None)`; `run(params)` returns `{metric: value}`, keeping the captions
and per-image scores (`by_lang`). It subclasses `caption_evaluator.CaptionEvaluator`.
"""

import importlib

import errors
from model import decode
from training import run_config

# type -> "module:Class", imported when a config names it.
EVALUATORS = {
    "xm3600_cider": "evaluation.evaluators.xm3600_cider:Xm3600Cider",
    "coco_dev_cider": "evaluation.evaluators.coco_dev_cider:CocoDevCider",
}


def evaluator_class(name, eval_config):
    """The class of `config.evals.<name>`, or a ValueError naming the key and the known types."""
    kind = eval_config.get("type", None)
    module, colon, cls = str(EVALUATORS.get(kind, kind)).partition(":")
    if not colon:
        raise ValueError(f"config.evals.{name}.type={kind!r}; known: {', '.join(EVALUATORS)}, "
                         f"or a 'module:Class' path")
    with errors.reraised(ValueError, (ImportError, AttributeError),
                         f"config.evals.{name}.type={kind!r}: "):
        return getattr(importlib.import_module(module), cls)


def _checked_class(name, eval_config):
    """The class of `config.evals.<name>` once its fields are checked (ValueError naming one)."""
    cls = evaluator_class(name, eval_config)
    run_config.check_evaluator(name, eval_config)  # The fields every evaluator has.
    decode.Decoding.from_config(eval_config, spell=f"config.evals.{name}.{{}}")
    cls.check_config(name, eval_config)
    return cls


def check_run_config(config, best_metric=None):
    """The checks of a run's whole config that need no data: the schema's and each evaluator's
    (`check_configs`), as a run_config.ConfigError naming the field."""
    run_config.check(config)
    with errors.reraised(run_config.ConfigError, ValueError):
        check_configs(config.evals, best_metric)


def check_configs(evals_config, best_metric=None):
    """Checks `config.evals` without loading data (ValueError naming a field), and that
    `best_metric` is one the in-loop evaluators log."""
    logged = []
    for name, eval_config in evals_config.items():
        cls = _checked_class(name, eval_config)
        if eval_config.every:
            logged += cls.metric_names_for(cls.config_langs(name, eval_config.langs))
    if logged and best_metric is not None and best_metric not in logged:
        raise ValueError(f"config.checkpoint.best_metric={best_metric!r} is not logged by the "
                         f"in-loop evaluators; they log {', '.join(logged)}")


def build(evals_config, setup, *, names=None, langs=None, decoding=None):
    """{name: evaluator} of `config.evals` (those of `names`, default all), in config order.
    `langs` and `decoding` replace the configs'. Raises ValueError naming what is wrong."""
    names = list(evals_config) if names is None else list(names)
    if unknown := [n for n in names if n not in evals_config]:
        raise ValueError(f"no evaluator {', '.join(map(repr, unknown))} in config.evals; it "
                         f"has {', '.join(evals_config) or 'none'}")
    built, owner = {}, {}
    for name in names:
        cls = _checked_class(name, evals_config[name])
        try:
            evaluator = cls(name, evals_config[name], setup, langs=(langs or {}).get(name),
                            decoding=decoding)
        except (FileNotFoundError, ValueError) as e:  # Its data: named by its config.
            where = f"config.evals.{name}"
            raise type(e)(str(e) if str(e).startswith(where) else f"{where}: {e}") from None
        for metric in evaluator.metric_names:
            if metric in owner:
                raise ValueError(f"config.evals.{name} and config.evals.{owner[metric]} both "
                                 f"log {metric}; keep one of them")
            owner[metric] = name
        built[name] = evaluator
    return built
