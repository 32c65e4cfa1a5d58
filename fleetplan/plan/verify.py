"""Phase 2: simulation verification of analytic candidates (the simulator is authoritative).

For each of the top-k analytic candidates the fleet (each pool's GPU count without
spares, which cover failed nodes, not load) is simulated at iteration level with
independent replications.  It passes when the upper end of the Student-t confidence
interval of its P99 TTFT (and P99 TPOT when a TPOT SLO is given) is within the SLO.
A failing fleet is grown one GPU at a time, each time in the pool whose simulated
P99 is worst relative to the SLO, until it passes or reaches ``max_gpus``; the
cheapest passing fleet is the recommendation.  A relative gap above
``disagreement_threshold`` between the analytic and simulated P99 TTFT is flagged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from fleetplan.errors import ConfigError
from fleetplan.hardware import GpuProfile, with_spares
from fleetplan.metrics import student_t_interval
from fleetplan.perf.seam import StepModel
from fleetplan.plan.space import SizingRouter
from fleetplan.plan.sweep import Candidate
from fleetplan.rng import task_seed
from fleetplan.sim import FleetSpec, Level, PoolRouter, build_pool, replicate
from fleetplan.units import H_PER_YEAR
from fleetplan.workload import Workload

DEFAULT_VERIFY_TOP = 5
DEFAULT_SIM_REQUESTS = 20_000
DEFAULT_REPLICATIONS = 3
DEFAULT_DISAGREEMENT = 0.20
#: Most GPUs added to one candidate by the upward search before it is declared failed.
DEFAULT_MAX_SEARCH_STEPS = 12


@dataclass(frozen=True)
class VerifySettings:
    """How candidates are simulated (times in seconds)."""

    slo_ttft_s: float
    slo_tpot_s: float | None
    rate_per_s: float
    max_gpus: int
    top_k: int = DEFAULT_VERIFY_TOP
    n_requests: int = DEFAULT_SIM_REQUESTS
    n_replications: int = DEFAULT_REPLICATIONS
    disagreement_threshold: float = DEFAULT_DISAGREEMENT
    max_search_steps: int = DEFAULT_MAX_SEARCH_STEPS
    seed: int = 0
    percentile: float = 99.0  # the SLO percentile; one the simulator summarises
    # Step model per GPU type for the simulator (with --model: the operator-level predictor);
    # GPU types not listed run the linear model of their serving constants.
    step_models: tuple[tuple[str, StepModel], ...] = ()
    # The served model's limit (fleetplan.models.context); longer requests are rejected and reported.
    max_model_len_tokens: int | None = None
    # The arrival process simulated (fleetplan.sim.ArrivalProcess name) and, for gamma, the gaps' CV;
    # the default is Poisson (today's behaviour).
    arrival: str = "poisson"
    arrival_cv: float = 1.0

    def __post_init__(self) -> None:
        if self.percentile not in _STAT_OF_PERCENTILE:
            raise ConfigError(
                f"--percentile {self.percentile:g} cannot be verified by simulation: the simulator reports "
                f"P{', P'.join(f'{p:g}' for p in _STAT_OF_PERCENTILE)}; use one of them or --no-verify"
            )


@dataclass(frozen=True)
class Verification:
    """Outcome for one analytic candidate (times in seconds)."""

    rank: int
    analytic_counts: tuple[int, ...]
    verified_counts: tuple[int, ...]
    verified_spares: tuple[int, ...]
    passed: bool
    p99_ttft_s_sim: float  # upper confidence bound of the simulated TTFT at the SLO percentile (P99 default)
    p99_tpot_s_sim: float  # the same for TPOT
    p99_ttft_s_analytic: float
    disagreement: float  # (sim - analytic) / analytic at the analytic counts
    flagged: bool
    total_gpus: int
    cost_usd_per_year: float
    reason: str | None
    # Simulated share of requests / tokens above max_model_len (rejected, out of the percentiles;
    # mean over replications of the analytic counts' run)
    too_long_share_sim: float = 0.0
    too_long_token_share_sim: float = 0.0


def fleet_spec(candidate: Candidate, gpus: dict[str, GpuProfile], counts: Sequence[int],
               step_models: Mapping[str, StepModel] | None = None,
               max_model_len_tokens: int | None = None) -> FleetSpec:
    """The simulator's fleet for ``candidate`` with ``counts`` instances per pool (each pool's
    step model replaced by ``step_models[gpu]`` where given; ``max_model_len_tokens`` the served
    model's limit)."""
    models = step_models or {}
    pools = tuple(
        build_pool(gpus[p.gpu], f"pool{i + 1}", int(n), int(p.hi_tokens))
        for i, (p, n) in enumerate(zip(candidate.pools, counts, strict=True))
        if n > 0
    )
    pools = tuple(replace(pool, step_model=models[pool.gpu]) if pool.gpu in models else pool for pool in pools)
    router = PoolRouter.COMPRESS_AND_ROUTE if candidate.router is SizingRouter.COMPRESS else PoolRouter.LENGTH
    return FleetSpec(pools=pools, pool_router=router, max_model_len_tokens=max_model_len_tokens)


#: Percentiles the simulator summarises (``fleetplan.sim.result.LatencyStats``).
_STAT_OF_PERCENTILE = {50.0: "p50_s", 90.0: "p90_s", 95.0: "p95_s", 99.0: "p99_s", 99.9: "p99_9_s"}


@dataclass(frozen=True)
class _Check:
    """One simulated fleet: mean and upper confidence bound of the percentile TTFT and TPOT
    over replications (seconds), and each pool's worst replication relative to the SLOs."""

    mean_ttft_s: float
    upper_ttft_s: float
    upper_tpot_s: float
    pool_ratio: dict[int, float]
    too_long_share: float = 0.0  # mean over replications
    too_long_token_share: float = 0.0

    def passes(self, s: VerifySettings) -> bool:
        ok = self.upper_ttft_s <= s.slo_ttft_s
        if s.slo_tpot_s is not None:
            ok = ok and self.upper_tpot_s <= s.slo_tpot_s
        return bool(ok)


def percentile_bounds(summaries: Sequence, percentile: float) -> tuple[float, float, float]:
    """(mean, upper 95 % bound) of the fleet's TTFT at ``percentile`` and the upper bound of its TPOT,
    over replications (``SimSummary`` per replication; seconds)."""
    stat = _STAT_OF_PERCENTILE[percentile]
    ttft_mean, _, ttft_hi = student_t_interval([getattr(x.overall.ttft, stat) for x in summaries])
    _, _, tpot_hi = student_t_interval([getattr(x.overall.tpot, stat) for x in summaries])
    return ttft_mean, ttft_hi, tpot_hi


def _simulate(candidate: Candidate, gpus: dict[str, GpuProfile], counts: Sequence[int], workload: Workload,
              s: VerifySettings) -> _Check:
    spec = fleet_spec(candidate, gpus, counts, dict(s.step_models), s.max_model_len_tokens)
    # The seed depends only on the run seed and the fleet's identity, so any executor that
    # verifies this fleet gets the same numbers.
    seed = task_seed(s.seed, "verify", repr(candidate.key()), repr(tuple(int(n) for n in counts)))
    rep = replicate(spec, workload, s.rate_per_s, s.n_requests, Level.ITERATION, seed,
                    n_replications=s.n_replications, slo_ttft_s=s.slo_ttft_s, slo_tpot_s=s.slo_tpot_s,
                    arrival=s.arrival, cv=s.arrival_cv)
    stat = _STAT_OF_PERCENTILE[s.percentile]
    ttft_mean, ttft_hi, tpot_hi = percentile_bounds(rep.summaries, s.percentile)
    names = {p.name for p in spec.pools}
    ratio = {}
    for i, n in enumerate(counts):
        name = f"pool{i + 1}"
        if n == 0 or name not in names:
            continue
        worst = max(getattr(x.pool(name).ttft, stat) for x in rep.summaries) / s.slo_ttft_s
        if s.slo_tpot_s is not None:
            worst = max(worst, max(getattr(x.pool(name).tpot, stat) for x in rep.summaries) / s.slo_tpot_s)
        ratio[i] = worst
    n = len(rep.summaries)
    too_long = sum(x.overall.n_too_long / max(x.overall.n_requests, 1) for x in rep.summaries) / n
    too_long_tokens = sum(x.overall.too_long_token_share for x in rep.summaries) / n
    return _Check(ttft_mean, ttft_hi, tpot_hi, ratio, too_long, too_long_tokens)


def verify_candidate(candidate: Candidate, gpus: dict[str, GpuProfile], workload: Workload,
                     s: VerifySettings, availability: Callable[[GpuProfile], float]) -> Verification:
    """Simulate ``candidate``; grow the worst pool until it passes (see module docstring)."""
    counts = [p.count for p in candidate.pools]
    analytic = tuple(counts)
    check = _simulate(candidate, gpus, counts, workload, s)
    first = check
    a = candidate.ttft_p_s
    disagreement = (check.mean_ttft_s - a) / a if a > 0 else float("inf")
    steps = 0
    reason = None
    while not check.passes(s):
        if steps >= s.max_search_steps or sum(counts) >= s.max_gpus or not check.pool_ratio:
            reason = (f"simulated P{s.percentile:g} TTFT upper bound {check.upper_ttft_s * 1e3:.0f} ms "
                      + ("" if s.slo_tpot_s is None else f"/ TPOT {check.upper_tpot_s * 1e3:.1f} ms ")
                      + f"still above the SLO after adding {steps} GPUs")
            break
        worst = max(check.pool_ratio, key=check.pool_ratio.get)
        counts[worst] += 1
        steps += 1
        check = _simulate(candidate, gpus, counts, workload, s)
    passed = reason is None
    spares = [with_spares(n, availability(gpus[p.gpu])) - n for p, n in zip(candidate.pools, counts, strict=True)]
    per = [p.gpus_per_instance for p in candidate.pools]
    total = sum((n + sp) * g for n, sp, g in zip(counts, spares, per, strict=True))
    cost = sum((n + sp) * g * p.price_usd_per_h
               for p, n, sp, g in zip(candidate.pools, counts, spares, per, strict=True))
    return Verification(
        rank=candidate.rank,
        analytic_counts=analytic,
        verified_counts=tuple(counts),
        verified_spares=tuple(int(x) for x in spares),
        passed=passed,
        p99_ttft_s_sim=check.upper_ttft_s if passed else first.upper_ttft_s,
        p99_tpot_s_sim=check.upper_tpot_s if passed else first.upper_tpot_s,
        p99_ttft_s_analytic=a,
        disagreement=disagreement,
        flagged=abs(disagreement) > s.disagreement_threshold,
        total_gpus=total,
        cost_usd_per_year=cost * H_PER_YEAR,
        reason=reason,
        too_long_share_sim=first.too_long_share,
        too_long_token_share_sim=first.too_long_token_share,
    )
