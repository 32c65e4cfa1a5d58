"""An incremental procurement plan over a demand forecast: start from the owned fleet, only add
(or retire when allowed), minimise the discounted total cost over the horizon.

Per period t (the forecast's dates; planned rate = its P90):

1. candidates: the analytic phase (``optimize.analytical_phase``) at the period's rate with the
   run's arrival process (Ca² at that rate); the ``n_candidates`` cheapest feasible fleets with
   distinct GPU needs, plus the cheapest fleet of every GPU-type combination, so owned types stay
   in reach.  Fleets using a GPU type before its availability date are left out;
2. the horizon program (``horizon.solve``, exact, HiGHS; prices ``hardware.procurement``) picks one candidate per
   period and each type's owned count (buy / retire) and how its shortfall is rented (a reserved
   contract for the prices' term, paid used or not, or on demand for the period);
3. with ``verify``, every chosen fleet is simulated at its period's rate and arrival process
   (``plan.verify.verify_candidate``: grown until it passes); a grown fleet replaces its candidate, a
   failing one is dropped, and the program is solved again until every chosen fleet has passed.

The per-step baseline (today's ``whatif``: each period's cheapest fleet from scratch, its shortfall
bought) is costed with the same prices and verified the same way.  Fleets re-split pools freely
between periods: GPUs are owned per type, not per pool (a changed pool layout is a "move").
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Mapping
from dataclasses import replace

from fleetplan.errors import ConfigError
from fleetplan.parallel import MapFn, TaskFailedError, in_input_order, serial_map
from fleetplan.plan.arrivals import ArrivalSpec
from fleetplan.plan.horizon.forecast import DAYS_PER_MONTH, H_PER_DAY, add_months
from fleetplan.plan.horizon.result import DEFAULT_CANDIDATES_PER_PERIOD as DEFAULT_CANDIDATES_PER_PERIOD
from fleetplan.plan.horizon.result import HorizonPlan, HorizonSettings, PeriodPlan
from fleetplan.plan.horizon.schedule import actions, capacity_per_s
from fleetplan.plan.horizon.solve import Plan, PlanBudgetError, Problem, TypeCosts, evaluate, solve
from fleetplan.plan.optimize import OptimizeRequest, analytical_phase, verified_fleet
from fleetplan.plan.sweep import Candidate, ProgressFn
from fleetplan.plan.verify import VerifySettings, verify_candidate

DAYS_PER_YEAR = 365.25


def fleet_needs(c: Candidate, types: tuple[str, ...]) -> tuple[int, ...]:
    """GPUs of each type ``c`` needs (spares and TP groups included)."""
    need = dict.fromkeys(types, 0)
    for p in c.pools:
        need[p.gpu] += p.total_gpus
    return tuple(need[g] for g in types)


def _select(ranked: list[Candidate], types: tuple[str, ...], k: int) -> list[Candidate]:
    out: list[Candidate] = []
    seen_needs, seen_sets = set(), set()
    for c in ranked:
        if not c.feasible:
            continue
        need = fleet_needs(c, types)
        used = frozenset(p.gpu for p in c.pools if p.total_gpus)
        if need in seen_needs:
            continue
        if len(out) < k or used not in seen_sets:
            out.append(c)
            seen_needs.add(need)
            seen_sets.add(used)
    return out


def period_candidates(request: OptimizeRequest, arrivals: ArrivalSpec | None, types: tuple[str, ...], k: int,
                      available_from: tuple[tuple[str, dt.date], ...], period: tuple[dt.date, float]
                      ) -> tuple[tuple[Candidate, ...], float]:
    """(candidate fleets, Ca²) of one period (date, planned rate); a task for ``map_fn``."""
    date, rate = period
    avail = dict(available_from)
    ca2 = request.arrival_cv2 if arrivals is None else arrivals.ca2(request.workload, rate)
    gpus = tuple(g for g in request.gpus if g.name not in avail or avail[g.name] <= date)
    if not gpus:
        raise ConfigError(f"no GPU type is available on {date.isoformat()}: move the availability dates "
                          "or add a GPU type available then")
    chosen = _select(analytical_phase(replace(request, rate_per_s=rate, arrival_cv2=ca2, gpus=gpus)), types, k)
    if not chosen:
        raise ConfigError(f"no fleet meets the SLO at {rate:g} req/s (period {date.isoformat()}): relax the "
                          "SLO, raise the GPU limit or add GPU types")
    return tuple(chosen), ca2


def verify_at_rate(gpus: Mapping, workload, verify: VerifySettings, availability: Callable,
                   item: tuple[Candidate, float]) -> Candidate | None:
    """``item``'s fleet verified at its rate (grown until it passes), or None when it fails; a task for
    ``map_fn``."""
    candidate, rate = item
    v = verify_candidate(candidate, gpus, workload, replace(verify, rate_per_s=rate), availability)
    return verified_fleet(replace(candidate, verification=v)) if v.passed else None


def _costs(s: HorizonSettings, types: tuple[str, ...]) -> tuple[tuple[TypeCosts, ...], tuple[float, ...]]:
    f = s.forecast
    start = f.dates[0]
    discount = tuple((1.0 + s.discount_rate_per_year) ** (-(d - start).days / DAYS_PER_YEAR) for d in f.dates)
    period_h = tuple(f.period_h(t) for t in range(f.n_periods))
    avail = dict(s.available_from)
    out = []
    for g in types:
        pr = s.prices[g]
        charges: list[float | None] = []
        for t in range(f.n_periods):
            too_late = s.lead_time_weeks > 0 and s.order_by(t) < start  # the order would predate the plan
            if not pr.buyable or too_late or (g in avail and f.dates[t] < avail[g]):
                charges.append(None)
                continue
            per_h = pr.capex_usd / (pr.amortisation_months * DAYS_PER_MONTH * H_PER_DAY)
            left_h = pr.amortisation_months * DAYS_PER_MONTH * H_PER_DAY
            total = 0.0
            for u in range(t, f.n_periods):
                use = min(period_h[u], left_h)
                total += discount[u] * per_h * use
                left_h -= use
                if left_h <= 0:
                    break
            charges.append(total)
        out.append(TypeCosts(tuple(charges), pr.capex_usd or 0.0, pr.reserved_usd_per_h, pr.resale_usd,
                             pr.on_demand_usd_per_h, _reserve_end(f, pr.reserved_term_months)))
    return tuple(out), discount


def _reserve_end(f, term_months: int) -> tuple[int, ...]:
    """Per period t: the first period (exclusive end) not covered by a contract signed at t's date."""
    out = []
    for t in range(f.n_periods):
        until = add_months(f.dates[t], term_months)
        out.append(next((u for u in range(t + 1, f.n_periods) if f.dates[u] >= until), f.n_periods))
    return tuple(out)



def _periods(plan: Plan, options: list[list[Candidate]], s: HorizonSettings, cv2: list[float],
             types: tuple[str, ...]) -> tuple[PeriodPlan, ...]:
    f = s.forecast
    def until(t: int, signed: tuple[int, ...]) -> tuple[dt.date | None, ...]:
        return tuple(add_months(f.dates[t], s.prices[g].reserved_term_months) if n else None
                     for g, n in zip(types, signed, strict=True))

    return tuple(PeriodPlan(f.dates[t], s.order_by(t), f.p50_per_s[t], f.p90_per_s[t], cv2[t],
                            options[t][st.choice], st.owned, st.rented, st.bought, st.retired, st.cost_usd,
                            st.spend_usd, st.reserved, st.signed, st.on_demand, until(t, st.signed))
                 for t, st in enumerate(plan.steps))


def _budget_error(exc: PlanBudgetError, s: HorizonSettings) -> ConfigError:
    t = exc.period
    return ConfigError(
        f"budget {exc.budget_usd:,.0f} USD per period cannot cover period {t} ({s.forecast.dates[t].isoformat()}, "
        f"{s.forecast.p90_per_s[t]:g} req/s): its cheapest fleet needs a spend of {exc.needed_usd:,.0f} USD; raise the "
        "budget to at least that, allow renting instead of buying earlier, or lower the forecast")


def plan_horizon(
    request: OptimizeRequest,
    settings: HorizonSettings,
    arrivals: ArrivalSpec | None = None,
    verify: VerifySettings | None = None,
    progress: ProgressFn | None = None,
    availability: Callable | None = None,
    map_fn: MapFn | None = None,
) -> HorizonPlan:
    """The horizon-optimal incremental plan (see module docstring); ``map_fn`` runs the periods' analytic
    sweeps (default: in this process)."""
    f = settings.forecast
    names = {g.name for g in request.gpus}
    owned0 = dict(settings.current_fleet)
    types = tuple(sorted(names | set(owned0)))
    missing = [g for g in types if g not in settings.prices]
    if missing:
        raise ConfigError(f"no procurement prices for {', '.join(missing)}: add them to the prices file")
    task = functools.partial(period_candidates, request, arrivals, types, settings.n_candidates,
                             settings.available_from)
    periods = [(f.dates[t], f.p90_per_s[t]) for t in range(f.n_periods)]
    if progress is not None:
        progress("plan", 0, f.n_periods)
    outcomes = []
    for outcome in (map_fn or serial_map)(task, periods):
        outcomes.append(outcome)
        if progress is not None:
            progress("plan", len(outcomes), f.n_periods)
    options: list[list[Candidate]] = []
    cv2: list[float] = []
    for outcome in in_input_order(outcomes, f.n_periods):
        if not outcome.ok:
            raise TaskFailedError(f"a period's analytic sweep failed: {outcome.error}; fix the cause and rerun")
        opts, ca2 = outcome.value
        options.append(list(opts))
        cv2.append(ca2)
    costs, discount = _costs(settings, types)
    initial = tuple(int(owned0.get(g, 0)) for g in types)
    period_h = tuple(f.period_h(t) for t in range(f.n_periods))
    gpu_of = {g.name: g for g in request.gpus}
    avail_fn = availability or request.availability_of

    def problem() -> Problem:
        needs = tuple(tuple(fleet_needs(c, types) for c in opts) for opts in options)
        return Problem(types, needs, period_h, discount, costs, initial, settings.allow_retire,
                       settings.budget_usd_per_period)

    def cheapest(t: int) -> int:
        return min(range(len(options[t])), key=lambda j: options[t][j].cost_usd_per_year)

    n_solves = 0
    while True:
        n_solves += 1
        try:
            best = solve(problem())
        except PlanBudgetError as exc:
            raise _budget_error(exc, settings) from exc
        base_choice = [cheapest(t) for t in range(f.n_periods)]
        if verify is None:
            break
        pending = {(t, i) for t, st in enumerate(best.steps) for i in (st.choice, base_choice[t])
                   if options[t][i].verification is None}
        if not pending:
            break
        order = sorted(pending)
        vtask = functools.partial(verify_at_rate, gpu_of, request.workload, verify, avail_fn)
        if progress is not None:
            progress("verify", 0, len(order))
        got = []
        for outcome in (map_fn or serial_map)(vtask, [(options[t][i], f.p90_per_s[t]) for t, i in order]):
            got.append(outcome)
            if progress is not None:
                progress("verify", len(got), len(order))
        verdict = {}
        for (t, i), outcome in zip(order, in_input_order(got, len(order)), strict=True):
            if not outcome.ok:
                raise TaskFailedError(f"verifying a fleet of period {f.dates[t].isoformat()} failed: {outcome.error}")
            verdict[(t, i)] = outcome.value
        for t in sorted({t for t, _ in order}):
            kept = [c if (t, i) not in verdict else verdict[(t, i)] for i, c in enumerate(options[t])]
            kept = [c for c in kept if c is not None]
            if not kept:
                raise ConfigError(f"no candidate fleet passed simulation at {f.p90_per_s[t]:g} req/s (period "
                                  f"{f.dates[t].isoformat()}): raise the GPU limit or relax the SLO")
            options[t] = kept
    baseline = evaluate(problem(), base_choice)
    out = HorizonPlan(types, initial, _periods(best, options, settings, cv2, types),
                      _periods(baseline, options, settings, cv2, types), settings, n_solves)
    return with_schedule(out)


def with_schedule(plan: HorizonPlan) -> HorizonPlan:
    """``plan`` carrying its actions and per-period capacities (``plan.horizon.schedule``)."""
    return replace(plan, actions=actions(plan), baseline_actions=actions(plan, plan.baseline),
                   capacities_per_s=tuple(capacity_per_s(p.fleet) for p in plan.periods),
                   baseline_capacities_per_s=tuple(capacity_per_s(p.fleet) for p in plan.baseline))
