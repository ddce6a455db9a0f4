"""Agreement of a metric with human judgements: correlations, bootstrap intervals, accuracy.

- `coefficients`: Pearson, Spearman, Kendall's tau-b and tau-c (scipy.stats; tau-b counts ties
  in its denominator, tau-c is Stuart's, for tables whose two sides have different numbers of
  distinct values, such as a 1-5 rating against a continuous score). Undefined (fewer than
  MIN_POINTS points, or a constant sample) is None.
- `bootstrap_intervals`: percentile intervals of each coefficient over resamples of clusters of
  points (an image with all its captions, a side-by-side evaluation with its flipped twin), so
  that points that belong together are drawn together.
- `pairwise_accuracy`: how often a metric prefers the caption people preferred, a tie of the
  metric broken at random (the CIDEr paper's protocol for triplets).
"""

import warnings

import numpy as np
from scipy import stats

COEFFICIENTS = ("pearson", "spearman", "kendall_b", "kendall_c")
# Fewer points than this leave a correlation undefined.
MIN_POINTS = 3
CONFIDENCE = 0.95


def coefficients(x, y, names=COEFFICIENTS):
    """Correlation coefficients of two samples.

    Args:
        x, y: float arrays [n].
        names: which of COEFFICIENTS.

    Returns:
        {name: float or None}; None where undefined (fewer than MIN_POINTS points, or a
        constant sample).
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if len(x) < MIN_POINTS or np.ptp(x) == 0 or np.ptp(y) == 0:
        return {name: None for name in names}
    functions = {
        "pearson": lambda: stats.pearsonr(x, y)[0],
        "spearman": lambda: stats.spearmanr(x, y)[0],
        "kendall_b": lambda: stats.kendalltau(x, y, variant="b")[0],
        "kendall_c": lambda: stats.kendalltau(x, y, variant="c")[0],
    }
    with warnings.catch_warnings():
        # A sample constant after ties makes scipy warn and return nan; None says it.
        warnings.simplefilter("ignore")
        values = {name: functions[name]() for name in names}
    return {name: (float(v) if np.isfinite(v) else None) for name, v in values.items()}


def resample_index(clusters, samples, seed):
    """Index arrays of `samples` cluster bootstrap resamples.

    Args:
        clusters: int array [n], the cluster of each point.
        samples: number of resamples.
        seed: seed of the draw.

    Returns:
        A list of `samples` int arrays of point indices (clusters drawn with replacement, each
        drawn cluster contributing all its points).
    """
    clusters = np.asarray(clusters)
    ids, inverse = np.unique(clusters, return_inverse=True)
    members = [np.flatnonzero(inverse == k) for k in range(len(ids))]
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(ids), size=(samples, len(ids)))
    return [np.concatenate([members[k] for k in draw]) for draw in draws]


def interval(values, confidence=CONFIDENCE):
    """The percentile interval of resampled values (None values dropped), or None."""
    values = np.array([v for v in values if v is not None], dtype=float)
    if values.size == 0:
        return None
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return [float(low), float(high)]


def bootstrap_intervals(x, y, clusters, samples=1000, seed=0, confidence=CONFIDENCE,
                        names=COEFFICIENTS):
    """Cluster bootstrap intervals of the coefficients.

    Args:
        x, y: float arrays [n].
        clusters: int array [n], the cluster of each point (e.g. its image).
        samples, seed: the resampling.
        confidence: the interval's coverage.
        names: which coefficients.

    Returns:
        {name: [low, high] or None}.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    resampled = {name: [] for name in names}
    for index in resample_index(clusters, samples, seed):
        for name, value in coefficients(x[index], y[index], names).items():
            resampled[name].append(value)
    return {name: interval(values, confidence) for name, values in resampled.items()}


def pairwise_accuracy(human, metric_a, metric_b, rng):
    """How often the metric agrees with people on which of two captions is better.

    Args:
        human: int array [pairs], +1 where people preferred caption a, -1 where b.
        metric_a, metric_b: float arrays [pairs], the metric's scores of the two captions.
        rng: a numpy Generator; a tie of the metric is broken by a fair coin from it.

    Returns:
        (accuracy, number of metric ties).
    """
    human = np.asarray(human)
    diff = np.asarray(metric_a, float) - np.asarray(metric_b, float)
    ties = diff == 0
    choice = np.where(ties, rng.choice([-1, 1], size=diff.size), np.sign(diff))
    return float(np.mean(choice == human)) if human.size else float("nan"), int(ties.sum())
