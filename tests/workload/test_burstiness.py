"""Index of dispersion, gaps' CV and the daily profile (``workload.burstiness``).

Theorem (Cox & Lewis 1966 §4.5): counts of a Poisson process in windows of any length have
Var/mean = 1; a renewal process with gap CV c has Var/mean -> c² over long windows.  Tolerance:
with K windows the sample dispersion's standard error is about I·sqrt(2/(K-1)); we allow 5 of them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.workload import Trace, TraceFormat, arrival_stats, gamma_arrivals_s, poisson_arrivals_s, replay_ca2
from fleetplan.workload.burstiness import ArrivalStats, index_of_dispersion, interarrival_cv

N = 200_000


def _tol(value: float, k: int) -> float:
    return 5 * value * math.sqrt(2 / (k - 1))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_poisson_dispersion_is_one(seed):
    t = poisson_arrivals_s(np.random.default_rng(seed), 50.0, N)
    k = int(t[-1] // 10.0)
    assert abs(index_of_dispersion(t, 10.0) - 1.0) < _tol(1.0, k)
    assert abs(interarrival_cv(t) - 1.0) < 0.02


@pytest.mark.parametrize("cv", [0.5, 2.0])
def test_gamma_renewal_dispersion_tends_to_cv_squared(cv):
    t = gamma_arrivals_s(np.random.default_rng(7), 50.0, cv, N)
    k = int(t[-1] // 20.0)
    assert abs(index_of_dispersion(t, 20.0) - cv * cv) < _tol(cv * cv, k)
    assert abs(interarrival_cv(t) - cv) < 0.05 * cv


def _trace(t: np.ndarray) -> Trace:
    n = t.size
    return Trace(t - t[0], np.full(n, 10), np.full(n, 10), "synthetic", TraceFormat.PLAIN)


def test_replay_ca2_follows_the_replay_clock():
    # rate steps 2 <-> 8 req/s every 10 minutes: bursty at minute scales, Poisson within a step
    rng = np.random.default_rng(3)
    parts, t0 = [], 0.0
    for i in range(12):
        rate = 2.0 if i % 2 == 0 else 8.0
        x = t0 + np.sort(rng.uniform(0, 600.0, rng.poisson(rate * 600)))
        parts.append(x)
        t0 += 600.0
    tr = _trace(np.concatenate(parts))
    slow, fast = replay_ca2(tr, tr.arrival_rate_per_s, 1.0), replay_ca2(tr, 100 * tr.arrival_rate_per_s, 1.0)
    # counts in a window T of the trace's clock: I = 1 + Var[rate] T / E[rate] = 1 + 9 T / 5 (T << 600 s);
    # replayed 100x faster a 1 s window is 100 s of the trace
    assert slow == pytest.approx(1 + 9 / 5, rel=0.15)
    assert fast == pytest.approx(1 + 9 * 100 / 5, rel=0.5) and fast > 20 * slow


def test_hourly_profile_and_round_trip():
    rng = np.random.default_rng(5)
    hours = []
    for h in range(48):  # two days; hour h of the day at rate 1 + h % 24 / 10
        rate = 1.0 + (h % 24) / 10.0
        hours.append(h * 3600.0 + np.sort(rng.uniform(0, 3600.0, rng.poisson(rate * 3600))))
    t = np.concatenate(hours)
    s = arrival_stats(t)
    expected = 1.0 + np.arange(24) / 10.0
    assert np.allclose(s.hourly_rates_per_s, expected, rtol=0.05)
    back = ArrivalStats.from_dict(s.to_dict(), "x.json")
    assert back.dispersion == s.dispersion and np.allclose(back.hourly_rates_per_s, s.hourly_rates_per_s)


def test_short_trace_leaves_hours_uncovered_and_windows_undefined():
    t = np.linspace(0, 100.0, 500)
    s = arrival_stats(t)
    assert math.isnan(s.hourly_rates_per_s[1]) and s.hourly_rates_per_s[0] == pytest.approx(5.0, rel=0.01)
    assert dict(s.dispersion)[60.0] is None  # fewer than MIN_WINDOWS windows


def test_bad_window_is_refused():
    with pytest.raises(ConfigError, match="window"):
        index_of_dispersion(np.arange(100.0), 0.0)
