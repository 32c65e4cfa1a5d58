"""Leaf-spine numbering, ideal times, validation and the path-policy registry."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.sim.network import FlowNetwork, FlowSet, LeafSpineFabric, PathPolicy, path_policy


def test_link_numbering_and_paths():
    fab = LeafSpineFabric(n_leaves=2, hosts_per_leaf=2, n_spines=3)
    assert (fab.n_hosts, fab.n_links) == (4, 2 * 4 + 2 * 2 * 3)
    assert fab.path(0, 1, 0) == (0, 4 + 1)  # same leaf: up, down
    # host 1 (leaf 0) -> host 3 (leaf 1) via spine 2: up, leaf0->spine2, spine2->leaf1, down
    assert fab.path(1, 3, 2) == (1, 8 + 0 * 3 + 2, 8 + 6 + 1 * 3 + 2, 4 + 3)
    links, hops = fab.path_table()
    assert hops[1, 3] == 4 and hops[0, 1] == 2 and hops[2, 2] == 0
    assert tuple(links[(1 * 4 + 3) * 3 + 2]) == fab.path(1, 3, 2)
    assert fab.oversubscription == pytest.approx(2 / 3)


def test_ideal_uses_the_slowest_link_on_the_path():
    fab = LeafSpineFabric(n_leaves=2, hosts_per_leaf=2, n_spines=1, host_link_gbps=100.0, spine_link_gbps=40.0)
    ideal = fab.ideal_s(np.array([0, 0]), np.array([1, 2]), np.array([5e9, 5e9]))
    np.testing.assert_allclose(ideal, [5e9 / 12.5e9, 5e9 / 5e9])


@pytest.mark.parametrize("kwargs", [dict(n_leaves=0, hosts_per_leaf=1, n_spines=1),
                                    dict(n_leaves=1, hosts_per_leaf=2.0, n_spines=1),
                                    dict(n_leaves=1, hosts_per_leaf=2, n_spines=1, host_link_gbps=-1.0),
                                    dict(n_leaves=1, hosts_per_leaf=2, n_spines=1, spine_link_gbps=float("inf"))])
def test_fabric_rejects_bad_values(kwargs):
    with pytest.raises(ConfigError):
        LeafSpineFabric(**kwargs)


def test_flowset_validation_and_immutability():
    with pytest.raises(ConfigError, match="equally long"):
        FlowSet([0], [1, 2], [1.0], [0.0])
    with pytest.raises(ConfigError, match="> 0 bytes"):
        FlowSet([0], [1], [0.0], [0.0])
    with pytest.raises(ConfigError, match=">= 0 s"):
        FlowSet([0], [1], [1.0], [-1.0])
    with pytest.raises(ConfigError, match="itself"):
        FlowSet([0, 3], [1, 3], [1.0, 1.0], [0.0, 0.0])
    flows = FlowSet([0], [1], [1.0], [0.0])
    with pytest.raises(ValueError):
        flows.src[0] = 5
    with pytest.raises(ConfigError, match="outside"):
        FlowNetwork(LeafSpineFabric(1, 2, 1)).simulate_flows(FlowSet([0], [9], [1.0], [0.0]), "reservation")


def test_policy_registry_is_loud():
    assert path_policy("ECMP") is PathPolicy.ECMP
    assert path_policy(PathPolicy.RESERVATION) is PathPolicy.RESERVATION
    with pytest.raises(UnknownNameError, match="ecmp, reservation"):
        path_policy("random")
    net = FlowNetwork(LeafSpineFabric(2, 1, 2))
    with pytest.raises(ConfigError, match="random stream"):
        net.simulate_flows(FlowSet([0], [1], [1.0], [0.0]), "ecmp")
    with pytest.raises(ConfigError, match="one spine"):
        net.simulate_flows(FlowSet([0], [1], [1.0], [0.0]), "ecmp", ecmp_spine=np.array([5]))
