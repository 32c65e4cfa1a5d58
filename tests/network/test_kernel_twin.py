"""The flow kernel equals its readable twin exactly; bytes are conserved; no flow beats its ideal."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.sim._kernels.codes import POLICY_ECMP, POLICY_RESERVATION
from fleetplan.sim._kernels.flows import run_flows
from fleetplan.sim.network import FlowNetwork, FlowSet, LeafSpineFabric
from tests.reference.flows import run_flows as twin_run_flows


def make_case(seed: int) -> tuple[LeafSpineFabric, dict]:
    rng = np.random.default_rng(seed)
    fabric = LeafSpineFabric(n_leaves=int(rng.integers(1, 4)), hosts_per_leaf=int(rng.integers(2, 4)),
                             n_spines=int(rng.integers(1, 4)), host_link_gbps=float(rng.choice([25.0, 100.0])),
                             spine_link_gbps=float(rng.choice([40.0, 100.0, 400.0])))
    n = int(rng.integers(1, 40))
    src = rng.integers(0, fabric.n_hosts, size=n)
    dst = (src + rng.integers(1, fabric.n_hosts, size=n)) % fabric.n_hosts
    start = np.sort(rng.exponential(0.05, size=n).cumsum())
    size = rng.uniform(1e7, 2e9, size=n)
    if rng.random() < 0.4:  # coarse values: simultaneous starts and finishes
        start, size = np.round(start, 1), np.round(size, -9) + 1e9
    links, hops = fabric.path_table()
    return fabric, dict(start_at_s=start, src=src.astype(np.int64), dst=dst.astype(np.int64), size_bytes=size,
                        ecmp_spine=rng.integers(0, fabric.n_spines, size=n).astype(np.int64),
                        n_hosts=fabric.n_hosts, n_spines=fabric.n_spines, path_links=links, path_hops=hops,
                        capacity=fabric.capacity_bytes_per_s())


def run_both(case: dict, policy: int, segments: list | None = None):
    n = case["start_at_s"].shape[0]
    outs = []
    for fn in (run_flows, twin_run_flows):
        done, spine = np.full(n, np.nan), np.full(n, -2, dtype=np.int64)
        extra = {} if fn is run_flows else {"segments": segments}
        peak = fn(case["start_at_s"], case["src"], case["dst"], case["size_bytes"], case["ecmp_spine"], policy,
                  case["n_hosts"], case["n_spines"], case["path_links"], case["path_hops"], case["capacity"],
                  done, spine, **extra)
        outs.append((done, spine, peak))
    return outs


@pytest.mark.parametrize("policy", [POLICY_ECMP, POLICY_RESERVATION])
@pytest.mark.parametrize("seed", range(40))
def test_kernel_matches_twin_exactly(seed, policy):
    _, case = make_case(seed)
    (done_k, spine_k, peak_k), (done_t, spine_t, peak_t) = run_both(case, policy)
    np.testing.assert_array_equal(done_k, done_t)
    np.testing.assert_array_equal(spine_k, spine_t)
    assert peak_k == peak_t


@pytest.mark.parametrize("seed", range(20))
def test_bytes_conserved_and_ideal_is_a_floor(seed):
    fabric, case = make_case(seed)
    segments: list = []
    run_both(case, POLICY_ECMP, segments)
    delivered = np.zeros(case["size_bytes"].shape[0])
    for f, rate, seconds in segments:
        delivered[f] += rate * seconds
    np.testing.assert_allclose(delivered, case["size_bytes"], rtol=1e-9)
    flows = FlowSet(case["src"], case["dst"], case["size_bytes"], case["start_at_s"])
    res = FlowNetwork(fabric).simulate_flows(flows, "ecmp", ecmp_spine=case["ecmp_spine"])
    assert np.all(res.done_at_s >= flows.start_at_s + res.ideal_s * (1 - 1e-12))
    assert np.all(res.slowdown >= 1 - 1e-12)


def test_wrapper_sorts_by_start_and_returns_input_order():
    fabric = LeafSpineFabric(n_leaves=1, hosts_per_leaf=3, n_spines=1, host_link_gbps=8.0)
    late_first = FlowSet(src=[1, 0], dst=[2, 2], size_bytes=[2e9, 10e9], start_at_s=[5.0, 0.0])
    res = FlowNetwork(fabric).simulate_flows(late_first, "reservation")
    np.testing.assert_allclose(res.done_at_s, [9.0, 12.0], rtol=1e-12)


def test_reservation_spreads_simultaneous_flows_over_spines():
    fabric = LeafSpineFabric(n_leaves=2, hosts_per_leaf=4, n_spines=4)
    flows = FlowSet(src=[0, 1, 2, 3], dst=[4, 5, 6, 7], size_bytes=[1e9] * 4, start_at_s=[0.0] * 4)
    net = FlowNetwork(fabric)
    res = net.simulate_flows(flows, "reservation")
    assert sorted(res.spine.tolist()) == [0, 1, 2, 3]
    np.testing.assert_allclose(res.slowdown, 1.0, rtol=1e-12)
    collide = net.simulate_flows(flows, "ecmp", ecmp_spine=np.zeros(4, dtype=np.int64))
    np.testing.assert_allclose(collide.slowdown, 4.0, rtol=1e-12)
