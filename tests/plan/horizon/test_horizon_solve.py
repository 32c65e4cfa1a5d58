"""The horizon DP against brute force over every integer owned count, and its invariants."""

from __future__ import annotations

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


def brute_force(p: Problem, max_owned: int) -> float:
    best = float("inf")
    n_types = len(p.types)

    def rec(t, owned, retired, acc):
        nonlocal best
        if t == len(p.needs):
            best = min(best, acc)
            return
        for need in p.needs[t]:
            for new in itertools.product(range(max_owned + 1), repeat=n_types):
                ret = tuple(r + max(0, o - n) for r, o, n in zip(retired, owned, new, strict=True))
                if any(n < o for n, o in zip(new, owned, strict=True)) and not p.allow_retire:
                    continue
                if any(r > i for r, i in zip(ret, p.initial, strict=True)):
                    continue
                out = _step(p, t, owned, new, need)
                if out is None or (p.budget_usd is not None and out[1] > p.budget_usd):
                    continue
                rec(t + 1, new, ret, acc + out[0])

    rec(0, tuple(p.initial), (0,) * n_types, 0.0)
    return best


NEEDS = (
    ((1, 0), (0, 3)),
    ((2, 0), (1, 2), (0, 5)),
    ((3, 0), (2, 3)),
)


@pytest.mark.parametrize("initial,allow_retire", [((0, 0), False), ((1, 2), False), ((3, 1), True)])
def test_dp_matches_brute_force(initial, allow_retire):
    p = _problem(NEEDS, initial, allow_retire)
    assert solve(p).total_cost_usd == pytest.approx(brute_force(p, 5), rel=1e-12)


def test_dp_with_lead_time_and_budget_matches_brute_force():
    p = _problem(NEEDS, (0, 0), False, budget=70_000.0, buy_from=1)
    assert solve(p).total_cost_usd == pytest.approx(brute_force(p, 5), rel=1e-12)


def test_budget_too_small_names_the_period():
    p = _problem(NEEDS, budget=100.0)
    with pytest.raises(PlanBudgetError) as info:
        solve(p)
    assert info.value.period == 0 and info.value.needed_usd > 100.0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=3),
                min_size=1, max_size=4),
       st.tuples(st.integers(0, 3), st.integers(0, 3)))
def test_owned_gpus_never_disappear_without_retire_and_dp_never_worse(needs, initial):
    p = _problem(tuple(tuple(n) for n in needs), initial)
    plan = solve(p)
    owned = initial
    for s in plan.steps:
        assert all(a >= b for a, b in zip(s.owned, owned, strict=True)) and not any(s.retired)
        owned = s.owned
    greedy = evaluate(p, [0] * len(needs))
    assert plan.total_cost_usd <= greedy.total_cost_usd + 1e-6
