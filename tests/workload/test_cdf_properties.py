"""Hypothesis: invariants of LengthCDF for random valid breakpoint lists."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fleetplan.workload import LengthCDF


@st.composite
def length_cdfs(draw) -> LengthCDF:
    n = draw(st.integers(min_value=2, max_value=12))
    tokens = sorted(draw(st.sets(st.integers(min_value=1, max_value=300_000), min_size=n, max_size=n)))
    raw = draw(
        st.lists(
            st.sampled_from([0.0, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 1.0]) | st.floats(1e-9, 1.0),
            min_size=n - 1,
            max_size=n - 1,
        )
    )
    fractions = sorted(raw) + [1.0]  # repeated fractions (empty bins) are allowed
    return LengthCDF(tokens, fractions)


unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(length_cdfs(), st.lists(unit, min_size=1, max_size=20))
def test_cdf_of_quantile_is_identity(cdf, us):
    u = np.array(us)
    np.testing.assert_allclose(cdf.cdf(cdf.quantile(u)), np.maximum(u, 0.0), atol=1e-9)


@given(length_cdfs(), st.lists(unit, min_size=1, max_size=20))
def test_quantile_of_cdf_round_trips_where_density_positive(cdf, us):
    # x = Q(u) for u in (0, 1) lies where F is strictly increasing (or at a bin's left end)
    u = np.clip(np.array(us), 1e-6, 1.0)
    x = cdf.quantile(u)
    np.testing.assert_allclose(cdf.quantile(cdf.cdf(x)), x, rtol=1e-9, atol=1e-6)


@given(length_cdfs(), st.floats(min_value=0, max_value=400_000))
def test_quantile_of_cdf_never_exceeds_x(cdf, x):
    # inf{y : F(y) >= F(x)} <= x whenever F(x) > 0 (Q(0) is the support's lower end).
    # Subnormal x (F(x) underflows to 0 though x > 0) says nothing about the CDF.
    assume(x == 0.0 or x > 1e-300)
    # F(x) that rounds to exactly 1.0 while a breakpoint fraction just below 1 is stored
    # (0.9999999999999999) sends Q to the last breakpoint: a float artefact, not a CDF property.
    assume(not (cdf.cdf(x) == 1.0 and np.any((cdf.fractions > 1.0 - 1e-12) & (cdf.fractions < 1.0))))
    if cdf.cdf(x) > 0:
        assert cdf.quantile(cdf.cdf(x)) <= x + 1e-6 * max(1.0, x)
    else:
        assert cdf.quantile(0.0) == cdf.min_tokens and x <= cdf.min_tokens


@given(length_cdfs(), st.integers(min_value=0, max_value=2**32 - 1))
def test_samples_are_integers_within_support(cdf, seed):
    t = cdf.sample(np.random.default_rng(seed), 500)
    assert t.dtype == np.int64
    assert t.min() >= 1 and t.max() <= int(np.ceil(cdf.max_tokens))


@given(length_cdfs(), unit, unit, st.lists(st.floats(0, 400_000), min_size=1, max_size=10))
def test_restrict_is_the_conditional_distribution(cdf, a, b, xs):
    lo, hi = sorted((float(cdf.quantile(a)), float(cdf.quantile(b))))
    mass = cdf.prob(lo, hi)
    if mass < 1e-6:
        return
    r = cdf.restrict(lo, hi)
    x = np.clip(np.array(xs), lo, hi)
    expected = (cdf.cdf(x) - cdf.cdf(lo)) / mass
    np.testing.assert_allclose(r.cdf(x), expected, atol=1e-9)
    assert r.prob(0, lo) == 0.0 and r.prob(lo, hi) == 1.0


@given(length_cdfs(), st.integers(min_value=0, max_value=2**32 - 1))
@settings(max_examples=40, deadline=None)
def test_sample_mean_matches_exact_mean(cdf, seed):
    # T = ceil(X): E[X] <= E[T] < E[X] + 1; allow 5 standard errors of the sample mean on top.
    n = 100_000
    t = cdf.sample(np.random.default_rng(seed), n)
    se = cdf.std() / np.sqrt(n)
    assert cdf.mean() - 5 * se - 1e-9 <= t.mean() <= cdf.mean() + 1 + 5 * se


@given(length_cdfs())
def test_mean_and_second_moment_consistent(cdf):
    m1, m2 = cdf.mean(), cdf.moment(2)
    assert 0 < m1 <= cdf.max_tokens
    assert m2 >= m1 * m1 * (1 - 1e-12)
