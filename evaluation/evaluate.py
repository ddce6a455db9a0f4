r"""Evaluates a checkpoint of a run with the evaluators of its config, and writes a results folder.

    python -m evaluation.evaluate --config configs/bb.py --workdir runs/bb [--step N] \
        [--evals xm3600,coco_dev] [--langs all|config|en,es,...] \
        [--decode greedy|beam] [--beam_size 4] [--alpha 0.6] [--out DIR] [--name NAME] \
        [--config.evals.xm3600.max_images=100]

It parses the flags, restores the checkpoint (the latest, or `--step`),
builds the evaluators of `config.evals` (all of them, or those named by
`--evals`) exactly as train.py does, runs them with progress and ETA, and
writes the results folder (default `<workdir>/eval_step<N>/`):

- `<prefix><lang>.jsonl` per evaluator and language: lines {"image/key",
  "lang", "caption"}, the input of `python -m evaluation.cider`
  (`predictions_<lang>.jsonl` for XM3600, `predictions_coco_dev_<lang>.jsonl`
  for COCO-dev);
- `metrics.json`: every evaluator's metrics, as train.py would log them;
- with an XM3600 evaluator, the report of evaluation/analysis/report.py:
  scores.json (with the paper's 35- and 36-language averages and the
  decoding), scores.csv, per_image.jsonl, table.md (Table 8 layout, with the
  COCO-dev column when a COCO-dev evaluator ran) and bars.png.

`--langs all` gives each evaluator all its languages (XM3600: 36, COCO-dev:
the 35 training languages), `config` those of its config, a list the listed
ones it has. Bad input is one `error: ...` line and exit status 2; nothing
is written before the evaluation has succeeded.
"""

import dataclasses
import json
import os
import sys

import numpy as np
from absl import flags, logging
from ml_collections import config_flags

from data import tokenizer
from evaluation import evaluators as evaluators_lib
from evaluation.analysis import report
from evaluation.evaluators import coco_dev_cider, common, xm3600_cider
from model import captioner
from training import checkpointing, compilation_cache, run_config
from training import state as state_lib
from training.metrics import Progress


class UsageError(ValueError):
    """Bad command-line input; main() prints it as `error: ...` and exits with status 2."""


def _define_flags(flag_values):
    config = config_flags.DEFINE_config_file(
        "config", None, "The run's config file (`file.py:variant` and --config.x=y work).",
        flag_values=flag_values, lock_config=True)
    flags.DEFINE_string("workdir", None, "The run's folder (holds checkpoints/).",
                        flag_values=flag_values)
    flags.DEFINE_integer("step", None, "Checkpoint step (default: the latest).",
                         flag_values=flag_values)
    flags.DEFINE_string("evals", None, "Comma-separated names of config.evals to run "
                        "(default: all).", flag_values=flag_values)
    flags.DEFINE_string("langs", "all", "all | config | comma-separated codes.",
                        flag_values=flag_values)
    flags.DEFINE_enum("decode", None, ["greedy", "beam"], "Decoding (default: each "
                      "evaluator's config, greedy unless it says otherwise).",
                      flag_values=flag_values)
    flags.DEFINE_integer("beam_size", 4, "Beams, with --decode=beam.", flag_values=flag_values)
    flags.DEFINE_float("alpha", 0.6, "Beam search length-penalty exponent (T5X), with "
                       "--decode=beam.", flag_values=flag_values)
    flags.DEFINE_string("out", None, "Results folder (default <workdir>/eval_step<N>).",
                        flag_values=flag_values)
    flags.DEFINE_string("name", None, "This model's column in table.md (default: the "
                        "workdir's name).", flag_values=flag_values)
    flags.DEFINE_string("compilation_cache", None, "JAX's persistent compilation cache "
                        "(default: $JAX_COMPILATION_CACHE_DIR, else <workdir>/compilation_cache, "
                        "which train.py fills); 'none' turns it off.", flag_values=flag_values)
    return config


def resolve_langs(spec, evals_config, names):
    """--langs as {evaluator name: languages}, or None for "config"."""
    if spec == "config":
        return None
    classes = {name: evaluators_lib.evaluator_class(name, evals_config[name]) for name in names}
    if spec == "all":
        return {name: cls.all_langs for name, cls in classes.items()}
    codes = [code.strip() for code in spec.split(",") if code.strip()]
    known = sorted({lang for cls in classes.values() for lang in cls.all_langs})
    unknown = [code for code in codes if code not in known]
    if unknown:
        raise UsageError(f"--langs: unknown language {unknown[0]!r}; known: {', '.join(known)}")
    return {name: tuple(lang for lang in codes if lang in cls.all_langs)
            for name, cls in classes.items()}


def _restore(config, workdir, vocab, step):
    """(model, params, step) of the run's checkpoint, with bad input as UsageError."""
    saved = run_config.load(workdir)
    changed = [c for c in run_config.incompatible_changes(saved or {}, config.to_dict())
               if c.startswith(("model.", "vocab."))] if saved else []
    try:
        return state_lib.restore_params(config, workdir, vocab.vocab_size, step)
    except FileNotFoundError as e:
        raise UsageError(str(e)) from None
    except checkpointing.IncompatibleCheckpoint as e:
        hint = f" (fields that differ from {workdir}/config.json: {'; '.join(changed)})" \
            if changed else ""
        raise UsageError(f"{e}{hint}") from None
    except checkpointing.CheckpointError as e:
        raise UsageError(f"{e}; pass --step with another of {checkpointing.steps(workdir)}") \
            from None


def check_config(config):
    """The checks of the model and evaluator fields that need no data (run_config.ConfigError)."""
    if config is None:
        return
    try:
        captioner.captioner_config(config.model)
        evaluators_lib.check_configs(config.evals)
    except ValueError as e:
        raise run_config.ConfigError(str(e)) from None


def write_predictions(path, keys, lang, captions):
    """Writes {"image/key", "lang", "caption"} lines (the evaluation.cider CLI's input)."""
    with open(path, "w", encoding="utf-8") as f:
        for key, caption in zip(keys, captions, strict=True):
            f.write(json.dumps({"image/key": key, "lang": lang, "caption": caption},
                               ensure_ascii=False) + "\n")


def _of_type(evaluators, cls):
    return next((name for name, e in evaluators.items() if isinstance(e, cls)), None)


def write_results(out, step, evaluators, results, *, name, config_name, workdir):
    """Writes the results folder (see the module docstring)."""
    os.makedirs(out, exist_ok=True)
    metrics = {}
    for key, evaluator in evaluators.items():
        for lang, r in results[key].items():
            write_predictions(os.path.join(out, f"{evaluator.predictions_prefix}{lang}.jsonl"),
                              r.keys, lang, r.captions)
        metrics.update(evaluator.metrics(results[key]))
    with open(os.path.join(out, "metrics.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps({"step": step, **metrics}, indent=2) + "\n")
    xm, dev = _of_type(evaluators, xm3600_cider.Xm3600Cider), \
        _of_type(evaluators, coco_dev_cider.CocoDevCider)
    if xm is None:
        return {}, {}
    scores = {lang: r.corpus for lang, r in results[xm].items()}
    dev_scores = {lang: r.corpus for lang, r in results[dev].items()} if dev else {}
    per_image = {lang: dict(zip(r.keys, r.per_image.tolist(), strict=True))
                 for lang, r in results[xm].items()}
    averages = report.averages(scores)
    summary = {"avg_35": averages["avg_35"], "avg_36": averages["avg_36"],
               "decoding": dataclasses.asdict(evaluators[xm].decoding),
               "workdir": os.path.abspath(workdir)}
    if dev_scores:
        summary["coco_dev_avg_35"] = report.averages(dev_scores)["avg_35"]
    report.write_report(out, scores, evaluators[xm].num_images, per_image=per_image,
                        coco_dev_scores=dev_scores or None, name=name, step=step,
                        config=config_name, extra=summary)
    return scores, dev_scores


def evaluate_checkpoint(config, workdir, *, step=None, names=None, langs="all", decoding=None,
                        out=None, name=None, config_name=None):
    """Evaluates a run's checkpoint with the evaluators of its config; writes the results folder.

    Args:
        config: the run's ConfigDict.
        workdir: the run's folder.
        step: checkpoint step, None for the latest.
        names: evaluator names of `config.evals` (default: all).
        langs: "all", "config" or comma-separated codes (see the module docstring).
        decoding: a `common.Decoding` for every evaluator (default: their configs').
        out: the results folder (default <workdir>/eval_step<step>).
        name: this model's column heading in table.md.
        config_name: recorded in scores.json.

    Returns:
        (results folder, {lang: CIDEr-D on XM3600}, {lang: CIDEr-D on COCO-dev}), the
        dicts empty when that evaluator did not run.

    Raises:
        UsageError: bad input (no checkpoint, unknown step, evaluator or language,
            missing data).
    """
    names = list(config.evals) if names is None else names
    try:
        unknown = [n for n in names if n not in config.evals]
        if unknown:
            raise UsageError(f"--evals: no evaluator {unknown[0]!r} in config.evals; it has "
                             f"{', '.join(config.evals)}")
        if not checkpointing.has_checkpoint(workdir):
            raise UsageError(f"no checkpoint in {checkpointing.checkpoint_dir(workdir)}: train "
                             f"first, or pass the --workdir of a run")
        per_name_langs = resolve_langs(langs, config.evals, names)
        if per_name_langs is not None:  # Evaluators with none of the languages asked for.
            names = [n for n in names if per_name_langs[n]]
        vocab = tokenizer.get_vocabulary(config.vocab.path)
    except FileNotFoundError as e:
        raise UsageError(f"config.vocab.path: {e}") from None
    except ValueError as e:
        raise UsageError(str(e)) from None
    model, params, step = _restore(config, workdir, vocab, step)
    setup = common.Setup.for_model(model, vocab, config.data, config.model.image_size)
    try:
        evaluators = evaluators_lib.build(config.evals, setup, names=names,
                                          langs=per_name_langs, decoding=decoding)
    except (FileNotFoundError, ValueError) as e:
        raise UsageError(str(e)) from None
    print(f"Evaluating step {step} of {workdir} with {', '.join(evaluators)}", flush=True)
    results = {}
    for key, evaluator in evaluators.items():
        progress = Progress(sum(evaluator.num_images.values()), len(evaluator.langs), key)
        results[key] = evaluator.evaluate(params, progress)
    out = out or os.path.join(workdir, f"eval_step{step}")
    scores, dev_scores = write_results(
        out, step, evaluators, results, config_name=config_name, workdir=workdir,
        name=name or os.path.basename(os.path.abspath(workdir)))
    return out, scores, dev_scores


def _print_summary(out, scores, dev_scores):
    fmt = lambda v: "–" if v is None else f"{v:.3f}"  # noqa: E731
    for lang, value in scores.items():
        dev = f"   COCO-dev {dev_scores[lang]:.3f}" if lang in dev_scores else ""
        print(f"  {lang:>4}  XM3600 {value:.3f}{dev}")
    if scores:
        avg = report.averages(scores)
        print(f"XM3600 CIDEr-D average: 35 languages {fmt(avg['avg_35'])}, 36 languages "
              f"{fmt(avg['avg_36'])}, these {len(scores)} {np.mean(list(scores.values())):.3f}")
        print(f"Results: {out}/table.md")
    else:
        print(f"Results: {out}/metrics.json")


def main(argv=None):
    """The command-line tool; returns 0, or exits with status 2 and `error: ...`."""
    argv = list(sys.argv if argv is None else argv)
    flag_values = flags.FlagValues()
    config_flag = _define_flags(flag_values)
    if any(arg in ("-h", "--help", "-help", "--helpfull") for arg in argv[1:]):
        print(__doc__ + "\nFlags:\n" + flag_values.get_help())
        return 0
    if not any(arg in ("-v", "--verbosity") or arg.startswith("--verbosity=")
               for arg in argv[1:]):
        logging.set_verbosity(logging.WARNING)  # Library INFO logs off unless asked for.
    try:
        run_config.parse_flags(flag_values, argv)
        check_config(config_flag.value)
        if flag_values.config is None:
            raise UsageError("--config is required (e.g. --config configs/bb.py)")
        if not flag_values.workdir:
            raise UsageError("--workdir is required (the run's folder)")
        decoding = None
        if flag_values.decode:
            try:
                decoding = common.Decoding(flag_values.decode, flag_values.beam_size,
                                           flag_values.alpha)
            except ValueError as e:
                raise UsageError(str(e)) from None
        names = flag_values.evals.split(",") if flag_values.evals else None
        compilation_cache.enable_from_flag(flag_values.compilation_cache, flag_values.workdir)
        out, scores, dev_scores = evaluate_checkpoint(
            config_flag.value, flag_values.workdir, step=flag_values.step, names=names,
            langs=flag_values.langs, decoding=decoding, out=flag_values.out,
            name=flag_values.name, config_name=flag_values["config"].config_filename)
    except (UsageError, run_config.ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    _print_summary(out, scores, dev_scores)
    return 0


if __name__ == "__main__":
    main()
