"""``plan.frontier.latency_profile`` reads its run's arrays (no request table): the figures are those of
``simulate``'s table and summary for the same run (its slow, readable twin here), to the last bit, with a
context limit rejecting the longest requests, for a compress-and-route fleet and a length-routed one."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.hardware import load_catalog
from fleetplan.metrics import percentiles
from fleetplan.plan.frontier import CDF_LEVELS_PCT, latency_profile
from fleetplan.plan.optimize import OptimizeRequest, analytical_phase, resolve_gpus
from fleetplan.plan.space import SizingRouter, Topology
from fleetplan.plan.verify import fleet_spec
from fleetplan.rng import task_seed
from fleetplan.sim import Level, simulate
from fleetplan.workload import load_workload


def _table_profile(candidate, gpus, workload, rate, n, seed, limit):
    """The profile as computed from ``simulate``'s per-request table and summary."""
    spec = fleet_spec(candidate, gpus, [p.count for p in candidate.pools], None, limit, 0.0)
    res = simulate(spec, workload, rate, n, Level.ITERATION, task_seed(seed, "latency-profile", repr(candidate.key())))
    df = res.requests[~res.requests["warmup"]]
    if limit is not None:
        df = df[~((df["status"] == "rejected") & (df["prompt_tokens"] + df["output_tokens"] > limit))]
    out = []
    for pool in spec.pools:
        rows = df[df["pool"] == pool.name]
        ttft = percentiles(rows["ttft_s"].to_numpy(), CDF_LEVELS_PCT)
        tpot = rows["tpot_s"].to_numpy()
        tpot = percentiles(tpot[~np.isnan(tpot)], CDF_LEVELS_PCT)
        out.append((pool.name, tuple(float(ttft[q]) for q in CDF_LEVELS_PCT),
                    tuple(float(tpot[q]) for q in CDF_LEVELS_PCT), float(res.summary.pool(pool.name).utilisation)))
    return out


@pytest.mark.parametrize("router, limit", [(SizingRouter.COMPRESS, None), (SizingRouter.LENGTH, 8192)])
def test_profile_equals_the_tables(router, limit):
    cat = load_catalog()
    rate = 40.0
    req = OptimizeRequest(workload=load_workload("lmsys"), gpus=resolve_gpus(cat, None), slo_ttft_s=0.5,
                          rate_per_s=rate, topologies=(Topology.TWO_POOL,), routers=(router,),
                          max_model_len_tokens=limit)
    cand = next(c for c in analytical_phase(req) if c.feasible)
    gpus = {g.name: g for g in req.gpus}
    got = latency_profile(cand, gpus, req.workload, rate, 4000, 3, limit)
    want = _table_profile(cand, gpus, req.workload, rate, 4000, 3, limit)
    assert len(got) == len(want) >= 2
    for g, (name, ttft, tpot, util) in zip(got, want, strict=True):
        assert (g.pool, g.ttft_s, g.utilisation) == (name, ttft, util)
        np.testing.assert_array_equal(np.array(g.tpot_s), np.array(tpot))  # NaN where a pool has no TPOT
