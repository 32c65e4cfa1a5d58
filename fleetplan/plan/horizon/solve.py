"""Horizon-optimal procurement over per-period candidate fleets (exact mixed-integer program, HiGHS).

Legend: periods t = 0..T-1 with hours h_t and discount factor d_t = (1 + r)^(-months since start);
GPU types g; candidate fleets c in C_t, each needing n_g(c) GPUs of type g (spares and TP groups
included).  Decisions per period: x_tc in {0, 1} (the fleet served, Σ_c x_tc = 1) and per type the
integers b_tg (bought), r_tg (initial GPUs retired), s_tg (GPUs newly reserved for a term that runs
from t to e_g(t), exclusive) and o_tg (GPUs rented on demand for the period).  Owned GPUs
O_tg = O_{t-1,g} + b_tg - r_tg (O_{-1} the initial fleet).  Constraints:

* cover:   O_tg + Σ_{u <= t < e_g(u)} s_ug + o_tg >= Σ_c n_g(c) x_tc;
* retire only with ``allow_retire``, only GPUs of the initial fleet (Σ_{u<=t} r_ug <= O_{-1,g}), and
  never in a period that buys the type (a buy-and-sell swap is not a plan);
* buy only where the type can be bought (its order-by date not before the plan's start, and its
  availability date reached); on demand only with an on-demand price;
* budget (cash per period): capex·b_tg + p_res·h_t·Σ_{u <= t < e_g(u)} s_ug + p_od·h_t·o_tg <= B.

Objective (USD, discounted), minimised exactly by HiGHS (``scipy.optimize.milp``): a purchase is
charged its straight-line amortisation capex/A per GPU-hour over the hours from its period to the
horizon end (at most A months) -- so a later purchase costs less and buying ahead of need never
pays; a reserved contract is charged when it is signed, Σ_{u=t}^{e-1} d_u·p_res·h_u per GPU (its
periods within the horizon, like a purchase's amortisation: capacity beyond the horizon is not
charged to the plan), paid whether used or not; on demand costs d_t·p_od·h_t per GPU; a retired GPU
is credited d_t times its resale value.  GPUs owned at the start are sunk.  Reserved rental is worth
it only where a need lasts: on demand wins for a shortfall that ends (the type is replaced, the
forecast dips) before a contract would have paid for itself.

A budget no plan can keep raises ``PlanBudgetError`` naming the first period t whose prefix 0..t is
infeasible and the smallest spend that period would need (a second program minimising that
period's spend with the earlier periods in budget).  The per-step baseline (``evaluate``) takes each
period's cheapest fleet, buys its shortfall where it may, reserves the rest and never retires: a
feasible point of the program, so the optimum is never dearer.  The test suite checks the program
against exhaustive search over every integer owned and reserved count on small cases.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from fleetplan.errors import ConfigError, InfeasibleError

#: A type's running reserved contracts: ((end period, GPUs), ...) sorted by end period.
Contracts = tuple[tuple[int, int], ...]


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
    end; None: cannot be bought then), capex (cash), reserved and on-demand rent per GPU-hour, resale
    credit (USD) and, per period t, the end period (exclusive) of a reserved contract signed at t
    (empty: a contract lasts one period, i.e. reserved rent without commitment)."""

    buy_charge_usd: tuple[float | None, ...]
    capex_usd: float
    reserved_usd_per_h: float
    resale_usd: float
    on_demand_usd_per_h: float | None = None  # None: no on-demand option
    reserve_end: tuple[int, ...] = field(default=())

    def end(self, t: int) -> int:
        return self.reserve_end[t] if self.reserve_end else t + 1


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
        for c in self.costs:
            if c.reserve_end and (len(c.reserve_end) != t_n
                                  or any(not t < e <= t_n for t, e in enumerate(c.reserve_end))):
                raise ConfigError("a reserved contract signed in period t ends after t and at most at the horizon")

    def contract_charge_usd(self, g: int, t: int) -> float:
        """Discounted cost of one GPU reserved at period t for its whole term within the horizon."""
        c = self.costs[g]
        return sum(self.discount[u] * c.reserved_usd_per_h * self.period_h[u] for u in range(t, c.end(t)))


@dataclass(frozen=True)
class Step:
    """One period of a plan: the fleet chosen (index into ``needs[t]``), per type the GPUs owned,
    rented and in use (``rented`` = ``reserved_used`` + ``on_demand``), under reserved contract
    (``reserved``, used or idle), newly reserved (``signed``), bought and retired, and the period's
    discounted cost and cash spend (USD)."""

    choice: int
    owned: tuple[int, ...]
    rented: tuple[int, ...]
    bought: tuple[int, ...]
    retired: tuple[int, ...]
    cost_usd: float
    spend_usd: float
    reserved: tuple[int, ...] = ()
    signed: tuple[int, ...] = ()
    on_demand: tuple[int, ...] = ()


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]

    @property
    def total_cost_usd(self) -> float:
        return sum(s.cost_usd for s in self.steps)


def _active(contracts: Contracts, t: int) -> int:
    return sum(n for end, n in contracts if end > t)


def _step(p: Problem, t: int, owned: tuple[int, ...], new_owned: tuple[int, ...], need: tuple[int, ...],
          contracts: tuple[Contracts, ...] | None = None, signed: tuple[int, ...] | None = None):
    """(discounted cost, cash spend, bought, retired, rented, reserved, on demand) of moving ``owned`` ->
    ``new_owned`` with the running ``contracts`` and ``signed`` new reserved GPUs per type (default: the
    whole gap); None when a
    type would be bought where it cannot be, or the shortfall left to on demand has no on-demand price."""
    n_types = len(p.costs)
    contracts = contracts if contracts is not None else ((),) * n_types
    if signed is None:  # reserve the whole gap
        signed = tuple(max(0, need[g] - new_owned[g] - _active(contracts[g], t)) for g in range(n_types))
    cost = spend = 0.0
    bought, retired, rented, reserved, on_demand = [], [], [], [], []
    for g, c in enumerate(p.costs):
        b = max(0, new_owned[g] - owned[g])
        r = max(0, owned[g] - new_owned[g])
        if b and c.buy_charge_usd[t] is None:
            return None
        short = max(0, need[g] - new_owned[g])
        res = _active(contracts[g], t) + signed[g]
        od = max(0, short - res)
        if od and c.on_demand_usd_per_h is None:
            return None
        h = p.period_h[t]
        cost += ((b * c.buy_charge_usd[t] if b else 0.0) + signed[g] * p.contract_charge_usd(g, t)
                 + p.discount[t] * ((od * c.on_demand_usd_per_h * h if od else 0.0) - r * c.resale_usd))
        spend += b * c.capex_usd + res * c.reserved_usd_per_h * h + (od * c.on_demand_usd_per_h * h if od else 0.0)
        bought.append(b)
        retired.append(r)
        rented.append(short)
        reserved.append(res)
        on_demand.append(od)
    return cost, spend, tuple(bought), tuple(retired), tuple(rented), tuple(reserved), tuple(on_demand)


def _add(contracts: Contracts, end: int, n: int, t: int) -> Contracts:
    """Running contracts after period t: those ending after t+1... plus ``n`` GPUs ending at ``end``."""
    merged: dict[int, int] = {}
    for e, k in contracts:
        if e > t + 1:
            merged[e] = merged.get(e, 0) + k
    if n and end > t + 1:
        merged[end] = merged.get(end, 0) + n
    return tuple(sorted(merged.items()))


class _Program:
    """The mixed-integer program of ``p`` (module docstring) over periods 0..``last``; variable columns
    per period: x (one per candidate), then per type b, r, s, o, y (y: 1 when the type is bought)."""

    def __init__(self, p: Problem, last: int) -> None:
        self.p, self.last = p, last
        self.x0, cols = [], 0
        for t in range(last + 1):
            self.x0.append(cols)
            cols += len(p.needs[t]) + 5 * len(p.types)
        self.n_cols = cols

    def var(self, t: int, kind: str, g: int) -> int:
        return self.x0[t] + len(self.p.needs[t]) + 5 * g + ("b", "r", "s", "o", "y").index(kind)

    def build(self, budget_until: int, objective_period: int | None = None):
        """(c, constraints, integrality, bounds): the plan's cost, or with ``objective_period`` that
        period's cash spend; the budget applies to periods before ``budget_until``."""
        from scipy.optimize import Bounds, LinearConstraint
        from scipy.sparse import lil_matrix

        p = self.p
        c = np.zeros(self.n_cols)
        lo, hi = np.zeros(self.n_cols), np.full(self.n_cols, np.inf)
        rows: list[tuple[dict[int, float], float, float]] = []
        for t in range(self.last + 1):
            opts = p.needs[t]
            hi[self.x0[t]:self.x0[t] + len(opts)] = 1.0
            rows.append(({self.x0[t] + i: 1.0 for i in range(len(opts))}, 1.0, 1.0))
            h, d = p.period_h[t], p.discount[t]
            spend: dict[int, float] = {}
            for g, cost in enumerate(p.costs):
                b, r, s, o, y = (self.var(t, k, g) for k in ("b", "r", "s", "o", "y"))
                hi[y] = 1.0
                if cost.buy_charge_usd[t] is None:
                    hi[b] = hi[y] = 0.0
                else:
                    c[b] = cost.buy_charge_usd[t]
                if not p.allow_retire or p.initial[g] == 0:
                    hi[r] = 0.0
                if cost.on_demand_usd_per_h is None:
                    hi[o] = 0.0
                c[s] = p.contract_charge_usd(g, t)
                c[o] = d * (cost.on_demand_usd_per_h or 0.0) * h
                c[r] = -d * cost.resale_usd
                big = max(max(n[g] for n in q) for q in p.needs) + p.initial[g]
                rows.append(({b: 1.0, y: -float(big)}, -np.inf, 0.0))  # b <= big * y
                rows.append(({r: 1.0, y: float(p.initial[g])}, -np.inf, float(p.initial[g])))  # r <= initial (1 - y)
                # cumulative retire <= initial
                rows.append(({self.var(u, "r", g): 1.0 for u in range(t + 1)}, -np.inf, float(p.initial[g])))
                # cover: initial + Σ_{u<=t} (b - r) + running contracts + o >= need
                cover = {self.var(u, "b", g): 1.0 for u in range(t + 1)}
                for u in range(t + 1):
                    cover[self.var(u, "r", g)] = -1.0
                    if cost.end(u) > t:
                        cover[self.var(u, "s", g)] = 1.0
                cover[o] = 1.0
                for i, n in enumerate(opts):
                    if n[g]:
                        cover[self.x0[t] + i] = -float(n[g])
                rows.append((cover, -float(p.initial[g]), np.inf))
                spend[b] = spend.get(b, 0.0) + cost.capex_usd
                spend[o] = spend.get(o, 0.0) + (cost.on_demand_usd_per_h or 0.0) * h
                for u in range(t + 1):
                    if cost.end(u) > t:
                        k = self.var(u, "s", g)
                        spend[k] = spend.get(k, 0.0) + cost.reserved_usd_per_h * h
            if p.budget_usd is not None and t < budget_until:
                rows.append((spend, -np.inf, p.budget_usd * (1 + 1e-12)))
            if objective_period == t:
                c = np.zeros(self.n_cols)
                for k, v in spend.items():
                    c[k] = v
        a = lil_matrix((len(rows), self.n_cols))
        lb, ub = np.empty(len(rows)), np.empty(len(rows))
        for i, (coefs, row_lo, row_hi) in enumerate(rows):
            for k, v in coefs.items():
                a[i, k] = v
            lb[i], ub[i] = row_lo, row_hi
        return c, LinearConstraint(a.tocsr(), lb, ub), np.ones(self.n_cols), Bounds(lo, hi)

    def solve(self, budget_until: int, objective_period: int | None = None):
        from scipy.optimize import milp

        c, cons, integrality, bounds = self.build(budget_until, objective_period)
        res = milp(c, constraints=cons, integrality=integrality, bounds=bounds,
                   options={"mip_rel_gap": 0.0, "presolve": True})
        return res if res.status == 0 else None

    def plan(self, values: np.ndarray) -> Plan:
        p, n_types = self.p, len(self.p.types)
        v = np.rint(values).astype(np.int64)
        owned = tuple(p.initial)
        contracts: tuple[Contracts, ...] = ((),) * n_types
        steps = []
        for t in range(self.last + 1):
            choice = int(np.argmax(v[self.x0[t]:self.x0[t] + len(p.needs[t])]))
            b = tuple(int(v[self.var(t, "b", g)]) for g in range(n_types))
            r = tuple(int(v[self.var(t, "r", g)]) for g in range(n_types))
            signed = tuple(int(v[self.var(t, "s", g)]) for g in range(n_types))
            new = tuple(o + bb - rr for o, bb, rr in zip(owned, b, r, strict=True))
            out = _step(p, t, owned, new, p.needs[t][choice], contracts, signed)
            cost, spend, bought, ret, rented, reserved, od = out
            steps.append(Step(choice, new, rented, bought, ret, cost, spend, reserved, signed, od))
            contracts = tuple(_add(contracts[g], p.costs[g].end(t), signed[g], t) for g in range(n_types))
            owned = new
        return Plan(tuple(steps))


def solve(p: Problem) -> Plan:
    """The plan of least total discounted cost (see module docstring)."""
    t_n = len(p.needs)
    prog = _Program(p, t_n - 1)
    res = prog.solve(t_n)
    if res is not None:
        return prog.plan(res.x)
    if p.budget_usd is None:
        raise InfeasibleError("the procurement program has no solution: a period's fleet cannot be covered "
                              "by buying, reserving or renting on demand")
    for t in range(t_n):  # the first period whose prefix cannot keep the budget
        if _Program(p, t).solve(t + 1) is None:
            least = _Program(p, t).solve(t, objective_period=t)
            needed = float(least.fun) if least is not None else math.inf
            raise PlanBudgetError(t, float(p.budget_usd), needed, f"period {t} needs a spend of at least "
                                  f"{needed:,.0f} USD")
    raise AssertionError("unreachable: the whole program is infeasible but every prefix is feasible")


def evaluate(p: Problem, choices: Sequence[int]) -> Plan:
    """The per-step baseline: fleet ``choices[t]`` each period, its shortfall bought where the type can
    be bought then, reserved otherwise, nothing retired; budget not applied."""
    n_types = len(p.types)
    owned = tuple(p.initial)
    contracts: tuple[Contracts, ...] = ((),) * n_types
    steps = []
    for t, ci in enumerate(choices):
        need = p.needs[t][ci]
        new = tuple(max(o, n) if p.costs[g].buy_charge_usd[t] is not None else o
                    for g, (o, n) in enumerate(zip(owned, need, strict=True)))
        signed = tuple(max(0, need[g] - new[g] - _active(contracts[g], t)) for g in range(n_types))
        cost, spend, bought, ret, rented, reserved, od = _step(p, t, owned, new, need, contracts, signed)
        steps.append(Step(ci, new, rented, bought, ret, cost, spend, reserved, signed, od))
        contracts = tuple(_add(contracts[g], p.costs[g].end(t), signed[g], t) for g in range(n_types))
        owned = new
    return Plan(tuple(steps))
