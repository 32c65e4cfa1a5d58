"""LengthCDF against hand-computed values of small piecewise-linear distributions."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.workload import LengthCDF

# Mass 0.25 uniform on (0, 100], 0.25 on (100, 200], nothing on (200, 300], 0.5 on (300, 400].
STEPPED = LengthCDF([100, 200, 300, 400], [0.25, 0.5, 0.5, 1.0])


def test_cdf_interpolates_with_implicit_origin():
    x = np.array([-5, 0, 50, 100, 150, 250, 350, 400, 1e6])
    expected = [0, 0, 0.125, 0.25, 0.375, 0.5, 0.75, 1.0, 1.0]
    np.testing.assert_allclose(STEPPED.cdf(x), expected)


def test_quantile_inverts_and_skips_empty_bin():
    u = np.array([0.125, 0.25, 0.375, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(STEPPED.quantile(u), [50, 100, 150, 200, 350, 400])
    # u just above 0.5 lands after the zero-mass bin (200, 300]
    assert STEPPED.quantile(0.5 + 1e-12) == pytest.approx(300, abs=1e-6)


def test_quantile_zero_is_support_lower_end():
    starts_late = LengthCDF([64, 128, 256], [0.0, 0.0, 1.0])
    assert starts_late.min_tokens == 128
    assert starts_late.quantile(0.0) == 128
    assert STEPPED.quantile(0.0) == 0.0


def test_quantile_rejects_levels_outside_unit_interval():
    with pytest.raises(ConfigError):
        STEPPED.quantile([0.5, 1.5])


def test_moments_exact_for_uniform_bins():
    # E[L] = 0.25*50 + 0.25*150 + 0.5*350 = 225
    assert STEPPED.mean() == pytest.approx(225.0)
    # E[L^2] per bin (a^2 + ab + b^2)/3: 10000/3, 70000/3, 370000/3
    m2 = 0.25 * 10000 / 3 + 0.25 * 70000 / 3 + 0.5 * 370000 / 3
    assert STEPPED.moment(2) == pytest.approx(m2)
    assert STEPPED.std() == pytest.approx(np.sqrt(m2 - 225.0**2))
    uniform = LengthCDF([50, 100], [0.5, 1.0])  # U(0, 100]
    assert uniform.moment(3) == pytest.approx(100**3 / 4)


@pytest.mark.parametrize("k", [0, -1, 1.5])
def test_moment_order_must_be_positive_integer(k):
    with pytest.raises(ConfigError):
        STEPPED.moment(k)


def test_prob_and_restrict():
    assert STEPPED.prob(100, 350) == pytest.approx(0.5)
    assert STEPPED.prob(350) == pytest.approx(0.25)
    r = STEPPED.restrict(150, 350)  # mass 0.125 + 0 + 0.25 = 0.375
    np.testing.assert_allclose(r.tokens, [150, 200, 300, 350])
    np.testing.assert_allclose(r.fractions, [0, 1 / 3, 1 / 3, 1.0])
    assert r.mean() == pytest.approx((0.125 * 175 + 0.25 * 325) / 0.375)


def test_restrict_from_origin_within_first_bin_splits_segment():
    r = STEPPED.restrict(0, 60)  # uniform on (0, 60]
    assert r.tokens.size == 2
    np.testing.assert_allclose(r.cdf([15, 30, 60]), [0.25, 0.5, 1.0])


def test_restrict_to_empty_range_raises():
    with pytest.raises(ConfigError, match="no requests"):
        STEPPED.restrict(210, 290)
    with pytest.raises(ConfigError):
        STEPPED.prob(300, 100)


def test_sampling_matches_integer_cdf():
    rng = np.random.default_rng(3)
    t = STEPPED.sample(rng, 200_000)
    assert t.dtype == np.int64 and t.min() >= 1 and t.max() <= 400
    assert not np.any((t > 200) & (t <= 300))  # empty bin never drawn
    # P(T <= 100) = F(100) = 0.25; binomial SE = sqrt(.25*.75/2e5) ~ 0.001
    assert abs(np.mean(t <= 100) - 0.25) < 0.005


@pytest.mark.parametrize(
    ("tokens", "fractions", "match"),
    [
        ([], [], "empty"),
        ([10], [1.0], "1 point"),
        ([10, 5], [0.5, 1.0], "strictly increasing"),
        ([0, 5], [0.5, 1.0], "positive"),
        ([5, 10], [0.6, 0.5], "non-decreasing"),
        ([5, 10], [0.5, 0.9], "end at exactly 1"),
        ([5, 10], [-0.1, 1.0], r"\[0, 1\]"),
    ],
)
def test_invalid_points_raise_config_error(tokens, fractions, match):
    with pytest.raises(ConfigError, match=match):
        LengthCDF(tokens, fractions)


def test_arrays_are_read_only():
    with pytest.raises(ValueError):
        STEPPED.tokens[0] = 1.0
