"""What an ``optimize`` run's reports show beyond the sweep, computed here once so ``report/`` only
formats (a report re-renders from the result or its JSON alone).

``with_report_figures`` returns the result carrying:

* ``latency_profiles``: when the run was simulated, the recommendation simulated once more
  (``verify``'s request count, the run's seed) for per-pool TTFT/TPOT quantiles
  (``plan.frontier.latency_profile``; CDF plots and the procurement simulated P99 column);
* ``procurement``: one ``ProcurementLine`` per pool of the recommendation with GPUs (counts in
  GPUs, utilisation, the power curve's draw at the busy batch, ``plan.gridflex.pool_power_w``,
  annual cost, analytic and simulated P99 TTFT);
* ``cost_latency``: the per-topology cost / P99-TTFT frontiers (``plan.frontier.cost_latency_frontier``);
* ``candidate_economics``: spend ratio and CE of every candidate and baseline with one
  (``plan.disagg.economics``), keyed by ``Candidate.key()``;
* ``rejected_traffic``: the requests above the served model's ``max_model_len``;
* ``deployments``: the fleets ``fleetplan deploy`` exports (``plan.deployment``), by ``Candidate.key()``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from fleetplan.hardware import GpuProfile
from fleetplan.plan.deployment import deployments_of
from fleetplan.plan.figure_types import PoolLatencyProfile, ProcurementLine
from fleetplan.plan.frontier import cost_latency_frontier, latency_profile
from fleetplan.plan.gridflex import W_PER_KW, pool_power_w
from fleetplan.plan.optimize import OptimizeRequest, OptimizeResult
from fleetplan.plan.sweep import Candidate
from fleetplan.units import H_PER_YEAR

if TYPE_CHECKING:
    from fleetplan.plan.verify import VerifySettings

#: Level of the latency profile whose TTFT is the procurement report's simulated P99.
SIM_P99_LEVEL_PCT = 99.0


def procurement_lines(best: Candidate | None, gpus: dict[str, GpuProfile],
                      pool_p99_sim_s: dict[str, float] | None = None) -> tuple[ProcurementLine, ...]:
    """The recommendation's pools with GPUs (empty without a recommendation); see ``ProcurementLine``."""
    if best is None:
        return ()
    sim = pool_p99_sim_s or {}
    out = []
    for i, p in enumerate(best.pools, start=1):
        if p.count + p.spares == 0:
            continue
        rho = p.lam_per_s * p.mean_service_s / p.count if p.count else 0.0
        busy = p.decode_batch / p.n_max if math.isfinite(p.decode_batch) and p.n_max > 0 else rho
        watts, basis = pool_power_w(gpus[p.gpu], busy, p.n_max)
        per = p.gpus_per_instance
        total = p.total_gpus
        out.append(ProcurementLine(
            pool=f"pool{i}", gpu=p.gpu, count=p.count * per, spares=p.spares * per, total_gpus=total,
            min_tokens=p.lo_tokens, max_tokens=p.hi_tokens, traffic_share=p.traffic_share, rate_per_s=p.lam_per_s,
            utilisation=rho, mean_batch=busy * p.n_max, power_w_per_gpu=watts, power_kw=total * watts / W_PER_KW,
            power_basis=basis, price_usd_per_h=p.price_usd_per_h,
            cost_usd_per_year=total * p.price_usd_per_h * H_PER_YEAR, ttft_p_s_analytic=p.ttft_p_s,
            ttft_p_s_sim=sim.get(f"pool{i}")))
    return tuple(out)


def recommendation_profiles(recommendation: Candidate, request: OptimizeRequest, verify: VerifySettings,
                            seed: int = 0) -> tuple[PoolLatencyProfile, ...]:
    """The latency profiles of ``with_report_figures``: ``recommendation`` simulated once more
    (``verify``'s request count, step models, margin and arrival process; the run's ``seed``).  A
    function of its arguments alone, so a caller may compute it beside other work (the command line
    runs it on a thread during the headroom search) and hand it to ``with_report_figures``."""
    gpus = {g.name: g for g in request.gpus}
    return latency_profile(recommendation, gpus, request.workload, request.rate_per_s, verify.fixed_requests(),
                           seed, request.max_model_len_tokens, dict(verify.step_models), verify.step_time_margin,
                           verify.arrival, verify.arrival_cv)


def with_report_figures(result: OptimizeResult, verify: VerifySettings | None = None, seed: int = 0,
                        progress: Callable[[str, int, int], None] | None = None,
                        profiles: tuple[PoolLatencyProfile, ...] | None = None) -> OptimizeResult:
    """``result`` carrying the figures its reports show (module docstring).  With ``verify`` (the run
    was simulated) and a recommendation, the recommendation is simulated once more for its latency
    profiles (progress stage ``"profile"``; ``recommendation_profiles``), unless ``profiles`` gives
    them already; without ``verify``, no simulation runs."""
    r = result.request
    gpus = {g.name: g for g in r.gpus}
    if verify is None or result.recommendation is None:
        profiles = ()
    elif profiles is None:
        if progress is not None:
            progress("profile", 0, 1)
        profiles = recommendation_profiles(result.recommendation, r, verify, seed)
        if progress is not None:
            progress("profile", 1, 1)
    sim_p99 = {p.pool: p.ttft_s[p.levels_pct.index(SIM_P99_LEVEL_PCT)] for p in profiles
               if SIM_P99_LEVEL_PCT in p.levels_pct}
    economics = {}
    for c in (*result.candidates, *result.pareto, *(b for _, b in result.baselines),
              *(() if result.recommendation is None else (result.recommendation,))):
        e = result.economics_of(c)
        if e is not None:
            economics[c.key()] = e
    return replace(result, latency_profiles=profiles,
                   procurement=procurement_lines(result.recommendation, gpus, sim_p99),
                   cost_latency=cost_latency_frontier(result), candidate_economics=economics,
                   rejected_traffic=r.rejected(),
                   deployments=deployments_of(result.candidates, result.recommendation, r))
