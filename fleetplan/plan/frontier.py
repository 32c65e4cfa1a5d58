"""Pareto frontiers: cost vs P99 TTFT per topology, and throughput vs generation speed.

1. *Cost-latency* (from an ``OptimizeResult``): per topology, the feasible candidates no
   other candidate of that topology beats on both annual cost and analytic P99 TTFT
   (``sweep.pareto_frontier`` applied per topology); ``pdd`` and ``afd`` candidates
   (``plan.disagg.candidates``) give their own frontiers next to the co-located ones.
2. *Throughput-interactivity* (Frontier, Feng et al. 2026, §6.1 and Fig. 13): for a
   serving architecture, sweep the batching limit (vLLM ``max_num_seqs``) and the offered
   rate with the simulator; each run gives

       throughput  = output tokens completed per second per GPU,
       speed       = tokens/s per user = 1 / P95 TPOT,

   and runs whose P99 TTFT exceeds the TTFT limit are dropped.  The frontier keeps the
   points no other point beats on both axes.  ``COLOCATED``: every instance prefills and
   decodes.  ``PDD``: the PDD simulator with ``round(share x n)`` prefill instances for each
   of ``prefill_shares`` and the rest decoding (the cap applies to the decode batch).
   ``AFD``: the same with the decode GPUs paired into 1:1 attention-FFN units whose step is
   the screen's AFD step linearised at the workload's mean decode context
   (``plan.disagg.screen``); an odd GPU left over is idle and not counted.
3. ``latency_profile``: one run of a fleet, keeping per-pool TTFT and TPOT quantiles, from
   which reports draw per-pool latency CDFs (a PDD/AFD fleet: the PDD simulator; every role
   gets the fleet's TTFT and TPOT quantiles, since each request passes every role).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.hardware import GpuProfile
from fleetplan.metrics import percentiles
from fleetplan.perf.seam import StepModel
from fleetplan.plan.figure_types import CostLatencyPoint, PoolLatencyProfile
from fleetplan.plan.optimize import OptimizeResult
from fleetplan.plan.sweep import Candidate, ProgressFn, candidate_label, pareto_frontier
from fleetplan.plan.verify import fleet_spec
from fleetplan.rng import task_seed
from fleetplan.sim import FleetSpec, Level, PoolRouter, build_pool, simulate
from fleetplan.sim.compile import compile_run
from fleetplan.sim.defaults import DEFAULT_WARMUP_FRACTION
from fleetplan.sim.engine import _instance_stats, _run_kernel, _validate, request_columns
from fleetplan.workload import Workload

DEFAULT_MAX_NUM_SEQS = (8, 16, 32, 64, 128, 256)
DEFAULT_FRONTIER_REQUESTS = 4000
#: Shares of the instances given to prefill in a PDD / AFD throughput sweep.
DEFAULT_PREFILL_SHARES = (0.25, 0.5)
#: Quantile levels (percent) kept per pool for latency CDF plots: every 0.5 % and the far tail, i.e. the
#: simulation's empirical distribution at plotting resolution (about 3 KB per pool in the run file).
CDF_LEVELS_PCT = tuple(float(x) for x in np.arange(0.5, 99.5 + 1e-9, 0.5)) + (99.9, 99.99)


class Architecture(enum.Enum):
    COLOCATED = "colocated"
    PDD = "pdd"
    AFD = "afd"


@dataclass(frozen=True)
class ThroughputPoint:
    """One simulated operating point (``on_frontier`` set by the frontier pass)."""

    architecture: str
    gpu: str
    n_instances: int
    max_num_seqs: int
    rate_per_s: float
    throughput_tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    p99_ttft_s: float
    p95_tpot_s: float
    meets_ttft: bool
    on_frontier: bool = False
    n_prefill: int = 0  # PDD/AFD: prefill instances (the rest decode)


def cost_latency_frontier(result: OptimizeResult) -> tuple[CostLatencyPoint, ...]:
    """Per-topology cost/P99-TTFT frontiers, cheapest first within each topology."""
    out = []
    for topo in dict.fromkeys(c.topology for c in result.candidates):
        for c in pareto_frontier([c for c in result.candidates if c.topology is topo]):
            out.append(CostLatencyPoint(topo.value, candidate_label(c), c.total_gpus_needed,
                                        c.cost_usd_per_year, c.ttft_p_s))
    return tuple(out)


def _mark_frontier(points: list[ThroughputPoint]) -> list[ThroughputPoint]:
    from dataclasses import replace

    ok = [p for p in points if p.meets_ttft]
    best = []
    for p in ok:
        dominated = any(
            q.throughput_tokens_per_s_per_gpu >= p.throughput_tokens_per_s_per_gpu
            and q.tokens_per_s_per_user >= p.tokens_per_s_per_user
            and (q.throughput_tokens_per_s_per_gpu > p.throughput_tokens_per_s_per_gpu
                 or q.tokens_per_s_per_user > p.tokens_per_s_per_user)
            for q in ok
        )
        if not dominated:
            best.append(p)
    keys = {id(p) for p in best}
    return [replace(p, on_frontier=id(p) in keys) for p in points]


def throughput_frontier(
    workload: Workload,
    gpu: GpuProfile,
    n_instances: int,
    rates_per_s: Sequence[float],
    ttft_limit_s: float,
    max_num_seqs: Sequence[int] = DEFAULT_MAX_NUM_SEQS,
    architecture: Architecture | str = Architecture.COLOCATED,
    max_context_tokens: int | None = None,
    n_requests: int = DEFAULT_FRONTIER_REQUESTS,
    seed: int = 0,
    progress: ProgressFn | None = None,
    prefill_shares: Sequence[float] = DEFAULT_PREFILL_SHARES,
) -> tuple[ThroughputPoint, ...]:
    """Throughput per GPU vs tokens/s per user under a TTFT limit (see module docstring)."""
    arch = Architecture(architecture) if isinstance(architecture, str) else architecture
    ctx = int(np.ceil(workload.total.quantile(1.0))) if max_context_tokens is None else int(max_context_tokens)
    if arch is not Architecture.COLOCATED:
        return _disagg_frontier(arch, workload, gpu, int(n_instances), rates_per_s, ttft_limit_s, max_num_seqs, ctx,
                                prefill_shares, int(n_requests), seed, progress)
    n_max = int(gpu.require_serving().n_max(ctx))
    caps = sorted({int(min(b, n_max)) for b in max_num_seqs if b >= 1})
    runs = [(b, float(r)) for b in caps for r in rates_per_s]
    points = []
    for i, (cap, rate) in enumerate(runs):
        if progress is not None:
            progress("frontier", i, len(runs))
        spec = FleetSpec(pools=(build_pool(gpu, "colocated", int(n_instances), ctx, max_num_seqs=cap),),
                         pool_router=PoolRouter.LENGTH)
        res = simulate(spec, workload, rate, int(n_requests), Level.ITERATION, task_seed(seed, "frontier", cap, rate))
        df = res.requests[~res.requests["warmup"]]
        done = df[df["status"] == "done"]
        span_s = res.summary.measured_duration_s
        tokens_per_s = float(done["output_tokens"].sum()) / span_s if span_s > 0 else 0.0
        s = res.summary.overall
        p95_tpot = float(s.tpot.p95_s)
        speed = 1.0 / p95_tpot if np.isfinite(p95_tpot) and p95_tpot > 0 else 0.0
        points.append(ThroughputPoint(arch.value, gpu.name, int(n_instances), cap, rate,
                                      tokens_per_s / n_instances, speed, float(s.ttft.p99_s), p95_tpot,
                                      bool(s.ttft.p99_s <= ttft_limit_s)))
    if progress is not None:
        progress("frontier", len(runs), len(runs))
    return tuple(_mark_frontier(points))


def _point(arch: Architecture, gpu: str, n_gpus: int, n_prefill: int, cap: int, rate: float, frame,
           ttft_limit_s: float) -> ThroughputPoint:
    """A throughput point from a PDD per-request frame (warm-up excluded)."""
    df = frame[~frame["warmup"]]
    done = df[df["status"] == "done"]
    span_s = float(done["done_s"].max() - df["arrival_s"].min()) if len(done) else 0.0
    tokens_per_s = float(done["output_tokens"].sum()) / span_s if span_s > 0 else 0.0
    ttft = np.where(df["status"] == "done", df["ttft_s"], np.inf)
    p99_ttft = float(percentiles(ttft, (99.0,))[99.0])
    tpot = df["tpot_s"].to_numpy()
    tpot = tpot[~np.isnan(tpot)]
    p95_tpot = float(percentiles(tpot, (95.0,))[95.0]) if tpot.size else float("inf")
    speed = 1.0 / p95_tpot if np.isfinite(p95_tpot) and p95_tpot > 0 else 0.0
    return ThroughputPoint(arch.value, gpu, n_gpus, cap, rate, tokens_per_s / n_gpus, speed, p99_ttft, p95_tpot,
                           bool(p99_ttft <= ttft_limit_s), n_prefill=n_prefill)


def _disagg_frontier(arch, workload, gpu, n_instances, rates_per_s, ttft_limit_s, max_num_seqs, ctx, shares,
                     n_requests, seed, progress) -> tuple[ThroughputPoint, ...]:
    from fleetplan.plan.disagg.verify import frontier_pdd_spec
    from fleetplan.sim.pdd import simulate_pdd

    per_unit = 2 if arch is Architecture.AFD else 1
    if n_instances < 1 + per_unit:
        raise ConfigError(f"{arch.value} needs at least {1 + per_unit} instances (prefill + decode), got "
                          f"{n_instances}; raise the instance count")
    splits = sorted({min(max(1, round(sh * n_instances)), n_instances - per_unit) for sh in shares})
    runs = [(p, int(b), float(r)) for p in splits for b in max_num_seqs if b >= 1 for r in rates_per_s]
    points = []
    for i, (n_p, cap, rate) in enumerate(runs):
        if progress is not None:
            progress("frontier", i, len(runs))
        spec, n_used = frontier_pdd_spec(arch.value, workload, gpu, n_p, n_instances - n_p, cap, ctx)
        res = simulate_pdd(spec, workload, rate, n_requests, task_seed(seed, "frontier", arch.value, n_p, cap, rate))
        points.append(_point(arch, gpu.name, n_used, n_p, cap, rate, res.requests, ttft_limit_s))
    if progress is not None:
        progress("frontier", len(runs), len(runs))
    return tuple(_mark_frontier(points))


def _timed(df, limit: int | None):
    """Measured rows that have a latency: not the rejections above max_model_len (vLLM's error replies)."""
    df = df[~df["warmup"]]
    if limit is None:
        return df
    return df[~((df["status"] == "rejected") & (df["prompt_tokens"] + df["output_tokens"] > limit))]


def latency_profile(candidate: Candidate, gpus: dict[str, GpuProfile], workload: Workload, rate_per_s: float,
                    n_requests: int, seed: int = 0, max_model_len_tokens: int | None = None,
                    step_models: Mapping[str, StepModel] | None = None,
                    step_time_margin: float = 0.0, arrival: str = "poisson",
                    arrival_cv: float = 1.0) -> tuple[PoolLatencyProfile, ...]:
    """One run of ``candidate``: per-pool TTFT/TPOT quantiles (warm-up trimmed; module docstring), with
    the served model's limit (requests above it are rejected and left out of the quantiles) and the
    step models verification ran (``step_models`` per GPU type, ``step_time_margin``) and its arrival
    process (``arrival``, ``arrival_cv``: a ``fleetplan.sim.ArrivalProcess`` name and the gaps' CV)."""
    counts = [p.count for p in candidate.pools]
    if getattr(candidate, "roles", ()):
        return _disagg_profile(candidate, gpus, workload, rate_per_s, n_requests, seed, max_model_len_tokens,
                               step_models, arrival, arrival_cv)
    spec = fleet_spec(candidate, gpus, counts, step_models, max_model_len_tokens, step_time_margin)
    # ``simulate``'s run and figures, read from its arrays: no request table (pandas) and no summary
    n = int(n_requests)
    run_seed = task_seed(seed, "latency-profile", repr(candidate.key()))
    _validate(rate_per_s, n, DEFAULT_WARMUP_FRACTION, arrival_cv, None, None, None, run_seed)
    run = compile_run(spec, workload, float(rate_per_s), n, int(run_seed), arrival, arrival_cv, None)
    raw = _run_kernel(run, Level.ITERATION)
    cols = request_columns(run, raw, min(int(math.floor(DEFAULT_WARMUP_FRACTION * n)), n - 1))
    inst_util, _ = _instance_stats(run, raw, Level.ITERATION)
    timed = ~cols["warmup"]  # ``_timed``: measured rows, not the rejections above the served model's limit
    if max_model_len_tokens is not None:
        timed &= ~((cols["status"] == "rejected")
                   & (cols["prompt_tokens"] + cols["output_tokens"] > max_model_len_tokens))
    out = []
    for p, pool in enumerate(spec.pools):
        rows = timed & (cols["pool"] == pool.name)
        ttft = percentiles(cols["ttft_s"][rows], CDF_LEVELS_PCT)
        tpot_arr = cols["tpot_s"][rows]
        tpot = percentiles(tpot_arr[~np.isnan(tpot_arr)], CDF_LEVELS_PCT)
        util = inst_util[run.fleet.inst_pool == p]  # the summary's pool utilisation: mean over its instances
        out.append(PoolLatencyProfile(pool.name, pool.gpu, CDF_LEVELS_PCT,
                                      tuple(float(ttft[q]) for q in CDF_LEVELS_PCT),
                                      tuple(float(tpot[q]) for q in CDF_LEVELS_PCT),
                                      float(np.mean(util)) if util.size else float("nan")))
    return tuple(out)


def _disagg_profile(candidate, gpus, workload, rate_per_s, n_requests, seed, limit: int | None,
                    step_models=None, arrival: str = "poisson", arrival_cv: float = 1.0
                    ) -> tuple[PoolLatencyProfile, ...]:
    from fleetplan.plan.disagg.verify import pdd_spec
    from fleetplan.sim.pdd import simulate_pdd

    spec = pdd_spec(candidate, gpus, [p.count for p in candidate.pools], step_models=step_models,
                    max_model_len_tokens=limit)
    res = simulate_pdd(spec, workload, rate_per_s, int(n_requests),
                       task_seed(seed, "latency-profile", repr(candidate.key())), arrival=arrival, cv=arrival_cv)
    df = _timed(res.requests, limit)
    ttft = percentiles(df["ttft_s"].to_numpy(), CDF_LEVELS_PCT)
    tpot_arr = df["tpot_s"].to_numpy()
    tpot = percentiles(tpot_arr[~np.isnan(tpot_arr)], CDF_LEVELS_PCT)
    return tuple(PoolLatencyProfile(f"pool{i + 1}", p.gpu, CDF_LEVELS_PCT,
                                    tuple(float(ttft[q]) for q in CDF_LEVELS_PCT),
                                    tuple(float(tpot[q]) for q in CDF_LEVELS_PCT))
                 for i, p in enumerate(candidate.pools))
