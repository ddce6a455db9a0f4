"""Meta-evaluation of caption metrics: how well they agree with human judgements.

    python -m tools.analysis.meta --thumb RATINGS.jsonl [MORE_ROUNDS.jsonl ...] \
        [--references REFS] [--metric cider-d|cider|vifidel ...] [--scores NAME=FILE ...] \
        [--system-scores NAME=FILE ...] [--without SYSTEM ...] [--lang en]
    python -m tools.analysis.meta --side-by-side side_by_side.csv
    python -m tools.analysis.meta --pairwise PREFS.jsonl --references REFS --metric cider-d
    python -m tools.analysis.meta --triplets JUDGEMENTS.jsonl [--references REFS] \
        --metric cider-d [--split-references] [--curve]
    python -m tools.analysis.meta --pascal50s DIR --metric cider-d [--split-references] \
        [--curve]
    pairs: [--num-refs K] [--draws 5] [--human-ties drop|random]
    common: [--samples 1000] [--seed 0] [--confidence 0.95] [--out DIR] [--json]
    VIFIDEL: --labels FILES --class-descriptions CSV --vectors 'wiki.{lang}.align.vec' and the
        settings of `python -m tools.vifidel` (--penalty, --cost-power, --stopwords,
        --label-weights, --no-references, ...), each default the paper's

Human judgements, five kinds:

- THUMB 1.0 ratings (tools/formats/thumb_ratings.py): per caption P, R and total. Instance level:
  every rated caption is a point (human rating, metric score); system level: per-system means,
  as many points as systems (said in the output; the THUMB paper calls five uninformative).
  `--without Human` repeats everything without that system, as the THUMB paper does.
  Pairwise accuracy over the pairs of systems whose captions of one image people rated
  differently.
- Side by side (the XM3600 paper's side_by_side.csv, tools/formats/side_by_side.py): delta S x S
  against each delta CIDEr column, each evaluation counted as given and flipped: Table 6 as
  `tools.analysis.correlate.table` computes it, with tau-c and intervals.
- Pairwise preferences, JSONL {"image/key", "a": caption, "b": caption, "preference": "a" |
  "b" | "tie", "lang"?, "kind"?}: one human winner per line as given, a repeated pair kept as
  another judgement (pairwise.py).
- Triplet judgements (tools/formats/triplet_judgements.py): the CIDEr paper's protocol as written,
  the majority of each triplet's judgements, then of each pair's triplets (triplets.py).
- PASCAL-50S as its authors released it, in either public layout (pascal50s.py): accuracy per
  kind of pair (HC, HI, HM, MM) and overall, against the majority of each pair's 11 votes
  (the CIDEr code repository's pair_pascal.mat) and against the majority of its 48 triplets
  (the dataset's consensus_pascal.mat), whichever the folder holds.

For pairs: the share of pairs where the metric scores the human winner higher, a metric tie
broken at random; each image's references sub-sampled to --num-refs (at least 1, at most the
references there are; default all) and the accuracy averaged over --draws draws; a human tie
left out and counted (--human-ties drop) or broken at random (random). --split-references
(triplets): the paper's human-vs-machine setting, winners from the triplets of half of each
image's references and the metric scored with the other half. --curve: the accuracy for 1, 2,
... references per image (to the smallest image's count), as meta_curve.csv / meta_curve.png.

Metric scores: computed by the tool from captions and references (--metric: CIDEr-D, CIDEr,
VIFIDEL; references from an XM3600 captions.jsonl or THUMB's references file), or read per
caption (--scores, JSONL {"system", "image/key", "score"}) or per system (--system-scores, CSV
system,score). Reported: Pearson, Spearman, Kendall tau-b and tau-c with cluster bootstrap
intervals (resampling images, or side-by-side evaluations; at the system level systems and
images both, and no interval below MIN_SYSTEMS_FOR_INTERVAL systems), and accuracies. With
--out (checked before any work; written after the results are printed): meta.md, meta.csv
and meta.png. Bad input (a file whose systems or images do not match the others', a rating
outside the rubric, an unknown --lang, a number out of range, a stray argument) is one `error:`
line naming the file, line, flag and value; exit status 2.
"""

import itertools
import json
import sys

import numpy as np

import errors
from data import languages
from tools import cli as tool_cli
from tools.analysis import coefficients as coefficients_lib
from tools.analysis import (
    correlate,
    meta_report,
    meta_scores,
    pairwise,
    pascal50s,
    thumb,
    triplets,
)
from tools.analysis.meta_scores import MetaError
from tools.formats import side_by_side, thumb_ratings, triplet_judgements
from tools.vifidel import options as vifidel_options

TARGETS = ("P", "R", "total")
NAMES = coefficients_lib.COEFFICIENTS
# Below this many systems a system-level correlation gets no interval: resampling 5 systems
# leaves 2-4 distinct ones in most draws (a correlation of 2 points is undefined), and an
# interval over such draws says little. A choice of this repository.
MIN_SYSTEMS_FOR_INTERVAL = meta_report.MIN_SYSTEMS_FOR_INTERVAL


def _row(analysis, subset, level, target, metric, x, y, clusters, samples, seed, confidence):
    row = {"analysis": analysis, "subset": subset, "level": level, "target": target,
           "metric": metric, "n": int(len(x)), **coefficients_lib.coefficients(x, y)}
    if samples:
        row["ci"] = coefficients_lib.bootstrap_intervals(x, y, clusters, samples, seed,
                                                         confidence)
    return row


def _system_row(subset, target, metric_name, human, metric, samples, seed, confidence):
    """System level: per-system means of the ratings against the metric's.

    The interval resamples the systems and the images (with replacement, both), so that it
    covers the choice of systems as well as of images; below MIN_SYSTEMS_FOR_INTERVAL systems
    there is none ("ci" None).

    Args:
        human: float [systems, images] ratings (NaN: not rated).
        metric: float [systems, images] per-caption scores, resampled with the images, or
            float [systems] fixed per-system scores.
    """
    def means(grid, systems=None, images=None):
        grid = grid if systems is None else grid[systems]
        if grid.ndim == 1:
            return grid
        with np.errstate(invalid="ignore"):
            return np.nanmean(grid if images is None else grid[:, images], axis=1)

    num_systems, num_images = human.shape
    row = {"analysis": "thumb", "subset": subset, "level": "system", "target": target,
           "metric": metric_name, "n": int(num_systems),
           **coefficients_lib.coefficients(means(human), means(metric))}
    if samples and num_systems >= MIN_SYSTEMS_FOR_INTERVAL:
        rng = np.random.default_rng(seed)
        values = {name: [] for name in NAMES}
        for _ in range(samples):
            systems = rng.integers(0, num_systems, size=num_systems)
            images = rng.integers(0, num_images, size=num_images)
            for name, value in coefficients_lib.coefficients(
                    means(human, systems, images), means(metric, systems, images)).items():
                values[name].append(value)
        row["ci"] = {name: coefficients_lib.interval(v, confidence)
                     for name, v in values.items()}
    elif samples:
        row["ci"] = {name: None for name in NAMES}
    return row


def _thumb_accuracy(human, metric, draws, seed):
    """Pairwise accuracy over pairs of systems on one image that people rated differently."""
    pairs = [(a, b) for a, b in itertools.combinations(range(human.shape[0]), 2)]
    h, m_a, m_b = [], [], []
    for a, b in pairs:
        valid = ~np.isnan(human[a]) & ~np.isnan(human[b]) & (human[a] != human[b])
        h.append(np.sign(human[a] - human[b])[valid])
        m_a.append(metric[a][valid])
        m_b.append(metric[b][valid])
    h, m_a, m_b = (np.concatenate(v) if v else np.zeros(0) for v in (h, m_a, m_b))
    rng = np.random.default_rng(seed)
    results = [coefficients_lib.pairwise_accuracy(h, m_a, m_b, rng) for _ in range(draws)]
    return {"pairs": int(h.size), "accuracy": float(np.mean([r[0] for r in results])),
            "metric_ties": results[0][1]}


def thumb_rows(tab, caption_metrics, system_metrics, *, without=(), samples=1000, seed=0,
               confidence=coefficients_lib.CONFIDENCE, draws=10):
    """Correlations of metrics with THUMB ratings.

    Args:
        tab: a `thumb.Table`.
        caption_metrics: {metric: float [systems, images]} (NaN: not scored).
        system_metrics: {metric: {system: score}}.
        without: systems to leave out in a second pass each (e.g. "Human").
        samples, seed, confidence: the bootstrap over images.
        draws: tie-breaking draws of the pairwise accuracy.

    Returns:
        A list of row dicts (see `meta_report`).
    """
    rows = []
    for subset in ("all systems", *(f"without {s}" for s in without)):
        keep = [i for i, s in enumerate(tab.systems) if subset != f"without {s}"]
        images = np.broadcast_to(np.arange(len(tab.images)), (len(keep), len(tab.images)))
        for target in TARGETS:
            human = tab.scores[target][keep]  # [systems, images]
            for name, grid in caption_metrics.items():
                metric = grid[keep]
                valid = ~np.isnan(human) & ~np.isnan(metric)
                row = _row("thumb", subset, "instance", target, name, human[valid],
                           metric[valid], images[valid], samples, seed, confidence)
                rows.append({**row, **_thumb_accuracy(human, metric, draws, seed)})
                rows.append(_system_row(subset, target, name, human, metric, samples, seed,
                                        confidence))
            for name, scores in system_metrics.items():
                means = np.array([scores[tab.systems[i]] for i in keep])
                rows.append(_system_row(subset, target, name, human, means, samples, seed,
                                        confidence))
    return rows


def side_by_side_rows(evaluations, columns, *, samples=1000, seed=0,
                      confidence=coefficients_lib.CONFIDENCE):
    """Correlations of delta S x S with each delta column (Table 6 with tau-c and intervals)."""
    result = correlate.table(evaluations, columns, samples=samples, seed=seed,
                             confidence=confidence)
    rows = []
    for set_name, by in result.items():
        for column in columns:
            row = {"analysis": "side_by_side", "subset": set_name, "level": "system pair",
                   "target": "delta_sxs", "metric": column, "n": by["n"][column],
                   **{name: by[name][column] for name in NAMES}}
            if samples:
                row["ci"] = {name: by["ci"][name][column] for name in NAMES}
            rows.append(row)
    return rows


def _named(entries, flag):
    out = {}
    for entry in entries or ():
        name, sep, path = entry.partition("=")
        if not sep or not name or not path:
            raise MetaError(f"{flag} {entry!r}: expected NAME=FILE")
        out[name] = path
    return out


def _caption_grid(tab, scores, lines, path, rounds_where):
    systems, images = set(tab.systems), set(tab.images)
    for (system, image), where in lines.items():
        if system not in systems:
            raise MetaError(f"{where}: system {system!r} is not in the ratings (they have "
                            f"{', '.join(tab.systems)})")
        if image not in images:
            raise MetaError(f"{where}: image {image!r} is not in the ratings")
    grid = np.full((len(tab.systems), len(tab.images)), np.nan)
    for s, system in enumerate(tab.systems):
        for i, image in enumerate(tab.images):
            if (system, image) in tab.hyps:
                if (system, image) not in scores:
                    raise MetaError(f"{path}: no score for system {system!r} on image "
                                    f"{image!r}, rated at {rounds_where[(system, image)]}")
                grid[s, i] = scores[(system, image)]
    return grid


def _thumb_inputs(args, tab, rounds, vifidel_settings):
    rounds_where = {(r.system, r.image): r.where for ratings in rounds for r in ratings}
    caption_metrics, system_metrics = {}, {}
    if args.metric:
        if not args.references:
            raise MetaError("--metric needs --references (THUMB's references file or an "
                            "XM3600 captions.jsonl)")
        refs = meta_scores.read_references(args.references, args.lang)
        pairs = list(tab.hyps)
        index = {s: i for i, s in enumerate(tab.systems)}, {m: i for i, m in
                                                             enumerate(tab.images)}
        for metric in args.metric:
            scores = meta_scores.compute(metric, args.lang, [(img, tab.hyps[(s, img)])
                                                             for s, img in pairs], refs,
                                         vifidel_settings=vifidel_settings,
                                         where=args.references)
            grid = np.full((len(tab.systems), len(tab.images)), np.nan)
            for (s, img), value in zip(pairs, scores, strict=True):
                grid[index[0][s], index[1][img]] = value
            caption_metrics[metric] = grid
    for name, path in _named(args.scores, "--scores").items():
        scores, lines = meta_scores.read_caption_scores(path)
        caption_metrics[name] = _caption_grid(tab, scores, lines, path, rounds_where)
    for name, path in _named(args.system_scores, "--system-scores").items():
        scores, lines = meta_scores.read_system_scores(path)
        for system, where in lines.items():
            if system not in tab.systems:
                raise MetaError(f"{where}: system {system!r} is not in the ratings (they have "
                                f"{', '.join(tab.systems)})")
        absent = [s for s in tab.systems if s not in scores]
        if absent:
            raise MetaError(f"{path}: no score for the rated system(s) {', '.join(absent)}")
        system_metrics[name] = scores
    for system in args.without or ():
        if system not in tab.systems:
            raise MetaError(f"--without {system!r}: no such system in the ratings (they have "
                            f"{', '.join(tab.systems)})")
    if not caption_metrics and not system_metrics:
        raise MetaError("no metric: give --metric, --scores or --system-scores")
    return caption_metrics, system_metrics


def _parser():
    parser = tool_cli.ArgumentParser(prog="python -m tools.analysis.meta",
                                     description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--thumb", nargs="+", metavar="RATINGS", help="THUMB 1.0 file(s)")
    source.add_argument("--side-by-side", metavar="CSV", help="XM3600-paper side-by-side CSV")
    source.add_argument("--pairwise", metavar="JSONL", help="pairwise preferences")
    source.add_argument("--triplets", metavar="JSONL", help="triplet judgements (CIDEr paper)")
    source.add_argument("--pascal50s", metavar="DIR",
                        help="folder of PASCAL-50S in either layout (pair_pascal.mat with "
                             "consensus_pascal.mat, or with its votes, pascal50S.mat and "
                             "pascal_cands.mat)")
    parser.add_argument("--references", help="XM3600 captions.jsonl or THUMB references")
    parser.add_argument("--metric", action="append", choices=meta_scores.METRICS)
    parser.add_argument("--scores", action="append", metavar="NAME=FILE")
    parser.add_argument("--system-scores", action="append", metavar="NAME=FILE")
    parser.add_argument("--without", action="append", metavar="SYSTEM")
    parser.add_argument("--lang", default="en", help="language of the captions (default en)")
    parser.add_argument("--num-refs", type=int,
                        help="pairs: references per image, at least 1 (default: all)")
    parser.add_argument("--draws", type=int, default=5, help="pairs: reference draws")
    parser.add_argument("--human-ties", choices=pairwise.HUMAN_TIES, default="drop",
                        help="pairs: a human tie is left out (drop) or broken at random")
    parser.add_argument("--split-references", action="store_true",
                        help="triplets: winners from half of each image's references, the "
                             "metric scored with the other half (the paper's human vs "
                             "machine setting)")
    parser.add_argument("--curve", action="store_true",
                        help="pairs: accuracy for 1, 2, ... references per image")
    parser.add_argument("--samples", type=tool_cli.count(0, tool_cli.MAX_SAMPLES), default=1000,
                        help="bootstrap resamples (0: none)")
    parser.add_argument("--seed", type=tool_cli.count(0), default=0)
    parser.add_argument("--confidence", type=tool_cli.number(0, 1, open_interval=True),
                        default=coefficients_lib.CONFIDENCE)
    parser.add_argument("--out", help="folder for meta.md, meta.csv and meta.png")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    vifidel_options.add_arguments(parser, required=False)
    return parser


def _pair_sources(args):
    """The pairs to score (--pairwise, --triplets, --pascal50s): ([(pairs, references,
    triplets or None, analysis, target, where)], description of the inputs)."""
    if args.pairwise:
        if not args.references:
            raise MetaError("--pairwise needs --references")
        pairs = pairwise.read_preferences(args.pairwise, args.lang)
        references = meta_scores.read_references(args.references, args.lang)
        note = pairwise.repeats(pairs)
        return [(pairs, references, None, "pairwise", "preference", args.references)], \
            args.pairwise + (f" ({note})" if note else "")
    if args.triplets:
        judgements = triplet_judgements.read(args.triplets)
        pairs, references, summary = triplets.aggregate(judgements, args.lang)
        where = args.triplets
        if args.references:
            references = meta_scores.read_references(args.references, args.lang)
            where = args.references
        return [(pairs, references, triplets.triplets_from_judgements(judgements)[0],
                 "triplets", "majority of triplets", where)], \
            f"{args.triplets} ({summary.describe()})"
    release = pascal50s.read(args.pascal50s, args.lang)
    jobs = [(a.pairs, a.references,
             release.triplets if a.target == pascal50s.TRIPLETS else None, "pascal50s",
             a.target, args.pascal50s) for a in release.analyses]
    return jobs, f"PASCAL-50S {args.pascal50s} ({release.note})"


def _pairs(args, vifidel_settings):
    """Pairwise accuracies (--pairwise, --triplets, --pascal50s): (rows, source, curves)."""
    if not args.metric:
        raise MetaError("pairs need --metric (the metrics to score the captions with)")
    if args.split_references and (args.pairwise or args.references):
        raise MetaError("--split-references splits the triplets' own references: it needs "
                        "--triplets or --pascal50s, without --references")
    if args.split_references and args.curve:
        raise MetaError("--curve and --split-references: choose one")
    jobs, source = _pair_sources(args)
    if args.split_references:
        jobs = [job for job in jobs if job[2] is not None]
        if not jobs:
            raise MetaError(f"--split-references needs the triplets ({pascal50s.VOTES_FILE})")
    rows, curves = [], {}
    for pairs, references, triplet_list, analysis, target, where in jobs:
        ties = sum(p.human == 0 for p in pairs)
        source += (f"; {target}: {ties} of {len(pairs)} pairs are human ties, "
                   + ("left out" if args.human_ties == "drop" else "broken at random"))
        common = dict(num_refs=args.num_refs, draws=args.draws, seed=args.seed,
                      samples=args.samples, confidence=args.confidence,
                      human_ties=args.human_ties, vifidel_settings=vifidel_settings,
                      where=where)
        if args.split_references:
            rows += triplets.split_rows(triplet_list, args.lang, args.metric,
                                        analysis=analysis, **common)
            continue
        rows += pairwise.rows(pairs, references, args.metric, analysis=analysis,
                              target=target, **common)
        if args.curve:
            max_refs = min(len(references[p.image]) for p in pairs)
            for metric in args.metric:
                name = metric if len(jobs) == 1 else f"{metric} ({target})"
                curves[name] = pairwise.curve(
                    pairs, references, metric, max_refs, draws=args.draws, seed=args.seed,
                    human_ties=args.human_ties, vifidel_settings=vifidel_settings, where=where)
    return rows, source, curves or None


def run(args):
    """Runs one analysis of parsed arguments: (rows, description of the inputs, curves or
    None)."""
    if args.samples < 0 or args.draws < 1 or not 0 < args.confidence < 1:
        raise MetaError("--samples must be >= 0, --draws >= 1 and --confidence in (0, 1)")
    if args.num_refs is not None and args.num_refs < 1:
        raise MetaError(f"--num-refs must be at least 1, got {args.num_refs} (leave it out to "
                        f"use all references)")
    try:
        languages.check_langs([args.lang])
    except ValueError as e:
        raise MetaError(f"--lang: {e}") from None
    pairs_only = [flag for flag, given in (("--num-refs", args.num_refs is not None),
                                           ("--split-references", args.split_references),
                                           ("--curve", args.curve)) if given]
    if pairs_only and (args.thumb or args.side_by_side):
        raise MetaError(f"{', '.join(pairs_only)}: for pairs only (--pairwise, --triplets, "
                        f"--pascal50s)")
    vifidel_settings = None
    if "vifidel" in (args.metric or ()):
        if not args.labels or not args.vectors:
            raise MetaError("--metric vifidel needs --labels and --vectors")
        vifidel_settings = vifidel_options.settings(args)
    if args.thumb:
        rounds = [thumb_ratings.read(path) for path in args.thumb]
        tab = thumb.table(rounds)
        caption_metrics, system_metrics = _thumb_inputs(args, tab, rounds, vifidel_settings)
        return thumb_rows(tab, caption_metrics, system_metrics, without=args.without or (),
                          samples=args.samples, seed=args.seed,
                          confidence=args.confidence), ", ".join(args.thumb), None
    if args.side_by_side:
        evaluations, columns = side_by_side.read(args.side_by_side)
        return side_by_side_rows(evaluations, columns, samples=args.samples, seed=args.seed,
                                 confidence=args.confidence), args.side_by_side, None
    return _pairs(args, vifidel_settings)


def main(argv=None):
    """Command line: see the module docstring. Returns the exit status (2 for bad input)."""
    args = _parser().parse_args(argv)
    try:
        if args.out:
            tool_cli.prepare_out(args.out)
        rows, source, curves = run(args)
    except (errors.Error, OSError) as e:
        return errors.print_error(e)
    if args.json:
        print(json.dumps({"source": source, "rows": rows,
                          "curves": {m: {k: [None if np.isnan(x) else float(x) for x in v]
                                         for k, v in c.items()}
                                     for m, c in (curves or {}).items()}}, indent=2),
              flush=True)
    else:
        print(f"({source})")
        print(meta_report.text(rows))
        if curves:
            print(meta_report.curve_text(curves))
        sys.stdout.flush()
    if args.out:  # After the results are printed: a report that cannot be written loses none.
        try:
            paths = meta_report.write(args.out, rows, source, args.confidence)
            if curves:
                paths.update(meta_report.write_curves(args.out, curves, source))
        except OSError as e:
            return errors.print_error(tool_cli.not_written(args.out, e, args.json))
        if not args.json:
            print(f"report: {', '.join(paths.values())}")
    return 0


if __name__ == "__main__":
    errors.run_main(main)
