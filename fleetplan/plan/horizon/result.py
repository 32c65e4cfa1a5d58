"""The settings and result types of a horizon plan (``plan.horizon.plan`` builds them,
``plan.horizon.schedule`` turns a plan into actions).

Apart from both so that a plan can carry its actions and the schedule can read a plan without the
two modules importing each other.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass

from fleetplan.errors import ConfigError
from fleetplan.hardware.procurement import GpuPrices
from fleetplan.plan.defaults import DEFAULT_CANDIDATES_PER_PERIOD
from fleetplan.plan.horizon.forecast import Forecast
from fleetplan.plan.sweep import Candidate

DAYS_PER_WEEK = 7.0
#: The kinds of ``Action`` (``plan.horizon.schedule``).
BUY, RETIRE, RENT, RELEASE, MOVE = "buy", "retire", "rent", "release", "move"


@dataclass(frozen=True)
class Action:
    date: dt.date
    order_by: dt.date
    action: str
    gpu: str
    count: int
    pool: str
    fleet_after: str
    cost_usd_period: float
    cumulative_cost_usd: float
    terms: str = ""  # rent / release: "reserved until YYYY-MM-DD", "on demand", "reserved term ended"


@dataclass(frozen=True)
class HorizonSettings:
    """How the plan is built (money in USD; ``discount_rate_per_year`` a fraction, 0: undiscounted)."""

    forecast: Forecast
    prices: Mapping[str, GpuPrices]
    current_fleet: tuple[tuple[str, int], ...] = ()  # catalog GPU name, GPUs owned
    allow_retire: bool = False
    lead_time_weeks: float = 0.0
    budget_usd_per_period: float | None = None
    available_from: tuple[tuple[str, dt.date], ...] = ()
    discount_rate_per_year: float = 0.0
    n_candidates: int = DEFAULT_CANDIDATES_PER_PERIOD

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lead_time_weeks) and self.lead_time_weeks >= 0):
            raise ConfigError(f"lead time {self.lead_time_weeks!r} weeks is invalid: give weeks >= 0")
        if self.budget_usd_per_period is not None and not self.budget_usd_per_period > 0:
            raise ConfigError(f"budget {self.budget_usd_per_period!r} USD per period is invalid: give a budget > 0")
        if not (math.isfinite(self.discount_rate_per_year) and self.discount_rate_per_year > -1):
            raise ConfigError(f"discount rate {self.discount_rate_per_year!r} is invalid: give a yearly fraction, "
                              "e.g. 0.08")
        if int(self.n_candidates) != self.n_candidates or self.n_candidates < 1:
            raise ConfigError(f"candidates per period {self.n_candidates!r} is invalid: give a whole number >= 1")
        for name, n in self.current_fleet:
            if int(n) != n or n < 0:
                raise ConfigError(f"current fleet: {n!r} {name} GPUs is invalid: give a whole number >= 0")

    def order_by(self, t: int) -> dt.date:
        return self.forecast.dates[t] - dt.timedelta(days=self.lead_time_weeks * DAYS_PER_WEEK)


@dataclass(frozen=True)
class PeriodPlan:
    """One period of a plan: the fleet serving its planned rate and the GPUs owned / rented per type."""

    date: dt.date
    order_by: dt.date
    p50_per_s: float
    p90_per_s: float
    arrival_cv2: float
    fleet: Candidate
    owned: tuple[int, ...]
    rented: tuple[int, ...]  # rented and in use (reserved or on demand)
    bought: tuple[int, ...]
    retired: tuple[int, ...]
    cost_usd: float  # discounted
    spend_usd: float  # cash in the period (capex of purchases + rent)
    reserved: tuple[int, ...] = ()  # under a reserved contract (used or idle)
    signed: tuple[int, ...] = ()  # newly reserved this period
    on_demand: tuple[int, ...] = ()  # rented on demand this period
    reserved_until: tuple[dt.date | None, ...] = ()  # per type: end of the contract signed this period

    @property
    def verified(self) -> bool:
        return self.fleet.verification is not None and self.fleet.verification.passed


@dataclass(frozen=True)
class HorizonPlan:
    """The horizon-optimal plan and the per-step baseline on the same candidates and prices."""

    types: tuple[str, ...]
    initial: tuple[int, ...]
    periods: tuple[PeriodPlan, ...]
    baseline: tuple[PeriodPlan, ...]
    settings: HorizonSettings
    n_solves: int
    # What the report shows, from ``plan.horizon.schedule`` (``plan_horizon`` fills them): the buy / rent /
    # release / move / retire actions of the plan and of the baseline, and each period's fleet capacity (req/s)
    actions: tuple[Action, ...] = ()
    baseline_actions: tuple[Action, ...] = ()
    capacities_per_s: tuple[float, ...] = ()
    baseline_capacities_per_s: tuple[float, ...] = ()

    @property
    def total_cost_usd(self) -> float:
        return sum(p.cost_usd for p in self.periods)

    @property
    def baseline_cost_usd(self) -> float:
        return sum(p.cost_usd for p in self.baseline)

    @property
    def saving_usd(self) -> float:
        """What the horizon-optimal plan saves against the per-step baseline (discounted USD)."""
        return self.baseline_cost_usd - self.total_cost_usd
