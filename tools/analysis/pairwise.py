"""Pairwise accuracy of caption metrics: how often a metric prefers the caption people preferred.

The CIDEr paper's measure (Vedantam et al., CVPR 2015, Sec. 7): over pairs of candidate
captions of one image, each with a human winner, the share where the metric scores the winner
higher. The human winner comes from per-pair preferences (`read_preferences`,
`meta --pairwise`) or from triplet judgements by the paper's majorities
(tools/analysis/triplets.py, `meta --triplets` and `--pascal50s`).

- Each image's references are sub-sampled to `num_refs` for each of `draws` draws (the same
  draw scores both captions of a pair, and every pair of the image); the accuracy is the mean
  over the draws, with its smallest and largest draw.
- A metric tie is broken by a fair coin (counted as `metric_ties`).
- A pair whose human winner is a tie (`human` 0) is left out of the accuracy and counted
  (`human_ties="drop"`, the default), or given a winner by a fair coin in each draw
  (`human_ties="random"`, as CLIPScore's PASCAL-50S evaluation does).
- `curve` repeats this for 1, 2, ... references per image.
"""

import collections
import dataclasses

import numpy as np

from data import jsonl
from tools.analysis import coefficients as coefficients_lib
from tools.analysis import meta_scores
from tools.analysis.meta_scores import MetaError

HUMAN_TIES = ("drop", "random")


@dataclasses.dataclass(frozen=True)
class Pair:
    """Two candidate captions of an image and the human verdict.

    Attributes:
        image: the image key.
        lang: the captions' language.
        a, b: the two captions.
        human: +1 where people preferred a, -1 where b, 0 for a tie.
        where: the file (and line) it comes from, for messages.
        kind: the pair's kind (PASCAL-50S: HC, HI, HM or MM), or None.
    """
    image: str
    lang: str
    a: str
    b: str
    human: int
    where: str
    kind: str | None = None


def read_preferences(path, lang):
    """Reads per-pair preferences, JSONL {"image/key", "a", "b", "preference": "a" | "b" |
    "tie", "lang"?, "kind"?}: [Pair] (a tie has human 0). A pair given again (either order) is
    another judgement of it and kept as such (`repeats` counts them), as PASCAL-50S's release
    holds two of its pairs twice, each with its own votes."""
    pairs = []
    try:
        for where, obj in jsonl.read_objects(path, error=MetaError):
            image, a, b, pref = (obj.get(k) for k in ("image/key", "a", "b", "preference"))
            if not isinstance(image, (str, int)) or not isinstance(a, str) or not isinstance(
                    b, str):
                raise MetaError(f"{where}: expected {{\"image/key\", \"a\", \"b\", "
                                f"\"preference\"}} with caption strings")
            if pref not in ("a", "b", "tie"):
                raise MetaError(f"{where}: field 'preference': {pref!r} is not a, b or tie")
            kind = obj.get("kind")
            if kind is not None and not isinstance(kind, str):
                raise MetaError(f"{where}: field 'kind': {kind!r} is not a string")
            pairs.append(Pair(str(image), obj.get("lang", lang), a, b,
                              {"a": 1, "b": -1, "tie": 0}[pref], where, kind))
    except FileNotFoundError:
        raise MetaError(f"pairwise preferences not found: {path}") from None
    if not any(p.human for p in pairs):
        raise MetaError(f"{path}: no preferences other than ties")
    return pairs


def repeats(pairs):
    """The note on pairs that repeat an earlier pair of their image (either order), or ""."""
    seen = collections.Counter((p.image, p.lang, frozenset((p.a, p.b))) for p in pairs)
    count = sum(n - 1 for n in seen.values())
    return (f"{count} pair{'s' if count > 1 else ''} repeat{'' if count > 1 else 's'} an "
            f"earlier pair of {'their' if count > 1 else 'its'} image, each kept as a separate "
            f"judgement") if count else ""


def check(pairs, references, num_refs, human_ties):
    """MetaError for an unknown human-ties handling or a --num-refs below 1 or above every
    image's reference count."""
    if human_ties not in HUMAN_TIES:
        raise MetaError(f"unknown human-ties handling {human_ties!r}; known: "
                        f"{', '.join(HUMAN_TIES)}")
    if num_refs is not None and num_refs < 1:
        raise MetaError(f"--num-refs must be at least 1, got {num_refs} (leave it out to use "
                        f"all references)")
    counts = [len(references[p.image]) for p in pairs if p.image in references]
    if num_refs is not None and counts and num_refs > max(counts):
        raise MetaError(f"--num-refs {num_refs}: the images have at most {max(counts)} "
                        f"references")


def refs_label(pairs, references, num_refs):
    """What the references per image are, truthfully ("4 refs", "2-4 refs", "all (5) refs")."""
    counts = sorted({len(references[p.image]) for p in pairs if p.image in references})
    used = sorted({min(num_refs, c) for c in counts}) if num_refs else counts
    span = f"{used[0]}" if len(used) == 1 else f"{used[0]}-{used[-1]}"
    return f"{span} refs" if num_refs else f"all ({span}) refs"


def agreement(pairs, references, metric, *, num_refs=None, draws=5, rng=None,
              human_ties="drop", vifidel_settings=None, where="references"):
    """Per draw and pair, whether the metric agrees with people.

    Returns:
        (agree: float [draws, pairs] of 0 / 1, NaN for a dropped human tie; metric ties
        summed over the draws).
    """
    rng = rng or np.random.default_rng(0)
    agree = np.full((draws, len(pairs)), np.nan)
    human = np.array([p.human for p in pairs])
    ties = 0
    for d in range(draws):
        for lang in sorted({p.lang for p in pairs}):
            chosen = [i for i, p in enumerate(pairs) if p.lang == lang]
            items = ([(pairs[i].image, pairs[i].a) for i in chosen]
                     + [(pairs[i].image, pairs[i].b) for i in chosen])
            scores = meta_scores.compute(metric, lang, items, references, num_refs=num_refs,
                                         rng=rng, vifidel_settings=vifidel_settings,
                                         where=where)
            diff = scores[:len(chosen)] - scores[len(chosen):]
            ties += int((diff == 0).sum())
            choice = np.where(diff == 0, rng.choice([-1, 1], size=diff.size), np.sign(diff))
            verdict = human[chosen]
            if human_ties == "random":
                verdict = np.where(verdict == 0, rng.choice([-1, 1], size=verdict.size),
                                   verdict)
            agree[d, chosen] = np.where(verdict == 0, np.nan, choice == verdict)
    return agree, ties


def _accuracy(agree, index, samples, seed, confidence):
    """Accuracy of the pairs `index` (mean over draws) with its draws' range and interval.

    NaN entries (dropped human ties, which may differ from draw to draw) are left out."""
    part = agree[:, index]
    valid = ~np.isnan(part)
    if not valid.any():
        return {"n": 0, "accuracy": None}
    per_draw = np.array([row[ok].mean() for row, ok in zip(part, valid, strict=True)
                         if ok.any()])
    out = {"n": int(valid.any(axis=0).sum()), "accuracy": float(per_draw.mean()),
           "accuracy_min": float(per_draw.min()), "accuracy_max": float(per_draw.max())}
    if samples:
        with np.errstate(invalid="ignore"):
            per_pair = np.nanmean(part[:, valid.any(axis=0)], axis=0)
        rng = np.random.default_rng(seed)
        draw = rng.integers(0, per_pair.size, size=(samples, per_pair.size))
        out["accuracy_ci"] = coefficients_lib.interval(per_pair[draw].mean(axis=1), confidence)
    return out


def summarize(pairs, agree, metric_ties, *, metric, label, analysis="pairwise",
              target="preference", samples=1000, seed=0,
              confidence=coefficients_lib.CONFIDENCE, human_ties="drop"):
    """Rows of one metric's agreement (`agreement`): all pairs, then each kind of pair."""
    draws = agree.shape[0]
    kinds = sorted({p.kind for p in pairs if p.kind})
    groups = [("all", np.arange(len(pairs)))] + [
        (kind, np.array([i for i, p in enumerate(pairs) if p.kind == kind])) for kind in kinds]
    out = []
    for kind, index in groups:
        row = {"analysis": analysis, "subset": label if kind == "all" else f"{kind}, {label}",
               "level": "pair", "target": target, "metric": metric,
               **_accuracy(agree, index, samples, seed, confidence), "draws": draws,
               "pairs": int(len(index)),
               # Per draw where the winners change with the draw (triplets.split_rows).
               "human_ties": float(np.isnan(agree[:, index]).sum(axis=1).mean())
               if human_ties == "drop" else int(sum(pairs[i].human == 0 for i in index)),
               "human_ties_handling": human_ties}
        if kind == "all":
            row["metric_ties"] = metric_ties / draws
        out.append(row)
    return out


def rows(pairs, references, metrics, *, analysis="pairwise", target="preference",
         num_refs=None, draws=5, seed=0, samples=1000,
         confidence=coefficients_lib.CONFIDENCE, human_ties="drop", vifidel_settings=None,
         where="references"):
    """Accuracy rows of each metric: all pairs, and each kind of pair where there are kinds.

    Raises:
        MetaError: --num-refs below 1 or above every image's reference count, an unknown
            human-ties handling, only human ties, an image without references, an engine's
            input error.
    """
    check(pairs, references, num_refs, human_ties)
    if human_ties == "drop" and not any(p.human for p in pairs):
        raise MetaError("every pair is a human tie: no accuracy to measure")
    label = refs_label(pairs, references, num_refs)
    out = []
    for metric in metrics:
        agree, metric_ties = agreement(
            pairs, references, metric, num_refs=num_refs, draws=draws,
            rng=np.random.default_rng(seed), human_ties=human_ties,
            vifidel_settings=vifidel_settings, where=where)
        out += summarize(pairs, agree, metric_ties, metric=metric, label=label,
                         analysis=analysis, target=target, samples=samples, seed=seed,
                         confidence=confidence, human_ties=human_ties)
    return out


def curve(pairs, references, metric, max_refs, *, draws=5, seed=0, human_ties="drop",
          vifidel_settings=None, where="references"):
    """Accuracy against the number of references per image, 1 .. max_refs.

    Returns:
        {kind ("all", then each kind): float [max_refs] accuracies (mean over draws)}.
    """
    check(pairs, references, max_refs, human_ties)
    kinds = ["all"] + sorted({p.kind for p in pairs if p.kind})
    out = {kind: np.full(max_refs, np.nan) for kind in kinds}
    for k in range(1, max_refs + 1):
        agree, _ = agreement(pairs, references, metric, num_refs=k, draws=draws,
                             rng=np.random.default_rng(seed + k), human_ties=human_ties,
                             vifidel_settings=vifidel_settings, where=where)
        for kind in kinds:
            index = [i for i, p in enumerate(pairs) if kind == "all" or p.kind == kind]
            part = agree[:, index]
            with np.errstate(invalid="ignore"):
                out[kind][k - 1] = float(np.nanmean(part)) if (~np.isnan(part)).any() else np.nan
    return out
