"""What-if traffic growth: the cheapest fleet per arrival rate and where each one stops holding.

Core paper §4.4 (Table 4, "when do I need to add GPUs?").  For every rate λ_i of a grid:

1. ``optimize`` at λ_i (with simulation verification when given): the fleet is the
   recommendation (the cheapest simulation-verified fleet, resized to its verified
   counts), else the cheapest analytic one;
2. its *step threshold* λ*_i: the largest rate the fixed fleet still serves within the
   SLO.  "This fleet holds until λ*_i; buy before then."  It is bracketed by growing λ
   geometrically from λ_i (factor ``ThresholdSettings.bracket_factor``) and bisected to a
   relative width ``rel_tol``.  The pass test is

   * simulated (verification on): ``replicate`` of the fixed fleet (``verify.fleet_spec``),
     passing when the upper end of the 95 % interval of TTFT at the SLO percentile (P99 by
     default; and TPOT when a TPOT SLO is set) is within the SLO, as verification checks it.
     Every λ uses the same seed (common random numbers), so the pass test is monotone in λ up
     to simulation noise; the replications run on the command's executor (``map_fn``);
   * analytic (no simulation): every pool, at its share of λ, still needs no more GPUs
     than it has (``pools.size_one_pool`` with the run's ρ cap, spares rule and TTFT model).

A fleet that already fails at λ_i under the threshold test gets λ*_i = λ_i, flagged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from fleetplan.errors import ConfigError
from fleetplan.parallel import MapFn
from fleetplan.plan.arrivals import ArrivalSpec
from fleetplan.plan.context_limit import RejectedTraffic
from fleetplan.plan.optimize import OptimizeRequest, optimize, verified_fleet
from fleetplan.plan.points import LengthPoints
from fleetplan.plan.pools import size_one_pool
from fleetplan.plan.space import PoolRange
from fleetplan.plan.sweep import Candidate, ProgressFn
from fleetplan.plan.verify import VerifySettings, fleet_spec, percentile_bounds
from fleetplan.rng import task_seed
from fleetplan.sim import Level, replicate

DEFAULT_REL_TOL = 0.01
DEFAULT_BRACKET_FACTOR = 1.25
DEFAULT_MAX_RATE_FACTOR = 16.0  # stop bracketing at 16 x the point's own rate
MAX_BISECTIONS = 30


@dataclass(frozen=True)
class ThresholdSettings:
    """How step thresholds are searched (``rel_tol``: relative width of the final bracket)."""

    rel_tol: float = DEFAULT_REL_TOL
    bracket_factor: float = DEFAULT_BRACKET_FACTOR
    max_rate_factor: float = DEFAULT_MAX_RATE_FACTOR

    def __post_init__(self) -> None:
        if not 0 < self.rel_tol < 1:
            raise ConfigError(f"threshold rel_tol {self.rel_tol!r} must lie in (0, 1), e.g. 0.01")
        if not 1 < self.bracket_factor <= self.max_rate_factor:
            raise ConfigError("bracket_factor must be > 1 and <= max_rate_factor")


@dataclass(frozen=True)
class WhatIfPoint:
    """The fleet for one rate and its step threshold (req/s)."""

    rate_per_s: float
    fleet: Candidate | None
    holds_until_rate_per_s: float | None
    threshold_capped: bool  # the fleet still held at max_rate_factor x rate (threshold is a lower bound)
    fails_at_own_rate: bool  # the threshold test failed already at rate_per_s
    reason: str | None

    @property
    def total_gpus(self) -> int:
        return 0 if self.fleet is None else self.fleet.total_gpus_needed


@dataclass(frozen=True)
class WhatIfResult:
    request: OptimizeRequest
    verify: VerifySettings | None
    threshold_method: str  # "simulated" or "analytic"
    points: tuple[WhatIfPoint, ...]
    rejected_traffic: RejectedTraffic | None = None  # requests above max_model_len (the request's)


def rate_grid(start_per_s: float, stop_per_s: float, step_per_s: float) -> tuple[float, ...]:
    """``start, start+step, ..., <= stop`` (a START:STOP:STEP grid of arrival rates)."""
    if not (start_per_s > 0 and step_per_s > 0 and stop_per_s >= start_per_s):
        raise ConfigError(
            f"`rates_per_s` {start_per_s:g}:{stop_per_s:g}:{step_per_s:g} is invalid: "
            "give START:STOP:STEP with 0 < START <= STOP and STEP > 0, e.g. 25:400:25",
            param="rates_per_s", value=(start_per_s, stop_per_s, step_per_s),
        )
    n = int((stop_per_s - start_per_s) / step_per_s + 1e-9) + 1
    return tuple(round(start_per_s + i * step_per_s, 9) for i in range(n))


def analytic_holds(request: OptimizeRequest, fleet: Candidate, points: LengthPoints) -> Callable[[float], bool]:
    """λ -> every pool of ``fleet`` still sized within its GPU count at λ (analytic model)."""
    gpus = {g.name: g for g in request.gpus}

    def holds(rate_per_s: float) -> bool:
        settings = replace(request.settings(), rate_per_s=rate_per_s)
        for i, p in enumerate(fleet.pools):
            rng_ = PoolRange(p.lo_tokens, p.hi_tokens, i == len(fleet.pools) - 1)
            need = size_one_pool(points, rng_, gpus[p.gpu], fleet.router, settings, 1.0)
            if not need.feasible or need.count > p.count:
                return False
        return True

    return holds


def simulated_holds(request: OptimizeRequest, fleet: Candidate, verify: VerifySettings,
                    map_fn: MapFn | None = None) -> Callable[[float], bool]:
    """λ -> the fixed fleet's replicated TTFT (and TPOT) at the SLO percentile (upper 95 % bound,
    as verification checks it) meets the SLO at λ.  ``map_fn`` runs the replications (the same
    figures on any executor: seeds are fixed per replication)."""
    gpus = {g.name: g for g in request.gpus}
    counts = [p.count for p in fleet.pools]
    spec = fleet_spec(fleet, gpus, counts, dict(verify.step_models), verify.max_model_len_tokens,
                      verify.step_time_margin)
    seed = task_seed(verify.seed, "whatif", repr(fleet.key()), repr(tuple(counts)))

    def holds(rate_per_s: float) -> bool:
        rep = replicate(spec, request.workload, rate_per_s, verify.fixed_requests(), Level.ITERATION, seed,
                        n_replications=verify.n_replications, slo_ttft_s=verify.slo_ttft_s,
                        slo_tpot_s=verify.slo_tpot_s, map_fn=map_fn, arrival=verify.arrival, cv=verify.arrival_cv)
        _, ttft_hi_s, tpot_hi_s = percentile_bounds(rep.summaries, verify.percentile)
        ok = ttft_hi_s <= verify.slo_ttft_s
        if verify.slo_tpot_s is not None:
            ok = ok and tpot_hi_s <= verify.slo_tpot_s
        return bool(ok)

    return holds


def threshold_requests(verify: VerifySettings, settings: ThresholdSettings = ThresholdSettings()) -> int:
    """Requests one simulated step threshold typically simulates: the test at the point's own rate,
    two bracketing steps and the bisection to ``rel_tol`` (for choosing an executor)."""
    tests = 3 + math.ceil(math.log2((settings.bracket_factor - 1) / settings.rel_tol))
    return tests * verify.n_replications * verify.fixed_requests()


def step_threshold(holds: Callable[[float], bool], rate_per_s: float,
                   settings: ThresholdSettings = ThresholdSettings()) -> tuple[float, bool, bool]:
    """(largest passing rate found, capped, fails_at_own_rate) by bracketing then bisection."""
    if not holds(rate_per_s):
        return rate_per_s, False, True
    lo, hi = rate_per_s, None
    limit = rate_per_s * settings.max_rate_factor
    while hi is None:
        nxt = min(lo * settings.bracket_factor, limit)
        if holds(nxt):
            lo = nxt
            if lo >= limit:
                return lo, True, False
        else:
            hi = nxt
    for _ in range(MAX_BISECTIONS):
        if (hi - lo) <= settings.rel_tol * lo:
            break
        mid = 0.5 * (lo + hi)
        if holds(mid):
            lo = mid
        else:
            hi = mid
    return lo, False, False


def whatif(
    request: OptimizeRequest,
    rates_per_s: Sequence[float],
    verify: VerifySettings | None = None,
    thresholds: ThresholdSettings = ThresholdSettings(),
    progress: ProgressFn | None = None,
    map_fn: MapFn | None = None,
    arrivals: ArrivalSpec | None = None,
) -> WhatIfResult:
    """The cheapest (verified) fleet and its step threshold for every rate (see module docstring).

    ``arrivals``: the arrival process; each rate's analytic phase gets its Ca² at that rate (a replayed
    trace is burstier replayed faster) and ``verify`` should simulate the same process
    (``VerifySettings.arrival``).  None keeps ``request.arrival_cv2`` at every rate.
    """
    rates = sorted(float(r) for r in rates_per_s)
    if not rates:
        raise ConfigError("no arrival rates given: pass `rates_per_s` START:STOP:STEP, e.g. 25:400:25",
                          param="rates_per_s")
    points = LengthPoints(request.workload, request.pool_points, request.quadrature_points,
                          request.max_model_len_tokens)
    out = []
    for i, rate in enumerate(rates):
        if progress is not None:
            progress("whatif", i, len(rates))
        req = replace(request, rate_per_s=rate)
        if arrivals is not None:
            req = replace(req, arrival_cv2=arrivals.ca2(request.workload, rate))
        ver = None if verify is None else replace(verify, rate_per_s=rate)
        res = optimize(req, ver, progress, map_fn=map_fn)
        best = res.recommendation
        if best is None:
            out.append(WhatIfPoint(rate, None, None, False, False, "no fleet meets the SLO at this rate"))
            continue
        fleet = best if best.verification is None else verified_fleet(best)
        holds = analytic_holds(req, fleet, points) if ver is None else simulated_holds(req, fleet, ver, map_fn)
        thr, capped, fails = step_threshold(holds, rate, thresholds)
        out.append(WhatIfPoint(rate, fleet, thr, capped, fails, None))
    if progress is not None:
        progress("whatif", len(rates), len(rates))
    return WhatIfResult(request, verify, "analytic" if verify is None else "simulated", tuple(out),
                        request.rejected())
