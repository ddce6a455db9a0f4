"""Tests of tools/vifidel/wmd.py: EMD against linear programming, the importance penalty."""

import math

import numpy as np
import pytest

from tests.tools.vifidel.conftest import emd_lp
from tools.vifidel import wmd


@pytest.mark.parametrize("seed", range(6))
def test_emd_equals_a_linear_program(seed):
    rng = np.random.default_rng(seed)
    m, n, dim = rng.integers(1, 7), rng.integers(1, 9), 5
    x = rng.normal(size=(m, dim))
    y = rng.normal(size=(n, dim))
    a, b = rng.integers(1, 4, size=m).astype(float), rng.integers(1, 4, size=n).astype(float)
    cost = wmd.cost_matrix(x, y, rng.uniform(size=m), rng.uniform(size=n))
    assert wmd.emd(a, b, cost) == pytest.approx(emd_lp(a, b, cost), abs=1e-6)


def test_cost_matrix_is_the_distances_to_the_power_p():
    x = np.array([[1.0, 0.0], [0.0, 1.0]])
    y = np.array([[0.6, 0.8]])
    plain = [[math.sqrt(0.16 + 0.64)], [math.sqrt(0.36 + 0.04)]]
    np.testing.assert_allclose(wmd.cost_matrix(x, y, power=1), plain)
    np.testing.assert_allclose(wmd.cost_matrix(x, y), np.square(plain))  # p = 2: Eq. 1
    np.testing.assert_allclose(wmd.cost_matrix(x, y, np.array([0.5, 0.0]), np.array([1.0]),
                                               power=1), [[math.sqrt(0.01 + 0.64)], [1.0]])


def test_score_is_exp_of_minus_wmd():
    x = np.array([[1.0, 0.0], [0.0, 1.0]])
    # The score is exp(-WMD), zero for an empty caption.
    assert wmd.vifidel([1.0], x[:1], [2.0], x[:1]) == (1.0, 0.0)
    score, distance = wmd.vifidel([1.0], x[:1], [1.0], np.array([[0.0, 1.0]]))
    assert distance == pytest.approx(2) and score == pytest.approx(math.exp(-2))
    score, distance = wmd.vifidel([1.0], x[:1], [1.0], np.array([[0.0, 1.0]]), power=1)
    assert distance == pytest.approx(math.sqrt(2)) and score == pytest.approx(math.exp(-2**.5))
    assert wmd.vifidel([1.0], x[:1], [], np.zeros((0, 2))) == (0.0, math.inf)


def test_importance_is_eq4_the_halved_cosine_distance_averaged_over_references():
    x = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    ref_a = np.array([[1.0, 0.0]])
    ref_b = np.array([[0.6, 0.8], [0.0, -1.0]])
    # Per reference: (1 - the best cosine) / 2 (the opposite vector: (1 - (-1)) / 2 = 1).
    expected_a = [0.0, 0.5, 1.0]
    expected_b = [(1 - 0.6) / 2, (1 - 0.8) / 2, (1 - 0) / 2]
    np.testing.assert_allclose(wmd.importance(x, [ref_a, ref_b]),
                               np.mean([expected_a, expected_b], axis=0))
    np.testing.assert_array_equal(wmd.importance(x, []), [1.0, 1.0, 1.0])
    # The former reading: 1 - cos clipped to [0, 1].
    np.testing.assert_allclose(wmd.importance(x, [ref_a, ref_b], "clipped"),
                               np.mean([[0.0, 1.0, 1.0], [0.4, 0.2, 1.0]], axis=0))
