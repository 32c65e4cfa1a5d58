"""The engine model's fast paths give the numbers of the plain forms they replace: numpy's geomspace bit for
bit, the sorted step-function sums and the per-level sum of two exponential waits to float rounding."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.queueing.engine import _geomspace, _step_survival, _two_exponentials_level


@settings(max_examples=300, deadline=None)
@given(st.floats(1e-9, 1e6), st.floats(1e-3, 1e7), st.integers(2, 200))
def test_geomspace_is_numpys_bit_for_bit(lo: float, ratio: float, n: int) -> None:
    hi = lo * ratio
    assert np.array_equal(_geomspace(lo, hi, n), np.geomspace(lo, hi, n))
    assert np.array_equal(_geomspace(lo, lo, n), np.geomspace(lo, lo, n))


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6), st.integers(1, 60), st.integers(1, 100), st.integers(0, 2**32 - 1))
def test_sorted_step_sums_are_the_plain_sums(levels: int, m: int, n_x: int, seed: int) -> None:
    """Σ_m w_m [x < t_lm] by suffix sums over sorted t equals the comparison sum, ties and x on a t included."""
    rng = np.random.default_rng(seed)
    t = np.round(rng.random((levels, m)) * 20.0) / 4.0  # coarse: many ties
    w = rng.random(m)
    x = np.concatenate([rng.random(n_x) * 6.0, t.ravel()[:3], [-1.0, 99.0]])
    want = (x[:, None, None] < t[None, :, :]).astype(np.float64) @ w
    np.testing.assert_allclose(_step_survival(x, t, w), want, rtol=1e-12, atol=1e-15)


@settings(max_examples=200, deadline=None)
@given(st.floats(0.1, 1e4), st.floats(0.1, 1e4), st.sampled_from([0.0, 1e-7, 1.0, np.inf]))
def test_two_waits_per_level_match_their_closed_forms(k: float, k_api: float, near: float) -> None:
    """P(W + A > y) for W ~ Exp(k), A ~ Exp(k_a): the hypoexponential survival, (1 + k y) e^{-k y} where
    the rates agree to 1e-6, A's alone for an infinite k; 1 before 0."""
    if near == np.inf:
        k = np.inf
    elif near < 1.0:
        k = k_api * (1.0 + near)
    y = np.linspace(-0.01, 5.0 / min(k, k_api), 64)
    yp = np.maximum(y, 0.0)
    got = _two_exponentials_level(y, yp, k, k_api)
    if np.isinf(k):
        want = np.exp(-k_api * yp)
    elif abs(k - k_api) <= 1e-6 * max(k_api, 1.0):
        want = (1.0 + k * yp) * np.exp(-k * yp)
    else:
        want = (k * np.exp(-k_api * yp) - k_api * np.exp(-k * yp)) / (k - k_api)
    want = np.where(y < 0, 1.0, want)
    np.testing.assert_array_equal(got, want)
    assert np.all(np.diff(got) <= 1e-15) and got[0] == 1.0 and np.all(got >= -1e-15)


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-6, 1.0), st.floats(1e-3, 1e4), st.integers(0, 2**32 - 1))
def test_api_wait_after_is_the_where_form_bit_for_bit(mass: float, k_api: float, seed: int) -> None:
    """``_api_wait_after`` (the exponential only where kept) equals np.where(y < 0, 1, C e^{-k_a max(y, 0)})
    bit for bit, zeros of both signs and a nan included."""
    from fleetplan.queueing.engine import _api_wait_after

    rng = np.random.default_rng(seed)
    y = rng.normal(0.0, 3.0 / k_api, (7, 5, 11))
    y.flat[:4] = [0.0, -0.0, np.nan, -1e-300]
    want = np.where(y < 0, 1.0, mass * np.exp(-k_api * np.maximum(y, 0.0)))
    got = _api_wait_after(y, mass, k_api)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))
