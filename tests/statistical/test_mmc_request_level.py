"""Request-level kernel with one instance of c slots and exponential service is M/M/c FCFS.

Theorem (Erlang C).  For Poisson arrivals at rate lam, exponential service at rate mu,
c servers, a = lam / mu and rho = a / c < 1, in steady state

    P(W > 0) = C(c, a) = B / (1 - rho (1 - B)),   B = Erlang-B(c, a) (recursion below)
    E[W]     = C(c, a) / (c mu - lam).

Method.  For each (c, rho), R independent replications (fixed seeds) of n customers
starting empty; the first ``WARMUP_FRACTION`` of customers are discarded; each replication
gives one estimate of E[W] and of P(W > 0).  The replication means are i.i.d., so the
Student-t interval ``mean +- t_{1-alpha/2, R-1} s / sqrt(R)`` at confidence 1 - alpha =
99.9% must contain the exact value.  The tolerance is therefore derived from the data,
not chosen.  (18 intervals at 99.9%: the chance of any false alarm is below 2%, and the
seeds are fixed, so the outcome is deterministic.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fleetplan.sim._kernels import STATUS_DONE, run_request_level

CONFIDENCE = 0.999
N_REPLICATIONS = 20
N_CUSTOMERS = 100_000
MAX_REL_HALF_WIDTH = 0.3  # the intervals must also be informative
WARMUP_FRACTION = 0.1
MU_PER_S = 1.0


def erlang_c(c: int, a: float) -> float:
    """Exact probability of waiting in M/M/c (Erlang-B recursion, stable for large c)."""
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    rho = a / c
    return b / (1.0 - rho * (1.0 - b))


def simulate_waits(c: int, lam: float, seed: int) -> np.ndarray:
    """Waiting times (start - arrival) of one M/M/c replication."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0 / lam, N_CUSTOMERS))
    service = rng.exponential(1.0 / MU_PER_S, N_CUSTOMERS)
    out_start = np.empty(N_CUSTOMERS)
    out_status = np.empty(N_CUSTOMERS, dtype=np.int8)
    run_request_level(
        arrival, service, np.zeros(N_CUSTOMERS), np.ones(N_CUSTOMERS, dtype=np.int64),
        np.zeros(N_CUSTOMERS, dtype=np.int32), np.zeros((N_CUSTOMERS, 2)),
        np.array([0, 1], dtype=np.int32), np.zeros(1, dtype=np.int32), np.array([10], dtype=np.int64),
        np.array([c], dtype=np.int32), np.inf,
        np.empty(N_CUSTOMERS, dtype=np.int32), out_start, np.empty(N_CUSTOMERS), np.empty(N_CUSTOMERS),
        out_status, np.empty(1),
    )
    assert np.all(out_status == STATUS_DONE)
    return (out_start - arrival)[int(WARMUP_FRACTION * N_CUSTOMERS):]


def t_interval(samples: np.ndarray) -> tuple[float, float]:
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, len(samples) - 1) * samples.std(ddof=1) / math.sqrt(len(samples))
    return samples.mean() - half, samples.mean() + half


def test_erlang_c_formula_hand_values() -> None:
    """C(1, a) = rho; C(2, 1) = 1/3 (from the textbook sum formula)."""
    assert erlang_c(1, 0.7) == pytest.approx(0.7, rel=1e-14)
    assert erlang_c(2, 1.0) == pytest.approx(1.0 / 3.0, rel=1e-14)


@pytest.mark.parametrize("c", [1, 8, 64])
@pytest.mark.parametrize("rho", [0.5, 0.8, 0.95])
def test_mmc_wait_matches_erlang_c(c: int, rho: float) -> None:
    lam = rho * c * MU_PER_S
    p_wait = erlang_c(c, lam / MU_PER_S)
    mean_wait_s = p_wait / (c * MU_PER_S - lam)
    mean_w, frac_w = [], []
    for rep in range(N_REPLICATIONS):
        waits = simulate_waits(c, lam, seed=1000 * c + int(100 * rho) + 7919 * rep)
        mean_w.append(waits.mean())
        frac_w.append(np.mean(waits > 0))
    if max(frac_w) == 0.0:
        # Nobody waited (c=64, rho=0.5: C ~ 1e-6): the exact one-sided bound for a binomial
        # with zero successes in n trials at confidence 1 - alpha is -ln(alpha) / n.
        n_total = N_REPLICATIONS * N_CUSTOMERS * (1 - WARMUP_FRACTION)
        assert p_wait <= -math.log(1 - CONFIDENCE) / n_total
        return
    lo, hi = t_interval(np.array(mean_w))
    assert lo <= mean_wait_s <= hi, (mean_wait_s, lo, hi)
    assert (hi - lo) / 2 < MAX_REL_HALF_WIDTH * mean_wait_s + 1e-3 / MU_PER_S
    lo, hi = t_interval(np.array(frac_w))
    assert lo <= p_wait <= hi, (p_wait, lo, hi)
    assert (hi - lo) / 2 < MAX_REL_HALF_WIDTH * p_wait + 1e-3
