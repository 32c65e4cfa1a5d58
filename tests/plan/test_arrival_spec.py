"""The arrival process a plan is sized for: Ca² per process, and the analytic phase's response.

Direction (Kingman / Whitt two-moment wait, (Ca² + Cs²)/2): burstier arrivals never need fewer GPUs.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.plan.arrivals import ArrivalSpec
from fleetplan.plan.optimize import OptimizeRequest, optimize
from fleetplan.plan.space import Topology
from fleetplan.workload import load_workload


def test_ca2_per_process():
    wl = load_workload("azure_conv")
    assert ArrivalSpec().ca2(wl, 10.0) == 1.0
    assert ArrivalSpec("gamma", 2.0).ca2(wl, 10.0) == 4.0
    with pytest.raises(ConfigError, match="replay arrivals need a trace"):
        ArrivalSpec("replay").ca2(wl, 10.0)
    with pytest.raises(ConfigError, match="gamma arrivals only"):
        ArrivalSpec("poisson", 2.0)


def test_burstier_arrivals_never_need_fewer_gpus():
    wl = load_workload("azure_conv")
    h100 = load_catalog().get("h100")
    base = OptimizeRequest(workload=wl, gpus=(h100,), slo_ttft_s=0.5, rate_per_s=100.0, topologies=(Topology.HOMO,))
    gpus = []
    for cv in (1.0, 2.0, 4.0, 8.0):
        rec = optimize(replace(base, arrival_cv2=cv * cv)).recommendation
        gpus.append(rec.total_gpus_needed)
    assert gpus == sorted(gpus) and gpus[-1] > gpus[0], gpus


def test_whatif_sizes_every_rate_for_the_arrival_process():
    from fleetplan.plan.whatif import whatif

    wl = load_workload("azure_conv")
    h100 = load_catalog().get("h100")
    req = OptimizeRequest(workload=wl, gpus=(h100,), slo_ttft_s=0.15, rate_per_s=100.0, topologies=(Topology.HOMO,))
    rates = (50.0, 100.0, 200.0)
    poisson = whatif(req, rates)
    bursty = whatif(req, rates, arrivals=ArrivalSpec("gamma", 3.0))
    pairs = list(zip(bursty.points, poisson.points, strict=True))
    assert all(b.total_gpus >= p.total_gpus for b, p in pairs)
    assert sum(b.total_gpus for b, _ in pairs) > sum(p.total_gpus for _, p in pairs)
