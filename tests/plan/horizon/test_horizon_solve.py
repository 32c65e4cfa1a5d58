"""The horizon program against exhaustive search over every integer owned and reserved count, and its invariants."""

from __future__ import annotations

import functools
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.plan.horizon.solve import PlanBudgetError, Problem, TypeCosts, _step, evaluate, solve


def _problem(needs, initial=(0, 0), allow_retire=False, budget=None, buy_from=0, n_types=2):
    t_n = len(needs)
    period_h = (730.0,) * t_n
    disc = tuple(0.99 ** t for t in range(t_n))
    costs = (
        TypeCosts(tuple(None if t < buy_from else 1.2 * 730 * (t_n - t) * disc[t] for t in range(t_n)),
                  30_000.0, 2.4, 9_000.0),
        TypeCosts((None,) * t_n, 0.0, 0.6, 0.0),  # rent-only type
    )[:n_types]
    return Problem(("big", "small")[:n_types], needs, period_h, disc, costs, initial, allow_retire, budget)


NEEDS = (
    ((1, 0), (0, 3)),
    ((2, 0), (1, 2), (0, 5)),
    ((3, 0), (2, 3)),
)


@pytest.mark.parametrize("initial,allow_retire", [((0, 0), False), ((1, 2), False), ((3, 1), True)])
def test_program_matches_brute_force(initial, allow_retire):
    p = _problem(NEEDS, initial, allow_retire)
    assert solve(p).total_cost_usd == pytest.approx(exhaustive_cost(p, 5, 6), rel=1e-12)


def test_program_with_lead_time_and_budget_matches_brute_force():
    p = _problem(NEEDS, (0, 0), False, budget=70_000.0, buy_from=1)
    assert solve(p).total_cost_usd == pytest.approx(exhaustive_cost(p, 5, 6), rel=1e-12)


def test_budget_too_small_names_the_period():
    p = _problem(NEEDS, budget=100.0)
    with pytest.raises(PlanBudgetError) as info:
        solve(p)
    assert info.value.period == 0 and info.value.needed_usd > 100.0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=3),
                min_size=1, max_size=4),
       st.tuples(st.integers(0, 3), st.integers(0, 3)))
def test_owned_gpus_never_disappear_without_retire_and_program_never_worse(needs, initial):
    p = _problem(tuple(tuple(n) for n in needs), initial)
    plan = solve(p)
    owned = initial
    for s in plan.steps:
        assert all(a >= b for a, b in zip(s.owned, owned, strict=True)) and not any(s.retired)
        owned = s.owned
    greedy = evaluate(p, [0] * len(needs))
    assert plan.total_cost_usd <= greedy.total_cost_usd + 1e-6


# --- reserved contracts with a term and on-demand rent -------------------------------------------------

def _rent_problem(needs, term, initial=(0, 0), allow_retire=False, budget=None, buy_from=0):
    """Type 0 buyable (from ``buy_from``), type 1 rent-only; both rentable on demand (1.0 $/h) or
    reserved (0.6 $/h) for ``term`` periods."""
    t_n = len(needs)
    period_h = (730.0,) * t_n
    disc = tuple(0.99 ** t for t in range(t_n))
    end = tuple(min(t_n, t + term) for t in range(t_n))
    costs = (
        TypeCosts(tuple(None if t < buy_from else 0.9 * 730 * (t_n - t) * disc[t] for t in range(t_n)),
                  30_000.0, 0.6, 9_000.0, 1.0, end),
        TypeCosts((None,) * t_n, 0.0, 0.6, 0.0, 1.0, end),
    )
    return Problem(("big", "small"), needs, period_h, disc, costs, initial, allow_retire, budget)


def exhaustive_cost(p: Problem, max_owned: int, max_sign: int) -> float:
    """Every integer owned count and every integer number of newly reserved GPUs, per type and period
    (cost-to-go memoised on the full state, so exhaustive without enumerating every path)."""

    from fleetplan.plan.horizon.solve import _add

    n_types = len(p.types)

    @functools.cache
    def go(t, owned, retired, contracts):
        if t == len(p.needs):
            return 0.0
        best = float("inf")
        for need in p.needs[t]:
            for new in itertools.product(range(max_owned + 1), repeat=n_types):
                ret = tuple(r + max(0, o - n) for r, o, n in zip(retired, owned, new, strict=True))
                if any(n < o for n, o in zip(new, owned, strict=True)) and not p.allow_retire:
                    continue
                if any(r > i for r, i in zip(ret, p.initial, strict=True)):
                    continue
                for signed in itertools.product(range(max_sign + 1), repeat=n_types):
                    out = _step(p, t, owned, new, need, contracts, signed)
                    if out is None or (p.budget_usd is not None and out[1] > p.budget_usd):
                        continue
                    nxt = tuple(_add(contracts[g], p.costs[g].end(t), signed[g], t) for g in range(n_types))
                    best = min(best, out[0] + go(t + 1, new, ret, nxt))
        return best

    return go(0, tuple(p.initial), (0,) * n_types, ((),) * n_types)


RENT_NEEDS = (
    ((0, 3), (1, 0)),
    ((0, 4), (2, 1)),
    ((0, 1), (1, 2)),
    ((0, 2),),
)


@pytest.mark.parametrize("term", [1, 2, 3])
def test_program_with_reserved_terms_and_on_demand_matches_brute_force(term):
    p = _rent_problem(RENT_NEEDS, term, buy_from=2)
    assert solve(p).total_cost_usd == pytest.approx(exhaustive_cost(p, 2, 4), rel=1e-12)


def test_program_with_reserved_terms_budget_and_retire_matches_brute_force():
    p = _rent_problem(RENT_NEEDS, 2, initial=(1, 0), allow_retire=True, budget=9_000.0, buy_from=1)
    assert solve(p).total_cost_usd == pytest.approx(exhaustive_cost(p, 2, 4), rel=1e-12)


def test_short_need_is_rented_on_demand_and_lasting_need_reserved():
    # the rent-only type is needed 3 GPUs for one period, then 1 GPU for the remaining five:
    # reserving 3 for a 6-period term would pay 2 idle GPUs for five periods
    needs = (((0, 3),),) + (((0, 1),),) * 5
    plan = solve(_rent_problem(needs, 6))
    first = plan.steps[0]
    assert first.signed[1] == 1 and first.on_demand[1] == 2 and first.rented[1] == 3
    assert all(s.on_demand[1] == 0 and s.reserved[1] == 1 for s in plan.steps[1:])
    # a cost check by hand: 1 reserved for six periods, 2 on demand for one
    disc = [0.99 ** t for t in range(6)]
    expected = 730 * (0.6 * sum(disc) + 2 * 1.0 * disc[0])
    assert plan.total_cost_usd == pytest.approx(expected, rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=2),
                min_size=1, max_size=4),
       st.integers(1, 4))
def test_rented_covers_every_shortfall_and_program_never_worse_than_baseline(needs, term):
    p = _rent_problem(tuple(tuple(n) for n in needs), term)
    plan = solve(p)
    for t, s in enumerate(plan.steps):
        need = p.needs[t][s.choice]
        assert all(o + r >= n for o, r, n in zip(s.owned, s.rented, need, strict=True))
        assert all(res + od >= r for r, res, od in zip(s.rented, s.reserved, s.on_demand, strict=True))
    assert plan.total_cost_usd <= evaluate(p, [0] * len(needs)).total_cost_usd + 1e-6


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3)), min_size=1, max_size=2),
                min_size=1, max_size=3),
       st.integers(1, 3), st.integers(0, 3))
def test_program_with_rent_options_matches_brute_force_on_random_problems(needs, term, buy_from):
    p = _rent_problem(tuple(tuple(n) for n in needs), term, buy_from=buy_from)
    assert solve(p).total_cost_usd == pytest.approx(exhaustive_cost(p, 2, 3), rel=1e-9, abs=1e-6)
