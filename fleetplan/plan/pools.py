"""Analytical sizing of one pool: traffic slice -> service moments -> GPU count.

For a pool range (lo, hi] on one GPU type:

1. its request points are the workload quadrature points with lo' < L <= hi'
   (``length`` router: lo' = lo, hi' = hi; ``compress``: lo' = gamma*lo,
   hi' = gamma*hi with L clipped to hi by shortening the prompt, except above the
   last pool), its arrival rate λ_pool = λ · (weight of those points) (core paper
   §3.1 step 1; sub-streams are treated as Poisson, §3.3);
2. n_max = floor(kv_blocks / ceil(hi / block)) KV slots per GPU at the pool's
   maximum context (§2.1); E[S], Cs² and the zero-wait TTFT from
   ``fleetplan.queueing.pool_service_moments`` (eqs. 3-5);
3. the minimum GPU count meeting the percentile TTFT SLO and the ρ cap from
   ``fleetplan.queueing.size_pool``; spares = ceil(n / A) - n for node
   availability A (§3.5, eq. 6).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from fleetplan.hardware import GpuProfile, with_spares
from fleetplan.perf.linear import LinearStepModel
from fleetplan.plan.space import PoolRange, SizingRouter
from fleetplan.queueing import (
    InfeasibleReason,
    ServiceModel,
    pool_service_moments,
    size_pool,
)
from fleetplan.queueing.ttft import ttft_model, zero_wait_ttft_quantile_s
from fleetplan.workload import Workload


@dataclass(frozen=True)
class PlanSettings:
    """Sizing targets and model choices shared by every pool of a sweep."""

    rate_per_s: float
    slo_ttft_s: float
    percentile: float  # e.g. 99.0
    rho_max: float
    max_gpus: int
    tail_model: str
    ttft_model: str
    compress_gamma: float
    n_prefill_seqs: float | None
    min_spare_gpus: int = 0  # extra GPUs above the offered load (fleet-sim's search starts at +1)


@dataclass(frozen=True)
class RequestPoints:
    """Weighted request points: prompt/output tokens and probability weights."""

    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    weight: np.ndarray

    @property
    def total_tokens(self) -> np.ndarray:
        return self.prompt_tokens + self.output_tokens

    def masked(self, mask: np.ndarray) -> RequestPoints:
        return RequestPoints(self.prompt_tokens[mask], self.output_tokens[mask], self.weight[mask])


#: Gauss-Legendre nodes per CDF bin (a bin is uniform in tokens, so the nodes integrate the
#: service-time moments, quadratic in L, exactly up to token rounding).
MAX_GAUSS_NODES_PER_BIN = 8
#: Equal-count bins of total length over which split workloads' prompt share is averaged.
PROMPT_SHARE_BINS = 64


@functools.cache
def _gauss_legendre(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on [-1, 1] (computed once per order)."""
    return np.polynomial.legendre.leggauss(k)


class LengthPoints:
    """Quadrature of a workload's length distribution, refined per pool range.

    For totals-only workloads each pool range (lo, hi] gets its own quadrature of
    the conditional distribution: totals are ceil(Q(u)), so lo < T <= hi exactly
    when F(lo) < u <= F(hi); that u-interval is cut at the CDF's breakpoints (L is
    uniform within a bin) and each piece gets Gauss-Legendre nodes (up to
    ``MAX_GAUSS_NODES_PER_BIN``, at most about ``n_points`` in all).  Moments of
    S, which grows like L², are then integrated exactly per bin, the heavy tail
    included; uniform strata in u would under-weight the longest requests.  For
    workloads with separate prompt/output CDFs (joined by a copula) the totals come
    from the same quadrature of their total CDF, split into prompt and output by
    the mean prompt share of requests of that size (from a global quadrature of
    ``n_global`` points of the joint distribution), so every length range with
    traffic gets points and an exact share.
    """

    def __init__(self, workload: Workload, n_points: int, n_global: int) -> None:
        self.workload = workload
        self.n_points = int(n_points)
        self.global_points = RequestPoints(*workload.quadrature(n_global))
        self.max_tokens = int(max(np.ceil(self.global_points.total_tokens.max()), np.ceil(workload.total.max_tokens)))
        self.mean_total_tokens = float(self.global_points.weight @ self.global_points.total_tokens)
        self._cache: dict[tuple[float, float], RequestPoints] = {}
        order = np.argsort(self.global_points.total_tokens, kind="stable")
        self._sorted_global = self.global_points.masked(order)

    def _prompt_share(self, total_tokens: np.ndarray) -> np.ndarray:
        """Mean prompt share of requests of about ``total_tokens`` (split workloads): the
        global quadrature sorted by total, averaged in ``PROMPT_SHARE_BINS`` equal-count
        bins and interpolated between bin medians."""
        g = self._sorted_global
        edges = np.linspace(0, g.weight.size, PROMPT_SHARE_BINS + 1).astype(np.int64)
        w = np.add.reduceat(g.weight, edges[:-1])
        share = np.add.reduceat(g.weight * g.prompt_tokens / g.total_tokens, edges[:-1]) / w
        centre = g.total_tokens[(edges[:-1] + edges[1:]) // 2]
        return np.interp(total_tokens, centre, share)

    def between(self, lo_tokens: float, hi_tokens: float) -> RequestPoints:
        """Points with lo < prompt + output <= hi (weights are probabilities; cached per range)."""
        key = (float(lo_tokens), float(hi_tokens))
        if key not in self._cache:
            self._cache[key] = self._between(*key)
        return self._cache[key]

    def _between(self, lo_tokens: float, hi_tokens: float) -> RequestPoints:
        cdf = self.workload.total
        u_lo, u_hi = float(cdf.cdf(lo_tokens)), float(cdf.cdf(min(hi_tokens, self.max_tokens)))
        if not u_hi > u_lo:
            empty = np.zeros(0)
            return RequestPoints(empty, empty, empty)
        knots = np.unique(
            np.concatenate(([u_lo, u_hi], cdf.fractions[(cdf.fractions > u_lo) & (cdf.fractions < u_hi)]))
        )
        left, width = knots[:-1], np.diff(knots)
        k = int(np.clip(self.n_points // left.size, 1, MAX_GAUSS_NODES_PER_BIN))
        nodes, gw = _gauss_legendre(k)
        u = (left[:, None] + width[:, None] * (nodes[None, :] + 1.0) / 2.0).ravel()
        w = (width[:, None] * gw[None, :] / 2.0).ravel()
        if self.workload.has_split:
            total = np.maximum(1.0, np.ceil(cdf.quantile(u)))
            prompt = np.maximum(1.0, np.round(self._prompt_share(total) * total))
            output = np.maximum(1.0, total - prompt)
            return RequestPoints(prompt, output, w)
        prompt, output = self.workload.lengths_at(u, np.zeros_like(u))
        return RequestPoints(prompt.astype(np.float64), output.astype(np.float64), w)


@dataclass(frozen=True)
class PoolPlan:
    """One sized pool.  Times in seconds; ``count`` excludes ``spares``."""

    gpu: str
    lo_tokens: int
    hi_tokens: int
    n_max: int
    traffic_share: float
    lam_per_s: float
    count: int
    spares: int
    rho: float
    ttft_p_s: float
    wait_p_s: float
    mean_service_s: float
    cs2: float
    price_usd_per_h: float
    feasible: bool
    reason: str | None

    @property
    def total_gpus(self) -> int:
        return self.count + self.spares


def _fits(total: np.ndarray, output: np.ndarray, bound: float, squeeze: bool, gamma: float) -> np.ndarray:
    """Requests a pool ending at ``bound`` accepts: L <= bound, or (compress-and-route)
    L <= gamma*bound when the output alone fits (only the prompt can be compressed)."""
    ok = total <= bound
    if squeeze:
        ok |= (total <= gamma * bound) & (output < bound)
    return ok


def pool_points(points: LengthPoints, rng_: PoolRange, router: SizingRouter, gamma: float) -> RequestPoints:
    """The request points a pool serves (compressed where the router squeezes them).

    A request goes to the first pool that accepts it, so pool (lo, hi] serves the
    requests its own bound accepts and the previous pool's bound (lo) rejects.
    """
    squeeze = router is SizingRouter.COMPRESS
    hi_eff = np.inf if rng_.last else (gamma * rng_.hi_tokens if squeeze else rng_.hi_tokens)
    if squeeze and rng_.lo_tokens > 0:
        # (lo, gamma*lo] belongs to the previous pool unless the output alone is too long to squeeze.
        lo_eff = min(gamma * rng_.lo_tokens, hi_eff)
        band = points.between(rng_.lo_tokens, lo_eff)
        band = band.masked(band.output_tokens >= rng_.lo_tokens)
        rest = points.between(lo_eff, hi_eff)
        cand = RequestPoints(
            *(
                np.concatenate([x, y])
                for x, y in zip(
                    (band.prompt_tokens, band.output_tokens, band.weight),
                    (rest.prompt_tokens, rest.output_tokens, rest.weight),
                    strict=True,
                )
            )
        )
    else:
        cand = points.between(rng_.lo_tokens, hi_eff)
    total, output = cand.total_tokens, cand.output_tokens
    mask = np.ones(total.shape, dtype=bool) if rng_.last else _fits(total, output, rng_.hi_tokens, squeeze, gamma)
    sub = cand.masked(mask)
    if not rng_.last:
        excess = np.maximum(sub.total_tokens - rng_.hi_tokens, 0.0)
        sub = RequestPoints(sub.prompt_tokens - excess, sub.output_tokens, sub.weight)
    return sub


def size_one_pool(
    points: LengthPoints,
    rng_: PoolRange,
    gpu: GpuProfile,
    router: SizingRouter,
    settings: PlanSettings,
    availability: float,
) -> PoolPlan:
    """Size one pool of ``gpu`` for the requests in ``rng_`` (see module docstring)."""
    serving = gpu.require_serving()
    price = gpu.require_price_usd_per_h()
    sub = pool_points(points, rng_, router, settings.compress_gamma)
    share = float(sub.weight.sum())
    n_max = int(serving.n_max(rng_.hi_tokens))
    lam = settings.rate_per_s * share

    def plan(
        count: int, spares: int, rho: float, ttft: float, wait: float, es: float, cs2: float, reason: str | None
    ) -> PoolPlan:
        return PoolPlan(
            gpu.name,
            rng_.lo_tokens,
            rng_.hi_tokens,
            n_max,
            share,
            lam,
            count,
            spares,
            rho,
            ttft,
            wait,
            es,
            cs2,
            price,
            reason is None,
            reason,
        )

    if share <= 0.0:
        return plan(0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, None)
    if n_max < 1:
        return plan(
            0,
            0,
            float("inf"),
            float("inf"),
            float("inf"),
            0.0,
            0.0,
            f"context {rng_.hi_tokens} tokens does not fit one request in {gpu.name}'s KV cache",
        )
    model = ServiceModel(
        step=LinearStepModel(serving.iter_base_s, serving.iter_per_seq_s),
        n_slots=n_max,
        chunk_tokens=serving.chunk_tokens,
        n_prefill_seqs=None if settings.n_prefill_seqs is None else min(settings.n_prefill_seqs, n_max),
        ref_context_tokens=serving.ref_context_tokens,
    )
    moments = pool_service_moments(sub.prompt_tokens, sub.output_tokens, sub.weight, model)
    sized = size_pool(
        lam,
        moments,
        settings.slo_ttft_s,
        settings.percentile / 100.0,
        rho_max=settings.rho_max,
        max_gpus=settings.max_gpus,
        min_spare_gpus=settings.min_spare_gpus,
        tail_model=settings.tail_model,
        ttft_model=settings.ttft_model,
    )
    ttft_reported = sized.ttft_p_s
    if sized.reason is InfeasibleReason.PREFILL_EXCEEDS_SLO:
        ttft_reported = zero_wait_ttft_quantile_s(
            moments.zero_wait, settings.percentile / 100.0, ttft_model(settings.ttft_model)
        )
    reason = None if sized.feasible else _reason_text(sized.reason, ttft_reported, settings)
    spares = with_spares(sized.n_gpus, availability) - sized.n_gpus if sized.feasible else 0
    return plan(
        sized.n_gpus, spares, sized.rho, sized.ttft_p_s, sized.wait_p_s, moments.mean_gpu_s, moments.cs2, reason
    )


def _reason_text(reason: InfeasibleReason | None, ttft_s: float, settings: PlanSettings) -> str:
    if reason is InfeasibleReason.PREFILL_EXCEEDS_SLO:
        return (
            f"prefill alone exceeds the SLO (P{settings.percentile:g} TTFT with no queue "
            f"{ttft_s * 1e3:.0f} ms > {settings.slo_ttft_s * 1e3:.0f} ms)"
        )
    if reason is InfeasibleReason.EXCEEDS_MAX_GPUS:
        return f"needs more than --max-gpus {settings.max_gpus} GPUs"
    return "unstable (utilisation >= 1)"
