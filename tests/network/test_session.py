"""The incremental session replays an offline flow list bit for bit, and guards its protocol."""

from __future__ import annotations

import heapq

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.rng import stream
from fleetplan.sim.network import FlowNetwork, FlowSession, KvTransferSetting, LeafSpineFabric


def drive(session: FlowSession, flows, ecmp_spine) -> np.ndarray:
    """An engine loop: events are flow starts and the session's next completion."""
    done = np.full(flows.n_flows, np.nan)
    starts = [(float(t), i) for i, t in enumerate(flows.start_at_s)]
    heapq.heapify(starts)
    while starts or session.n_active:
        t = min(starts[0][0] if starts else np.inf, session.next_done_at_s())
        for fid, at in session.advance_to(t):
            done[fid] = at
        while starts and starts[0][0] == t:
            _, i = heapq.heappop(starts)
            assert session.start_flow(t, int(flows.src[i]), int(flows.dst[i]), float(flows.size_bytes[i]),
                                      ecmp_spine=int(ecmp_spine[i])) == i
    return done


@pytest.mark.parametrize("policy", ["ecmp", "reservation"])
@pytest.mark.parametrize("seed", range(3))
def test_session_equals_offline(seed, policy):
    setting = KvTransferSetting()
    flows = setting.flows(300, stream(seed, "arrivals"))
    net = FlowNetwork(setting.fabric)
    ecmp = stream(seed, "ecmp").integers(0, setting.fabric.n_spines, size=flows.n_flows)
    offline = net.simulate_flows(flows, policy, ecmp_spine=ecmp)
    session = FlowSession(net, policy, rng=stream(seed, "unused"))
    np.testing.assert_array_equal(drive(session, flows, ecmp), offline.done_at_s)
    assert [session.spine_of(i) for i in range(flows.n_flows)] == offline.spine.tolist()


def test_session_grows_past_its_initial_capacity():
    net = FlowNetwork(LeafSpineFabric(n_leaves=2, hosts_per_leaf=2, n_spines=2))
    session = FlowSession(net, "ecmp", rng=stream(0, "ecmp"))
    for i in range(1500):
        session.start_flow(0.0, i % 2, 2 + i % 2, 1e6)
    assert session.n_active == 1500
    done = session.advance_to(10.0)
    assert len(done) == 1500 and session.n_active == 0
    assert session.next_done_at_s() == np.inf


def test_protocol_errors():
    net = FlowNetwork(LeafSpineFabric(n_leaves=1, hosts_per_leaf=2, n_spines=1))
    with pytest.raises(ConfigError, match="random stream"):
        FlowSession(net, "ecmp")
    session = FlowSession(net, "reservation")
    session.advance_to(1.0)
    with pytest.raises(ConfigError, match="before the session's clock"):
        session.advance_to(0.5)
    with pytest.raises(ConfigError, match="call advance_to"):
        session.start_flow(2.0, 0, 1, 1e9)
    with pytest.raises(ConfigError, match="itself"):
        session.start_flow(1.0, 1, 1, 1e9)
    with pytest.raises(ConfigError, match="not a host"):
        session.start_flow(1.0, 0, 7, 1e9)
    with pytest.raises(ConfigError, match="> 0"):
        session.start_flow(1.0, 0, 1, 0.0)
