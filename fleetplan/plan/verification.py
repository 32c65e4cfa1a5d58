"""What phase 2 found for one candidate: the result types of ``plan.verify``.

In their own module so that ``plan.sweep.Candidate`` can carry a ``Verification`` without importing
the verifier (which imports the sweep): a result type apart keeps the import graph free of loops.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["AtAnalytic", "PoolFigures", "SteadyState", "Verification"]


@dataclass(frozen=True)
class PoolFigures:
    """Analytic and simulated SLO-percentile latencies of one pool at the analytic count (s)."""

    ttft_p_s_analytic: float
    ttft_p_s_sim: float
    tpot_p_s_analytic: float
    tpot_p_s_sim: float
    drifting: bool


@dataclass(frozen=True)
class AtAnalytic:
    """Both phases at the analytic counts, fleet-wide over all requests and per pool (s)."""

    ttft_p_s_analytic: float
    ttft_p_s_sim: float
    tpot_p_s_analytic: float
    tpot_p_s_sim: float
    pools: tuple[PoolFigures | None, ...]  # None for an empty pool


@dataclass(frozen=True)
class SteadyState:
    """How one pool was simulated at its verified count (means over replications; times in s)."""

    n_requests: int  # per replication
    lifetime_s: float  # R of the run-length rule
    lifetime_source: str  # "analytic", "pilot" or "fixed" (n_requests given)
    warmup_s: float  # simulated time cut by MSER-5
    n_warmup: int
    measured_s: float
    measured_lifetimes: float
    n_measured: int
    drifting: bool


@dataclass(frozen=True)
class Verification:
    """Outcome for one analytic candidate (times in seconds)."""

    rank: int
    analytic_counts: tuple[int, ...]
    verified_counts: tuple[int, ...]
    verified_spares: tuple[int, ...]
    passed: bool
    p99_ttft_s_sim: float  # upper confidence bound of the fleet-wide TTFT at the SLO percentile (P99 default)
    p99_tpot_s_sim: float  # the same for TPOT
    p99_ttft_s_analytic: float
    disagreement: float  # (sim - analytic) / analytic fleet-wide TTFT at the analytic counts
    flagged: bool
    total_gpus: int
    cost_usd_per_year: float
    reason: str | None
    # Simulated share of requests / tokens above max_model_len (rejected, out of the percentiles;
    # mean over replications of the analytic counts' run)
    too_long_share_sim: float = 0.0
    too_long_token_share_sim: float = 0.0
    at_analytic: AtAnalytic | None = None
    pool_direction: tuple[str, ...] = ()  # per pool: too_high, too_low or exact
    direction: str = ""  # the fleet's: too_high, too_low, exact or mixed
    steady: tuple[SteadyState | None, ...] = ()
    n_simulations: int = 0  # pool runs (replications included)
    drifting_pools: tuple[int, ...] = field(default=())  # pools (1-based) drifting at the analytic count
    # Why it failed, as a code of ``fleetplan.errors.REASONS`` (None when it passed): prefill-bound (more
    # instances stopped lowering a pool's percentile), max-gpus, or verification-failed (a run's error)
    reason_code: str | None = None
    # Mean over replications of the fleet-wide TTFT at the SLO percentile at the verified counts (its 95 %
    # interval's upper end is ``p99_ttft_s_sim``); nan when the candidate failed
    p99_ttft_s_sim_mean: float = float("nan")
