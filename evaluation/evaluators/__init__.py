"""Evaluators that plug into the training loop and the checkpoint tool by name.

`config.evals` is a dict of named evaluator configs; each has a `type`, a key
of `EVALUATORS` below, and `every` (steps between runs; 0 = only when the
checkpoint tool asks). `build` turns it into evaluator objects with what
they need (`caption_evaluator.Setup`: vocabulary, prompts, image size, the
compiled decoder); each `run(params)` returns `{metric name: value}`, with the
captions and per-image scores behind them for the checkpoint tool, which
writes the files (the contract: caption_evaluator.py). Adding an evaluator is a
module with its class and one entry in the table; the loop and the checkpoint
tool need no change.
"""

import importlib

from model import decode

# type -> "module:Class", imported when a config names it: the training process loads only
# the evaluators it runs (VIFIDEL, a tool, brings word vectors and POT).
EVALUATORS = {
    "xm3600_cider": "evaluation.evaluators.xm3600_cider:Xm3600Cider",
    "coco_dev_cider": "evaluation.evaluators.coco_dev_cider:CocoDevCider",
    "vifidel": "tools.vifidel.evaluator:Xm3600Vifidel",
}


def _is_count(value, low):
    """An integer (not a bool) >= low."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def evaluator_class(name, eval_config):
    """The class of `config.evals.<name>`, or a ValueError naming the key and the known types."""
    kind = eval_config.get("type", None)
    if kind not in EVALUATORS:
        raise ValueError(f"config.evals.{name}.type={kind!r}; known: {', '.join(EVALUATORS)}")
    entry = EVALUATORS[kind]
    if not isinstance(entry, str):  # A class put in the table directly.
        return entry
    module, _, cls = entry.partition(":")
    return getattr(importlib.import_module(module), cls)


def check_configs(evals_config, best_metric=None):
    """Checks `config.evals` without loading anything: types, counts, decoding, languages.

    Counts are integers: `every` >= 0, `batch_size` and `max_decode_len` >= 1, `max_images`
    None (all) or >= 1 (a negative one would slice images off the end, 0 leave none);
    `decode` and its settings must make a `Decoding` (model/decode.py: greedy or beam here).

    Args:
        evals_config: `config.evals`.
        best_metric: `config.checkpoint.best_metric`, which an in-loop evaluator must log
            (when there is one).

    Returns:
        The metric names the in-loop evaluators (`every` > 0) log.

    Raises:
        ValueError: naming the `config.evals.<name>.<field>` at fault.
    """
    logged = []
    for name, eval_config in evals_config.items():
        cls = evaluator_class(name, eval_config)
        for field in ("every", "batch_size", "max_decode_len"):
            value = eval_config.get(field, None)
            low = 0 if field == "every" else 1
            if not _is_count(value, low):
                raise ValueError(f"config.evals.{name}.{field}={value!r}; expected an integer "
                                 f">= {low}")
        max_images = eval_config.get("max_images", None)
        if max_images is not None and not _is_count(max_images, 1):
            raise ValueError(f"config.evals.{name}.max_images={max_images!r}; expected None "
                             f"(every image) or an integer >= 1")
        decode.Decoding.from_config(eval_config, spell=f"config.evals.{name}.{{}}")
        cls.check_config(name, eval_config)
        langs = cls.config_langs(name, eval_config.langs)
        if eval_config.every:
            logged += cls.metric_names_for(langs)
    if logged and best_metric is not None and best_metric not in logged:
        raise ValueError(f"config.checkpoint.best_metric={best_metric!r} is not logged by the "
                         f"in-loop evaluators; they log {', '.join(logged)}")
    return logged


def build(evals_config, setup, *, names=None, langs=None, decoding=None):
    """Builds the evaluators of `config.evals`.

    Args:
        evals_config: `config.evals`, {name: evaluator ConfigDict}.
        setup: a `caption_evaluator.Setup`.
        names: build only these (default: all).
        langs: {name: languages} instead of the configs' (the checkpoint tool's --langs).
        decoding: a `model.decode.Decoding` for all of them instead of the configs'.

    Returns:
        {name: evaluator}, in config order.

    Raises:
        ValueError: an unknown name or type, a bad field (named), or two
            evaluators that would log the same metric.
    """
    names = list(evals_config) if names is None else list(names)
    unknown = [n for n in names if n not in evals_config]
    if unknown:
        raise ValueError(f"no evaluator {', '.join(map(repr, unknown))} in config.evals; it "
                         f"has {', '.join(evals_config) or 'none'}")
    built, owner = {}, {}
    for name in names:
        cls = evaluator_class(name, evals_config[name])
        evaluator = cls(name, evals_config[name], setup, langs=(langs or {}).get(name),
                        decoding=decoding)
        for metric in evaluator.metric_names:
            if metric in owner:
                raise ValueError(f"config.evals.{name} and config.evals.{owner[metric]} both "
                                 f"log {metric}; keep one of them")
            owner[metric] = name
        built[name] = evaluator
    return built

