"""A replication that fails alone (``plan.verify``): one replication above the SLO fails a count whatever
the others show, for n <= 4 replications (Samuelson's inequality against the Student-t bound), so where
only a count's verdict is read (verification galloping down or bisecting, every headroom probe) the
later replications may be left out, with every verdict, count and answer unchanged.

* the theorem: any k <= 4 values, one above the limit, give a 95 % upper bound above the limit (exact
  pool checks on hand-made runs); at n = 5 a counterexample, and the rule says it does not apply;
* a search that shrinks an over-sized pool and a headroom search give the same result with the rule
  as without it, with fewer simulations counted;
* a replication skips itself only after an earlier one of its group failed alone, in input order.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.hardware import load_catalog
from fleetplan.parallel import serial_map
from fleetplan.plan import headroom as headroom_mod
from fleetplan.plan import verify as verify_mod
from fleetplan.plan.headroom import HeadroomSettings, fleet_headroom
from fleetplan.plan.optimize import OptimizeRequest, optimize, resolve_gpus
from fleetplan.plan.space import SizingRouter, Topology
from fleetplan.plan.verify import (
    VerifySettings,
    decisive_runs,
    fails_alone,
    fails_alone_is_exact,
    pool_check,
    pool_tasks,
    run_pool_tasks,
    verify_candidate,
)
from fleetplan.sim.steady import PoolRun
from fleetplan.workload import load_workload

SLO_S = 0.5


def _run(p_ttft_s: float, p_tpot_s: float = 0.01) -> PoolRun:
    return PoolRun(n_requests=1000, n_warmup=100, warmup_s=1.0, duration_s=10.0, warmup_at_limit=False,
                   rate_per_s=100.0, share=1.0, p_ttft_s=p_ttft_s, p_tpot_s=p_tpot_s, p_ttft_first_half_s=p_ttft_s,
                   p_ttft_second_half_s=p_ttft_s, mean_service_s=1.0, mean_e2e_s=1.0, n_not_done=0,
                   throughput_per_s=100.0, ttft_grid_s=(), tpot_grid_s=())


def _settings(n_replications: int = 3, slo_tpot_s: float | None = None) -> VerifySettings:
    return VerifySettings(slo_ttft_s=SLO_S, slo_tpot_s=slo_tpot_s, rate_per_s=10.0, max_gpus=100,
                          n_replications=n_replications)


def test_the_rule_holds_up_to_four_replications_only():
    assert [fails_alone_is_exact(n) for n in (2, 3, 4, 5, 10)] == [True, True, True, False, False]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0.0, 3.0 * SLO_S), min_size=0, max_size=3), st.floats(1e-6, 2.0), st.integers(0, 3))
def test_one_replication_above_the_slo_fails_the_count(others, excess, at):
    """Any k <= 4 replications holding one above the SLO: the upper bound is above the SLO (pool_check
    fails), and ``fails_alone`` says so for that replication."""
    bad = _run(SLO_S * (1.0 + excess))
    runs = [_run(x) for x in others]
    runs.insert(min(at, len(runs)), bad)
    assert fails_alone(bad, SLO_S, None)
    assert not pool_check(1, runs, _settings()).passes


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_a_replication_without_a_finite_percentile_fails_alone(bad):
    runs = [_run(0.1), _run(bad), _run(0.1)]
    assert fails_alone(runs[1], SLO_S, None) and not pool_check(1, runs, _settings()).passes


def test_tpot_above_its_slo_fails_alone_and_nan_tpot_does_not():
    s = _settings(slo_tpot_s=0.05)
    assert fails_alone(_run(0.1, 0.06), SLO_S, 0.05)
    assert not pool_check(1, [_run(0.1, 0.01), _run(0.1, 0.06), _run(0.1, 0.01)], s).passes
    assert not fails_alone(_run(0.1, float("nan")), SLO_S, 0.05)
    assert not fails_alone(_run(0.1, 0.06), SLO_S, None)  # no TPOT SLO: TPOT decides nothing


def test_five_replications_can_pass_with_one_above_the_slo():
    """Why the rule stops at four: with n = 5, t_4 / sqrt(5) < 4 / sqrt(5) and the bound can sit below a value."""
    runs = [_run(1.01 * SLO_S)] + [_run(0.5 * SLO_S)] * 4
    assert pool_check(1, runs, _settings(n_replications=5)).passes


def test_decisive_runs_stop_at_the_first_failing_replication():
    class Outcome:
        def __init__(self, value):
            self.ok, self.value = True, value

    outs = [Outcome(_run(0.1)), Outcome(_run(0.9)), Outcome(None)]
    assert decisive_runs(outs, SLO_S, None) == outs[:2]
    full = [Outcome(_run(0.1))] * 3
    assert decisive_runs(full, SLO_S, None) == full


def test_a_replication_skips_itself_only_after_an_earlier_one_failed_alone():
    """Run in input order in one process: a group whose first replication fails alone skips the rest;
    a group whose first passes runs every replication."""
    cat = load_catalog()
    req = OptimizeRequest(workload=load_workload("lmsys"), gpus=(cat.get("H100-SXM"),), slo_ttft_s=SLO_S,
                          rate_per_s=30.0, topologies=(Topology.HOMO,), routers=(SizingRouter.LENGTH,))
    fleet = optimize(req).recommendation
    gpus = {g.name: g for g in req.gpus}
    s = replace(_settings(), rate_per_s=30.0)
    tight = pool_tasks(fleet, 0, gpus, req.workload, s, 1000, 0.0, fail_limits_s=(1e-9, None))  # every run fails
    loose = pool_tasks(fleet, 0, gpus, req.workload, s, 1000, 0.0, fail_limits_s=(1e9, None))  # none does
    out_tight = list(serial_map(verify_mod._run_pool_task, tight))
    out_loose = list(serial_map(verify_mod._run_pool_task, loose))
    assert out_tight[0].value is not None and [o.value for o in out_tight[1:]] == [None, None]
    assert all(o.value is not None for o in out_loose)
    plain = [o.value for o in run_pool_tasks(pool_tasks(fleet, 0, gpus, req.workload, s, 1000, 0.0))]
    assert [r.p_ttft_s for r in plain] == [o.value.p_ttft_s for o in out_loose]  # same seeds, same runs


def _without_the_rule(monkeypatch) -> None:
    monkeypatch.setattr(verify_mod, "fails_alone_is_exact", lambda n, confidence=0.95: False)
    monkeypatch.setattr(headroom_mod, "fails_alone_is_exact", lambda n, confidence=0.95: False)


def test_a_shrinking_search_gives_the_same_verification(monkeypatch):
    """An over-sized pool galloping down meets failing counts (verdicts only): same verification, fewer runs."""
    cat = load_catalog()
    rate, slo_s = 60.0, 0.12  # a tight SLO and a loose utilisation cap: counts below the answer fail the SLO
    req = OptimizeRequest(workload=load_workload("azure_conv"), gpus=resolve_gpus(cat, ["a100"]), slo_ttft_s=slo_s,
                          rate_per_s=rate, topologies=(Topology.HOMO,), routers=(SizingRouter.LENGTH,), rho_max=0.99)
    cand = optimize(req).recommendation
    big = replace(cand, pools=(replace(cand.pools[0], count=cand.pools[0].count + 6),))
    vs = VerifySettings(slo_ttft_s=slo_s, slo_tpot_s=None, rate_per_s=rate, max_gpus=200, n_requests=2_000,
                        n_replications=3, seed=1)
    gpus = {g.name: g for g in req.gpus}
    fast = verify_candidate(big, gpus, req.workload, vs, req.availability_of)
    _without_the_rule(monkeypatch)
    full = verify_candidate(big, gpus, req.workload, vs, req.availability_of)
    assert fast.direction == "too_high" and fast.passed and fast.verified_counts[0] > cand.pools[0].floor_count
    assert repr(replace(fast, n_simulations=0)) == repr(replace(full, n_simulations=0))  # NaN-safe equality
    assert fast.n_simulations < full.n_simulations


def test_the_headroom_search_gives_the_same_answer(monkeypatch):
    cat = load_catalog()
    rate = 30.0
    req = OptimizeRequest(workload=load_workload("lmsys"), gpus=(cat.get("H100-SXM"),), slo_ttft_s=SLO_S,
                          rate_per_s=rate, topologies=(Topology.HOMO,), routers=(SizingRouter.LENGTH,))
    vs = VerifySettings(slo_ttft_s=SLO_S, slo_tpot_s=None, rate_per_s=rate, max_gpus=100, top_k=1,
                        n_requests=3000, n_replications=3, seed=5)
    best = optimize(req, vs).recommendation
    gpus = {g.name: g for g in req.gpus}
    fast = fleet_headroom(best, gpus, req.workload, vs, HeadroomSettings())
    _without_the_rule(monkeypatch)
    full = fleet_headroom(best, gpus, req.workload, vs, HeadroomSettings())
    assert replace(fast, time_s=0.0, n_simulations=0) == replace(full, time_s=0.0, n_simulations=0)
    assert fast.n_simulations < full.n_simulations
    assert np.isfinite(fast.step_slowdown_max)
