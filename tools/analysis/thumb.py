"""System scores of THUMB 1.0 ratings (Kasai et al., NAACL 2022), with bootstrap intervals.

    python -m tools.analysis.thumb RATINGS.jsonl [MORE_ROUNDS.jsonl ...] [--samples 1000] \
        [--seed 0] [--out DIR] [--json]

The ratings are files in the THUMB 1.0 release layout, one per rating round, read by
formats/thumb_ratings.py (which also holds the rubric: P, R, Fl, Con, Inc and their total);
several files are rounds of the same captions and each caption's ratings are averaged over the
rounds. A later round must rate captions of the first (a round of other images or systems is
refused, naming them); one that rates only some of them is said in the output.

Reported, per system: the mean of each field over its images with a 90% bootstrap interval
(images resampled with replacement, one draw shared by all systems, percentile interval), and,
as the paper's Table 3, the number of images where the system is best (or worst) "both in
precision and recall": its P and its R each at least (at most) every other system's on that
image. Ties count, as in the paper: on an image where two systems share the top P and R, both
are best (this reproduces Table 3's Best row exactly from the release), and on an image where
every system has the same P and R, every system is both best and worst. With one system there
is nothing to compare: no best / worst. Output: a text table (or JSON), and with --out
`thumb.md`, `thumb.csv` and `thumb.png` (--out is checked before any work; the table is printed
before the report is written, so a report that still cannot be written loses nothing).
"""

import collections
import csv
import dataclasses
import json
import os
import sys

import numpy as np

import errors
import files
from evaluation import cli
from tools import cli as tool_cli
from tools.formats import thumb_ratings

CONFIDENCE = 0.90


@dataclasses.dataclass(frozen=True)
class Table:
    """Ratings of several systems on shared images, averaged over rounds.

    Attributes:
        systems: system names, in order of first appearance.
        images: image ids (seg_id), in order of first appearance.
        scores: {score name: float [systems, images]}, NaN where a system has no rating.
        hyps: {(system, image): caption}.
        rounds: number of rating rounds.
        partial_rounds: [(file, captions rated, captions of the first round)] for the later
            rounds that rate only some of the first round's captions.
    """
    systems: list
    images: list
    scores: dict
    hyps: dict
    rounds: int
    partial_rounds: list = dataclasses.field(default_factory=list)


_EXAMPLES = 5


def _source(ratings):
    return ratings[0].where.rsplit(":", 1)[0]


def _check_rounds(rounds):
    """ThumbError for a later round that rates captions the first round does not have (named:
    its images, or its systems); the later rounds that rate only some of them."""
    first = {(r.system, r.image) for r in rounds[0]}
    partial = []
    for ratings in rounds[1:]:
        pairs = {(r.system, r.image) for r in ratings}
        extra = pairs - first
        if extra:
            first_images = {image for _, image in first}
            images = sorted({image for _, image in extra if image not in first_images})
            systems = sorted({system for system, _ in extra} - {s for s, _ in first})
            what = (f"images {', '.join(images[:_EXAMPLES])}" + (
                f" and {len(images) - _EXAMPLES} more" if len(images) > _EXAMPLES else "")
                if images else f"systems {', '.join(systems)}" if systems else
                f"{len(extra)} (system, image) pairs, e.g. {sorted(extra)[0]}")
            raise thumb_ratings.ThumbError(
                f"{_source(ratings)}: a later round rates {what}, which the first round "
                f"({_source(rounds[0])}) does not; rounds are re-ratings of the same captions "
                f"(analyse other images in a run of their own)")
        if len(pairs) < len(first):
            partial.append((_source(ratings), len(pairs), len(first)))
    return partial


def table(rounds):
    """Averages the rounds of ratings into a `Table` (each caption's mean over its ratings).

    Raises:
        ThumbError: a later round rates captions that the first does not, or another caption
            for a (system, image).
    """
    partial = _check_rounds(rounds)
    systems, images, sums, counts, hyps = {}, {}, collections.defaultdict(dict), {}, {}
    for ratings in rounds:
        for r in ratings:
            systems.setdefault(r.system, len(systems))
            images.setdefault(r.image, len(images))
            pair = (r.system, r.image)
            if pair in hyps and hyps[pair] != r.hyp:
                raise thumb_ratings.ThumbError(
                    f"{r.where}: system {r.system!r} on image {r.image!r} has another caption "
                    f"than in an earlier round")
            hyps[pair] = r.hyp
            counts[pair] = counts.get(pair, 0) + 1
            for name, value in r.scores.items():
                sums[name][pair] = sums[name].get(pair, 0.0) + value
    scores = {}
    for name in thumb_ratings.SCORES:
        grid = np.full((len(systems), len(images)), np.nan)
        for (system, image), value in sums[name].items():
            grid[systems[system], images[image]] = value / counts[(system, image)]
        scores[name] = grid
    return Table(list(systems), list(images), scores, hyps, len(rounds), partial)


def system_scores(tab, samples=1000, seed=0, confidence=CONFIDENCE):
    """Per-system means with bootstrap intervals over images.

    Returns:
        {system: {"n": images rated, score name: {"mean", "low", "high"}}}.
    """
    rng = np.random.default_rng(seed)
    index = rng.integers(0, len(tab.images), size=(samples, len(tab.images)))
    tail = (1 - confidence) / 2 * 100
    out = {}
    for s, system in enumerate(tab.systems):
        rated = ~np.isnan(tab.scores["total"][s])
        row = {"n": int(rated.sum())}
        for name in thumb_ratings.SCORES:
            values = tab.scores[name][s]  # [images]
            with np.errstate(invalid="ignore"):
                means = np.nanmean(values[index], axis=1)  # [samples]
            low, high = np.nanpercentile(means, [tail, 100 - tail])
            row[name] = {"mean": float(np.nanmean(values)), "low": float(low),
                         "high": float(high)}
        out[system] = row
    return out


def best_worst(tab):
    """How often each system is best / worst in both P and R (the paper's Table 3).

    Best on an image: its P and its R each at least every other system's; worst: each at most.
    Ties count (module docstring). Only images that every system has rated count.

    Returns:
        ({system: {"best": n, "worst": n}} or None with fewer than two systems, number of
        images compared, number of those where all systems tie in P and R).
    """
    p, r = tab.scores["P"], tab.scores["R"]  # [systems, images]
    complete = ~np.isnan(p).any(axis=0)
    all_tied = complete & (p == p[:1]).all(axis=0) & (r == r[:1]).all(axis=0)
    if len(tab.systems) < 2:
        return None, int(complete.sum()), int(all_tied.sum())
    out = {}
    for s, system in enumerate(tab.systems):
        others = np.delete(np.arange(len(tab.systems)), s)
        best = (p[s] >= p[others]).all(axis=0) & (r[s] >= r[others]).all(axis=0) & complete
        worst = (p[s] <= p[others]).all(axis=0) & (r[s] <= r[others]).all(axis=0) & complete
        out[system] = {"best": int(best.sum()), "worst": int(worst.sum())}
    return out, int(complete.sum()), int(all_tied.sum())


def best_worst_note(tab, counts, compared, all_tied):
    """One line saying what the best / worst counts are (or why there are none)."""
    if counts is None:
        return (f"(best / worst: none: {len(tab.systems)} system, nothing to compare it with; "
                f"Table 3 needs two systems or more)")
    return (f"(best / worst: P and R each at least / at most every other system's, ties "
            f"counted as in the paper's Table 3, over the {compared} images rated for all "
            f"{len(tab.systems)} systems; on {all_tied} of them all systems tie and each is "
            f"both best and worst)")


def _count(counts, system, key):
    return "–" if counts is None else str(counts[system][key])


def format_table(scores, counts, note, confidence=CONFIDENCE):
    """System scores and best / worst counts as a fixed-width text table."""
    header = (f"{'system':<16}{'n':>5}"
              + "".join(f"{name:>8}" for name in thumb_ratings.FIELDS)
              + f"{'total':>8}  {int(confidence * 100)}% CI of total{'':>4}"
              f"{'best':>6}{'worst':>7}")
    lines = [header]
    for system, row in scores.items():
        t = row["total"]
        lines.append(f"{system:<16}{row['n']:>5}"
                     + "".join(f"{row[name]['mean']:>8.2f}" for name in thumb_ratings.FIELDS)
                     + f"{t['mean']:>8.2f}  [{t['low']:.2f}, {t['high']:.2f}]{'':>8}"
                     f"{_count(counts, system, 'best'):>6}{_count(counts, system, 'worst'):>7}")
    lines.append(note)
    return "\n".join(lines)


def write_report(out, scores, counts, note, sources, confidence=CONFIDENCE):
    """Writes thumb.md, thumb.csv and thumb.png into `out`; returns their paths."""
    os.makedirs(out, exist_ok=True)
    paths = {kind: os.path.join(out, f"thumb.{kind}") for kind in ("md", "csv", "png")}
    with files.replacing(paths["csv"], newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["system", "n", *(f"{n}{suffix}" for n in thumb_ratings.SCORES
                                          for suffix in ("", "_low", "_high")),
                         "best", "worst"])
        for system, row in scores.items():
            writer.writerow([system, row["n"],
                             *(f"{row[n][k]:.4f}" for n in thumb_ratings.SCORES
                               for k in ("mean", "low", "high")),
                             *(("", "") if counts is None else
                               (counts[system]["best"], counts[system]["worst"]))])
    pct = int(confidence * 100)
    lines = [f"# THUMB 1.0 ratings ({', '.join(sources)})", "",
             f"Means over images; [{pct}% bootstrap interval]. {note}", "",
             "| system | n | P | R | Fl | Con | Inc | total | best | worst |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for system, row in scores.items():
        cells = [f"{row[n]['mean']:.2f} [{row[n]['low']:.2f}, {row[n]['high']:.2f}]"
                 if n in ("P", "R", "total") else f"{row[n]['mean']:.3f}"
                 for n in thumb_ratings.SCORES]
        lines.append(f"| {system} | {row['n']} | " + " | ".join(cells)
                     + f" | {_count(counts, system, 'best')} | {_count(counts, system, 'worst')} |")
    files.write_text(paths["md"], "\n".join(lines) + "\n")
    plot(paths["png"], scores, confidence)
    return paths


def plot(path, scores, confidence=CONFIDENCE):
    """Grouped bars of P, R and total per system with their bootstrap intervals."""
    systems = list(scores)
    fig, ax = cli.pyplot().subplots(figsize=(max(6.0, 1.4 * len(systems)), 4))
    width = 0.27
    for k, name in enumerate(("P", "R", "total")):
        means = np.array([scores[s][name]["mean"] for s in systems])
        errors = np.array([[m - scores[s][name]["low"], scores[s][name]["high"] - m]
                           for s, m in zip(systems, means, strict=True)]).T
        ax.bar(np.arange(len(systems)) + (k - 1) * width, means, width, yerr=errors,
               capsize=3, label=name)
    ax.set_xticks(np.arange(len(systems)), systems, rotation=20, ha="right")
    ax.set_ylim(1, 5.6)
    ax.set_ylabel("mean rating")
    ax.set_title(f"THUMB 1.0: P, R and total per system ({int(confidence * 100)}% bootstrap "
                 f"intervals)")
    ax.legend(ncols=3, loc="upper left")
    fig.tight_layout()
    tool_cli.save_figure(fig, path, dpi=120)


def main(argv=None):
    """Command line: see the module docstring. Returns the exit status (2 for bad input)."""
    parser = tool_cli.ArgumentParser(
        prog="python -m tools.analysis.thumb",
        description="THUMB 1.0 system scores with bootstrap intervals and best/worst counts.")
    parser.add_argument("ratings", nargs="+", help="release-layout JSONL file(s), one per round")
    parser.add_argument("--samples", type=tool_cli.count(1, tool_cli.MAX_SAMPLES), default=1000,
                        help="bootstrap resamples")
    parser.add_argument("--seed", type=tool_cli.count(0), default=0)
    parser.add_argument("--out", help="folder for thumb.md, thumb.csv and thumb.png")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    try:
        if args.out:
            tool_cli.prepare_out(args.out)
        tab = table([thumb_ratings.read(path) for path in args.ratings])
    except (errors.Error, OSError) as e:
        return errors.print_error(e)
    for source, rated, first in tab.partial_rounds:
        print(f"note: {source} re-rates {rated} of the first round's {first} captions; the "
              f"others have fewer ratings", file=sys.stderr)
    scores = system_scores(tab, args.samples, args.seed)
    counts, compared, all_tied = best_worst(tab)
    note = best_worst_note(tab, counts, compared, all_tied)
    if args.json:
        print(json.dumps({"rounds": tab.rounds, "images": len(tab.images),
                          "num_systems": len(tab.systems), "systems": scores,
                          "best_worst": counts, "compared": compared, "all_tied": all_tied,
                          "note": note}, indent=2), flush=True)
    else:
        print(format_table(scores, counts, note), flush=True)
    if args.out:
        try:
            paths = write_report(args.out, scores, counts, note, args.ratings)
        except OSError as e:
            return errors.print_error(tool_cli.not_written(args.out, e, args.json))
        if not args.json:
            print(f"report: {paths['md']}, {paths['csv']}, {paths['png']}")
    return 0


if __name__ == "__main__":
    errors.run_main(main)
