"""The results folder of the checkpoint tool: what goes in it, the room it needs, written whole
(beside its place, renamed onto it at the end).

A folder evaluated again is the tool's own: its files the evaluation rewrites are replaced (and
named), every other file (a user's notes) is kept, and predictions it would not recompute
(other languages or evaluators) are refused before the evaluation, named. Every reader of
results folders calls `cli.finish_swap` first.
"""

import os
import shutil

import numpy as np

import errors
import files
from evaluation import cli, report
from formats import eval_metrics
from formats import per_image as per_image_format
from formats import predictions as predictions_format

# Bytes of one image in one language, beyond its key (twice) and its caption: the JSON of a
# predictions line and of a per-image line (a score of up to 20 digits), the language twice.
LINE_BYTES = 120
# Bytes of a decoded token in a caption's UTF-8, a generous mean (a SentencePiece token of the
# mT5 vocabulary is 3-4 Latin letters, or one or two characters of 3 bytes in CJK scripts).
TOKEN_BYTES = 4
# An evaluator's report files (the Table 8 chart is the largest, ~0.1 MB).
REPORT_BYTES = 1 << 20


def needed_bytes(evaluators):
    """The room a results folder of `evaluators` needs, every caption at its longest."""
    total = 0
    for evaluator in evaluators.values():
        for keys in evaluator.data.keys.values():
            total += len(keys) * (LINE_BYTES + TOKEN_BYTES * evaluator.max_decode_len)
            total += 2 * sum(map(len, keys))
        total += REPORT_BYTES
    return total


def check_room(out, evaluators, flag, folder=None):
    """InputError (naming `flag`) when `out`'s file system has less room than the results need,
    or when `out` holds predictions the evaluation would not write again."""
    cli.finish_swap(out, tidy=True)
    folder = folder or cli.check_results_folder(out, flag, eval_metrics.FILE_NAME)
    fresh = {predictions_format.file_name(lang, e.outputs_name)
             for e in evaluators.values() for lang in e.langs}
    stale = sorted(name for name in (os.listdir(out) if os.path.isdir(out) else ())
                   if predictions_format.is_file_name(name) and name not in fresh)
    if stale:
        raise errors.InputError(
            f"{flag} {out} holds predictions this evaluation does not recompute "
            f"({', '.join(stale)}); evaluate their languages and evaluators too, or choose "
            f"another {flag}")
    stat = os.statvfs(folder)  # The room an unprivileged writer has.
    needed, free = needed_bytes(evaluators), stat.f_bavail * stat.f_frsize
    if free < needed:
        images = sum(sum(e.num_images.values()) for e in evaluators.values())
        raise errors.InputError(
            f"{flag} {out}: {free / 1e6:.1f} MB free there, and the results need up to "
            f"{needed / 1e6:.1f} MB ({images} captions of images x languages, each up to "
            f"{max(e.max_decode_len for e in evaluators.values())} tokens); make room or "
            f"choose another --out")


def write(out, step, evaluators, results, *, name, config_name, workdir):
    """Writes the results folder `out` whole from each evaluator's `results`.
    Returns {evaluator name: [its file names but the predictions]}, and metrics.json's."""
    metrics = {name: value for key in evaluators for name, value in results[key].items()}
    coco_dev = next(({lang: r.corpus for lang, r in results[key].by_lang.items()}
                     for key, evaluator in evaluators.items()
                     if evaluator.paper_column == "coco_dev"), None)
    checkpoint = dict(name=name, step=step, config=config_name)
    with files.replacing_folder(out) as folder:
        eval_metrics.write(os.path.join(folder, eval_metrics.FILE_NAME), step, metrics)
        written = {}
        for key, evaluator in evaluators.items():
            by_lang = results[key].by_lang
            report.write_outputs(folder, {lang: (r.keys, r.captions, r.per_image)
                                          for lang, r in by_lang.items()}, evaluator.outputs_name)
            paths = _write_report(folder, evaluator, by_lang, coco_dev, checkpoint,
                                  os.path.abspath(workdir))
            written[key] = [per_image_format.file_name(evaluator.outputs_name)] + [
                os.path.basename(path) for path in paths.values()]
        replaced, kept = _keep_the_rest(out, folder)
    if replaced:
        print(f"{out}: replaced the previous results' {', '.join(replaced)}"
              + (f"; kept {', '.join(kept)}" if kept else ""), flush=True)
    written[eval_metrics.FILE_NAME] = [eval_metrics.FILE_NAME]
    return written


def _keep_the_rest(out, folder):
    """Links (or copies) into `folder` every entry of the previous `out` it has not written;
    returns (names replaced, names kept), sorted."""
    old = sorted(os.listdir(out)) if os.path.isdir(out) else []
    new = set(os.listdir(folder))
    for name in old:
        if name not in new:
            source, target = os.path.join(out, name), os.path.join(folder, name)
            if os.path.isdir(source) and not os.path.islink(source):
                shutil.copytree(source, target, symlinks=True, copy_function=_link_or_copy)
            else:
                _link_or_copy(source, target)
    return [n for n in old if n in new], [n for n in old if n not in new]


def _link_or_copy(source, target):
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:
        shutil.copy2(source, target, follow_symlinks=False)


def _write_report(folder, evaluator, by_lang, coco_dev, checkpoint, workdir):
    """An evaluator's report: Table 8 for the XM3600 column, else its own; {kind: path}."""
    scores = {lang: r.corpus for lang, r in by_lang.items()}
    averages = report.averages(scores)
    extra = {"avg_35": averages["avg_35"], "avg_36": averages["avg_36"],
             "decoding": evaluator.decoding.as_dict(), "workdir": workdir}
    if evaluator.paper_column == "xm3600":
        if coco_dev:
            extra["coco_dev_avg_35"] = report.averages(coco_dev)["avg_35"]
        return report.write_report(folder, scores, evaluator.num_images,
                                   coco_dev_scores=coco_dev or None, extra=extra, **checkpoint)
    # An image whose score is undefined (NaN: VIFIDEL's without a known label) is not counted.
    scored = {lang: int(np.count_nonzero(~np.isnan(r.per_image))) for lang, r in by_lang.items()}
    return report.write_metric_report(
        folder, evaluator.outputs_name, evaluator.metric, evaluator.title, scores, scored,
        with_quz="quz" in evaluator.all_langs, extra=extra, **checkpoint)
