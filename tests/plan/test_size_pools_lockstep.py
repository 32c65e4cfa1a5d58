"""The sweep's pools sized in lockstep (``plan.pools.size_pools``) are the pools ``size_one_pool`` sizes one at a
time: the same counts, spares, verdicts and token budgets, every figure within 1e-12 relative (the lockstep
load's rows round in another order: ``fleetplan.queueing.lockstep``)."""

from __future__ import annotations

import math

import pytest

from fleetplan.hardware import load_catalog
from fleetplan.plan.optimize import OptimizeRequest, resolve_gpus
from fleetplan.plan.points import LengthPoints
from fleetplan.plan.pools import size_one_pool, size_pools
from fleetplan.plan.space import layouts
from fleetplan.plan.sweep import sweep_pools
from fleetplan.workload import load_workload

REL = 1e-12
_FIELDS = ("rho", "ttft_p_s", "tpot_p_s", "mean_residence_s", "mean_step_s", "decode_batch")


def _jobs(**kw) -> list[tuple]:
    req = OptimizeRequest(**{"workload": load_workload("lmsys"), "gpus": resolve_gpus(load_catalog(), None),
                             "slo_ttft_s": 0.5, "rate_per_s": 100.0, **kw})
    points = LengthPoints(req.workload, req.pool_points, req.quadrature_points, req.max_model_len_tokens)
    lays = list(layouts(req.topologies, req.thresholds_tokens, points.max_tokens, req.max_pools))
    settings = req.settings()
    return [(points, r, g, router, settings, req.availability_of(g))
            for r, g, router in sweep_pools(lays, req.gpus, req.routers)]


@pytest.mark.parametrize("kw", [{}, {"slo_tpot_s": 0.03, "rate_per_s": 400.0}])
def test_pools_sized_in_lockstep_are_the_pools_sized_alone(kw) -> None:
    jobs = _jobs(**kw)
    alone = [size_one_pool(*job) for job in jobs]
    together = size_pools(jobs)
    assert len(together) == len(alone) > 100
    for a, b in zip(alone, together, strict=True):
        assert (a.gpu, a.lo_tokens, a.hi_tokens, a.count, a.spares, a.feasible, a.reason, a.binding, a.floor_count,
                a.max_num_batched_tokens, a.n_max) == \
               (b.gpu, b.lo_tokens, b.hi_tokens, b.count, b.spares, b.feasible, b.reason, b.binding, b.floor_count,
                b.max_num_batched_tokens, b.n_max)
        for name in _FIELDS:
            x, y = getattr(a, name), getattr(b, name)
            assert (math.isnan(x) and math.isnan(y)) or y == pytest.approx(x, rel=REL, abs=0.0), name
