"""Max-min fair sharing is exact on textbook cases and satisfies its defining property.

Definition (Bertsekas & Gallager, Data Networks, 1992, section 6.5.2): a feasible allocation is
max-min fair iff every flow has a bottleneck link -- a saturated link on which no other flow gets
a larger rate.  Hand cases are checked on the kernel helper and on the readable twin.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.sim._kernels.flows import maxmin_rates
from fleetplan.sim.network import FlowNetwork, FlowSet, LeafSpineFabric
from tests.reference.flows import progressive_filling


def kernel_rates(paths: list[list[int]], capacity: list[float]) -> np.ndarray:
    """``maxmin_rates`` on flows ``0..n-1`` with the given link lists."""
    n, n_links = len(paths), len(capacity)
    links = np.full((max(n, 1), 4), -1, dtype=np.int64)
    hops = np.zeros(max(n, 1), dtype=np.int64)
    link_flows = np.zeros(n_links, dtype=np.int64)
    for f, p in enumerate(paths):
        links[f, : len(p)] = p
        hops[f] = len(p)
        for link in p:
            link_flows[link] += 1
    rate = np.zeros(max(n, 1))
    maxmin_rates(np.arange(max(n, 1), dtype=np.int64), n, links, hops, np.asarray(capacity, dtype=np.float64),
                 link_flows, rate, np.empty(n_links), np.empty(n_links, dtype=np.int64), np.zeros(max(n, 1), bool))
    return rate[:n]


def both(paths, capacity) -> list[np.ndarray]:
    twin = progressive_filling(dict(enumerate(paths)), capacity)
    return [kernel_rates(paths, capacity), np.array([twin[f] for f in range(len(paths))])]


CASES = [
    # two flows on one bottleneck get half each
    ([[0], [0]], [10.0], [5.0, 5.0]),
    # a long flow across two links and one short flow on each: 1/2 each (linear network)
    ([[0, 1], [0], [1]], [1.0, 1.0], [0.5, 0.5, 0.5]),
    # the short flow on the wider link takes what the long flow, limited elsewhere, leaves
    ([[0, 1], [0], [1]], [1.0, 2.0], [0.5, 0.5, 1.5]),
    # three links: C, D bottlenecked at link 2 (4/2); A, B at link 0 (10/2); link 1 left with 1 spare
    ([[0, 1], [0], [1, 2], [2]], [10.0, 8.0, 4.0], [5.0, 5.0, 2.0, 2.0]),
    # three flows on a link of 9, one of them also on a link of 1: 1, then 4 and 4
    ([[0, 1], [0], [0]], [9.0, 1.0], [1.0, 4.0, 4.0]),
]


@pytest.mark.parametrize(("paths", "capacity", "expected"), CASES)
def test_textbook_allocations(paths, capacity, expected):
    for rates in both(paths, capacity):
        np.testing.assert_allclose(rates, expected, rtol=1e-15)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_every_flow_has_a_bottleneck(data):
    n_links = data.draw(st.integers(1, 6))
    capacity = data.draw(st.lists(st.floats(0.5, 100.0), min_size=n_links, max_size=n_links))
    paths = data.draw(st.lists(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=4, unique=True),
                               min_size=1, max_size=8))
    rates, twin = both(paths, capacity)
    np.testing.assert_array_equal(rates, twin)
    load = np.zeros(n_links)
    for f, p in enumerate(paths):
        load[p] += rates[f]
    assert np.all(load <= np.asarray(capacity) * (1 + 1e-12))
    for f, p in enumerate(paths):
        saturated = [link for link in p if load[link] >= capacity[link] * (1 - 1e-9)]
        assert any(rates[f] >= max(rates[g] for g, q in enumerate(paths) if link in q) * (1 - 1e-12)
                   for link in saturated), f"flow {f} has no bottleneck link"


def test_rates_change_at_start_and_finish():
    """One leaf, 1 GB/s NICs.  A (10 GB, t=0) and B (2 GB, t=5) both to host 2: A alone sends 5 GB,
    then both get 0.5 GB/s, B finishes at 9 s, A's last 3 GB take until 12 s."""
    fabric = LeafSpineFabric(n_leaves=1, hosts_per_leaf=3, n_spines=1, host_link_gbps=8.0)
    flows = FlowSet(src=[0, 1], dst=[2, 2], size_bytes=[10e9, 2e9], start_at_s=[0.0, 5.0])
    res = FlowNetwork(fabric).simulate_flows(flows, "reservation")
    np.testing.assert_allclose(res.done_at_s, [12.0, 9.0], rtol=1e-12)
    np.testing.assert_allclose(res.ideal_s, [10.0, 2.0], rtol=1e-12)
    np.testing.assert_allclose(res.slowdown, [1.2, 2.0], rtol=1e-12)
    assert res.peak_active_flows == 2


def test_two_equal_flows_on_one_spine_link_take_twice_as_long():
    """Two leaves, one spine: two cross-leaf flows from different hosts share the leaf uplink."""
    fabric = LeafSpineFabric(n_leaves=2, hosts_per_leaf=2, n_spines=1)
    flows = FlowSet(src=[0, 1], dst=[2, 3], size_bytes=[1.25e9, 1.25e9], start_at_s=[0.0, 0.0])
    res = FlowNetwork(fabric).simulate_flows(flows, "reservation")
    np.testing.assert_allclose(res.ideal_s, [0.1, 0.1], rtol=1e-12)  # 1.25 GB at 12.5 GB/s
    np.testing.assert_allclose(res.slowdown, [2.0, 2.0], rtol=1e-12)
