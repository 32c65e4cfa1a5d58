"""Arrival processes.

Theorem checked: a renewal process with Gamma(1/cv², cv²/λ) gaps has mean gap 1/λ and
gap CV ``cv`` (cv = 1 is Poisson).  Each check is replicated over 30 independent
streams and the true value must lie in the 99.9% Student-t interval of the
replication means (false-alarm rate 1e-3 per check).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.metrics import student_t_interval
from fleetplan.rng import stream
from fleetplan.workload import Trace, TraceFormat, gamma_arrivals_s, poisson_arrivals_s, replay_arrivals_s

N_REPLICATIONS = 30
N_ARRIVALS = 20_000
CONFIDENCE = 0.999


def _gap_stats(times: np.ndarray) -> tuple[float, float]:
    gaps = np.diff(np.r_[0.0, times])
    return float(gaps.mean()), float(gaps.std(ddof=1) / gaps.mean())


def _interval(values) -> tuple[float, float]:
    _, lo, hi = student_t_interval(np.asarray(values), CONFIDENCE)
    return lo, hi


@pytest.mark.parametrize(("rate", "cv"), [(5.0, 1.0), (20.0, 0.5), (2.0, 3.0)])
def test_gamma_mean_rate_and_cv(rate, cv):
    stats = [
        _gap_stats(gamma_arrivals_s(stream(7, "gamma", i), rate, cv, N_ARRIVALS))
        for i in range(N_REPLICATIONS)
    ]
    lo, hi = _interval([s[0] for s in stats])
    assert lo <= 1 / rate <= hi
    lo, hi = _interval([s[1] for s in stats])
    # sample CV is biased by O(cv^3 / n); widen by that much
    bias = 3 * cv**3 / N_ARRIVALS
    assert lo - bias <= cv <= hi + bias


def test_poisson_rate_and_unit_cv():
    stats = [
        _gap_stats(poisson_arrivals_s(stream(3, "poisson", i), 10.0, N_ARRIVALS))
        for i in range(N_REPLICATIONS)
    ]
    lo, hi = _interval([s[0] for s in stats])
    assert lo <= 0.1 <= hi
    lo, hi = _interval([s[1] for s in stats])
    assert lo <= 1.0 <= hi


def test_arrivals_are_increasing_and_reproducible():
    a = poisson_arrivals_s(stream(1, "x"), 3.0, 100)
    b = poisson_arrivals_s(stream(1, "x"), 3.0, 100)
    np.testing.assert_array_equal(a, b)
    assert a.size == 100 and np.all(np.diff(a) > 0) and a[0] > 0


@pytest.mark.parametrize("rate", [0.0, -1.0, math.inf, math.nan])
def test_bad_rates_raise(rate):
    rng = np.random.default_rng(0)
    with pytest.raises(ConfigError, match="finite number > 0"):
        poisson_arrivals_s(rng, rate, 10)
    with pytest.raises(ConfigError, match="finite number > 0"):
        gamma_arrivals_s(rng, rate, 1.0, 10)


def test_bad_cv_raises():
    with pytest.raises(ConfigError, match="cv"):
        gamma_arrivals_s(np.random.default_rng(0), 1.0, 0.0, 10)


def test_replay_original_and_rescaled():
    tr = Trace([0.0, 1.0, 3.0, 4.0], [1, 2, 3, 4], [1, 1, 1, 1], "t", TraceFormat.PLAIN)
    np.testing.assert_array_equal(replay_arrivals_s(tr), [0, 1, 3, 4])
    # own rate = 3 gaps / 4 s = 0.75 req/s; at 1.5 req/s the clock runs twice as fast
    np.testing.assert_allclose(replay_arrivals_s(tr, 1.5), [0, 0.5, 1.5, 2.0])
    with pytest.raises(ConfigError):
        replay_arrivals_s(tr, -2.0)
    same = Trace([0.0, 0.0], [1, 1], [1, 1], "s", TraceFormat.PLAIN)
    with pytest.raises(ConfigError, match="no arrival rate"):
        replay_arrivals_s(same, 1.0)
