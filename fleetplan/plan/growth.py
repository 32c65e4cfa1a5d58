"""A dated procurement schedule from what-if step thresholds and a traffic growth rate.

Traffic grows geometrically from ``start_rate_per_s`` by ``growth_per_month`` (0.15 = 15 %
a month):  λ(t) = λ0 · (1 + g)^t, t in months.  The rate reaches λ* at

    t(λ*) = ln(λ*/λ0) / ln(1 + g)  months.

The fleet serving λ is the what-if fleet of the first grid point whose step threshold
covers λ (``points`` sorted by rate; thresholds are assumed non-decreasing).  Each
row of the schedule is one purchase: the month it must be in service (the first whole
month whose λ exceeds the previous fleet's threshold), the rate then, the new fleet,
GPUs to add, the date the previous fleet runs out (threshold date) and the order-by
date = threshold date - lead time.  Month m starts at ``start_date + m`` calendar months
(fractional months: ``DAYS_PER_MONTH`` = 365.25 / 12 days each).  The first row (month
0) is the fleet needed at the start; its order-by date is ``start_date`` - lead time.
Dates come in as arguments: the library never reads the clock.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass

from fleetplan.errors import ConfigError
from fleetplan.plan.whatif import WhatIfPoint

DAYS_PER_MONTH = 365.25 / 12.0
DAYS_PER_WEEK = 7.0


@dataclass(frozen=True)
class ProcurementStep:
    """One purchase (rates in req/s; dates as ``datetime.date``)."""

    month: int
    rate_per_s: float
    fleet_label: str
    total_gpus: int
    gpus_to_add: int
    cost_usd_per_year: float
    holds_until_rate_per_s: float
    previous_runs_out_on: dt.date | None  # None for the initial fleet
    order_by: dt.date


@dataclass(frozen=True)
class ProcurementSchedule:
    start_date: dt.date
    start_rate_per_s: float
    growth_per_month: float
    months: int
    lead_time_weeks: float
    steps: tuple[ProcurementStep, ...]
    uncovered_from_month: int | None  # first month whose λ exceeds every what-if threshold


def months_to_reach(rate_per_s: float, start_rate_per_s: float, growth_per_month: float) -> float:
    """t such that λ0 (1 + g)^t = rate (0 when rate <= λ0)."""
    if rate_per_s <= start_rate_per_s:
        return 0.0
    return math.log(rate_per_s / start_rate_per_s) / math.log1p(growth_per_month)


def date_after_months(start: dt.date, months: float) -> dt.date:
    """``start`` + ``months`` x ``DAYS_PER_MONTH`` days (rounded down to a day)."""
    return start + dt.timedelta(days=math.floor(months * DAYS_PER_MONTH))


def fleet_label(point: WhatIfPoint) -> str:
    f = point.fleet
    pools = " + ".join(f"{p.count + p.spares}x {p.gpu} (<= {p.hi_tokens} tok)" for p in f.pools if p.count + p.spares)
    return f"{f.topology.value}: {pools}"


def procurement_schedule(
    points: Sequence[WhatIfPoint],
    start_rate_per_s: float,
    growth_per_month: float,
    months: int,
    start_date: dt.date,
    lead_time_weeks: float = 0.0,
) -> ProcurementSchedule:
    """Purchases needed over ``months`` months of growth (see module docstring)."""
    if not (start_rate_per_s > 0 and math.isfinite(start_rate_per_s)):
        raise ConfigError(param="start_rate_per_s", value=start_rate_per_s, rule="give a rate > 0 req/s")
    if not (growth_per_month > 0 and math.isfinite(growth_per_month)):
        raise ConfigError(param="growth_per_month", value=growth_per_month, rule="give a growth > 0, e.g. 15%/month")
    if int(months) != months or months < 1:
        raise ConfigError(param="months", value=months, rule="give a whole number of months >= 1")
    if not (lead_time_weeks >= 0 and math.isfinite(lead_time_weeks)):
        raise ConfigError(param="lead_time_weeks", value=lead_time_weeks, rule="give weeks >= 0")
    usable = sorted((p for p in points if p.fleet is not None and p.holds_until_rate_per_s is not None),
                    key=lambda p: p.rate_per_s)
    if not usable:
        raise ConfigError("the what-if run found no fleet at any rate", param="rates_per_s",
                          fix="widen `rates_per_s` or relax the SLO")
    lead = dt.timedelta(days=lead_time_weeks * DAYS_PER_WEEK)

    def fleet_for(rate: float) -> WhatIfPoint | None:
        return next((p for p in usable if p.holds_until_rate_per_s >= rate), None)

    steps: list[ProcurementStep] = []
    current: WhatIfPoint | None = None
    uncovered = None
    for m in range(int(months) + 1):
        rate = start_rate_per_s * (1.0 + growth_per_month) ** m
        if current is not None and rate <= current.holds_until_rate_per_s:
            continue
        nxt = fleet_for(rate)
        if nxt is None:
            uncovered = m
            break
        if current is None:
            runs_out, order_by, added = None, start_date - lead, nxt.total_gpus
        else:
            t = months_to_reach(current.holds_until_rate_per_s, start_rate_per_s, growth_per_month)
            runs_out = date_after_months(start_date, t)
            order_by = runs_out - lead
            added = nxt.total_gpus - current.total_gpus
        steps.append(ProcurementStep(m, rate, fleet_label(nxt), nxt.total_gpus, added,
                                     nxt.fleet.cost_usd_per_year, float(nxt.holds_until_rate_per_s),
                                     runs_out, order_by))
        current = nxt
    return ProcurementSchedule(start_date, float(start_rate_per_s), float(growth_per_month), int(months),
                               float(lead_time_weeks), tuple(steps), uncovered)
