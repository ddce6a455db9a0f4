"""Command line of the CIDEr engine: scores a predictions file against XM3600 references.

    python -m tools.cider --references captions.jsonl --predictions preds.jsonl \
        [--langs en,es] [--metric cider-d|cider] [--json] [--per-image OUT.jsonl] \
        [--df FILE] [--save-df FILE] [--allow-missing] [--segmenter char|word] \
        [--reference-field caption|caption/tokenized]

See docs/cider.md.
"""

import contextlib
import ctypes
import gc
import json
import os
import sys
import threading

import numpy as np

import errors
from data.releases import xm3600 as xm3600_release
from evaluation.cider import per_language, scorer, text
from evaluation.cider.df import load_document_frequencies, save_document_frequencies
from formats import per_image, predictions
from tools import cli as tool_cli


def _format_table(results, metric):
    name = {"cider-d": "CIDEr-D", "cider": "CIDEr"}[metric]
    lines = [f"{'lang':<6}{'images':>8}{name:>10}"] + [
        f"{r.lang:<6}{len(r.keys):>8}{r.score:>10.4f}" for r in results.values()]
    average = float(np.mean([r.score for r in results.values()]))
    count = f"{len(results)} language{'s' if len(results) != 1 else ''}"
    lines.append(f"{'average':<6}{'':>8}{average:>10.4f}   ({count}; "
                 f"pycocoevalcap scale, x100 in PaLI papers)")
    return "\n".join(lines)


def _parser():
    parser = tool_cli.ArgumentParser(
        prog="python -m tools.cider",
        description="CIDEr-D / CIDEr of predictions against XM3600 references, per language.")
    parser.add_argument("--references", required=True,
                        help="XM3600 captions.jsonl (release layout)")
    parser.add_argument("--predictions", required=True, action="append",
                        help='JSONL of {"image/key", "lang", "caption"} or {"image_id", '
                             '"caption"}, a results list [{"image_id", "caption"}] or an '
                             'object {key: caption}; repeatable')
    parser.add_argument("--langs", help="comma-separated languages (default: all predicted; "
                        "one: the language of entries without \"lang\")")
    parser.add_argument("--metric", choices=scorer.METRICS, default="cider-d")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--per-image", metavar="OUT.jsonl",
                        help='write {"image/key", "lang", "score"} lines')
    parser.add_argument("--df", metavar="FILE", help="document frequencies to use")
    parser.add_argument("--save-df", metavar="FILE",
                        help="write the document frequencies used (one file, all languages)")
    parser.add_argument("--allow-missing", action="store_true",
                        help="score only images that have a prediction")
    parser.add_argument("--segmenter", choices=text.SEGMENTERS, default="char",
                        help="ja/th/zh: characters (default) or words (needs jieba, "
                             "fugashi+unidic-lite, pythainlp)")
    parser.add_argument("--reference-field", choices=per_language.REFERENCE_FIELDS,
                        default="caption")
    return parser


def _keep_freed_memory():
    """Has glibc's malloc keep freed memory for reuse, saving page faults (elsewhere, nothing)."""
    if not hasattr(os, "confstr") or "CS_GNU_LIBC_VERSION" not in os.confstr_names:
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_top_pad, m_mmap_threshold, m_arena_max = -1, -2, -3, -8
    for option, value in ((m_arena_max, 1), (m_mmap_threshold, 32 << 20),
                          (m_trim_threshold, 1 << 30), (m_top_pad, 64 << 20)):
        mallopt(option, value)


_BLAS_MODULE = "scipy.linalg.cython_blas"


def _start_warm_up(metric, own_process):
    """Loads the compiled loops and compiles the kernel for its smallest padded size, on a
    thread of its own; errors are left to the real scoring. In a process of its own, numba is
    kept from importing scipy.linalg to probe for BLAS, which our loops never call."""
    skip_blas = own_process and "numba.np.arraymath" not in sys.modules
    if skip_blas:
        sys.modules.setdefault(_BLAS_MODULE, None)

    def run():
        # The same error comes back where it is reported.
        with contextlib.suppress(Exception):
            scorer.CiderScorer([["a b c", "a b"], ["b c d"]], "en", metric).score(["a b", "c d"])
        if skip_blas and sys.modules.get(_BLAS_MODULE, 0) is None:
            del sys.modules[_BLAS_MODULE]
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _score(args, own_process):
    """Reads the files and scores; returns the results."""
    references = xm3600_release.read_references(args.references, args.reference_field)
    langs = [code.strip() for code in (args.langs or "").split(",") if code.strip()]
    preds = predictions.read_files(args.predictions, langs)
    if own_process:
        # Nor what was read, which lives until the end.
        gc.freeze()
    df = load_document_frequencies(args.df) if args.df else None
    # Without --save-df no scorer is kept: each language's tables are
    # freed once it is scored, and the next reuses their memory.
    results = per_language.score_languages(
        references, preds, langs=args.langs, metric=args.metric, df=df,
        segmenter=args.segmenter, reference_field=args.reference_field,
        allow_missing=args.allow_missing, keep_scorers=bool(args.save_df))
    for r in results.values():
        if r.num_skipped:
            print(f"{r.lang}: scored {len(r.keys)} of {len(r.keys) + r.num_skipped} "
                  f"images; skipped {r.num_skipped} without a prediction", file=sys.stderr)
    return results


def _write_outputs(args, results):
    """Writes --per-image and --save-df, each whole or not at all, after the scores are printed."""
    outputs = []
    if args.per_image:
        outputs.append((args.per_image, lambda: per_image.write(args.per_image, {
            r.lang: dict(zip(r.keys, r.per_image.tolist(), strict=True))
            for r in results.values()})))
    if args.save_df:
        outputs.append((args.save_df, lambda: save_document_frequencies(
            args.save_df, [r.scorer.document_frequency for r in results.values()])))
    for path, write in outputs:
        try:
            write()
        except OSError as e:
            raise errors.InputError(f"cannot write {path} ({e.strerror or e}); the scores are "
                                    f"printed above") from None


def main(argv=None, own_process=False):
    """Runs the CLI; returns the exit status (2 for bad input).
    `own_process`: nothing else runs in the process, so process-wide settings may change."""
    args = _parser().parse_args(argv)
    if own_process:
        _keep_freed_memory()
        # The modules imported so far stay: the collector need not walk them
        # each time reading the files allocates.
        gc.freeze()
    # Loading the compiled code overlaps with reading the files.
    warm_up = _start_warm_up(args.metric, own_process)
    try:
        for flag, path in (("--per-image", args.per_image), ("--save-df", args.save_df)):
            if path:
                tool_cli.check_output_file(path, flag)
        results = _score(args, own_process)
    except (errors.Error, OSError) as e:
        return errors.print_error(e)
    finally:
        warm_up.join()  # not left compiling at exit
    if args.json:
        print(json.dumps({
            "metric": args.metric,
            "scores": {r.lang: r.score for r in results.values()},
            "average": float(np.mean([r.score for r in results.values()])),
            "num_images": {r.lang: len(r.keys) for r in results.values()},
        }, ensure_ascii=False), flush=True)
    else:
        print(_format_table(results, args.metric), flush=True)
    try:
        _write_outputs(args, results)
    except errors.Error as e:
        return errors.print_error(e)
    return 0


if __name__ == "__main__":
    errors.run_main(lambda: main(own_process=True))
