"""Check the request-level kernel against exact M/M/c queueing theory.

One instance with ``c`` slots, Poisson arrivals at ``λ = ρ c μ`` and exponential
service with mean ``1/μ`` is exactly an M/M/c FCFS queue, whose waiting time W
satisfies (Erlang 1917; e.g. Harchol-Balter 2013, ch. 14)::

    P(W > 0) = C(c, λ/μ)                    (Erlang-C, core paper eq. 1)
    E[W]     = C / (cμ - λ)
    P(W > t) = C exp(-(cμ - λ) t)   =>   W_p = ln(C / (1-p)) / (cμ - λ), 0 if C <= 1-p

``fleetplan.queueing`` provides these (its ``exp`` tail model is exact at
Cs² = 1) and the core paper's eq. (2) form ``E[W] ln(1/(1-p))``, shown for
comparison.  The first ``warmup_fraction`` of customers are discarded.
Relative errors are ``|sim - exact| / exact`` and NaN where the exact value is 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.errors import ConfigError
from fleetplan.metrics import percentile
from fleetplan.queueing.erlang import erlang_c
from fleetplan.queueing.tail import TailModel, mean_wait_s, wait_quantile_s
from fleetplan.rng import stream
from fleetplan.sim._kernels import codes
from fleetplan.sim._kernels.request_level import run_request_level
from fleetplan.sim.defaults import DEFAULT_VALIDATE_C_VALUES as DEFAULT_C_VALUES
from fleetplan.sim.defaults import DEFAULT_VALIDATE_N_CUSTOMERS as DEFAULT_N_CUSTOMERS
from fleetplan.sim.defaults import DEFAULT_VALIDATE_RHOS as DEFAULT_RHOS

__all__ = ["simulate_mmc_waits_s", "validate_queueing"]

DEFAULT_WARMUP_FRACTION = 0.1
WAIT_PERCENTILE = 99.0
SERVICE_RATE_PER_S = 1.0  # μ; results scale with 1/μ


def simulate_mmc_waits_s(c: int, rho: float, n_customers: int, seed: int, mu_per_s: float = SERVICE_RATE_PER_S
                         ) -> np.ndarray:
    """Queueing delays (s) of ``n_customers`` in M/M/c at utilisation ``rho``,
    simulated by the request-level kernel (one instance with ``c`` slots)."""
    lam = rho * c * mu_per_s
    arrivals_rng = stream(seed, "validate", c, repr(rho), "arrivals")
    arrival_s = np.cumsum(arrivals_rng.exponential(1 / lam, n_customers))
    service_s = stream(seed, "validate", c, repr(rho), "service").exponential(1 / mu_per_s, n_customers)
    n = n_customers
    out_start_s = np.full(n, np.inf)
    run_request_level(
        arrival_s, service_s, np.zeros(n), np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int32),
        np.zeros((n, 2)), np.array([0, 1], dtype=np.int32),
        np.array([codes.ROUTE_LEAST_OUTSTANDING], dtype=np.int32), np.array([1], dtype=np.int64),
        np.array([c], dtype=np.int32), np.inf,
        np.full(n, -1, dtype=np.int32), out_start_s, np.full(n, np.inf), np.full(n, np.inf),
        np.full(n, codes.STATUS_UNFINISHED, dtype=np.int8), np.zeros(1),
    )
    return out_start_s - arrival_s


def _rel(sim: float, exact: float) -> float:
    return abs(sim - exact) / exact if exact > 0 else float("nan")


def validate_queueing(
    c_values: tuple[int, ...] = DEFAULT_C_VALUES,
    rhos: tuple[float, ...] = DEFAULT_RHOS,
    n_customers: int = DEFAULT_N_CUSTOMERS,
    seed: int = 0,
    warmup_fraction: float = DEFAULT_WARMUP_FRACTION,
) -> pd.DataFrame:
    """One row per (c, ρ): exact and simulated E[W], P(W>0), P99 W and relative errors.

    Columns: ``c, rho, exact_mean_wait_s, sim_mean_wait_s, mean_wait_rel_err,
    exact_p_wait, sim_p_wait, p_wait_rel_err, exact_p99_wait_s, sim_p99_wait_s,
    p99_wait_rel_err, paper_p99_wait_s`` (waits in units of 1/μ = 1 s).
    """
    if any(isinstance(c, bool) or not isinstance(c, int | np.integer) or c < 1 for c in c_values):
        raise ConfigError(f"c values {c_values} must be integers >= 1")
    if any(not (0 < r < 1) for r in rhos):
        raise ConfigError(f"utilisations {rhos} must be in (0, 1); the queue is unstable at rho >= 1")
    if isinstance(n_customers, bool) or not isinstance(n_customers, int) or n_customers < 100:
        raise ConfigError(f"n_customers = {n_customers!r} must be an integer >= 100 (2000000 is the default)")
    if not 0 <= warmup_fraction < 1:
        raise ConfigError(f"warmup_fraction = {warmup_fraction!r} must be in [0, 1)")
    mu = SERVICE_RATE_PER_S
    p = WAIT_PERCENTILE / 100.0
    rows = []
    for c in c_values:
        for rho in rhos:
            lam = rho * c * mu
            waits = simulate_mmc_waits_s(int(c), float(rho), n_customers, seed)
            waits = waits[int(warmup_fraction * n_customers):]
            exact_mean = float(mean_wait_s(c, lam, mu, 1.0))
            exact_p_wait = float(erlang_c(c, lam / mu))
            exact_p99 = float(wait_quantile_s(c, lam, mu, 1.0, p, TailModel.EXP))
            sim_mean = float(np.mean(waits))
            sim_p_wait = float(np.mean(waits > 0))
            sim_p99 = percentile(waits, WAIT_PERCENTILE)
            rows.append({
                "c": int(c),
                "rho": float(rho),
                "exact_mean_wait_s": exact_mean,
                "sim_mean_wait_s": sim_mean,
                "mean_wait_rel_err": _rel(sim_mean, exact_mean),
                "exact_p_wait": exact_p_wait,
                "sim_p_wait": sim_p_wait,
                "p_wait_rel_err": _rel(sim_p_wait, exact_p_wait),
                "exact_p99_wait_s": exact_p99,
                "sim_p99_wait_s": sim_p99,
                "p99_wait_rel_err": _rel(sim_p99, exact_p99),
                "paper_p99_wait_s": float(wait_quantile_s(c, lam, mu, 1.0, p, TailModel.PAPER)),
            })
    return pd.DataFrame(rows)
