"""The sweep's bulk fleet latencies (``plan.sweep.fleet_latencies_p_s``) are ``fleet_latency_p_s`` of each
fleet bit for bit, on the compiled path (``queueing._kernels.mixture``) and the one-by-one path alike."""

from __future__ import annotations

import dataclasses
import math
import pickle

import pytest

from fleetplan.hardware import load_catalog
from fleetplan.plan import sweep as sweep_mod
from fleetplan.plan.optimize import OptimizeRequest, analytical_phase, resolve_gpus
from fleetplan.plan.space import Topology
from fleetplan.plan.sweep import fleet_latencies_p_s, fleet_latency_p_s
from fleetplan.queueing.engine import Lazy, peek
from fleetplan.workload import load_workload


@pytest.fixture(scope="module")
def candidates():
    request = OptimizeRequest(workload=load_workload("lmsys"), gpus=resolve_gpus(load_catalog(), None),
                              slo_ttft_s=0.5, rate_per_s=100.0,
                              topologies=(Topology.HOMO, Topology.TWO_POOL, Topology.MULTI_POOL))
    return analytical_phase(request)


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize(("min_fleets", "warm"), [(0, False), (10**9, False), (10**9, True)])
def test_bulk_latencies_are_the_one_by_one_figures(candidates, monkeypatch, min_fleets, warm):
    monkeypatch.setattr(sweep_mod, "KERNEL_MIN_FLEETS", min_fleets)
    monkeypatch.setattr(sweep_mod, "_kernels_warm", lambda: warm)
    calls = []
    bulk = sweep_mod.mixture_quantiles_s
    monkeypatch.setattr(sweep_mod, "mixture_quantiles_s", lambda *a: calls.append(1) or bulk(*a))
    fleets = [c.pools for c in candidates]
    got = fleet_latencies_p_s(fleets, 99.0)
    assert bool(calls) == (min_fleets == 0 or (warm and len(fleets) >= sweep_mod.KERNEL_WARM_MIN_FLEETS))
    assert len(got) == len(fleets) > 100
    for pools, (ttft, tpot), c in zip(fleets, got, candidates, strict=True):
        want = fleet_latency_p_s(pools, 99.0)
        assert _same(ttft, want[0]) and _same(tpot, want[1]), (c.key(), (ttft, tpot), want)
        assert _same(ttft, c.ttft_p_s) and _same(tpot, c.tpot_p_s)  # the sweep's own figures


def test_the_sweep_ranks_as_its_rule_says(candidates):
    keys = [(not c.feasible, c.cost_usd_per_year if c.feasible else 0.0, c.ttft_p_s, c.total_gpus_needed, c.key())
            for c in candidates]
    assert keys == sorted(keys)
    assert [c.rank for c in candidates] == list(range(1, len(candidates) + 1))


def test_kernels_are_warm_once_one_is_loaded(candidates):
    """``fleetplan.jit.kernels_warm``: true once this process has loaded a kernel (here the mixture kernel
    of the bulk test, or loaded now), never under NUMBA_DISABLE_JIT."""
    from numba.core import config

    from fleetplan import jit
    from fleetplan.queueing.engine import mixture_quantiles_s

    mixture_quantiles_s([([candidates[0].pools[0].ttft_table], [1.0])], 0.99)
    assert jit.kernels_warm() is (not config.DISABLE_JIT)
    assert sweep_mod._kernels_warm() is jit.kernels_warm()


def test_tpot_is_built_on_first_read_and_pickles_unbuilt():
    """The sweep leaves every TPOT unbuilt (``queueing.engine.Deferred``); a candidate or pool pickled so (a
    forked child's result) builds the same figure as one read in place, bit for bit."""
    request = OptimizeRequest(workload=load_workload("lmsys"), gpus=resolve_gpus(load_catalog(), None),
                              slo_ttft_s=0.5, rate_per_s=100.0, topologies=(Topology.HOMO, Topology.TWO_POOL))
    ranked = analytical_phase(request)
    assert all(isinstance(peek(c, "tpot_p_s"), Lazy) for c in ranked)
    live = [p for c in ranked for p in c.pools if p.traffic_share > 0]
    assert live and all(isinstance(peek(p, "tpot_p_s"), Lazy) for p in live)
    for c in ranked[:5]:
        copy = pickle.loads(pickle.dumps(c))
        assert isinstance(peek(copy.pools[0], "tpot_table"), Lazy)
        assert copy.tpot_p_s == c.tpot_p_s == fleet_latency_p_s(c.pools, 99.0)[1]
        assert math.isfinite(c.tpot_p_s)  # (pools never compare equal: their wait_p_s is nan)
        for a, b in zip(copy.pools, c.pools, strict=True):
            assert _same(a.tpot_p_s, b.tpot_p_s)
            assert dataclasses.replace(b, count=b.count + 1).tpot_p_s == b.tpot_p_s or b.traffic_share == 0
