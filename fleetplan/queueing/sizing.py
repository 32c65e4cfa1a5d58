"""Minimum GPU count of one pool meeting a percentile TTFT SLO under a utilisation cap.

Legend: G GPUs, n_max KV slots per GPU, c = G·n_max servers, λ pool arrival
rate (1/s), E[S] per-slot service time (s), μ = 1/E[S], ρ = λE[S]/c,
a_G = λ·E[S]/n_max the offered load in GPUs.

A pool of G GPUs is evaluated as an M/G/c queue with c = G·n_max slot servers
(``service.py``); its wait percentile comes from ``tail.py`` and its TTFT
percentile from ``ttft.py``.  ``size_pool`` returns the smallest G with

    ρ <= ρ_max,   G >= ceil(a_G) + min_spare_gpus,   TTFT_p(G) <= SLO.

TTFT_p(G) is non-increasing in G (C(c, a) falls and cμ - λ grows with c), so the
search starts at the smallest G allowed by the first two rules, scans a short
block of counts in one vectorised evaluation and, if needed, brackets the
answer on a geometric grid and bisects.  A pool whose TTFT exceeds the SLO even
with no queueing (prefill alone) is reported infeasible at once
(``PREFILL_EXCEEDS_SLO``: adding GPUs cannot help; only a lower split threshold
or a faster GPU can).

Provenance and differences from the reference fleet simulator
(vllm-project/semantic-router ``src/fleet-sim/fleet_sim/optimizer/analytical.py``,
``min_gpus_analytical``): it searches G upward from ceil(λ/μ_GPU) + 1 until the
P99 *wait* (exponential tail, Cs² floored at 0.01) is <= SLO, then takes the max
with ceil(λ/(μ_GPU ρ_max)); prefill never enters its sizing (only its reported
TTFT, P99 wait + mean prefill at one-sequence iteration time).  Here the TTFT
(wait and prefill) is what is sized, the one-GPU headroom is the explicit
``min_spare_gpus`` (fleet-sim: 1; default here 0, the ρ cap already leaves
headroom), and Cs² is used as computed.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.queueing import tail, ttft
from fleetplan.queueing.service import ServiceMoments
from fleetplan.queueing.tail import TailModel, check_probability_level
from fleetplan.queueing.ttft import TtftModel

__all__ = ["InfeasibleReason", "PoolLatency", "PoolSizing", "pool_latency", "size_pool"]

DEFAULT_RHO_MAX = 0.85
DEFAULT_MAX_GPUS = 10_000
# Counts scanned in one vectorised evaluation before bracketing.
_SCAN_BLOCK = 8
# Bisection stops once the bracket is this narrow and scans it in one evaluation.
_FINAL_BLOCK = 64
# Relative slack when comparing a_G / G with ρ_max (float rounding of exact ratios).
_RHO_RTOL = 1e-12


class InfeasibleReason(enum.Enum):
    """Why a pool cannot meet its targets (closed set)."""

    PREFILL_EXCEEDS_SLO = "prefill-exceeds-slo"
    UNSTABLE = "unstable"
    EXCEEDS_MAX_GPUS = "exceeds-max-gpus"
    DECODE_EXCEEDS_TPOT_SLO = "decode-exceeds-tpot-slo"


@dataclass(frozen=True)
class PoolLatency:
    """Latency of a pool of ``n_gpus`` GPUs (times in seconds; ``inf`` when ρ >= 1)."""

    n_gpus: int
    n_servers: int
    rho: float
    mean_wait_s: float
    wait_p_s: float
    ttft_p_s: float


@dataclass(frozen=True)
class PoolSizing:
    """Result of :func:`size_pool`.

    ``n_gpus`` is the minimum feasible count, or for an infeasible pool the count
    the figures were evaluated at (the smallest allowed by the ρ cap for
    ``PREFILL_EXCEEDS_SLO``, ``max_gpus`` otherwise).  ``reason`` is None iff feasible.
    """

    n_gpus: int
    n_servers: int
    rho: float
    wait_p_s: float
    ttft_p_s: float
    feasible: bool
    reason: InfeasibleReason | None

    def __post_init__(self) -> None:
        if self.feasible != (self.reason is None):
            raise ConfigError(
                f"PoolSizing feasible={self.feasible} with reason={self.reason}: "
                "a reason is given exactly when the pool is infeasible"
            )
        if self.n_gpus < 0 or self.n_servers < 0:
            raise ConfigError(
                f"PoolSizing counts must be >= 0, got {self.n_gpus} GPUs and {self.n_servers} servers"
            )


def _check_inputs(lam: float, service: ServiceMoments) -> float:
    if not isinstance(service, ServiceMoments):
        raise ConfigError(f"service={service!r} must be ServiceMoments; build it with pool_service_moments")
    if not (math.isfinite(lam) and lam >= 0):
        raise ConfigError(f"pool arrival rate {lam!r}/s is invalid: it must be finite and >= 0")
    return float(lam)


def _evaluate(
    lam: float,
    service: ServiceMoments,
    n_gpus: np.ndarray,
    p: float,
    tail_kind: TailModel,
    ttft_kind: TtftModel,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ρ, A, k, TTFT_p) for an array of GPU counts (>= 1)."""
    servers = n_gpus.astype(np.float64) * service.n_slots
    rho = lam * service.mean_s / servers
    mass, decay = tail._survival_params(servers, lam, 1.0 / service.mean_s, service.cs2, tail_kind)
    return rho, mass, decay, ttft._ttft_quantile(mass, decay, service.zero_wait, p, ttft_kind)


def pool_latency(
    lam: float,
    service: ServiceMoments,
    n_gpus: int,
    p: float = 0.99,
    tail_model: str | TailModel = TailModel.EXP,
    ttft_model: str | TtftModel = TtftModel.QUANTILE,
) -> PoolLatency:
    """Utilisation, mean and p-quantile wait and p-quantile TTFT of a pool of ``n_gpus``.

    Parameters
    ----------
    lam : float
        Pool arrival rate, requests per second (>= 0).
    service : ServiceMoments
        From ``pool_service_moments``.
    n_gpus : int
        GPUs in the pool (>= 1).
    p : float
        Probability level, 0 < p < 1 (0.99 for P99).
    tail_model, ttft_model
        See ``tail.py`` and ``ttft.py``.

    Returns
    -------
    PoolLatency
        Times in seconds; ``inf`` waits when ρ >= 1.
    """
    lam = _check_inputs(lam, service)
    p = check_probability_level(p)
    if int(n_gpus) != n_gpus or n_gpus < 1:
        raise ConfigError(f"n_gpus={n_gpus!r} is invalid: a pool needs a whole number >= 1 of GPUs")
    tail_kind, ttft_kind = tail.tail_model(tail_model), ttft.ttft_model(ttft_model)
    rho, mass, decay, ttft_p = _evaluate(lam, service, np.array([int(n_gpus)]), p, tail_kind, ttft_kind)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_wait = np.where(decay > 0, mass / decay, np.inf)
    return PoolLatency(
        n_gpus=int(n_gpus),
        n_servers=int(n_gpus) * service.n_slots,
        rho=float(rho[0]),
        mean_wait_s=float(mean_wait[0]),
        wait_p_s=float(tail._quantile_from_params(mass, decay, p)[0]),
        ttft_p_s=float(ttft_p[0]),
    )


def min_gpus_for_cap(load_gpus: float, rho_max: float, min_spare_gpus: int) -> int:
    """Smallest G >= 1 with G > a_G (stability), a_G/G <= ρ_max and G >= ceil(a_G) + spares."""
    n_rho = max(1, math.ceil(load_gpus / rho_max))
    if n_rho > 1 and load_gpus / (n_rho - 1) <= rho_max * (1.0 + _RHO_RTOL):
        n_rho -= 1
    return max(n_rho, math.floor(load_gpus) + 1, math.ceil(load_gpus) + min_spare_gpus)


def size_pool(
    lam: float,
    service: ServiceMoments,
    slo_s: float,
    p: float = 0.99,
    *,
    rho_max: float = DEFAULT_RHO_MAX,
    max_gpus: int = DEFAULT_MAX_GPUS,
    min_spare_gpus: int = 0,
    tail_model: str | TailModel = TailModel.EXP,
    ttft_model: str | TtftModel = TtftModel.QUANTILE,
) -> PoolSizing:
    """Minimum GPUs so that the pool's p-quantile TTFT <= ``slo_s`` and ρ <= ``rho_max``.

    Parameters
    ----------
    lam : float
        Pool arrival rate, requests per second (>= 0); 0 gives 0 GPUs, feasible.
    service : ServiceMoments
        From ``pool_service_moments`` (E[S] per slot, Cs², zero-wait TTFT points).
    slo_s : float
        TTFT target in seconds (> 0).
    p : float
        Probability level of the target, 0 < p < 1 (0.99 for P99 TTFT).
    rho_max : float
        Utilisation cap in (0, 1] (core paper: 0.85).
    max_gpus : int
        Largest pool considered (>= 1).
    min_spare_gpus : int
        Require G >= ceil(a_G) + min_spare_gpus (fleet-sim uses 1).
    tail_model, ttft_model
        See ``tail.py`` and ``ttft.py``.

    Returns
    -------
    PoolSizing
        The count and its ρ, wait and TTFT quantiles (s), or the infeasibility reason.
    """
    lam = _check_inputs(lam, service)
    p = check_probability_level(p)
    if not (math.isfinite(slo_s) and slo_s > 0):
        raise ConfigError(f"TTFT SLO {slo_s!r} s is invalid: it must be > 0 seconds")
    if not (0.0 < rho_max <= 1.0):
        raise ConfigError(
            f"rho_max={rho_max!r} is invalid: the utilisation cap must lie in (0, 1]; e.g. 0.85"
        )
    if int(max_gpus) != max_gpus or max_gpus < 1:
        raise ConfigError(f"max_gpus={max_gpus!r} is invalid: it must be a whole number >= 1")
    if int(min_spare_gpus) != min_spare_gpus or min_spare_gpus < 0:
        raise ConfigError(f"min_spare_gpus={min_spare_gpus!r} is invalid: it must be a whole number >= 0")
    tail_kind, ttft_kind = tail.tail_model(tail_model), ttft.ttft_model(ttft_model)
    if lam == 0.0:
        return PoolSizing(0, 0, 0.0, 0.0, 0.0, True, None)

    def evaluate(counts: np.ndarray) -> tuple[np.ndarray, ...]:
        return (counts, *_evaluate(lam, service, counts, p, tail_kind, ttft_kind))

    def pick(ev: tuple[np.ndarray, ...], i: int, reason: InfeasibleReason | None) -> PoolSizing:
        counts, rho, mass, decay, ttft_p = ev
        wait_p = float(tail._quantile_from_params(mass[i : i + 1], decay[i : i + 1], p)[0])
        n = int(counts[i])
        return PoolSizing(
            n, n * service.n_slots, float(rho[i]), wait_p, float(ttft_p[i]), reason is None, reason
        )

    def at(n: int, reason: InfeasibleReason) -> PoolSizing:
        return pick(evaluate(np.array([n])), 0, reason)

    load_gpus = lam * service.mean_gpu_s
    if math.floor(load_gpus) + 1 > max_gpus:
        return at(int(max_gpus), InfeasibleReason.UNSTABLE)
    n_lo = min_gpus_for_cap(load_gpus, rho_max, int(min_spare_gpus))
    if n_lo > max_gpus:
        return at(int(max_gpus), InfeasibleReason.EXCEEDS_MAX_GPUS)
    if ttft.zero_wait_ttft_quantile_s(service.zero_wait, p, ttft_kind) > slo_s:
        return at(n_lo, InfeasibleReason.PREFILL_EXCEEDS_SLO)

    # Scan a short block, then bracket on a geometric grid, bisect, and scan the bracket.
    counts = np.arange(n_lo, min(n_lo + _SCAN_BLOCK, max_gpus + 1))
    ev = evaluate(counts)
    meets = ev[4] <= slo_s
    if not meets.any():
        lo = int(counts[-1])  # fails
        grid = np.unique(np.minimum(lo + _SCAN_BLOCK * 2.0 ** np.arange(1, 64), max_gpus).astype(np.int64))
        grid = grid[grid > lo]
        grid_meets = evaluate(grid)[4] <= slo_s if grid.size else np.zeros(0, dtype=bool)
        if not grid_meets.any():
            return at(int(max_gpus), InfeasibleReason.EXCEEDS_MAX_GPUS)
        j = int(np.argmax(grid_meets))
        hi = int(grid[j])
        lo = int(grid[j - 1]) if j > 0 else lo
        while hi - lo > _FINAL_BLOCK:
            mid = (lo + hi) // 2
            if evaluate(np.array([mid]))[4][0] <= slo_s:
                hi = mid
            else:
                lo = mid
        counts = np.arange(lo + 1, hi + 1)
        ev = evaluate(counts)
        meets = ev[4] <= slo_s
    return pick(ev, int(np.argmax(meets)), None)
