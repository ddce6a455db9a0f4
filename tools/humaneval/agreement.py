"""Krippendorff's alpha for inter-rater agreement (nominal, ordinal, interval).

Krippendorff, "Computing Krippendorff's Alpha-Reliability" (2011). From the values each unit
(item) got from its raters, only units with two or more values are pairable. The coincidence
matrix counts every ordered pair of values within a unit, weighted 1 / (m_u - 1) for a unit with
m_u values:

    o[c, k] = sum_u  #(pairs (c, k) in u) / (m_u - 1),     n_c = sum_k o[c, k],  n = sum_c n_c

and alpha = 1 - D_o / D_e with

    D_o = sum_{c,k} o[c, k] * d(c, k) / n,    D_e = sum_{c,k} n_c * n_k * d(c, k) / (n (n - 1)).

Distances d: nominal 1 when c != k; interval (c - k)^2; ordinal, over the values' rank order,
(sum_{g from c to k} n_g - (n_c + n_k) / 2)^2, which uses the marginal counts n_g, so only the
order of the values matters.
"""

import numpy as np

LEVELS = ("nominal", "ordinal", "interval")


def coincidences(units, domain):
    """The coincidence matrix of `units` over `domain`.

    Args:
        units: iterable of sequences of values (one sequence per unit, missing values left
            out); units with fewer than two values are skipped.
        domain: the possible values, in order.

    Returns:
        float array [len(domain), len(domain)].

    Raises:
        ValueError: a value is not in `domain`.
    """
    index = {v: i for i, v in enumerate(domain)}
    o = np.zeros((len(domain), len(domain)))
    for values in units:
        if len(values) < 2:
            continue
        try:
            counts = np.bincount([index[v] for v in values], minlength=len(domain))
        except KeyError as e:
            raise ValueError(f"value {e.args[0]!r} is not in the domain {list(domain)}") from None
        # Ordered pairs of distinct raters: counts_c * counts_k, minus the value with itself.
        pairs = np.outer(counts, counts) - np.diag(counts)
        o += pairs / (len(values) - 1)
    return o


def distances(level, domain, marginals):
    """The squared distance matrix d[c, k] of a level of measurement.

    Args:
        level: "nominal", "ordinal" or "interval".
        domain: the values in order (numbers for interval).
        marginals: n_c per value (used by ordinal).
    """
    size = len(domain)
    if level == "nominal":
        return 1.0 - np.eye(size)
    if level == "interval":
        values = np.asarray(domain, dtype=float)
        return (values[:, None] - values[None, :]) ** 2
    if level == "ordinal":
        cumulative = np.concatenate([[0.0], np.cumsum(marginals)])  # [size + 1]
        low = np.minimum.outer(np.arange(size), np.arange(size))
        high = np.maximum.outer(np.arange(size), np.arange(size))
        between = cumulative[high + 1] - cumulative[low]  # sum of n_g for g in [c, k]
        return (between - (marginals[:, None] + marginals[None, :]) / 2) ** 2
    raise ValueError(f"unknown level {level!r}; known: {', '.join(LEVELS)}")


def alpha(units, level="ordinal", domain=None):
    """Krippendorff's alpha of `units`.

    Args:
        units: iterable of sequences of values, one per unit (missing values left out).
        level: "nominal", "ordinal" or "interval".
        domain: the possible values in order; default the sorted values seen.

    Returns:
        alpha as a float, or None when undefined (fewer than two pairable values, or no
        variation at all: every value the same).
    """
    units = [list(u) for u in units]
    if domain is None:
        domain = sorted({v for u in units for v in u})
    o = coincidences(units, domain)
    marginals = o.sum(axis=1)  # [values]
    n = marginals.sum()
    if n < 2:
        return None
    d = distances(level, domain, marginals)
    expected = (np.outer(marginals, marginals) * d).sum() / (n - 1)
    if expected <= 0:
        return None
    return float(1.0 - (o * d).sum() / expected)
