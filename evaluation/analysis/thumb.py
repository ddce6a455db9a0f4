"""THUMB 1.0 ratings (Kasai et al., NAACL 2022): the rubric, release-layout files, system scores.

    python -m evaluation.analysis.thumb RATINGS.jsonl [MORE_ROUNDS.jsonl ...] [--samples 1000] \
        [--seed 0] [--out DIR] [--json]

The rubric, per caption: precision P and recall R (integers 1-5), fluency Fl (0, -0.1, ...,
-0.5), conciseness Con and inclusive language Inc (0 or -0.5);

    total = (P + R) / 2 + Fl + Con + Inc.

Files are in the THUMB 1.0 release layout (`mscoco/mscoco_THumB-1.0.jsonl`), one JSON object
per line and caption: SYS, seg_id, set_id, hyp, image, P, R, Fl, Inc, Con, human_score (the
total). The human-evaluation kit (humaneval/) writes the same layout, one file per rating round
(`thumb.jsonl`, or `thumb_1.jsonl` ... `thumb_r.jsonl`); several files are rounds of the same
captions and each caption's ratings are averaged over the rounds. `check_rating` and `total`
are the rubric, written once for the readers here and for the kit.

Reported, per system: the mean of each field over its images with a 90% bootstrap interval
(images resampled with replacement, one draw shared by all systems, percentile interval), and,
as the paper's Table 3, the number of images where the system is strictly best (or worst) in
both P and R: its P and its R above (below) every other system's on that image. Output: a text
table, or with --out `thumb.md`, `thumb.csv` and `thumb.png`.
"""

import argparse
import collections
import csv
import dataclasses
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")  # headless: set before pyplot is imported
import matplotlib.pyplot as plt
import numpy as np

from data import jsonl

FIELDS = ("P", "R", "Fl", "Con", "Inc")
SCORES = (*FIELDS, "total")
PR_RANGE = (1, 5)
FLUENCY = (0.0, -0.1, -0.2, -0.3, -0.4, -0.5)
BINARY = (0.0, -0.5)
RELEASE_FIELDS = ("SYS", "seg_id", "set_id", "hyp", "image", "P", "R", "Fl", "Inc", "Con",
                  "human_score")
CONFIDENCE = 0.90


class ThumbError(ValueError):
    """A rating outside the rubric or a malformed file; names the file, line, field and value."""


def _number(value, field):
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ThumbError(f"field {field!r}: expected a number, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise ThumbError(f"field {field!r}: expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ThumbError(f"field {field!r}: expected a finite number, got {value!r}")
    return number


def _one_of(number, allowed, field):
    for choice in allowed:
        if abs(number - choice) < 1e-9:
            return choice
    raise ThumbError(f"field {field!r}: {number:g} is not one of "
                     f"{', '.join(f'{a:g}' for a in allowed)}")


def check_rating(P, R, Fl, Con, Inc):  # noqa: N803 (the rubric's own names)
    """Checks one THUMB rating against the rubric.

    Args:
        P, R: precision and recall, integers 1-5 (integral floats and numeric strings
            accepted).
        Fl: fluency penalty, one of 0, -0.1, ..., -0.5.
        Con, Inc: conciseness and inclusive-language penalties, 0 or -0.5.

    Returns:
        {"P": int, "R": int, "Fl": float, "Con": float, "Inc": float}.

    Raises:
        ThumbError: a value is malformed or outside the rubric (the field and value named).
    """
    out = {}
    for field, value in (("P", P), ("R", R)):
        number = _number(value, field)
        if not number.is_integer():
            raise ThumbError(f"field {field!r}: {value!r} is not an integer")
        low, high = PR_RANGE
        if not low <= number <= high:
            raise ThumbError(f"field {field!r}: {number:g} is outside {low}-{high}")
        out[field] = int(number)
    out["Fl"] = _one_of(_number(Fl, "Fl"), FLUENCY, "Fl")
    out["Con"] = _one_of(_number(Con, "Con"), BINARY, "Con")
    out["Inc"] = _one_of(_number(Inc, "Inc"), BINARY, "Inc")
    return out


def total(rating):
    """The THUMB score of one checked rating: (P + R) / 2 + Fl + Con + Inc."""
    return (rating["P"] + rating["R"]) / 2 + rating["Fl"] + rating["Con"] + rating["Inc"]


@dataclasses.dataclass(frozen=True)
class Rating:
    """One rated caption of a release-layout file.

    Attributes:
        system: SYS.
        image: seg_id (as a string), the image the caption describes.
        set_id: the image's index in its test split.
        hyp: the caption.
        scores: {"P", "R", "Fl", "Con", "Inc", "total"}.
        where: "file:line".
    """
    system: str
    image: str
    set_id: int
    hyp: str
    scores: dict
    where: str


def _parse(obj, where):
    missing = [f for f in RELEASE_FIELDS if f not in obj]
    if missing:
        raise ThumbError(f"{where}: missing field(s) {', '.join(missing)} (the THUMB 1.0 layout "
                         f"has {', '.join(RELEASE_FIELDS)})")
    for field in ("SYS", "hyp", "image"):
        if not isinstance(obj[field], str) or (field == "SYS" and not obj[field]):
            raise ThumbError(f"{where}: field {field!r} must be a string, got {obj[field]!r}")
    if not isinstance(obj["seg_id"], (str, int)) or isinstance(obj["seg_id"], bool):
        raise ThumbError(f"{where}: field 'seg_id' must be a string, got {obj['seg_id']!r}")
    if not isinstance(obj["set_id"], int) or isinstance(obj["set_id"], bool):
        raise ThumbError(f"{where}: field 'set_id' must be an integer, got {obj['set_id']!r}")
    try:
        scores = check_rating(*(obj[f] for f in FIELDS))
        stated = _number(obj["human_score"], "human_score")
    except ThumbError as e:
        raise ThumbError(f"{where}: {e}") from None
    scores["total"] = total(scores)
    if abs(stated - scores["total"]) > 1e-6:
        raise ThumbError(f"{where}: field 'human_score': {stated:g} is not (P + R) / 2 + Fl + "
                         f"Con + Inc = {scores['total']:g}")
    return Rating(obj["SYS"], str(obj["seg_id"]), obj["set_id"], obj["hyp"], scores, where)


def read_ratings(path):
    """Reads one release-layout file (one rating round).

    Returns:
        [Rating] in file order.

    Raises:
        FileNotFoundError: the file does not exist.
        ThumbError: a malformed line, a value outside the rubric, a human_score that is not the
            total, or a second rating of the same (system, image) (file:line named).
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"THUMB ratings not found: {path}")
    ratings, seen = [], {}
    for where, obj in jsonl.read_objects(path, error=ThumbError):
        rating = _parse(obj, where)
        pair = (rating.system, rating.image)
        if pair in seen:
            raise ThumbError(f"{where}: system {rating.system!r} rated again on image "
                             f"{rating.image!r} (first at {seen[pair]}); a second round belongs "
                             f"in a file of its own")
        seen[pair] = where
        ratings.append(rating)
    if not ratings:
        raise ThumbError(f"{path}: no ratings (the file is empty)")
    return ratings


def read_references(path):
    """Reads THUMB's references file: lines {"seg_id", "set_id", "refs": [...]}.

    Returns:
        {seg_id (str): [reference captions]}.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"THUMB references not found: {path}")
    refs = {}
    for where, obj in jsonl.read_objects(path, error=ThumbError):
        seg, captions = obj.get("seg_id"), obj.get("refs")
        if seg is None or not isinstance(captions, list) or not captions or not all(
                isinstance(c, str) for c in captions):
            raise ThumbError(f"{where}: expected {{\"seg_id\", \"set_id\", \"refs\": [strings]}}")
        if str(seg) in refs:
            raise ThumbError(f"{where}: seg_id {seg!r} appears twice")
        refs[str(seg)] = captions
    return refs


@dataclasses.dataclass(frozen=True)
class Table:
    """Ratings of several systems on shared images, averaged over rounds.

    Attributes:
        systems: system names, in order of first appearance.
        images: image ids (seg_id), in order of first appearance.
        scores: {score name: float [systems, images]}, NaN where a system has no rating.
        hyps: {(system, image): caption}.
        rounds: number of rating rounds.
    """
    systems: list
    images: list
    scores: dict
    hyps: dict
    rounds: int


def table(rounds):
    """Averages the rounds of ratings into a `Table` (each caption's mean over its ratings)."""
    systems, images, sums, counts, hyps = {}, {}, collections.defaultdict(dict), {}, {}
    for ratings in rounds:
        for r in ratings:
            systems.setdefault(r.system, len(systems))
            images.setdefault(r.image, len(images))
            pair = (r.system, r.image)
            if pair in hyps and hyps[pair] != r.hyp:
                raise ThumbError(f"{r.where}: system {r.system!r} on image {r.image!r} has "
                                 f"another caption than in an earlier round")
            hyps[pair] = r.hyp
            counts[pair] = counts.get(pair, 0) + 1
            for name, value in r.scores.items():
                sums[name][pair] = sums[name].get(pair, 0.0) + value
    scores = {}
    for name in SCORES:
        grid = np.full((len(systems), len(images)), np.nan)
        for (system, image), value in sums[name].items():
            grid[systems[system], images[image]] = value / counts[(system, image)]
        scores[name] = grid
    return Table(list(systems), list(images), scores, hyps, len(rounds))


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
        for name in SCORES:
            values = tab.scores[name][s]  # [images]
            with np.errstate(invalid="ignore"):
                means = np.nanmean(values[index], axis=1)  # [samples]
            low, high = np.nanpercentile(means, [tail, 100 - tail])
            row[name] = {"mean": float(np.nanmean(values)), "low": float(low),
                         "high": float(high)}
        out[system] = row
    return out


def best_worst(tab):
    """How often each system is strictly best / worst in both P and R (the paper's Table 3).

    Only images that every system has rated count.

    Returns:
        ({system: {"best": n, "worst": n}}, number of images compared).
    """
    p, r = tab.scores["P"], tab.scores["R"]  # [systems, images]
    complete = ~np.isnan(p).any(axis=0)
    out = {}
    for s, system in enumerate(tab.systems):
        others = np.delete(np.arange(len(tab.systems)), s)
        best = (p[s] > p[others]).all(axis=0) & (r[s] > r[others]).all(axis=0) & complete
        worst = (p[s] < p[others]).all(axis=0) & (r[s] < r[others]).all(axis=0) & complete
        out[system] = {"best": int(best.sum()), "worst": int(worst.sum())}
    return out, int(complete.sum())


def format_table(scores, counts, compared, confidence=CONFIDENCE):
    """System scores and best / worst counts as a fixed-width text table."""
    header = (f"{'system':<16}{'n':>5}" + "".join(f"{name:>8}" for name in FIELDS)
              + f"{'total':>8}  {int(confidence * 100)}% CI of total{'':>4}"
              f"{'best':>6}{'worst':>7}")
    lines = [header]
    for system, row in scores.items():
        t = row["total"]
        lines.append(f"{system:<16}{row['n']:>5}"
                     + "".join(f"{row[name]['mean']:>8.2f}" for name in FIELDS)
                     + f"{t['mean']:>8.2f}  [{t['low']:.2f}, {t['high']:.2f}]{'':>8}"
                     f"{counts[system]['best']:>6}{counts[system]['worst']:>7}")
    lines.append(f"(best / worst: strictly above / below every other system in both P and R, "
                 f"over {compared} images rated for all systems)")
    return "\n".join(lines)


def write_report(out, scores, counts, compared, sources, confidence=CONFIDENCE):
    """Writes thumb.md, thumb.csv and thumb.png into `out`; returns their paths."""
    os.makedirs(out, exist_ok=True)
    paths = {kind: os.path.join(out, f"thumb.{kind}") for kind in ("md", "csv", "png")}
    with open(paths["csv"], "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["system", "n", *(f"{n}{suffix}" for n in SCORES
                                          for suffix in ("", "_low", "_high")),
                         "best", "worst"])
        for system, row in scores.items():
            writer.writerow([system, row["n"],
                             *(f"{row[n][k]:.4f}" for n in SCORES for k in ("mean", "low",
                                                                              "high")),
                             counts[system]["best"], counts[system]["worst"]])
    pct = int(confidence * 100)
    lines = [f"# THUMB 1.0 ratings ({', '.join(sources)})", "",
             f"Means over images; [{pct}% bootstrap interval]. Best / worst: images where the "
             f"system's P and R are both strictly above / below every other system's "
             f"({compared} images rated for all systems).", "",
             "| system | n | P | R | Fl | Con | Inc | total | best | worst |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for system, row in scores.items():
        cells = [f"{row[n]['mean']:.2f} [{row[n]['low']:.2f}, {row[n]['high']:.2f}]"
                 if n in ("P", "R", "total") else f"{row[n]['mean']:.3f}" for n in SCORES]
        lines.append(f"| {system} | {row['n']} | " + " | ".join(cells)
                     + f" | {counts[system]['best']} | {counts[system]['worst']} |")
    with open(paths["md"], "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    plot(paths["png"], scores, confidence)
    return paths


def plot(path, scores, confidence=CONFIDENCE):
    """Grouped bars of P, R and total per system with their bootstrap intervals."""
    systems = list(scores)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(systems)), 4))
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
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    """Command line: see the module docstring. Returns the exit status (2 for bad input)."""
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.analysis.thumb",
        description="THUMB 1.0 system scores with bootstrap intervals and best/worst counts.")
    parser.add_argument("ratings", nargs="+", help="release-layout JSONL file(s), one per round")
    parser.add_argument("--samples", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="folder for thumb.md, thumb.csv and thumb.png")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    try:
        if args.samples < 1:
            raise ThumbError(f"--samples must be positive, got {args.samples}")
        tab = table([read_ratings(path) for path in args.ratings])
    except (ThumbError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    scores = system_scores(tab, args.samples, args.seed)
    counts, compared = best_worst(tab)
    if args.out:
        paths = write_report(args.out, scores, counts, compared, args.ratings)
    if args.json:
        print(json.dumps({"rounds": tab.rounds, "images": len(tab.images), "systems": scores,
                          "best_worst": counts, "compared": compared}, indent=2))
    else:
        print(format_table(scores, counts, compared))
        if args.out:
            print(f"report: {paths['md']}, {paths['csv']}, {paths['png']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
