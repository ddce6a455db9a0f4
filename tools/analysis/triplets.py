"""The CIDEr paper's triplet protocol (Vedantam et al., CVPR 2015, Sec. 7), as written.

A triplet is (reference A, candidates B and C) of one image, and people answer "which of B or
C is more similar to A?". The paper:

1. collects 3 judgements per triplet and takes their majority: the triplet's winner;
2. tries each candidate pair with the image's references, one triplet per reference;
3. takes the pair's winner as the candidate chosen by the majority of its triplets;
4. scores a metric by its accuracy: the share of pairs where its higher score goes to that
   winner (tools/analysis/pairwise.py).

`aggregate` does 1-3 on a judgements file (tools/formats/triplet_judgements.py). Where the paper is
silent, this module chooses, and says so:

- a triplet whose judgements split evenly (an even number of them, e.g. 2 where one was lost)
  has no winner and does not vote;
- a pair whose triplets split evenly is a human tie, `human` 0 (pairwise.py drops it from the
  accuracy and counts it, or breaks it at random with --human-ties random);
- the metric's references for an image are the references of its triplets (the sentences
  people compared against: PASCAL-50S's 48 per image), unless the tool is given others.

`pairs_from_triplets` does step 3 alone, for releases that store each triplet's winner rather
than the judgements (PASCAL-50S, tools/analysis/pascal50s.py).
"""

import collections
import dataclasses

import numpy as np

from tools.analysis import coefficients as coefficients_lib
from tools.analysis import pairwise
from tools.analysis.meta_scores import MetaError
from tools.analysis.pairwise import Pair


@dataclasses.dataclass(frozen=True)
class Triplet:
    """A triplet's outcome.

    Attributes:
        image: the image key.
        reference: the reference caption A.
        a, b: the pair's candidates, in the pair's order.
        outcome: +1 where the majority chose a, -1 where b, 0 where its judgements split.
        kind: the pair's kind, or None.
        lang: the language, or None.
        where: where it comes from (the first judgement's file:line).
        pair: the pair's number where a release numbers its pairs (PASCAL-50S), so that a
            pair it holds twice stays two pairs; None: pairs are told apart by their captions.
    """
    image: str
    reference: str
    a: str
    b: str
    outcome: int
    kind: str | None
    lang: str | None
    where: str
    pair: int | None = None


@dataclasses.dataclass(frozen=True)
class Summary:
    """What the aggregation saw.

    Attributes:
        judgements: lines read.
        triplets: triplets formed.
        per_triplet: {number of judgements: number of triplets with that many}.
        split_triplets: triplets without a majority.
        pairs: candidate pairs.
        human_ties: pairs whose triplets split evenly.
    """
    judgements: int
    triplets: int
    per_triplet: dict
    split_triplets: int
    pairs: int
    human_ties: int

    def describe(self):
        """One line for reports."""
        counts = ", ".join(f"{n} with {k}" for k, n in sorted(self.per_triplet.items()))
        return (f"{self.judgements} judgements in {self.triplets} triplets ({counts} "
                f"judgements; {self.split_triplets} without a majority), {self.pairs} pairs "
                f"({self.human_ties} human ties)")


def _sign(x):
    return (x > 0) - (x < 0)


def triplets_from_judgements(judgements):
    """Step 1: each triplet's winner, the majority of its judgements.

    Returns:
        ([Triplet] in first-seen order, {judgements per triplet: count}).
    """
    order = {}  # pair -> (a, b): the order of its first line
    votes = collections.defaultdict(list)  # (pair, reference) -> [+1 a / -1 b]
    first = {}
    for j in judgements:
        pair = (j.image, frozenset((j.b, j.c)))
        a, b = order.setdefault(pair, (j.b, j.c))
        key = (pair, j.reference)
        first.setdefault(key, j)
        votes[key].append(1 if j.choice == a else -1)
    triplets = []
    for key, choices in votes.items():
        j = first[key]
        a, b = order[key[0]]
        triplets.append(Triplet(j.image, j.reference, a, b, _sign(sum(choices)), j.kind, j.lang,
                                j.where))
    return triplets, dict(collections.Counter(len(v) for v in votes.values()))


def pairs_from_triplets(triplets, lang, votes=None):
    """Step 3: each pair's winner, the majority of its triplets' winners.

    Args:
        triplets: `Triplet`s (their order sets the pairs' order).
        lang: the language of triplets without one.
        votes: which triplets vote (a predicate; default all): the others still make their
            pair and reference known, so that the pairs come in the same order.

    Returns:
        ([pairwise.Pair], {image: [the references of its triplets, first-seen order]}).
    """
    tally = {}
    references = {}
    for t in triplets:
        pair = tally.setdefault((t.image, t.a, t.b, t.pair), [0, t])
        if votes is None or votes(t):
            pair[0] += t.outcome
        refs = references.setdefault(t.image, [])
        if t.reference not in refs:
            refs.append(t.reference)
    pairs = [Pair(image, first.lang or lang, a, b, _sign(total), first.where, first.kind)
             for (image, a, b, _), (total, first) in tally.items()]
    return pairs, references


def split_references(triplets, lang, rng):
    """The paper's human-vs-machine setting (Sec. 7), one random draw: each image's triplet
    references split in two halves; the pair winners come from the triplets of the first
    half, the metric scores with the second.

    Returns:
        ([pairwise.Pair] in `pairs_from_triplets` order, {image: [the held-out references]}).
    """
    _, references = pairs_from_triplets(triplets, lang)
    voting, held = {}, {}
    for image, refs in references.items():
        order = rng.permutation(len(refs))
        half = len(refs) // 2
        voting[image] = {refs[i] for i in order[:half]}
        held[image] = [refs[i] for i in sorted(order[half:])]
    pairs, _ = pairs_from_triplets(triplets, lang,
                                   votes=lambda t: t.reference in voting[t.image])
    return pairs, held


def aggregate(judgements, lang):
    """Steps 1-3 on judgements (`tools.formats.triplet_judgements.read`).

    Returns:
        ([pairwise.Pair], {image: [references]}, Summary).

    Raises:
        MetaError: a triplet whose reference is one of its own candidates.
    """
    for j in judgements:
        if j.reference in (j.b, j.c):
            raise MetaError(f"{j.where}: the reference is one of the candidates")
    triplets, per_triplet = triplets_from_judgements(judgements)
    pairs, references = pairs_from_triplets(triplets, lang)
    summary = Summary(judgements=len(judgements), triplets=len(triplets),
                      per_triplet=per_triplet,
                      split_triplets=sum(t.outcome == 0 for t in triplets), pairs=len(pairs),
                      human_ties=sum(p.human == 0 for p in pairs))
    return pairs, references, summary


def split_rows(triplets, lang, metrics, *, num_refs=None, draws=5, seed=0, samples=1000,
               confidence=coefficients_lib.CONFIDENCE, human_ties="drop",
               vifidel_settings=None, where="references", analysis="triplets"):
    """Accuracy rows in the human-vs-machine setting (`split_references`), one split per
    draw: the winners and the metric's references change together from draw to draw."""
    out = []
    for metric in metrics:
        rng = np.random.default_rng(seed)
        agree, ties = [], 0
        for _ in range(draws):
            pairs, held = split_references(triplets, lang, rng)
            if not agree:
                pairwise.check(pairs, held, num_refs, human_ties)
                label = (f"winners from half the references, metric with "
                         f"{pairwise.refs_label(pairs, held, num_refs)} of the other half")
            one, metric_ties = pairwise.agreement(
                pairs, held, metric, num_refs=num_refs, draws=1, rng=rng,
                human_ties=human_ties, vifidel_settings=vifidel_settings, where=where)
            agree.append(one[0])
            ties += metric_ties
        out += pairwise.summarize(pairs, np.stack(agree), ties, metric=metric, label=label,
                                  analysis=analysis, target="majority of triplets",
                                  samples=samples, seed=seed, confidence=confidence,
                                  human_ties=human_ties)
    return out
