"""Krippendorff's alpha (tools/humaneval/agreement.py) against the `krippendorff` package."""

import krippendorff
import numpy as np
import pytest

from tools.humaneval import agreement


def _reliability_data(seed, raters=3, units=60, domain=(-3, 3), missing=0.2):
    """Ratings [raters, units] with shared signal, noise and missing values (nan)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(domain[0], domain[1] + 1, size=units)
    data = np.clip(truth + rng.integers(-1, 2, size=(raters, units)), *domain).astype(float)
    data[rng.random(data.shape) < missing] = np.nan
    return data


def _units(data):
    return [[v for v in column if not np.isnan(v)] for column in data.T]


@pytest.mark.parametrize("level", agreement.LEVELS)
@pytest.mark.parametrize("seed", range(4))
def test_alpha_equals_the_reference_implementation(level, seed):
    data = _reliability_data(seed, raters=3 + seed % 2)
    domain = list(range(-3, 4))
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level,
                                  value_domain=domain)
    assert agreement.alpha(_units(data), level, domain) == pytest.approx(expected, abs=1e-9)


def test_ordinal_alpha_depends_only_on_the_order_of_values():
    data = _reliability_data(9, domain=(1, 5))
    units = _units(data)
    spread = [[v ** 3 for v in u] for u in units]  # same order, other distances
    assert agreement.alpha(spread, "ordinal") == pytest.approx(
        agreement.alpha(units, "ordinal"), abs=1e-12)
    assert agreement.alpha(spread, "interval") != pytest.approx(
        agreement.alpha(units, "interval"), abs=1e-3)


def test_ordinal_alpha_of_perfect_agreement_is_1():
    # Perfect agreement, and undefined cases.
    assert agreement.alpha([[1, 1], [2, 2, 2], [3, 3]], "ordinal") == pytest.approx(1.0)


def test_ordinal_alpha_without_variation_or_pairs_is_undefined():
    assert agreement.alpha([[2, 2], [2, 2]], "ordinal") is None  # no variation
    assert agreement.alpha([[1], [2]], "ordinal") is None  # nothing pairable


def test_ordinal_alpha_refuses_values_outside_the_domain():
    with pytest.raises(ValueError, match="not in the domain"):
        agreement.alpha([[1, 9]], "ordinal", domain=[1, 2])
