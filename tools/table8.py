"""Table 8 beside the paper's baselines, for a results folder or any captioner's predictions.

    python -m tools.table8 RESULTS_DIR [--name NAME]
    python -m tools.table8 RESULTS_DIR --predictions FILE --references captions.jsonl \
        [--langs en,es] [--name NAME]

The first redraws the report (evaluation/report.py) from RESULTS_DIR's scores.json; the second
scores FILE (repeatable) with CIDEr-D and writes RESULTS_DIR whole, as the checkpoint tool would.
"""

import pathlib
import shlex

import errors
import files
from evaluation import cider, cli
from evaluation.report import PAPER_SCORES_FILE, write_outputs, write_report
from formats import predictions as predictions_format
from formats import scores as scores_format
from tools import cli as tool_cli


def write_scored(results_dir, results, predictions, *, name, paper_dir=None):
    """Writes `--predictions`'s results folder whole; returns {file kind: path}."""
    with files.replacing_folder(results_dir) as folder:
        write_outputs(folder, {lang: (r.keys, [predictions[lang][key] for key in r.keys],
                                      r.per_image) for lang, r in results.items()})
        written = write_report(folder, {lang: r.score for lang, r in results.items()},
                               {lang: len(r.keys) for lang, r in results.items()}, name=name,
                               paper_dir=paper_dir)
    # The paths in the folder renamed in (`folder`, where they were written, is gone).
    return {kind: pathlib.Path(results_dir) / path.name for kind, path in written.items()}


def _cider_command(args):
    """python -m tools.cider on report's --predictions and --references, --allow-missing."""
    words = ["--references", args.references] + [
        word for path in args.predictions for word in ("--predictions", path)] + (
        ["--langs", args.langs] if args.langs else [])
    return f"python -m tools.cider {shlex.join(words)} --allow-missing"


def _score(args):
    """({lang: LanguageScore}, the predictions) of --predictions against --references."""
    langs = [code.strip() for code in args.langs.split(",") if code.strip()] \
        if args.langs else None
    references = tool_cli.read_references(args.references)
    predictions = predictions_format.read_files(args.predictions, langs)
    # Table 8's averages are over every image.
    results = cider.score_languages(
        references, predictions, langs=langs, keep_scorers=False,
        missing_hint=f"a report needs one for every image ({_cider_command(args)} scores only "
                     f"the images that have one)")
    return results, predictions


def _parser():
    parser = tool_cli.ArgumentParser(prog="python -m tools.table8",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("results_dir", help="results folder (with scores.json, or to write)")
    parser.add_argument("--name", default=None, help="this model's column heading "
                        "(default: the folder name)")
    parser.add_argument("--predictions", metavar="FILE", action="append",
                        help="score FILE (a predictions file of any kind, as python -m "
                             "tools.cider's; repeatable) and write RESULTS_DIR from it")
    parser.add_argument("--references", metavar="captions.jsonl",
                        help="with --predictions: the XM3600 references")
    parser.add_argument("--langs", help="with --predictions: the languages to score (default: "
                        "all of the file's); one: the language of entries without \"lang\"")
    parser.add_argument("--paper-dir", default=None,
                        help=f"folder with {PAPER_SCORES_FILE} (default: the repository's "
                        "paper_tables/)")
    return parser


def main(argv=None):
    """Writes the report of a results folder, or scores predictions into one; returns 0."""
    parser = _parser()
    args = parser.parse_args(argv)
    results_dir = pathlib.Path(args.results_dir)
    cli.finish_swap(results_dir, tidy=True)  # It writes the folder too.
    name = args.name or results_dir.resolve().name
    if args.predictions or args.references or args.langs:
        if not (args.predictions and args.references):
            parser.error("--predictions and --references go together")
        cli.check_results_folder(results_dir, "RESULTS_DIR", scores_format.file_name())
        results, predictions = _score(args)
        try:
            paths = write_scored(results_dir, results, predictions, name=name,
                                 paper_dir=args.paper_dir)
        except OSError as e:  # A full disk: the scores are not lost.
            for lang, r in sorted(results.items()):
                print(f"{lang}\tCIDEr-D {r.score:.6f}\t{len(r.keys)} images")
            raise errors.InputError(f"{results_dir}: cannot write the results ({e.strerror or e})"
                                    f"; nothing there was changed; the scores are printed "
                                    f"above") from None
    else:
        summary = scores_format.read(results_dir / scores_format.file_name())
        try:
            paths = write_report(
                results_dir, summary["scores"], summary["num_images"],
                coco_dev_scores=summary.get("coco_dev_scores"), name=name,
                step=summary.get("step"), config=summary.get("config"),
                paper_dir=args.paper_dir,
                extra={k: v for k, v in summary.items() if k not in scores_format.FIELDS})
        except OSError as e:
            raise errors.InputError(f"{results_dir}: cannot write the report ({e.strerror or e})"
                                    f"; each of its files is whole (old or new)") from None
    print(f"{results_dir}: {', '.join(path.name for path in paths.values())}")
    return 0


if __name__ == "__main__":
    errors.run_main(main)
