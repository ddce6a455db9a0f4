"""Tests of tools/analysis/coefficients.py against textbook formulas."""

import itertools

import numpy as np
import pytest

from tools.analysis import coefficients


def _concordance(x, y):
    concordant = discordant = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        s = np.sign(x[i] - x[j]) * np.sign(y[i] - y[j])
        concordant += s > 0
        discordant += s < 0
    return concordant, discordant


def test_kendall_tau_c_is_stuarts_formula():
    # A 1-5 rating against a continuous score: tau-c's case (tables of unequal sides).
    x = np.array([5, 4, 4, 3, 5, 2, 1, 3, 4, 5], dtype=float)
    y = np.array([0.9, 0.7, 0.8, 0.4, 0.8, 0.5, 0.1, 0.2, 0.6, 0.7])
    c, d = _concordance(x, y)
    n, m = len(x), min(len(set(x)), len(set(y)))
    got = coefficients.coefficients(x, y)
    assert got["kendall_c"] == pytest.approx(2 * (c - d) / (n * n * (m - 1) / m), abs=1e-12)
    assert got["pearson"] == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)
    assert set(got) == {"pearson", "spearman", "kendall_b", "kendall_c"}


def test_coefficients_of_undefined_cases_are_none():
    assert coefficients.coefficients([1, 2], [3, 4])["pearson"] is None
    assert coefficients.coefficients([1, 1, 1], [3, 4, 5])["kendall_c"] is None


def test_cluster_resampling_draws_whole_clusters():
    clusters = np.array([0, 0, 1, 1, 1, 2])
    for index in coefficients.resample_index(clusters, samples=20, seed=3):
        # A drawn cluster brings all of its points.
        counts = np.bincount(clusters[index], minlength=3)
        assert all(c % size == 0 for c, size in zip(counts, (2, 3, 1), strict=True))


def test_bootstrap_intervals_hold_the_coefficient():
    x = np.arange(30.0)
    ci = coefficients.bootstrap_intervals(x, x + np.sin(x), np.arange(30) // 3, samples=50)
    assert ci["pearson"][0] <= coefficients.coefficients(x, x + np.sin(x))["pearson"] <= 1


def test_pairwise_accuracy_breaks_metric_ties_at_random():
    rng = np.random.default_rng(0)
    human = np.array([1, 1, -1, -1])
    assert coefficients.pairwise_accuracy(human, [2, 1, 0, 3], [1, 2, 1, 1], rng) == (0.5, 0)
    accuracy, ties = coefficients.pairwise_accuracy(np.ones(4000), np.zeros(4000),
                                                    np.zeros(4000), rng)
    assert ties == 4000 and accuracy == pytest.approx(0.5, abs=0.03)
