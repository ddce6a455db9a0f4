"""Compares two evaluated checkpoints per language, with paired bootstrap confidence intervals.

    python -m tools.analysis.compare RESULTS_A RESULTS_B [--samples 1000] [--seed 0] \
        [--out DIR] [--json] [--references captions.jsonl [--langs en]]

reads `per_image.jsonl` of both results folders (written by `python -m evaluation.evaluate`
or `python -m tools.table8 --predictions`; read by formats/per_image.py), or scores a
predictions file of any kind (formats/predictions.py) given instead against --references
as `tools.table8 --predictions` would, and prints, per
language the two share (a note names those only one of them has), the delta CIDEr-D (B - A)
with a 95% paired bootstrap interval: the
images are resampled with replacement, the same draw for A and B, and the interval is the
2.5 and 97.5 percentiles of the resampled deltas. A delta whose interval excludes 0 is
flagged as significant. The average over languages gets an interval the same way; when all
languages share one image set (XM3600) one draw of images serves every language, so the
interval of the average accounts for the images being common to all languages.

The per-image scores are held fixed while resampling: CIDEr-D's document frequencies come
from the references, and a corpus score is the mean of its per-image scores.
"""

import json
import os
import pathlib
import re
import sys

import numpy as np

import errors
import files
from data import languages
from evaluation import cider, cli
from formats import per_image, predictions
from tools import cli as tool_cli

_EXAMPLES = 3


class ResultsError(errors.InputError):
    """Two results folders that cannot be compared: a missing per_image.jsonl, no language in
    common, or other images."""


def read_per_image(results_dir, references=None, langs=None):
    """{lang: {image key: score}} of a results folder, or of a predictions file scored with
    CIDEr-D against `references` (`xm3600_release.read_references`) in `langs`.

    Raises:
        ResultsError: no per_image.jsonl in the folder, or a file without references.
        errors.InputError: a malformed file (file:line).
    """
    if os.path.isfile(results_dir):
        if references is None:
            raise ResultsError(
                f"{results_dir} is a predictions file, not a results folder: give --references "
                f"with XM3600's captions.jsonl to score it here")
        results = cider.score_languages(
            references, predictions.read_files([results_dir], langs), langs=langs,
            keep_scorers=False, missing_hint="compare pairs the models image by image: it "
            "needs a prediction of every image")
        return {lang: dict(zip(r.keys, r.per_image.tolist(), strict=True))
                for lang, r in results.items()}
    cli.finish_swap(results_dir)
    if os.path.exists(results_dir) and not os.path.isdir(results_dir):  # A FIFO, a device.
        raise ResultsError(f"results folder {results_dir} is {files.kind(results_dir)}, not a "
                           f"folder")
    path = pathlib.Path(results_dir) / per_image.file_name()
    if not path.is_file():
        raise ResultsError(f"{results_dir}: no {per_image.file_name()} (expected {path}): not "
                           f"a results folder of python -m evaluation.evaluate or python -m "
                           f"tools.table8")
    return per_image.read(path)


def _examples(keys):
    keys = sorted(keys)
    shown = ", ".join(map(repr, keys[:_EXAMPLES]))
    return shown + (", ..." if len(keys) > _EXAMPLES else "")


def left_out(scores_a, scores_b, name_a="A", name_b="B"):
    """A note naming the languages only one of two results has, or "" when they have the same.

    Raises:
        ResultsError: the two have no language in common.
    """
    only_a = _ordered(set(scores_a) - set(scores_b))
    only_b = _ordered(set(scores_b) - set(scores_a))
    if not set(scores_a) & set(scores_b):
        raise ResultsError(f"{name_a} and {name_b} have no language in common ({name_a}: "
                           f"{', '.join(_ordered(scores_a))}; {name_b}: "
                           f"{', '.join(_ordered(scores_b))})")
    parts = [f"{', '.join(langs)} only in {name}" for langs, name in ((only_a, name_a),
                                                                       (only_b, name_b)) if langs]
    return f"note: comparing the languages both have; left out: {'; '.join(parts)}" \
        if parts else ""


def _ordered(langs):
    return [lang for lang in languages.XM3600_LANGS if lang in langs]


def align(scores_a, scores_b, name_a="A", name_b="B"):
    """Pairs the per-image scores of two results on the languages they share and their images.

    Args:
        scores_a, scores_b: {lang: {image key: score}} as from `read_per_image`.
        name_a, name_b: how to call the two results in error messages (their folders).

    Returns:
        {lang: (keys, a, b)} for the languages both have, in the paper's language order; keys
        is a sorted list, a and b are float arrays [num_images] in the order of keys
        (`left_out` names the languages left out).

    Raises:
        ResultsError: no language in common, or the image sets of a shared language differ.
    """
    left_out(scores_a, scores_b, name_a, name_b)
    paired = {}
    for lang in _ordered(set(scores_a) & set(scores_b)):
        keys_a, keys_b = set(scores_a[lang]), set(scores_b[lang])
        if keys_a != keys_b:
            missing_b, missing_a = keys_a - keys_b, keys_b - keys_a
            raise ResultsError(
                f"language {lang!r}: {name_a} and {name_b} scored different images "
                f"({len(keys_a)} vs {len(keys_b)}); {len(missing_b)} only in {name_a}"
                + (f" (e.g. {_examples(missing_b)})" if missing_b else "")
                + f", {len(missing_a)} only in {name_b}"
                + (f" (e.g. {_examples(missing_a)})" if missing_a else ""))
        keys = sorted(keys_a)
        paired[lang] = (keys, np.array([scores_a[lang][k] for k in keys]),
                        np.array([scores_b[lang][k] for k in keys]))
    return paired


def bootstrap_means(values, index):
    """Means of `values` over resampled indices.

    Args:
        values: [num_images] per-image values.
        index: [samples, num_images] integer indices into values.

    Returns:
        [samples] the mean of each resample.
    """
    return values[index].mean(axis=1)


def _interval(samples):
    low, high = np.percentile(samples, [2.5, 97.5])
    return float(low), float(high)


def compare(paired, samples=1000, seed=0):
    """Per-language and average deltas (B - A) with 95% paired bootstrap intervals.

    Args:
        paired: output of `align`.
        samples: number of bootstrap resamples.
        seed: seed of the resampling.

    Returns:
        {"languages": {lang: row}, "average": row, "joint_images": bool}, each row
        {"n": images, "a": mean A, "b": mean B, "delta": B - A, "ci": [low, high],
        "significant": bool}; the average is over languages, "n" its language count.
    """
    if samples < 1:
        raise ValueError(f"--samples must be positive, got {samples}")
    rng = np.random.default_rng(seed)
    key_sets = {tuple(keys) for keys, _, _ in paired.values()}
    # One draw of images for all languages when they share the images, so that the
    # interval of the average sees each image's effect on every language at once.
    joint = len(key_sets) == 1
    shared_index = None
    rows, resampled = {}, []
    for lang, (keys, a, b) in paired.items():
        if joint and shared_index is None:
            shared_index = rng.integers(0, len(keys), size=(samples, len(keys)))
        index = shared_index if joint else rng.integers(0, len(keys), size=(samples, len(keys)))
        deltas = bootstrap_means(b - a, index)  # [samples]
        resampled.append(deltas)
        rows[lang] = _row(len(keys), a.mean(), b.mean(), deltas)
    average = np.mean(resampled, axis=0)  # [samples]
    rows_avg = _row(len(rows), np.mean([r["a"] for r in rows.values()]),
                    np.mean([r["b"] for r in rows.values()]), average)
    return {"languages": rows, "average": rows_avg, "joint_images": joint}


def _row(n, mean_a, mean_b, resampled_deltas):
    low, high = _interval(resampled_deltas)
    return {"n": int(n), "a": float(mean_a), "b": float(mean_b),
            "delta": float(mean_b - mean_a), "ci": [low, high],
            "significant": bool(low > 0 or high < 0)}


def format_table(result, name_a, name_b):
    """The comparison as a fixed-width text table.

    Args:
        result: output of `compare`.
        name_a, name_b: names of the two results.

    Returns:
        The table as a string.
    """
    lines = [f"A = {name_a}", f"B = {name_b}",
             f"{'lang':<8}{'images':>7}{'A':>9}{'B':>9}{'B - A':>9}   95% CI"]
    items = list(result["languages"].items()) + [("average", result["average"])]
    for lang, row in items:
        low, high = row["ci"]
        mark = " *" if row["significant"] else ""
        count = str(row["n"]) if lang != "average" else ""
        lang = lang if lang != "average" else f"avg({row['n']})"
        lines.append(f"{lang:<8}{count:>7}{row['a']:>9.3f}{row['b']:>9.3f}"
                     f"{row['delta']:>+9.3f}   [{low:+.3f}, {high:+.3f}]{mark}")
    significant = [lang for lang, row in result["languages"].items() if row["significant"]]
    lines.append(f"* interval excludes 0: {len(significant)} of {len(result['languages'])} "
                 f"languages" + (f" ({', '.join(significant)})" if significant else ""))
    return "\n".join(lines)


def plot_deltas(path, result, name_a, name_b):
    """Draws each language's delta with its interval, significant ones in color.

    Args:
        path: the PNG file to write.
        result: output of `compare`.
        name_a, name_b: names of the two results.
    """
    items = list(result["languages"].items()) + [("average", result["average"])]
    fig, ax = cli.pyplot().subplots(figsize=(7.0, 1.2 + 0.26 * len(items)))
    for y, (lang, row) in enumerate(items):
        low, high = row["ci"]
        color = "#7f7f7f"
        if row["significant"]:
            color = "#1b9e77" if row["delta"] > 0 else "#d95f02"
        marker = "D" if lang == "average" else "o"
        ax.errorbar(row["delta"], y, xerr=[[row["delta"] - low], [high - row["delta"]]],
                    fmt=marker, color=color, capsize=3, markersize=5)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.axhline(len(items) - 1.5, color="#bbbbbb", linewidth=0.8, linestyle=":")
    ax.set_yticks(range(len(items)))
    ax.set_yticklabels([lang for lang, _ in items], fontsize=9)
    ax.set_ylim(len(items) - 0.5, -0.5)
    ax.set_xlabel("delta CIDEr-D (B - A), 95% paired bootstrap interval")
    ax.set_title(f"B = {name_b}\nvs A = {name_a}", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    tool_cli.save_figure(fig, path, dpi=110)


def _name(results_dir):
    return pathlib.Path(results_dir).resolve().name


def chart_path(results_a, results_b, out=None):
    """Where the chart goes: OUT or RESULTS_B (its folder when a file), compare_<A>.png."""
    safe = re.sub(r"[^A-Za-z0-9._+-]", "_", _name(results_a)) or "A"
    folder = out or (results_b if not os.path.isfile(results_b) else os.path.dirname(results_b))
    return pathlib.Path(folder or ".") / f"compare_{safe}.png"


def main(argv=None):
    """Command line: see the module docstring."""
    parser = tool_cli.ArgumentParser(
        description="Per-language delta CIDEr-D (B - A) with paired bootstrap intervals.")
    parser.add_argument("results_a", help="results folder (or predictions file) of model A, "
                        "the baseline")
    parser.add_argument("results_b", help="results folder (or predictions file) of model B")
    parser.add_argument("--samples", type=tool_cli.count(1, tool_cli.MAX_SAMPLES), default=1000,
                        help="bootstrap resamples")
    parser.add_argument("--seed", type=tool_cli.count(0), default=0, help="seed of the resampling")
    parser.add_argument("--out", default=None,
                        help="folder for the chart (default: RESULTS_B)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--references", metavar="captions.jsonl",
                        help="XM3600 references to score a predictions file given as A or B")
    parser.add_argument("--langs", help="with --references: the languages to score (one: the "
                        "language of entries without \"lang\")")
    args = parser.parse_args(argv)
    if args.out:
        tool_cli.prepare_out(args.out)
    references = tool_cli.read_references(args.references) if args.references else None
    langs = args.langs.split(",") if args.langs else None
    scores_a, scores_b = (read_per_image(path, references, langs)
                          for path in (args.results_a, args.results_b))
    paired = align(scores_a, scores_b, args.results_a, args.results_b)
    note = left_out(scores_a, scores_b, args.results_a, args.results_b)
    if note:
        print(note, file=sys.stderr, flush=True)
    result = compare(paired, args.samples, args.seed)
    path = chart_path(args.results_a, args.results_b, args.out)
    if args.json:
        print(json.dumps({"a": args.results_a, "b": args.results_b,
                          "samples": args.samples, "seed": args.seed, "chart": str(path),
                          "left_out": {"a": _ordered(set(scores_a) - set(scores_b)),
                                       "b": _ordered(set(scores_b) - set(scores_a))},
                          **result}, indent=2), flush=True)
    else:
        print(format_table(result, args.results_a, args.results_b), flush=True)
    try:  # After the results are printed: a chart that cannot be written loses none.
        path.parent.mkdir(parents=True, exist_ok=True)
        plot_deltas(path, result, args.results_a, args.results_b)
    except OSError as e:
        raise tool_cli.not_written(args.out or args.results_b, e, args.json) from None
    if not args.json:
        print(f"chart: {path}")


if __name__ == "__main__":
    errors.run_main(main)
