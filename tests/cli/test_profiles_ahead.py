"""``cli.report_output.ProfilesAhead``: the reports' simulation of the recommendation, run on a thread
beside the headroom search, gives the very profiles ``with_report_figures`` computes after the run;
``plan.optimize.optimize`` hands it the verified recommendation once, before the headroom search."""

from __future__ import annotations

import dataclasses

from fleetplan.cli.report_output import ProfilesAhead
from fleetplan.hardware import load_catalog
from fleetplan.plan.figures import with_report_figures
from fleetplan.plan.headroom import HeadroomSettings
from fleetplan.plan.optimize import OptimizeRequest, optimize, resolve_gpus
from fleetplan.plan.space import Topology
from fleetplan.plan.verify import VerifySettings
from fleetplan.workload import load_workload


def test_profiles_simulated_beside_the_headroom_search_are_the_reports_own():
    rate, slo_s = 20.0, 0.5
    request = OptimizeRequest(workload=load_workload("lmsys"), rate_per_s=rate, slo_ttft_s=slo_s,
                              gpus=resolve_gpus(load_catalog(), ["h100"]), topologies=(Topology.HOMO,))
    verify = VerifySettings(slo_ttft_s=slo_s, slo_tpot_s=None, rate_per_s=rate, max_gpus=64, top_k=1,
                            n_requests=2_000)
    ahead = ProfilesAhead(request, verify, seed=3)
    seen = []

    def start(candidate):
        seen.append(candidate)
        ahead.start(candidate)

    result = optimize(request, verify, on_recommendation=start, headroom=HeadroomSettings(resolution=0.1))
    assert result.recommendation is not None and result.headroom is not None
    assert seen == [result.recommendation]  # once, with the verified recommendation
    mine = with_report_figures(result, verify, 3, profiles=ahead.result(result.recommendation))
    after = with_report_figures(result, verify, 3)
    assert mine.latency_profiles and mine.latency_profiles == after.latency_profiles
    assert mine.procurement == after.procurement  # the simulated P99 column reads the profiles
    other = dataclasses.replace(result.recommendation)
    assert ahead.result(other) is None  # started for another fleet: computed after the run instead


def test_without_a_start_nothing_is_precomputed():
    ahead = ProfilesAhead(None, None, 0)
    assert ahead.result(object()) is None
