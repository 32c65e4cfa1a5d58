"""Horizon-optimal procurement over per-period candidate fleets (exact dynamic programming).

Legend: periods t = 0..T-1 with hours h_t and discount factor d_t = (1 + r)^(-months since start);
GPU types g; candidate fleets c in C_t, each needing n_g(c) GPUs of type g (spares and TP groups
included).  The state after period t is (O, R): GPUs owned and GPUs of the initial fleet retired,
per type.  A step picks c in C_t and, per type, the owned count O'_g:

* keep O_g (any shortfall n_g - O_g is rented at the reserved rate for the period);
* buy up to n_g (when the type can be bought and its order-by date is not before the plan's start);
* with ``allow_retire``: sell initial GPUs down to the need, or all retirable ones.

Costs (USD, discounted): a purchase is charged its straight-line amortisation capex/A per GPU-hour
over the hours from its period to the horizon end (at most A months) -- so a later purchase costs
less and buying ahead of need never pays; rent is reserved_usd_per_h x h_t per rented GPU; a
retired GPU is credited its resale value.  GPUs owned at the start are sunk (no further charge).

The objective sum_t d_t (period cost) is minimised exactly by forward DP over the reachable states
(same (O, R): the cheaper path kept).  Within a type, GPUs that enter the need together are used
alike afterwards, so when each type's need along the plan never falls, "all or none of the
shortfall" per period loses nothing (the test suite checks the DP against brute force over every
integer owned count on small cases).  A budget caps each period's cash spend (capex of purchases
+ rent); a period no state can afford raises ``PlanBudgetError`` with the smallest spend that period
would need.  The per-step baseline (``evaluate``) takes each period's cheapest fleet, buys its
shortfall where it may (rents otherwise) and never retires: it is one path of the DP, so the DP is
never worse.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from fleetplan.errors import ConfigError, InfeasibleError


class PlanBudgetError(InfeasibleError):
    """No plan keeps a period's spend within the budget."""

    def __init__(self, period: int, budget_usd: float, needed_usd: float, message: str) -> None:
        self.period = period
        self.budget_usd = budget_usd
        self.needed_usd = needed_usd
        super().__init__(message)


@dataclass(frozen=True)
class TypeCosts:
    """Per GPU type: buy charge per GPU bought in each period (discounted amortisation to the horizon
    end; None: cannot be bought then), capex (cash), rent per GPU-hour and resale credit (USD)."""

    buy_charge_usd: tuple[float | None, ...]
    capex_usd: float
    rent_usd_per_h: float
    resale_usd: float


@dataclass(frozen=True)
class Problem:
    """A horizon problem on abstract needs (``needs[t][c]``: GPUs per type of candidate c in period t)."""

    types: tuple[str, ...]
    needs: tuple[tuple[tuple[int, ...], ...], ...]
    period_h: tuple[float, ...]
    discount: tuple[float, ...]
    costs: tuple[TypeCosts, ...]
    initial: tuple[int, ...]
    allow_retire: bool = False
    budget_usd: float | None = None  # per period, cash

    def __post_init__(self) -> None:
        t_n = len(self.needs)
        if t_n == 0 or len(self.period_h) != t_n or len(self.discount) != t_n:
            raise ConfigError("a horizon problem needs hours and a discount factor for every period")
        for t, opts in enumerate(self.needs):
            if not opts:
                raise ConfigError(f"period {t} has no candidate fleet")
            for n in opts:
                if len(n) != len(self.types):
                    raise ConfigError("every candidate's need lists one count per GPU type")
        if len(self.initial) != len(self.types) or any(x < 0 for x in self.initial):
            raise ConfigError("the initial fleet gives one count >= 0 per GPU type")


@dataclass(frozen=True)
class Step:
    """One period of a plan: the fleet chosen (index into ``needs[t]``), owned / rented / bought /
    retired GPUs per type, and the period's discounted cost and cash spend (USD)."""

    choice: int
    owned: tuple[int, ...]
    rented: tuple[int, ...]
    bought: tuple[int, ...]
    retired: tuple[int, ...]
    cost_usd: float
    spend_usd: float


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]

    @property
    def total_cost_usd(self) -> float:
        return sum(s.cost_usd for s in self.steps)


def _step(p: Problem, t: int, owned: tuple[int, ...], new_owned: tuple[int, ...], need: tuple[int, ...]
          ) -> tuple[float, float, tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None:
    """(discounted cost, cash spend, bought, retired, rented) of moving ``owned`` -> ``new_owned``."""
    cost = spend = 0.0
    bought, retired, rented = [], [], []
    for g, c in enumerate(p.costs):
        b = max(0, new_owned[g] - owned[g])
        r = max(0, owned[g] - new_owned[g])
        if b and c.buy_charge_usd[t] is None:
            return None
        rent = max(0, need[g] - new_owned[g])
        cost += (b * c.buy_charge_usd[t] if b else 0.0) + p.discount[t] * (rent * c.rent_usd_per_h * p.period_h[t]
                                                                            - r * c.resale_usd)
        spend += b * c.capex_usd + rent * c.rent_usd_per_h * p.period_h[t]
        bought.append(b)
        retired.append(r)
        rented.append(rent)
    return cost, spend, tuple(bought), tuple(retired), tuple(rented)


def _levels(p: Problem, t: int, owned: int, retired: int, need: int, g: int) -> set[int]:
    out = {owned}
    if need > owned and p.costs[g].buy_charge_usd[t] is not None:
        out.add(need)
    if p.allow_retire:
        retirable = min(owned, p.initial[g] - retired)
        if retirable > 0:
            out.add(max(need, owned - retirable))
            out.add(owned - retirable)
    return out


def solve(p: Problem) -> Plan:
    """The plan of least total discounted cost (see module docstring)."""
    n_types = len(p.types)
    start = (tuple(p.initial), (0,) * n_types)
    layer: dict = {start: (0.0, None)}
    history = []
    for t, options in enumerate(p.needs):
        nxt: dict = {}
        cheapest_spend = math.inf
        for state, (acc, _) in layer.items():
            owned, retired = state
            for ci, need in enumerate(options):
                per_type = [sorted(_levels(p, t, owned[g], retired[g], need[g], g)) for g in range(n_types)]
                for new_owned in itertools.product(*per_type):
                    out = _step(p, t, owned, new_owned, need)
                    if out is None:
                        continue
                    cost, spend, bought, ret, rented = out
                    cheapest_spend = min(cheapest_spend, spend)
                    if p.budget_usd is not None and spend > p.budget_usd * (1 + 1e-12):
                        continue
                    key = (tuple(new_owned), tuple(r0 + r1 for r0, r1 in zip(retired, ret, strict=True)))
                    total = acc + cost
                    if key not in nxt or total < nxt[key][0] - 1e-9:
                        nxt[key] = (total, (state, Step(ci, tuple(new_owned), rented, bought, ret, cost, spend)))
        if not nxt:
            raise PlanBudgetError(t, float(p.budget_usd or 0.0), cheapest_spend,
                                  f"period {t} needs a spend of at least {cheapest_spend:,.0f} USD")
        history.append(nxt)
        layer = nxt
    key = min(layer, key=lambda k: layer[k][0])
    steps = []
    for t in range(len(p.needs) - 1, -1, -1):
        prev, step = history[t][key][1]
        steps.append(step)
        key = prev
    return Plan(tuple(reversed(steps)))


def evaluate(p: Problem, choices: Sequence[int]) -> Plan:
    """The per-step baseline: fleet ``choices[t]`` each period, its shortfall bought where the type can
    be bought then (rented otherwise), nothing retired; budget not applied."""
    owned = tuple(p.initial)
    steps = []
    for t, ci in enumerate(choices):
        need = p.needs[t][ci]
        new = tuple(max(o, n) if p.costs[g].buy_charge_usd[t] is not None else o
                    for g, (o, n) in enumerate(zip(owned, need, strict=True)))
        cost, spend, bought, ret, rented = _step(p, t, owned, new, need)
        steps.append(Step(ci, new, rented, bought, ret, cost, spend))
        owned = new
    return Plan(tuple(steps))
