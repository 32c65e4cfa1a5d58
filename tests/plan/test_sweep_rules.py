"""Planner rules: candidate space, traffic split, cost arithmetic, ranking, Pareto, spares."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.cli.errors import render_error
from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.hardware import load_catalog
from fleetplan.plan.optimize import OptimizeRequest, optimize, resolve_gpus
from fleetplan.plan.points import LengthPoints, pool_points
from fleetplan.plan.space import PoolRange, SizingRouter, Topology, layouts, topology
from fleetplan.plan.sweep import pareto_frontier
from fleetplan.units import H_PER_YEAR
from fleetplan.workload import load_workload


@pytest.fixture(scope="module")
def lmsys():
    return load_workload("lmsys")


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_layout_counts():
    grid = (512, 1024, 2048, 4096)
    lays = list(layouts((Topology.HOMO, Topology.TWO_POOL, Topology.MULTI_POOL), grid, 8192, max_pools=4))
    # 1 homogeneous + 4 two-pool + C(4,2) three-pool + C(4,3) four-pool
    assert len(lays) == 1 + 4 + 6 + 4
    for lay in lays:
        assert lay.ranges[0].lo_tokens == 0 and lay.ranges[-1].hi_tokens == 8192
        for a, b in zip(lay.ranges, lay.ranges[1:], strict=False):
            assert a.hi_tokens == b.lo_tokens


def test_thresholds_at_or_above_the_longest_request_are_dropped():
    lays = list(layouts((Topology.TWO_POOL,), (4096, 8192, 16384), 8192))
    assert [lay.thresholds_tokens for lay in lays] == [(4096,)]


def test_unknown_topology_is_loud():
    with pytest.raises(UnknownNameError, match="two-pool"):
        topology("triple")


@pytest.mark.parametrize("router", [SizingRouter.LENGTH, SizingRouter.COMPRESS])
@pytest.mark.parametrize("cuts", [(1024,), (512, 4096), (512, 2048, 8192)])
def test_pool_shares_partition_the_traffic(lmsys, router, cuts):
    pts = LengthPoints(lmsys, 512, 4096)
    bounds = (0, *cuts, pts.max_tokens)
    ranges = [PoolRange(bounds[i], bounds[i + 1], i == len(bounds) - 2) for i in range(len(bounds) - 1)]
    shares = [pool_points(pts, r, router, 1.5).weight.sum() for r in ranges]
    assert sum(shares) == pytest.approx(1.0, abs=1e-9)
    for r, s in zip(ranges, shares, strict=True):
        sub = pool_points(pts, r, router, 1.5)
        assert np.all(sub.total_tokens <= r.hi_tokens)  # compressed requests fit their pool
        if router is SizingRouter.LENGTH:
            assert s == pytest.approx(lmsys.total.prob(r.lo_tokens, r.hi_tokens), abs=1e-9)


def test_compress_moves_the_band_into_the_short_pool(lmsys):
    pts = LengthPoints(lmsys, 512, 4096)
    short = PoolRange(0, 2048, False)
    plain = pool_points(pts, short, SizingRouter.LENGTH, 1.5).weight.sum()
    squeezed = pool_points(pts, short, SizingRouter.COMPRESS, 1.5).weight.sum()
    assert squeezed == pytest.approx(lmsys.total.prob(0, 3072), abs=1e-9)
    assert squeezed > plain


def _request(wl, catalog, **kw):
    base = dict(workload=wl, gpus=resolve_gpus(catalog, None), slo_ttft_s=0.5, rate_per_s=100.0)
    base.update(kw)
    return OptimizeRequest(**base)


def test_costs_ranking_and_pareto(lmsys, catalog):
    result = optimize(_request(lmsys, catalog, topologies=(Topology.HOMO, Topology.TWO_POOL)))
    feasible = [c for c in result.candidates if c.feasible]
    assert feasible and result.recommendation is feasible[0]
    costs = [c.cost_usd_per_year for c in feasible]
    assert costs == sorted(costs)
    for c in result.candidates:
        assert c.total_gpus_needed == sum(p.count + p.spares for p in c.pools)
        expect = sum((p.count + p.spares) * p.price_usd_per_h for p in c.pools) * H_PER_YEAR
        assert c.cost_usd_per_year == pytest.approx(expect)
        if c.feasible:
            assert c.ttft_p_s <= 0.5 + 1e-12
            assert all(p.rho <= 0.85 + 1e-9 for p in c.pools if p.count)
    front = pareto_frontier(result.candidates)
    for a in front:
        assert not any(
            b.cost_usd_per_year <= a.cost_usd_per_year
            and b.ttft_p_s < a.ttft_p_s
            or b.cost_usd_per_year < a.cost_usd_per_year
            and b.ttft_p_s <= a.ttft_p_s
            for b in feasible
        )


def test_availability_adds_spares(lmsys, catalog):
    plain = optimize(_request(lmsys, catalog, topologies=(Topology.HOMO,), gpus=resolve_gpus(catalog, ["a100"])))
    spared = optimize(
        _request(lmsys, catalog, topologies=(Topology.HOMO,), gpus=resolve_gpus(catalog, ["a100"]), availability=0.9)
    )
    n = plain.recommendation.pools[0].count
    assert spared.recommendation.pools[0].count == n
    assert spared.recommendation.pools[0].spares == math.ceil(n / 0.9) - n


@settings(max_examples=15, deadline=None)
@given(lam=st.floats(5.0, 300.0), factor=st.floats(1.05, 3.0))
def test_more_traffic_never_needs_fewer_gpus(lam, factor):
    wl = load_workload("azure_conv")
    cat = load_catalog()
    kw = dict(topologies=(Topology.HOMO,), gpus=resolve_gpus(cat, ["h100"]), routers=(SizingRouter.LENGTH,))
    lo = optimize(_request(wl, cat, rate_per_s=lam, **kw)).recommendation
    hi = optimize(_request(wl, cat, rate_per_s=lam * factor, **kw)).recommendation
    assert hi.total_gpus_needed >= lo.total_gpus_needed


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(rate_per_s=-1.0), "--lam"),
        (dict(rate_per_s=float("nan")), "--lam"),
        (dict(rate_per_s=0.0), "--lam"),
        (dict(slo_ttft_s=0.0), "--slo-ttft"),
        (dict(rho_max=1.5), "--rho-max"),
        (dict(availability=0.0), "--node-avail"),
    ],
)
def test_bad_requests_are_config_errors(lmsys, catalog, kw, match):
    with pytest.raises(ConfigError) as err:
        _request(lmsys, catalog, **kw)
    assert match in render_error(err.value, "optimize")  # the CLI's wording names the flag


def test_uncalibrated_gpu_is_refused_not_substituted(lmsys, catalog):
    with pytest.raises(ConfigError, match="L4"):
        _request(lmsys, catalog, gpus=resolve_gpus(catalog, ["l4"]))
