"""Spares for hardware failures: binomial at a random time, a Markov chain over a horizon, simulation.

Model (core paper §3.5 extended).  A pool needs ``n`` instances in service and deploys
``N = n + s``; instances fail and are repaired independently, each up a fraction
``A = MTBF / (MTBF + MTTR)`` of the time (eq. 6).

* At a random time the number up is Binomial(N, A):

      P_up(n, s) = P(Bin(N, A) >= n) = sum_{k=n}^{N} C(N, k) A^k (1 - A)^(N - k)

* Over a horizon T, with exponential up and repair times and one repair crew per instance, the
  number down D(t) is a birth-death chain on 0..N (failure rate (N - j) / MTBF from j, repair
  rate j / MTTR).  Started in equilibrium (D(0) ~ Bin(N, 1 - A)), the probability that the pool
  never drops below ``n`` during [0, T] is

      P_hold(n, s, T) = pi_0^T expm(Q_s T) 1

  with ``Q_s`` the generator restricted to the states 0..s (leaving them is absorbing) and
  ``pi_0`` the equilibrium probabilities of those states.  T -> 0 gives P_up.
* Expected time short over the horizon: T (1 - P_up) (ergodic average).
* Simulated: the fleet with ``s`` spares per pool under failure injection
  (``fleetplan.sim.failures``), replicated; it meets the SLO when the upper end of the 95 %
  interval of P99 TTFT (and TPOT, if given) is within it (the single value with one replication).

Pools are independent: fleet probabilities are products over pools.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy import linalg, stats

from fleetplan.errors import ConfigError, InfeasibleError
from fleetplan.plan.defaults import DEFAULT_RELIABILITY_TARGET as DEFAULT_TARGET
from fleetplan.sim.failures import FailureSpec
from fleetplan.sim.replications import replicate
from fleetplan.sim.spec import FleetSpec, Level

__all__ = [
    "ReliabilityReport",
    "SparesRow",
    "prob_enough_up",
    "prob_hold_over_horizon",
    "reliability_table",
    "spares_for_target",
]

DEFAULT_MAX_SPARES = 64  # search limit of spares_for_target


def _check(n_needed: int, spares: int, availability: float) -> None:
    for name, value, low in (("n_needed", n_needed, 1), ("spares", spares, 0)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
            raise ConfigError(f"{name} = {value!r} must be an integer >= {low}")
    if not (isinstance(availability, int | float) and 0 < availability <= 1):
        raise ConfigError(f"availability = {availability!r} must be in (0, 1]; e.g. 0.987")


def prob_enough_up(n_needed: int, spares: int, availability: float) -> float:
    """P(at least ``n_needed`` of ``n_needed + spares`` instances up) at a random time (binomial)."""
    _check(n_needed, spares, availability)
    return float(stats.binom.sf(n_needed - 1, n_needed + spares, availability))


def prob_hold_over_horizon(n_needed: int, spares: int, mtbf_s: float, mttr_s: float, horizon_s: float) -> float:
    """P(at least ``n_needed`` up throughout ``[0, horizon_s]``), equilibrium start (module doc)."""
    if not (mtbf_s > 0 and mttr_s >= 0 and math.isfinite(mttr_s) and horizon_s >= 0):
        raise ConfigError(f"mtbf_s = {mtbf_s!r}, mttr_s = {mttr_s!r}, horizon_s = {horizon_s!r} must be "
                          "MTBF > 0, finite MTTR >= 0 and horizon >= 0 (seconds)")
    if math.isinf(mtbf_s) or mttr_s == 0:
        return 1.0
    availability = mtbf_s / (mtbf_s + mttr_s)
    _check(n_needed, spares, availability)
    n_total = n_needed + spares
    states = np.arange(spares + 1)
    q = np.zeros((spares + 1, spares + 1))
    for j in states:
        fail_rate, repair_rate = (n_total - j) / mtbf_s, j / mttr_s
        q[j, j] = -(fail_rate + repair_rate)
        if j + 1 <= spares:
            q[j, j + 1] = fail_rate
        if j >= 1:
            q[j, j - 1] = repair_rate
    start = stats.binom.pmf(states, n_total, 1.0 - availability)
    return float(np.clip(start @ linalg.expm(q * horizon_s) @ np.ones(spares + 1), 0.0, 1.0))


def spares_for_target(
    n_needed: int, availability: float, target: float = DEFAULT_TARGET, max_spares: int = DEFAULT_MAX_SPARES
) -> int:
    """Smallest ``s`` with ``prob_enough_up(n_needed, s, A) >= target``; ``InfeasibleError`` past ``max_spares``."""
    if not (isinstance(target, float | int) and 0 < target < 1):
        raise ConfigError(f"target = {target!r} must be a probability in (0, 1), e.g. 0.99")
    for spares in range(max_spares + 1):
        if prob_enough_up(n_needed, spares, availability) >= target:
            return spares
    raise InfeasibleError(f"{max_spares} spares do not give P(>= {n_needed} up) >= {target} at availability "
                          f"{availability}; raise max_spares or lower the target")


@dataclass(frozen=True)
class SparesRow:
    """One spares count: ``spares`` per pool; probabilities over the fleet (product over pools);
    simulated P99s (s, mean over replications and the bound compared with the SLO)."""

    spares: int
    n_instances: int
    prob_up: float
    prob_hold_horizon: float
    shortfall_h: float
    p99_ttft_s: float
    p99_ttft_bound_s: float
    p99_tpot_s: float
    p99_tpot_bound_s: float
    meets_slo: bool


@dataclass(frozen=True)
class ReliabilityReport:
    """Rows for spares 0..max, the binomial answer (``spares_binomial``: smallest spares per pool
    with ``prob_up >= target``) and the simulated one (smallest row meeting the SLO, or None)."""

    rows: tuple[SparesRow, ...]
    target: float
    horizon_s: float
    availability: tuple[float, ...]
    spares_binomial: int
    spares_simulated: int | None
    p99_ttft_no_failures_s: float
    p99_tpot_no_failures_s: float


def _with_spares(spec: FleetSpec, spares: int) -> FleetSpec:
    pools = tuple(dataclasses.replace(p, n_instances=p.n_instances + spares) for p in spec.pools)
    return dataclasses.replace(spec, pools=pools)


def reliability_table(
    spec: FleetSpec,
    workload,
    rate_per_s: float,
    slo_ttft_s: float,
    failures: FailureSpec,
    horizon_s: float,
    target: float = DEFAULT_TARGET,
    max_spares: int | None = None,
    slo_tpot_s: float | None = None,
    n_requests: int = 20_000,
    n_replications: int = 3,
    seed: int = 0,
    map_fn=None,
) -> ReliabilityReport:
    """Spares per pool for ``spec`` (instances needed per pool) under ``failures``.

    Rows run from 0 spares to ``max_spares`` (default: the binomial answer + 1).  The no-failure
    P99s of the fleet without spares (same seeds) are reported for comparison.
    """
    n_pools = len(spec.pools)
    mtbf, mttr = failures.pool_times_s(n_pools)
    avail = failures.pool_availability(n_pools)
    need = [p.n_instances for p in spec.pools]
    binomial = max(spares_for_target(n, float(a), target) for n, a in zip(need, avail, strict=True))
    top = binomial + 1 if max_spares is None else int(max_spares)

    def p99s(fleet: FleetSpec, fails: FailureSpec | None) -> tuple[float, float, float, float]:
        rep = replicate(fleet, workload, rate_per_s, n_requests, Level.ITERATION, seed, n_replications,
                        map_fn=map_fn, failures=fails)
        one = n_replications == 1
        return (rep.mean_p99_ttft_s, rep.mean_p99_ttft_s if one else rep.upper_p99_ttft_s,
                rep.mean_p99_tpot_s, rep.mean_p99_tpot_s if one else rep.upper_p99_tpot_s)

    base = p99s(spec, None)
    rows = []
    for spares in range(top + 1):
        prob_up = math.prod(prob_enough_up(n, spares, float(a)) for n, a in zip(need, avail, strict=True))
        hold = math.prod(prob_hold_over_horizon(n, spares, float(b), float(r), horizon_s)
                         for n, b, r in zip(need, mtbf, mttr, strict=True))
        ttft, ttft_bound, tpot, tpot_bound = p99s(_with_spares(spec, spares), failures)
        meets = ttft_bound <= slo_ttft_s and (slo_tpot_s is None or tpot_bound <= slo_tpot_s)
        rows.append(SparesRow(spares, sum(need) + spares * n_pools, prob_up, hold, horizon_s * (1 - prob_up) / 3600,
                              ttft, ttft_bound, tpot, tpot_bound, bool(meets)))
    simulated = next((r.spares for r in rows if r.meets_slo), None)
    return ReliabilityReport(tuple(rows), float(target), float(horizon_s), tuple(float(a) for a in avail), binomial,
                             simulated, base[0], base[2])
