"""Pareto frontiers: cost vs P99 TTFT per topology, throughput vs tokens/s per user (co-located)."""

from __future__ import annotations

import csv
import io

import pytest

from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.plan.frontier import Architecture, cost_latency_frontier, throughput_frontier
from fleetplan.plan.optimize import OptimizeRequest, optimize, resolve_gpus
from fleetplan.plan.space import Topology
from fleetplan.report.plots import plots_available, throughput_frontier_figure
from fleetplan.report.procurement import THROUGHPUT_COLUMNS, rows_to_csv, throughput_rows
from fleetplan.workload import load_workload


@pytest.fixture(scope="module")
def result():
    req = OptimizeRequest(workload=load_workload("lmsys"), gpus=resolve_gpus(load_catalog(), ["h100", "a100"]),
                          slo_ttft_s=0.5, rate_per_s=100.0, topologies=(Topology.HOMO, Topology.TWO_POOL))
    return optimize(req)


def test_cost_latency_frontier_per_topology_is_non_dominated(result):
    front = cost_latency_frontier(result)
    assert {p.topology for p in front} == {"homo", "two-pool"}
    for topo in ("homo", "two-pool"):
        pts = [p for p in front if p.topology == topo]
        costs = [p.cost_usd_per_year for p in pts]
        lat = [p.p99_ttft_s for p in pts]
        assert costs == sorted(costs) and lat == sorted(lat, reverse=True)  # pay more, get lower latency
        feasible = [c for c in result.candidates if c.feasible and c.topology.value == topo]
        for c in feasible:  # nothing of that topology beats a frontier point on both axes
            for p in pts:
                assert not (c.cost_usd_per_year < p.cost_usd_per_year and c.ttft_p_s < p.p99_ttft_s)
    # the cheapest frontier point overall is the recommendation's cost
    assert min(p.cost_usd_per_year for p in front) == pytest.approx(result.recommendation.cost_usd_per_year)


@pytest.fixture(scope="module")
def throughput():
    return throughput_frontier(load_workload("azure_conv"), load_catalog().get("h100"), 2, (10.0, 40.0), 0.5,
                               max_num_seqs=(4, 64), n_requests=1500)


def test_throughput_frontier_points_are_non_dominated(throughput):
    assert len(throughput) == 4
    front = [p for p in throughput if p.on_frontier]
    assert front and all(p.meets_ttft for p in front)
    ok = [p for p in throughput if p.meets_ttft]
    for p in front:
        for q in ok:
            assert not (q.throughput_tokens_per_s_per_gpu > p.throughput_tokens_per_s_per_gpu
                        and q.tokens_per_s_per_user > p.tokens_per_s_per_user)
    for p in throughput:
        assert p.tokens_per_s_per_user == pytest.approx(1.0 / p.p95_tpot_s)
    # more load on the same cap: more throughput per GPU
    by = {(p.max_num_seqs, p.rate_per_s): p for p in throughput}
    assert by[(64, 40.0)].throughput_tokens_per_s_per_gpu > by[(64, 10.0)].throughput_tokens_per_s_per_gpu


def test_throughput_csv_and_plot(throughput):
    rows = throughput_rows(throughput)
    parsed = list(csv.DictReader(io.StringIO(rows_to_csv(THROUGHPUT_COLUMNS, rows))))
    assert len(parsed) == 4 and set(parsed[0]) == set(THROUGHPUT_COLUMNS)
    png = throughput_frontier_figure(rows)
    if plots_available():
        assert png.startswith(b"\x89PNG")
    else:
        assert png is None


@pytest.mark.parametrize("arch", [Architecture.PDD, "afd"])
def test_disaggregated_architectures_have_simulated_frontiers(arch):
    pts = throughput_frontier(load_workload("azure_conv"), load_catalog().get("h100"), 5, (5.0, 20.0), 0.5,
                              max_num_seqs=(16, 64), architecture=arch, n_requests=1500)
    name = Architecture(arch).value if isinstance(arch, str) else arch.value
    assert pts and all(p.architecture == name and 1 <= p.n_prefill < p.n_instances for p in pts)
    assert any(p.on_frontier for p in pts) and all(p.meets_ttft for p in pts if p.on_frontier)
    assert all(p.throughput_tokens_per_s_per_gpu > 0 for p in pts)
    with pytest.raises(ConfigError, match="at least"):
        throughput_frontier(load_workload("azure_conv"), load_catalog().get("h100"), 1, (10.0,), 0.5,
                            architecture=arch)
