"""The plan as actions procurement can act on, and each period's capacity.

Per period and GPU type, against the period before (the owned fleet before the first period):
``buy`` (GPUs purchased; order by the period's date minus the lead time), ``retire`` (owned GPUs
sold), ``rent`` (GPUs newly reserved for the prices' term, or more GPUs on demand; ``terms`` says
which and until when), ``release`` (fewer GPUs on demand, or reserved contracts whose term ended),
``move`` (owned GPUs of the type
that change pool when the pools are re-split: the GPUs leaving pools that shrink or disappear, at
most as many as the type still serves).  Each row carries the fleet after the period's actions, the
period's discounted cost and the cumulative cost.

Capacity (req/s): the rate at which the fleet's busiest pool saturates with the same split,
min over pools of λ_i / (ρ_i s_i) where λ_i, ρ_i are the pool's rate and utilisation at its sizing
and s_i its traffic share (a verified fleet's ρ scaled by analytic / verified count).
"""

from __future__ import annotations

import datetime as dt
import math

from fleetplan.plan.horizon.result import BUY, MOVE, RELEASE, RENT, RETIRE, Action, HorizonPlan, PeriodPlan
from fleetplan.plan.sweep import Candidate


def pool_label(lo: int, hi: int) -> str:
    return f"{lo}-{hi} tok"


def fleet_label(c: Candidate) -> str:
    return " + ".join(f"{p.total_gpus}x {p.gpu} ({pool_label(p.lo_tokens, p.hi_tokens)})"
                      for p in c.pools if p.total_gpus)


def capacity_per_s(c: Candidate) -> float:
    """Saturation rate of the fleet (see module docstring); inf for a fleet with no loaded pool."""
    v = c.verification
    out = math.inf
    for i, p in enumerate(c.pools):
        if p.traffic_share <= 0 or p.rho <= 0 or p.count == 0:
            continue
        rho = p.rho
        if v is not None and v.verified_counts[i] > 0:
            rho = p.rho * v.analytic_counts[i] / v.verified_counts[i]
        out = min(out, p.lam_per_s / (rho * p.traffic_share))
    return out


def _layout(c: Candidate | None, gpu: str) -> dict[str, int]:
    if c is None:
        return {}
    out: dict[str, int] = {}
    for p in c.pools:
        if p.gpu == gpu and p.total_gpus:
            out[pool_label(p.lo_tokens, p.hi_tokens)] = out.get(pool_label(p.lo_tokens, p.hi_tokens), 0) + p.total_gpus
    return out


def actions(plan: HorizonPlan, periods: tuple[PeriodPlan, ...] | None = None) -> tuple[Action, ...]:
    """Rows of ``periods`` (default: the plan's own) in date order (see module docstring)."""
    rows: list[Action] = []
    cumulative = 0.0
    prev: PeriodPlan | None = None
    for per in periods if periods is not None else plan.periods:
        cumulative += per.cost_usd
        label = fleet_label(per.fleet)
        for g, gpu in enumerate(plan.types):
            new = _layout(per.fleet, gpu)
            pools = ", ".join(new) or "-"

            def row(kind: str, n: int, pool: str, order_by: dt.date | None = None, terms: str = "", per=per,
                    gpu=gpu, label=label, cumulative=cumulative) -> None:
                rows.append(Action(per.date, order_by or per.date, kind, gpu, int(n), pool, label, per.cost_usd,
                                   cumulative, terms))

            if per.bought[g]:
                row(BUY, per.bought[g], pools, per.order_by)
            if per.retired[g]:
                row(RETIRE, per.retired[g], "-")
            ended = (prev.reserved[g] if prev is not None else 0) - (per.reserved[g] - per.signed[g])
            if ended > 0:
                row(RELEASE, ended, "-", terms="reserved term ended")
            if per.signed[g]:
                until = per.reserved_until[g]
                row(RENT, per.signed[g], pools, terms=f"reserved until {until.isoformat()}" if until else "reserved")
            was_od = prev.on_demand[g] if prev is not None else 0
            if per.on_demand[g] > was_od:
                row(RENT, per.on_demand[g] - was_od, pools, terms="on demand")
            elif per.on_demand[g] < was_od:
                row(RELEASE, was_od - per.on_demand[g], "-", terms="on demand")
            if prev is not None:
                old = _layout(prev.fleet, gpu)
                if old and new and old != new:
                    leaving = sum(max(0, n - new.get(k, 0)) for k, n in old.items())
                    moved = min(leaving, sum(new.values()))
                    if moved:
                        row(MOVE, moved, f"{', '.join(old)} -> {', '.join(new)}")
        prev = per
    return tuple(rows)
