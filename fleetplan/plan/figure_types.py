"""The figures an ``optimize`` run's reports show beyond the sweep, as plain result types.

They live apart from what computes them (``plan.frontier``, ``plan.figures``) so that
``plan.optimize.OptimizeResult`` can carry them without importing those modules, which import it
(a result type in its own module keeps the import graph free of loops).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CostLatencyPoint", "PoolLatencyProfile", "ProcurementLine"]


@dataclass(frozen=True)
class CostLatencyPoint:
    """One candidate on its topology's cost / analytic P99 TTFT frontier (``plan.frontier``; s)."""

    topology: str
    label: str
    total_gpus: int
    cost_usd_per_year: float
    p99_ttft_s: float


@dataclass(frozen=True)
class PoolLatencyProfile:
    """Quantiles (s) at ``plan.frontier.CDF_LEVELS_PCT`` of one pool's simulated TTFT and TPOT, and its
    simulated utilisation."""

    pool: str
    gpu: str
    levels_pct: tuple[float, ...]
    ttft_s: tuple[float, ...]
    tpot_s: tuple[float, ...]
    utilisation: float | None = None  # simulated busy fraction of the pool's instances (co-located pools)


@dataclass(frozen=True)
class ProcurementLine:
    """One pool of the recommendation as bought: counts in GPUs (for a served model an instance is a
    tensor-parallel group), utilisation ρ = λ_pool · E[S per GPU] / count (the engine model's load: the
    rate over the throughput with every KV slot busy, or over the prefill server's), the busy batch the power
    curve reads (the engine model's operating batch where it has one, else ρ · n_max), power for every
    GPU of the pool (spares idle at the same draw: an upper bound), annual cost and P99 TTFT (s)."""

    pool: str
    gpu: str
    count: int
    spares: int
    total_gpus: int
    min_tokens: int
    max_tokens: int
    traffic_share: float
    rate_per_s: float
    utilisation: float
    mean_batch: float
    power_w_per_gpu: float
    power_kw: float
    power_basis: str
    price_usd_per_h: float
    cost_usd_per_year: float
    ttft_p_s_analytic: float
    ttft_p_s_sim: float | None
