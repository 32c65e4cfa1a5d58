"""Step-time margin and headroom (``plan.pools.pool_step_model``, ``plan.headroom``).

* one physics: a margin m scales the analytic engine model's steps, the paper model's service times
  and the simulator's step coefficients by exactly 1 + m;
* a margin never shrinks a pool: slower steps need as many instances or more;
* the grid search is monotone and brackets: on any monotone pass test it returns the largest passing
  index with the next one failing (or the grid's top, capped), never probing index 0; on a noisy test
  still a passing/failing pair one step apart;
* a real search: the slowdown and rate it reports pass, one resolution more fails.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from fleetplan.cli.errors import render_error
from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.plan.headroom import GridSearch, HeadroomSettings, fleet_headroom, largest_passing
from fleetplan.plan.optimize import OptimizeRequest, analytical_phase, optimize, resolve_gpus
from fleetplan.plan.points import LengthPoints
from fleetplan.plan.pools import PlanSettings, engine_of, size_one_pool
from fleetplan.plan.space import PoolRange, SizingRouter, Topology
from fleetplan.plan.verify import VerifySettings, fleet_spec, pool_check, pool_tasks, run_pool_tasks
from fleetplan.workload import load_workload

CATALOG = load_catalog()
GPUS = resolve_gpus(CATALOG, None)
SLO_S = 0.5
MARGIN = 0.15


def _settings(service_model: str = "engine", margin: float = 0.0, rate: float = 100.0) -> PlanSettings:
    return PlanSettings(rate_per_s=rate, slo_ttft_s=SLO_S, percentile=99.0, rho_max=0.85, max_gpus=10_000,
                        tail_model="exp", ttft_model="quantile", compress_gamma=1.5, n_prefill_seqs=None,
                        service_model=service_model, step_time_margin=margin)


# --- one physics ------------------------------------------------------------------------------------


@pytest.mark.parametrize("gpu", ["A10G", "A100-80GB", "H100-SXM"])
def test_margin_scales_the_engine_models_steps_exactly(gpu):
    g = CATALOG.get(gpu)
    base, slow = engine_of(g, 8192, {}), engine_of(g, 8192, {}, MARGIN)
    rng = np.random.default_rng(1)
    n = rng.integers(1, 64, 200).astype(float)
    args = (n, n, rng.integers(0, 2048, 200).astype(float), n * rng.integers(1, 8192, 200), rng.random(200) * 1e7)
    np.testing.assert_allclose(slow.step_s(*args), (1 + MARGIN) * base.step_s(*args), rtol=1e-12)
    assert slow.limits == base.limits


def test_margin_scales_the_simulators_steps_exactly():
    req = OptimizeRequest(workload=load_workload("lmsys"), gpus=GPUS, slo_ttft_s=SLO_S, rate_per_s=100.0,
                          topologies=(Topology.TWO_POOL,))
    c = analytical_phase(req)[0]
    gpus = {g.name: g for g in GPUS}
    counts = [max(p.count, 1) for p in c.pools]
    base, slow = fleet_spec(c, gpus, counts), fleet_spec(c, gpus, counts, step_time_margin=MARGIN)
    for a, b in zip(base.pools, slow.pools, strict=True):
        (ca, xa), (cb, xb) = a.step_model.kernel_coefficients(), b.step_model.kernel_coefficients()
        assert ca == cb
        np.testing.assert_allclose(xb, (1 + MARGIN) * xa, rtol=1e-12)
        assert float(b.step_model.t_iter_s(32, 2048.0)) == pytest.approx((1 + MARGIN) * a.step_model.t_iter_s(32,
                                                                                                            2048.0))


def test_margin_scales_the_paper_models_service_time_exactly():
    points = LengthPoints(load_workload("lmsys"), 512, 16384)
    rng_, g = PoolRange(0, 8192, False), CATALOG.get("A100-80GB")
    base = size_one_pool(points, rng_, g, SizingRouter.LENGTH, _settings("paper"), 1.0)
    slow = size_one_pool(points, rng_, g, SizingRouter.LENGTH, _settings("paper", MARGIN), 1.0)
    # eqs. 3-4: E[S] = iterations x (W + h n_max), both W and H times 1 + m; Cs² unchanged
    assert slow.mean_service_s == pytest.approx((1 + MARGIN) * base.mean_service_s, rel=1e-12)
    assert slow.cs2 == pytest.approx(base.cs2, rel=1e-9)


@pytest.mark.parametrize("margin", [-0.01, 3.0, math.nan])
def test_bad_margins_are_refused(margin):
    with pytest.raises(ConfigError) as err:
        _settings(margin=margin)
    assert "--step-time-margin" in render_error(err.value)


@pytest.mark.parametrize("service_model", ["engine", "paper"])
@pytest.mark.parametrize("rate", [20.0, 1000.0])
def test_a_margin_never_shrinks_a_pool(service_model, rate):
    """Every pool of every candidate needs at least as many instances with slower steps."""
    wl = load_workload("lmsys")
    kw = dict(workload=wl, gpus=GPUS, slo_ttft_s=SLO_S, rate_per_s=rate, service_model=service_model)
    plain = {c.key(): c for c in analytical_phase(OptimizeRequest(**kw))}
    slow = {c.key(): c for c in analytical_phase(OptimizeRequest(**kw, step_time_margin=MARGIN))}
    common = plain.keys() & slow.keys()  # not the multi-pool mixes of each range's cheapest GPU, which may differ
    assert len(common) > 100
    for key in common:
        c, s = plain[key], slow[key]
        if not c.feasible:
            assert not s.feasible or s.total_gpus_needed >= c.total_gpus_needed
            continue
        assert not s.feasible or all(ps.count >= pc.count for pc, ps in zip(c.pools, s.pools, strict=True)), key
    best_plain = min((c for c in plain.values() if c.feasible), key=lambda c: c.cost_usd_per_year)
    best_slow = min((c for c in slow.values() if c.feasible), key=lambda c: c.cost_usd_per_year)
    assert best_slow.cost_usd_per_year >= best_plain.cost_usd_per_year


def test_verification_must_simulate_the_requests_margin():
    req = OptimizeRequest(workload=load_workload("lmsys"), gpus=GPUS, slo_ttft_s=SLO_S, rate_per_s=100.0,
                          step_time_margin=MARGIN)
    vs = VerifySettings(slo_ttft_s=SLO_S, slo_tpot_s=None, rate_per_s=100.0, max_gpus=10_000)
    with pytest.raises(ConfigError, match="step_time_margin"):
        optimize(req, vs)


def test_disaggregated_topologies_refuse_a_margin():
    with pytest.raises(ConfigError, match="co-located"):
        OptimizeRequest(workload=load_workload("lmsys"), gpus=GPUS, slo_ttft_s=SLO_S, rate_per_s=100.0,
                        topologies=(Topology.HOMO, Topology.PDD), slo_tpot_s=0.05, step_time_margin=MARGIN)


# --- the grid search ------------------------------------------------------------------------------


@pytest.mark.parametrize("n_points", [1, 2, 3, 7, 64, 101, 151])
def test_grid_search_finds_every_threshold_and_brackets_it(n_points):
    for threshold in range(n_points):  # passes iff k <= threshold
        probed: dict[int, bool] = {}

        def passes(k: int, t: int = threshold, seen: dict[int, bool] = probed) -> bool:
            assert 0 < k < n_points and k not in seen  # index 0 is known; nothing probed twice
            seen[k] = k <= t
            return seen[k]

        found, capped = largest_passing(passes, n_points)
        assert found == threshold
        assert capped == (threshold == n_points - 1)
        if not capped:
            assert probed[threshold + 1] is False and (threshold == 0 or probed[threshold] is True)
        assert len(probed) <= GridSearch.max_probes(n_points)


def test_small_answers_take_few_probes():
    probes = []
    largest_passing(lambda k: probes.append(k) or k <= 1, 101)
    assert probes == [1, 2]


@pytest.mark.parametrize("seed", range(20))
def test_a_noisy_test_still_gives_a_bracketing_pair(seed):
    rng = np.random.default_rng(seed)
    outcome = {k: bool(rng.random() < 0.7) for k in range(1, 101)}  # non-monotone
    found, capped = largest_passing(lambda k: outcome[k], 101)
    assert found == 0 or outcome[found]
    assert capped or not outcome[found + 1]


# --- a real search ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def verified():
    """A small verified homo fleet (fixed short runs for speed), its headroom and the settings."""
    rate = 30.0
    req = OptimizeRequest(workload=load_workload("lmsys"), gpus=(CATALOG.get("H100-SXM"),), slo_ttft_s=SLO_S,
                          rate_per_s=rate, topologies=(Topology.HOMO,), routers=(SizingRouter.LENGTH,))
    vs = VerifySettings(slo_ttft_s=SLO_S, slo_tpot_s=None, rate_per_s=rate, max_gpus=100, top_k=1,
                        n_requests=3000, n_replications=2, seed=5)
    result = optimize(req, vs, headroom=HeadroomSettings())
    return req, vs, result


def _fleet_passes(fleet, req, vs, slowdown: float, multiplier: float) -> bool:
    s = replace(vs, rate_per_s=vs.rate_per_s * multiplier, step_time_margin=slowdown)
    gpus = {g.name: g for g in req.gpus}
    for i, p in enumerate(fleet.pools):
        if p.count == 0:
            continue
        runs = run_pool_tasks(pool_tasks(fleet, i, gpus, req.workload, s, vs.fixed_requests(), 0.0))
        if not pool_check(p.count, [o.value for o in runs], s).passes:
            return False
    return True


def test_the_reported_headroom_passes_and_one_resolution_more_fails(verified):
    req, vs, result = verified
    h, fleet = result.headroom, result.recommendation
    assert h is not None and h.resolution == 0.02 and h.step_time_margin == 0.0 and h.n_simulations > 0
    r = h.resolution
    assert _fleet_passes(fleet, req, vs, h.step_slowdown_max, 1.0)
    assert h.step_slowdown_capped or not _fleet_passes(fleet, req, vs, h.step_slowdown_max + r, 1.0)
    assert _fleet_passes(fleet, req, vs, 0.0, h.rate_multiplier_max)
    assert h.rate_multiplier_capped or not _fleet_passes(fleet, req, vs, 0.0, h.rate_multiplier_max + r)
    assert h.step_binding_pools and h.rate_binding_pools  # the one pool binds both


def test_headroom_is_reproducible(verified):
    req, vs, result = verified
    again = fleet_headroom(result.recommendation, {g.name: g for g in req.gpus}, req.workload, vs)
    assert replace(again, time_s=0.0) == replace(result.headroom, time_s=0.0)


def test_headroom_needs_a_verified_colocated_fleet(verified):
    req, vs, result = verified
    unverified = replace(result.recommendation, verification=None)
    with pytest.raises(ConfigError, match="verification"):
        fleet_headroom(unverified, {g.name: g for g in req.gpus}, req.workload, vs)


def test_a_rate_point_is_the_slowed_fleet_in_scaled_time(verified):
    """x · λ at the model's steps is λ at steps x times as long with every time divided by x: the
    headroom search simulates rate points that way (one run for both searches)."""
    req, vs, result = verified
    fleet, x = result.recommendation, 1.3
    gpus = {g.name: g for g in req.gpus}
    i = next(i for i, p in enumerate(fleet.pools) if p.count > 0)
    faster = replace(vs, rate_per_s=vs.rate_per_s * x)
    slower = replace(vs, step_time_margin=x - 1.0)
    a = [o.value for o in run_pool_tasks(pool_tasks(fleet, i, gpus, req.workload, faster, 3000, 0.0))]
    b = [o.value for o in run_pool_tasks(pool_tasks(fleet, i, gpus, req.workload, slower, 3000, 0.0))]
    for ra, rb in zip(a, b, strict=True):
        assert (ra.n_requests, ra.n_warmup, ra.n_not_done) == (rb.n_requests, rb.n_warmup, rb.n_not_done)
        for name in ("p_ttft_s", "p_tpot_s", "p_ttft_first_half_s", "p_ttft_second_half_s", "mean_e2e_s"):
            assert getattr(ra, name) * x == pytest.approx(getattr(rb, name), rel=1e-9)
    judged = replace(slower, slo_ttft_s=vs.slo_ttft_s * x)
    ca, cb = pool_check(fleet.pools[i].count, a, faster), pool_check(fleet.pools[i].count, b, judged)
    assert ca.passes == cb.passes and ca.ratio == pytest.approx(cb.ratio, rel=1e-9)


def test_a_fleet_far_below_capacity_gets_the_top_of_the_simulable_grid():
    """λ = 5 on one H100: both searches reach their tops.  The rate grid ends where its slowdown would reach
    the simulator's largest margin (300 %): 3.98 λ, capped (4 λ once failed the run with a margin error)."""
    rate = 5.0
    req = OptimizeRequest(workload=load_workload("lmsys"), gpus=(CATALOG.get("H100-SXM"),), slo_ttft_s=SLO_S,
                          rate_per_s=rate, topologies=(Topology.HOMO,), routers=(SizingRouter.LENGTH,))
    vs = VerifySettings(slo_ttft_s=SLO_S, slo_tpot_s=None, rate_per_s=rate, max_gpus=100, top_k=1,
                        n_requests=1000, n_replications=2, seed=5)
    h = optimize(req, vs, headroom=HeadroomSettings()).headroom
    assert h.step_slowdown_capped and h.step_slowdown_max == pytest.approx(2.0)
    assert h.rate_multiplier_capped and h.rate_multiplier_max == pytest.approx(3.98)
