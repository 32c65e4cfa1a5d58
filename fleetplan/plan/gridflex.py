"""Grid flexibility: how much power a fixed fleet can shed by capping the batch (core paper §4.8).

Demand response caps vLLM's ``max_num_seqs`` (GPU-to-Grid, Hassan et al. 2025).  Per GPU
the board power follows the logistic curve of ``fleetplan.hardware.power``:

    P(b) = P_range / (1 + exp(-k (log2 b - x0))) + P_idle,   P_range = P_nom - P_idle.

For a curtailment of ``f`` percent:

1. target power per GPU  P* = P_nom · (1 - f/100)  (relative to the curve's nominal power
   ``nominal_w``, as the reference tool does; this reproduces Table 9's caps 48, 24, 13);
2. batch cap  n_cap = the largest integer b <= n_max (the uncapped KV-slot count at the
   pool's context) with P(b) <= P*, i.e. floor(P^-1(P*)), and at least 1 sequence
   (0 % curtailment leaves n_max unchanged);
3. W per GPU = P(n_cap) (the curve at the cap: a saturated fleet runs at its cap) and
   fleet kW = n_gpus · P(n_cap) / 1000;
4. analytic P99 TTFT: the pool's M/G/c model recalibrated at the cap (n_slots = n_cap,
   so t_iter(n_cap) = W + H n_cap is faster per step) via ``queueing.pool_latency``
   (``inf`` when ρ >= 1);
5. simulated P99 TTFT (iteration level, ``max_num_seqs = n_cap``) in two regimes:
   *event window*: ``window_s · λ`` requests arriving into an empty fleet already capped,
   every request counted (no warm-up trimmed) -- the paper's N = 15,000 at λ = 200 is
   exactly such a 75 s window; *steady state*: ``steady_requests`` requests with the
   usual 10 % warm-up trimmed, replicated, upper end of the 95 % interval.

Table 9 differs from this module in one row: at 40 % the reference tool reports
n_max = 6 (350 W), but P(7) = 359.7 W <= 360 W, so the exact inverse gives 7; the
reference's integer bisection stops one short there.  All other caps agree.

At ρ >= 1 (analytic) no steady state exists, so the steady-state simulation is skipped and
its P99 reported as ``inf``; the event window is still simulated (a finite burst can pass).

``pool_power_w`` (used by procurement reports) estimates a pool's draw per GPU at its mean
batch b = ρ · n_max (busy KV slots per GPU): P(b) from the GPU's logistic curve when it has
one, else a stated *TDP-based estimate* idle_w + ρ · (tdp_w - idle_w).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.hardware import GpuProfile
from fleetplan.hardware.power import PowerCurve
from fleetplan.perf.linear import LinearStepModel
from fleetplan.plan.arrivals import POISSON, ArrivalSpec
from fleetplan.plan.defaults import DEFAULT_FLEX_LEVELS_PCT as DEFAULT_LEVELS_PCT
from fleetplan.plan.defaults import DEFAULT_FLEX_STEADY_REQUESTS as DEFAULT_STEADY_REQUESTS
from fleetplan.plan.defaults import DEFAULT_FLEX_WINDOW_S as DEFAULT_WINDOW_S
from fleetplan.plan.sweep import ProgressFn
from fleetplan.queueing import ServiceModel, pool_latency, pool_service_moments
from fleetplan.rng import task_seed
from fleetplan.sim import FleetSpec, Level, PoolRouter, build_pool, replicate, simulate
from fleetplan.workload import Workload

DEFAULT_REPLICATIONS = 3
DEFAULT_QUADRATURE_POINTS = 4096
W_PER_KW = 1000.0
POOL_NAME = "flex"


@dataclass(frozen=True)
class GridFlexLevel:
    """One curtailment level (times in seconds; ``None`` when not simulated)."""

    flex_pct: float
    target_w: float
    n_max: int
    power_w_per_gpu: float
    fleet_kw: float
    rho: float
    p99_ttft_s_analytic: float
    p99_ttft_s_window: float | None
    p99_ttft_s_steady: float | None
    slo_ok_window: bool | None
    slo_ok_steady: bool

    @property
    def slo_ok(self) -> bool:
        """Steady state meets the SLO (simulated when available, else analytic)."""
        return self.slo_ok_steady


@dataclass(frozen=True)
class GridFlexResult:
    gpu: str
    n_gpus: int
    rate_per_s: float
    slo_ttft_s: float
    max_context_tokens: int
    n_max_uncapped: int
    window_s: float
    levels: tuple[GridFlexLevel, ...]

    @property
    def max_safe_flex_pct_steady(self) -> float | None:
        ok = [lv.flex_pct for lv in self.levels if lv.slo_ok_steady]
        return max(ok) if ok else None

    @property
    def max_safe_flex_pct_window(self) -> float | None:
        ok = [lv.flex_pct for lv in self.levels if lv.slo_ok_window]
        return max(ok) if ok else None


def batch_cap(curve: PowerCurve, flex_pct: float, n_max: int) -> int:
    """Largest integer batch <= ``n_max`` with P(b) <= P_nom (1 - flex/100); at least 1."""
    if not (math.isfinite(flex_pct) and 0.0 <= flex_pct < 100.0):
        raise ConfigError(f"curtailment level {flex_pct!r}% is invalid: give percentages in [0, 100), e.g. 0,10,20")
    target_w = curve.nominal_w * (1.0 - flex_pct / 100.0)
    if target_w >= curve.nominal_w:
        return int(n_max)
    if target_w <= float(curve.power_w(1.0)):
        return 1
    b = int(math.floor(float(curve.batch_for_power(target_w))))
    # guard the float inverse: step down while P(b) exceeds the target, up while b+1 fits
    while b > 1 and float(curve.power_w(b)) > target_w:
        b -= 1
    while float(curve.power_w(b + 1)) <= target_w:
        b += 1
    return int(max(1, min(b, n_max)))


def pool_power_w(gpu: GpuProfile, rho: float, n_max: int) -> tuple[float, str]:
    """(watts per GPU, basis) for a pool at utilisation ``rho`` (see module docstring)."""
    rho = min(max(float(rho), 0.0), 1.0) if math.isfinite(rho) else 1.0
    if gpu.power is not None:
        batch = max(rho * n_max, 1.0)
        return float(gpu.power.power_w(batch)), f"logistic curve at mean batch {batch:.1f}"
    return gpu.idle_w + rho * (gpu.tdp_w - gpu.idle_w), "TDP-based estimate: idle + utilisation x (TDP - idle)"


def default_context_tokens(workload: Workload) -> int:
    """The pool's context: the smallest length at which the workload's CDF reaches 1."""
    return int(math.ceil(float(workload.total.quantile(1.0))))


def _analytic(workload, gpu, n_cap, n_gpus, rate_per_s, percentile, ttft_model, n_prefill_seqs, points,
              arrival_cv2: float = 1.0):
    serving = gpu.require_serving()
    model = ServiceModel(
        step=LinearStepModel(serving.iter_base_s, serving.iter_per_seq_s),
        n_slots=n_cap,
        chunk_tokens=serving.chunk_tokens,
        n_prefill_seqs=None if n_prefill_seqs is None else min(n_prefill_seqs, n_cap),
        ref_context_tokens=serving.ref_context_tokens,
    )
    moments = pool_service_moments(*points, model)
    # Kimura / Whitt two-moment wait: (Ca² + Cs²)/2 in place of (1 + Cs²)/2, i.e. Cs² -> Cs² + Ca² - 1
    # (Cs² enters the wait tail only)
    moments = dataclasses.replace(moments, cs2=max(0.0, moments.cs2 + arrival_cv2 - 1.0))
    lat = pool_latency(rate_per_s, moments, n_gpus, percentile / 100.0, ttft_model=ttft_model)
    ttft = lat.ttft_p_s if lat.rho < 1.0 else float("inf")
    return lat.rho, ttft


def grid_flex(
    workload: Workload,
    gpu: GpuProfile,
    rate_per_s: float,
    n_gpus: int,
    slo_ttft_s: float,
    levels_pct: Sequence[float] = DEFAULT_LEVELS_PCT,
    *,
    max_context_tokens: int | None = None,
    window_s: float | None = DEFAULT_WINDOW_S,
    steady_requests: int | None = DEFAULT_STEADY_REQUESTS,
    n_replications: int = DEFAULT_REPLICATIONS,
    percentile: float = 99.0,
    ttft_model: str = "quantile",
    n_prefill_seqs: float | None = None,
    seed: int = 0,
    progress: ProgressFn | None = None,
    arrivals: ArrivalSpec = POISSON,
) -> GridFlexResult:
    """Power, batch cap and P99 TTFT of a fixed single-pool fleet per curtailment level.

    ``arrivals``: the arrival process, simulated as given and, analytically, through its Ca²
    (``plan.arrivals``).

    ``window_s=None`` / ``steady_requests=None`` skip that simulation (steady SLO then
    judged analytically).  See the module docstring for every definition.
    """
    if gpu.power is None:
        raise ConfigError(
            f"GPU {gpu.name!r} has no power curve: grid flex needs one; give `gpu` h100 or add a [power] table"
        )
    if int(n_gpus) != n_gpus or n_gpus < 1:
        raise ConfigError(param="n_gpus", value=n_gpus, rule="give a whole number of GPUs >= 1")
    if not (math.isfinite(rate_per_s) and rate_per_s > 0):
        raise ConfigError(param="rate_per_s", value=rate_per_s, rule="the arrival rate must be > 0 req/s")
    if window_s is not None and not (math.isfinite(window_s) and window_s > 0):
        raise ConfigError(param="window_s", value=window_s, rule="give the event length in seconds > 0")
    serving = gpu.require_serving()
    ctx = default_context_tokens(workload) if max_context_tokens is None else int(max_context_tokens)
    n_max = int(serving.n_max(ctx))
    if n_max < 1:
        raise ConfigError(f"context {ctx} tokens does not fit one sequence on {gpu.name}",
                          param="max_context_tokens", value=ctx, fix="lower `max_context_tokens`")
    levels = sorted(float(x) for x in levels_pct)
    caps = [batch_cap(gpu.power, f, n_max) for f in levels]  # validates every level first
    prompt, output, weight = workload.quadrature(DEFAULT_QUADRATURE_POINTS)
    points = (np.asarray(prompt, float), np.asarray(output, float), np.asarray(weight, float))
    out = []
    for i, (flex, cap) in enumerate(zip(levels, caps, strict=True)):
        if progress is not None:
            progress("grid-flex", i, len(levels))
        watts = float(gpu.power.power_w(cap))
        rho, ttft_a = _analytic(workload, gpu, cap, int(n_gpus), rate_per_s, percentile, ttft_model,
                                n_prefill_seqs, points, arrivals.ca2(workload, rate_per_s))
        spec = FleetSpec(pools=(build_pool(gpu, POOL_NAME, int(n_gpus), ctx, max_num_seqs=cap),),
                         pool_router=PoolRouter.LENGTH)
        p_window = p_steady = None
        if window_s is not None:
            n_win = max(1, int(round(window_s * rate_per_s)))
            res = simulate(spec, workload, rate_per_s, n_win, Level.ITERATION,
                           task_seed(seed, "grid-flex-window", cap), warmup_fraction=0.0,
                           arrival=arrivals.process, cv=arrivals.cv)
            p_window = float(res.summary.overall.ttft.p99_s)
        if steady_requests is not None and rho >= 1.0:
            p_steady = float("inf")  # no steady state exists at ρ >= 1: the queue grows without bound
        elif steady_requests is not None:
            rep = replicate(spec, workload, rate_per_s, int(steady_requests), Level.ITERATION,
                            task_seed(seed, "grid-flex-steady", cap), n_replications=n_replications,
                            arrival=arrivals.process, cv=arrivals.cv)
            p_steady = float(rep.upper_p99_ttft_s)
        steady_val = p_steady if p_steady is not None else ttft_a
        out.append(GridFlexLevel(
            flex_pct=flex,
            target_w=gpu.power.nominal_w * (1.0 - flex / 100.0),
            n_max=cap,
            power_w_per_gpu=watts,
            fleet_kw=n_gpus * watts / W_PER_KW,
            rho=rho,
            p99_ttft_s_analytic=ttft_a,
            p99_ttft_s_window=p_window,
            p99_ttft_s_steady=p_steady,
            slo_ok_window=None if p_window is None else p_window <= slo_ttft_s,
            slo_ok_steady=bool(steady_val <= slo_ttft_s),
        ))
    if progress is not None:
        progress("grid-flex", len(levels), len(levels))
    return GridFlexResult(gpu.name, int(n_gpus), float(rate_per_s), float(slo_ttft_s), ctx, n_max,
                          float(window_s) if window_s is not None else 0.0, tuple(out))


@dataclass(frozen=True)
class SizedFleet:
    """A homogeneous fleet sized by ``optimize``'s analytic sweep (phase 1, no simulation)."""

    n_gpus: int
    analytic_p_ttft_s: float
    rho: float
    cost_usd_per_year: float


def size_fleet_analytic(workload: Workload, gpu: GpuProfile, rate_per_s: float, slo_ttft_s: float,
                        percentile: float = 99.0, ttft_model: str = "quantile") -> SizedFleet:
    """The fewest ``gpu`` GPUs, in one pool serving every request, that meet the percentile TTFT SLO under
    the utilisation cap, from ``optimize``'s analytic sweep (``grid_flex`` without ``n_gpus``).

    Raises the sweep's ``InfeasibleError`` (naming the binding constraint) when no count fits."""
    from fleetplan.plan.optimize import OptimizeRequest, optimize
    from fleetplan.plan.optimize_errors import infeasible_error
    from fleetplan.plan.space import SizingRouter, Topology

    request = OptimizeRequest(workload=workload, gpus=(gpu,), slo_ttft_s=slo_ttft_s, rate_per_s=rate_per_s,
                              percentile=percentile, topologies=(Topology.HOMO,), routers=(SizingRouter.LENGTH,),
                              ttft_model=ttft_model)
    result = optimize(request)
    best = result.recommendation
    if best is None:
        raise infeasible_error(request, result.candidates)
    pool = best.pools[0]
    return SizedFleet(best.total_gpus_needed, best.ttft_p_s, pool.rho, best.cost_usd_per_year)
