"""Evaluates a checkpoint of a run with the evaluators of its config, and writes a results folder.

    python -m evaluation.evaluate --workdir runs/bb [--step N|best] \
        [--evals xm3600,coco_dev] [--langs all|config|en,es,...] \
        [--decode greedy|beam] [--beam_size 4] [--alpha 0.6] [--out DIR] [--name NAME] \
        [--config configs/bb.py] [--config.evals.xm3600.max_images=100]

The run's config.json is the config; `--config` replaces it (its evaluation fields: a model or
vocabulary field that differs from the run's is refused), and `--config.<field>=` overrides.

The results folder (default `<workdir>/eval_step<N>/`) is written whole at the end; if that
fails, the scores are printed and the `error:` line names the temporary folder left.
"""

import os
import sys
import tempfile

import numpy as np
from absl import flags, logging
from ml_collections import config_flags

import errors
from data import languages
from evaluation import cli, report, results_folder
from evaluation import evaluators as evaluators_lib
from evaluation.evaluators import caption_evaluator
from formats import eval_metrics
from model import decode
from training import checkpointing, compilation_cache, run_config
from training import run as run_lib
from training.metrics import Progress


class UsageError(errors.InputError):
    """Bad command-line input; main() prints it as `error: ...` and exits with status 2."""


class ResultsNotWritten(errors.RunError):
    """The evaluation ran but its results folder could not be written; says where they went."""


def _define_flags(flag_values, argv):
    # sys_argv: where ml_collections finds the --config.x overrides (main's argv, not sys.argv).
    given = flags.FlagValues()  # --config and --workdir first: without --config, the run's.
    for name in ("config", "workdir"):
        flags.DEFINE_string(name, None, "", flag_values=given)
    with errors.reraised(UsageError, flags.Error):
        given(argv, known_only=True)
    if given.config is None and given.workdir:
        config = config_flags.DEFINE_config_dict(
            "config", run_lib.read_config(given.workdir), "The run's config (default: its "
            "config.json; --config.x=y works).", flag_values=flag_values, sys_argv=argv)
    else:
        config = config_flags.DEFINE_config_file(
            "config", None, "A config file instead of the run's config.json (`file.py:variant` "
            "and --config.x=y work).", flag_values=flag_values, lock_config=True, sys_argv=argv)
    kw = {"flag_values": flag_values}
    flags.DEFINE_string("workdir", None, "The run's folder (holds checkpoints/).", **kw)
    flags.DEFINE_string("step", None, "Checkpoint step, or 'best' (checkpoints_best/'s; "
                        "default: the latest).", **kw)
    flags.DEFINE_string("evals", None, "Comma-separated names of config.evals to run "
                        "(default: all).", **kw)
    flags.DEFINE_string("langs", "all", "all (every language of an evaluator's that its data "
                        "has) | config | comma-separated codes.", **kw)
    flags.DEFINE_enum("decode", None, ["greedy", "beam"], "Decoding (default: each "
                      "evaluator's config, greedy unless it says otherwise).", **kw)
    flags.DEFINE_integer("beam_size", None, "Beams, with --decode=beam (default 4).", **kw)
    flags.DEFINE_float("alpha", None, "Beam search length-penalty exponent (T5X), with "
                       "--decode=beam (default 0.6).", **kw)
    flags.DEFINE_string("out", None, "Results folder (default <workdir>/eval_step<N>).", **kw)
    flags.DEFINE_string("name", None, "This model's column in table.md (default: the "
                        "workdir's name).", **kw)
    flags.DEFINE_string("compilation_cache", None, "JAX's persistent compilation cache "
                        "(default: $JAX_COMPILATION_CACHE_DIR, else <workdir>/compilation_cache, "
                        "which train.py fills); 'none' turns it off.", **kw)
    return config


def _data_langs(name, cls, eval_config):
    """The languages of `cls` that the evaluator's data has, with a note naming the others."""
    with errors.reraised(UsageError, (FileNotFoundError, ValueError), f"config.evals.{name}: "):
        langs = cls.data_langs(eval_config)
    if len(langs) < len(cls.all_langs):  # data_langs: those of all_langs it has
        print(f"note: {name}: its data has {len(langs)} of its {len(cls.all_langs)} languages "
              f"({', '.join(langs) or 'none'}); the others are left out", flush=True)
    return langs


# Model fields that say how the model runs, not what it computes: they may differ (the run's
# model is evaluated as it was trained).
_HOW_IT_RUNS = ("model.scan", "model.remat", "model.dropout", "model.vit.dropout")


def open_run(workdir, config, names, decoding):
    """The run of `workdir`, evaluated with `config` by evaluators `names`. UsageError when its
    model or vocabulary differs from the run's config.json, or, before anything is allocated,
    when an evaluator decodes longer than the run's longest or its batch x beams (`decoding`'s
    or its own) exceeds the memory here."""
    if not checkpointing.steps(workdir):
        raise _no_checkpoint(workdir)
    run = run_lib.Run.open(workdir)
    changed = [c for c in run_config.incompatible_changes(run.config.to_dict(), config.to_dict())
               if c.startswith(("model.", "vocab.")) and c.split(":")[0] not in _HOW_IT_RUNS]
    if changed:
        raise UsageError(f"config.{changed[0]}: not the model or vocabulary of the run in "
                         f"{run_config.path(workdir)}; leave --config out to evaluate the run "
                         f"with its own config")
    memory, max_len_bound = decode.memory_bytes(), run_lib.max_len_bound(run.config)
    for name in names:
        eval_config = config.evals[name]  # Each has max_decode_len (run_config.check_evaluator).
        try:
            (decoding or decode.Decoding.from_config(eval_config)).check_size(
                run.model.config, eval_config.batch_size, eval_config.max_decode_len,
                max_len_bound, memory)
        except decode.DecodingError as e:
            field = {"max_len": "max_decode_len"}.get(e.setting, e.setting)
            where = (f"config.evals.{name}.{field}" if decoding is None or field != "beam_size"
                     else "--beam_size")
            raise UsageError(f"{where}: {e.problem}") from None
    run.config = config
    return run


def _restore(run, step):
    """(params, step) of the run's checkpoint (parameters only); bad input as UsageError."""
    try:
        params, step = run.restore(step)
    except (FileNotFoundError, checkpointing.IncompatibleCheckpoint) as e:
        raise UsageError(str(e)) from None
    except checkpointing.CheckpointError as e:
        raise UsageError(f"{e}; pass --step with another of "
                         f"{checkpointing.steps(run.workdir)}") from None
    if params is None:
        raise _no_checkpoint(run.workdir, step == "best")
    return params, step


def _no_checkpoint(workdir, best=False):
    return UsageError(f"no checkpoint in {checkpointing.checkpoint_dir(workdir, best)}: train "
                      f"first, or pass the --workdir of a run")


def check_outputs(evaluators):
    """UsageError when two evaluators would write the same files (the same outputs_name)."""
    writers = {}  # outputs_name -> the first evaluator writing its files
    for key, evaluator in evaluators.items():
        if (first := writers.setdefault(evaluator.outputs_name, key)) != key:
            raise UsageError(f"config.evals.{first} and config.evals.{key} write the same files; "
                             f"evaluate them one at a time (--evals) into different --out folders")


def evaluate_checkpoint(config, workdir, *, step=None, names=None, langs="all", decoding=None,
                        out=None, name=None, config_name=None):
    """Evaluates a run's checkpoint with the evaluators of its config; writes the results folder.
    Returns (results folder, {evaluator: {lang: score}}, {evaluator: [its file names]} and
    "metrics.json"); raises UsageError for bad input."""
    names, per_name_langs = _check_request(config, names, langs)
    run = open_run(workdir, config, names, decoding)
    params, step = _restore(run, step)
    setup = caption_evaluator.Setup(run.model, run.vocab, config.data, config.model.image_size)
    with errors.reraised(UsageError, (FileNotFoundError, ValueError)):
        evaluators = evaluators_lib.build(config.evals, setup, names=names,
                                          langs=per_name_langs, decoding=decoding)
    check_outputs(evaluators)
    flag = "--out" if out else "the results folder"
    out = out or os.path.join(workdir, f"eval_step{step}")
    results_folder.check_room(out, evaluators, flag)
    print(f"Evaluating step {step} of {workdir} with {', '.join(evaluators)}", flush=True)
    results = {key: e.run(params, Progress(sum(e.num_images.values()), len(e.langs), key))
               for key, e in evaluators.items()}
    scores = {key: {lang: r.corpus for lang, r in results[key].by_lang.items()}
              for key in evaluators}
    name = name or os.path.basename(os.path.abspath(workdir))
    written = _write_or_fall_back(out, scores, lambda folder: results_folder.write(
        folder, step, evaluators, results, config_name=config_name, workdir=workdir, name=name))
    return out, scores, written


def _check_request(config, names, spec):
    """(evaluator names, {name: languages} or None for --langs=config), checked (UsageError);
    evaluators with none of the languages asked for are left out."""
    names = list(config.evals) if names is None else names
    if unknown := [n for n in names if n not in config.evals]:
        raise UsageError(f"--evals: no evaluator {unknown[0]!r} in config.evals; it has "
                         f"{', '.join(config.evals)}")
    if spec == "config":
        return names, None
    with errors.reraised(UsageError, ValueError):
        classes = {n: evaluators_lib.evaluator_class(n, config.evals[n]) for n in names}
    if spec == "all":
        langs = {n: _data_langs(n, cls, config.evals[n]) for n, cls in classes.items()}
    else:
        known = sorted({lang for cls in classes.values() for lang in cls.all_langs})
        with errors.reraised(UsageError, ValueError, "--langs: "):
            codes = languages.check_langs(spec, known=known)
        langs = {n: tuple(lang for lang in codes if lang in cls.all_langs)
                 for n, cls in classes.items()}
    return [n for n in names if langs[n]], langs


def _write_or_fall_back(out, scores, write):
    """write(out), or: the scores printed, a temporary folder, ResultsNotWritten."""
    try:
        return write(out)
    except OSError as e:
        cause = e.strerror or str(e)
    _print_scores(scores)
    try:
        fallback = os.path.join(tempfile.mkdtemp(prefix="evaluation_"),
                                os.path.basename(os.path.normpath(out)))
        write(fallback)
        saved = f"the results are in {fallback} instead"
    except OSError as e:
        saved = f"nor in a temporary folder ({e.strerror or e}); the scores are printed above"
    raise ResultsNotWritten(f"cannot write the results into {out} ({cause}); {saved}")


def _print_scores(scores):
    for key, by_lang in scores.items():
        avg = report.averages(by_lang)
        print(f"{key}: " + ", ".join(f"{lang} {value:.3f}" for lang, value in by_lang.items()))
        print(f"{key}: average of 35 languages {report.fmt(avg['avg_35'])}, of 36 "
              f"{report.fmt(avg['avg_36'])}, of these {len(by_lang)} "
              f"{np.mean(list(by_lang.values())):.3f}", flush=True)


def check_flags(flag_values):
    """The `Decoding` of --decode or None (UsageError for bad settings)."""
    settings = {name: flag_values[name].value for name in ("beam_size", "alpha")}
    if flag_values.decode is not None:
        return decode.Decoding.create(flag_values.decode, settings, spell="--{}")
    if given := [f"--{name}" for name, value in settings.items() if value is not None]:
        raise UsageError(f"{' and '.join(given)} apply to --decode=beam only; add it, or leave "
                         f"them out")
    return None


def main(argv=None):
    """The command-line tool; returns 0, or exits with status 2 and `error: ...`."""
    argv = list(sys.argv if argv is None else argv)
    flag_values = flags.FlagValues()
    if any(arg in ("-h", "--help", "-help", "--helpfull") for arg in argv[1:]):
        _define_flags(flag_values, argv[:1])
        print(__doc__ + "\nFlags:\n" + flag_values.get_help())
        return 0
    if not errors.asks_for_verbosity(argv):
        logging.set_verbosity(logging.WARNING)  # Library INFO logs off unless asked for.
    try:
        config_flag = _define_flags(flag_values, argv)
        rest = run_config.parse_flags(flag_values, argv)
        if len(rest) > 1:
            raise UsageError(f"unexpected argument {rest[1]!r} (every input is a --flag; see "
                             f"--help)")
        if not flag_values.workdir:
            raise UsageError("--workdir is required (the run's folder)")
        with errors.reraised(UsageError, ValueError, "--"):
            step = checkpointing.parse_step(flag_values.step)
        evaluators_lib.check_run_config(config_flag.value)  # The checks that need no data.
        decoding = check_flags(flag_values)
        names = flag_values.evals.split(",") if flag_values.evals else None
        if flag_values.out:
            cli.check_results_folder(flag_values.out, "--out", eval_metrics.FILE_NAME)
        compilation_cache.enable_from_flag(flag_values.compilation_cache, flag_values.workdir)
        out, scores, paths = evaluate_checkpoint(
            config_flag.value, flag_values.workdir, step=step, names=names,
            langs=flag_values.langs, decoding=decoding, out=flag_values.out,
            name=flag_values.name, config_name=getattr(
                flag_values["config"], "config_filename", run_config.path(flag_values.workdir)))
    except errors.Error as e:
        errors.fail(e)
    _print_scores(scores)
    print(f"Results: {out}")
    for key in scores:  # The files of each evaluator but its predictions.
        print(f"  {key}: {', '.join(paths[key])}, and predictions")
    return 0


if __name__ == "__main__":
    errors.run_main(main)
