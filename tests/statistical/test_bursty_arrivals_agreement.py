"""Bursty arrivals: the analytic phase (Ca² = CV²) against the simulator on one case.

Case: azure_conv at 100 req/s on 2 H100-SXM (homo), gamma inter-arrival gaps with CV 2 (Ca² = 4).
The engine model's two-moment wait takes (Ca² + Cs²)/2 in place of (1 + Cs²)/2 (Kingman/Whitt);
verification simulates the same gamma stream.  Stated tolerance: the mean simulated P99 TTFT over
3 replications lies within the [One physics] agreement band (±25 %) of the analytic P99, and the
bursty analytic P99 exceeds the Poisson one.  Measured (seed 3) with the engine model of this
commit: CV 2: analytic 107 ms, simulated mean 132 ms (+23 %) -- the model under-predicts
burstiness a little, in step with its Poisson gap (+8-10 % on this fleet).
"""

from __future__ import annotations

from dataclasses import replace

from fleetplan.hardware import load_catalog
from fleetplan.plan.optimize import OptimizeRequest, optimize
from fleetplan.plan.space import Topology
from fleetplan.plan.verify import VerifySettings, verify_candidate
from fleetplan.workload import load_workload

AGREEMENT_BAND = 0.25  # [One physics]: simulated P99 within ±25 % of the analytic one


def test_gamma_cv2_analytic_p99_agrees_with_simulation():
    h100 = load_catalog().get("h100")
    wl = load_workload("azure_conv")
    base = OptimizeRequest(workload=wl, gpus=(h100,), slo_ttft_s=0.5, rate_per_s=100.0, topologies=(Topology.HOMO,))
    poisson = optimize(base).recommendation
    bursty = optimize(replace(base, arrival_cv2=4.0)).recommendation
    assert [p.count for p in bursty.pools] == [2] and bursty.ttft_p_s > poisson.ttft_p_s
    s = VerifySettings(0.5, None, 100.0, base.max_gpus, arrival="gamma", arrival_cv=2.0, seed=3)
    v = verify_candidate(bursty, {h100.name: h100}, wl, s, lambda g: 1.0)
    assert abs(v.disagreement) <= AGREEMENT_BAND, (v.disagreement, bursty.ttft_p_s, v.p99_ttft_s_sim)
