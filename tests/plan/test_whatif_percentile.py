"""The what-if simulated threshold tests the SLO at the run's percentile, as verification does."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fleetplan.hardware import load_catalog
from fleetplan.plan.optimize import OptimizeRequest, analytical_phase, resolve_gpus
from fleetplan.plan.space import Topology
from fleetplan.plan.verify import VerifySettings, fleet_spec, percentile_bounds
from fleetplan.plan.whatif import simulated_holds
from fleetplan.rng import task_seed
from fleetplan.sim import Level, replicate
from fleetplan.workload import load_workload

RATE_PER_S = 40.0


@pytest.fixture(scope="module")
def setting():
    request = OptimizeRequest(workload=load_workload("lmsys"), gpus=resolve_gpus(load_catalog(), ["a100"]),
                              slo_ttft_s=0.5, rate_per_s=RATE_PER_S, topologies=(Topology.HOMO,))
    fleet = analytical_phase(request)[0]
    verify = VerifySettings(slo_ttft_s=0.5, slo_tpot_s=None, rate_per_s=RATE_PER_S, max_gpus=64, n_requests=3000,
                            n_replications=3, seed=5)
    return request, fleet, verify


def test_threshold_test_reads_the_slo_percentile(setting):
    """With the SLO between the fleet's P50 and P99 TTFT bounds, the fleet holds at P50 and not at P99."""
    request, fleet, verify = setting
    spec = fleet_spec(fleet, {g.name: g for g in request.gpus}, [p.count for p in fleet.pools], {})
    seed = task_seed(verify.seed, "whatif", repr(fleet.key()), repr(tuple(p.count for p in fleet.pools)))
    rep = replicate(spec, request.workload, RATE_PER_S, verify.n_requests, Level.ITERATION, seed,
                    n_replications=verify.n_replications, slo_ttft_s=0.5)
    p50_hi = percentile_bounds(rep.summaries, 50.0)[1]
    p99_hi = percentile_bounds(rep.summaries, 99.0)[1]
    assert p50_hi < p99_hi
    slo_s = 0.5 * (p50_hi + p99_hi)
    at = {pct: simulated_holds(request, fleet, replace(verify, slo_ttft_s=slo_s, percentile=pct))(RATE_PER_S)
          for pct in (50.0, 99.0)}
    assert at == {50.0: True, 99.0: False}
