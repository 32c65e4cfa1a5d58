"""PDD with its KV transfers as flows on a leaf-spine fabric (``PddSpec.network``)."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.sim.network import LeafSpineFabric
from fleetplan.sim.pdd import FabricSpec, KvTransferSpec, PddSpec, load_fabric_toml, simulate_pdd_arrays
from tests.pdd.helpers import pool

GBPS = 8.0  # host links: 10^9 bytes/s
LINK_BYTES_PER_S = GBPS * 1e9 / 8


def _pair(layerwise: bool, latency_s: float = 2e-3, policy: str = "ecmp", spine_gbps: float = GBPS):
    """The same fleet with the first-order transfer at the host-link rate, and on a fabric."""
    pf, dec = pool("prefill", 2, blocks=4096, ctx=8192), pool("decode", 2, blocks=1024, ctx=8192)
    transfer = KvTransferSpec(latency_s, LINK_BYTES_PER_S, 2e5, layerwise, 8)
    fabric = FabricSpec(LeafSpineFabric(2, 2, 2, GBPS, spine_gbps), policy, (0, 1), (2, 3))
    return PddSpec(pf, dec, transfer, "ils"), PddSpec(pf, dec, transfer, "ils", network=fabric)


def _run(spec, arrival, prompt, output):
    return simulate_pdd_arrays(spec, arrival, prompt, output, warmup_fraction=0.0, seed=1)


def test_one_flow_at_a_time_equals_the_first_order_model_exactly():
    """Whole-KV transfers that never overlap: the flow runs alone at the link rate, so the handoff
    is (ready + latency) + bytes / rate, the same floats as the formula: equal bit for bit."""
    plain, net = _pair(layerwise=False)
    n = 30
    arrival, prompt, output = np.arange(n) * 2.0, 100 + 37 * np.arange(n) % 400, 5 + np.arange(n) % 50
    a, b = _run(plain, arrival, prompt, output), _run(net, arrival, prompt, output)
    assert b.summary.network.peak_active_flows == 1
    cols = ["prefill_end_s", "grant_s", "handoff_s", "first_token_s", "done_s", "ttft_s", "decode_instance"]
    pd_equal = a.requests[cols].equals(b.requests[cols])
    assert pd_equal
    np.testing.assert_allclose(b.flows["fct_s"], b.flows["size_bytes"] / LINK_BYTES_PER_S, rtol=1e-12)  # done - start
    np.testing.assert_allclose(b.flows["slowdown"], 1.0, rtol=1e-12)


@pytest.mark.parametrize("policy", ["ecmp", "reservation"])
def test_layerwise_uncontended_equals_the_formula_to_rounding(policy):
    """Layer-wise: the layers' flow and the last layer's flow; equal to float rounding (the formula
    sums (L-1)/L * bytes/bw, the flows bytes*(L-1)/L / bw)."""
    plain, net = _pair(layerwise=True, policy=policy)
    n = 20
    arrival, prompt, output = np.arange(n) * 2.0, 200 + 53 * np.arange(n) % 700, 3 + np.arange(n) % 40
    a, b = _run(plain, arrival, prompt, output), _run(net, arrival, prompt, output)
    for col in ("handoff_s", "first_token_s", "done_s", "ttft_s"):
        np.testing.assert_allclose(b.requests[col], a.requests[col], rtol=1e-12, atol=0)
    assert set(b.flows["kind"]) == {"layers", "last"} and len(b.flows) == 2 * n


def test_contention_raises_ttft_and_slowdown():
    """A burst: transfers from two prefill hosts share 2:1 oversubscribed spine links and the
    decode hosts' links, so flows take longer than alone and TTFT rises."""
    plain, net = _pair(layerwise=False, latency_s=0.0, spine_gbps=GBPS / 2)
    n = 40
    arrival, prompt, output = np.zeros(n), np.full(n, 3000), np.full(n, 20)
    a, b = _run(plain, arrival, prompt, output), _run(net, arrival, prompt, output)
    s = b.summary.network
    assert s.peak_active_flows > 1 and s.mean_slowdown > 1.5 and s.max_slowdown > 2
    assert b.summary.ttft.mean_s > a.summary.ttft.mean_s
    assert (b.requests["kv_slowdown"] >= 1 - 1e-12).all()
    assert b.summary.n_done == n
    measured = b.requests["transfer_s"] - b.requests["kv_flow_s"]
    assert (measured >= -1e-12).all()  # the transfer includes the flow


def test_reservation_spreads_flows_over_spines():
    _, net = _pair(layerwise=False, latency_s=0.0, policy="reservation", spine_gbps=GBPS / 2)
    flows = _run(net, [0.0, 0.0], [3000, 3000], [5, 5]).flows
    assert flows["start_s"][0] == flows["start_s"][1] and sorted(flows["spine"]) == [0, 1]


def test_spec_checks_hosts_and_bytes(tmp_path):
    fab = LeafSpineFabric(1, 4, 1)
    pf, dec = pool("p", 2), pool("d", 2)
    with pytest.raises(ConfigError, match="both a prefill and a decode"):
        PddSpec(pf, dec, KvTransferSpec(0, 1e9, 10.0), network=FabricSpec(fab, "ecmp", (0, 1), (1, 2)))
    with pytest.raises(ConfigError, match="2 instances"):
        PddSpec(pf, dec, KvTransferSpec(0, 1e9, 10.0), network=FabricSpec(fab, "ecmp", (0,), (2, 3)))
    with pytest.raises(ConfigError, match="host 5"):
        PddSpec(pf, dec, KvTransferSpec(0, 1e9, 10.0), network=FabricSpec(fab, "ecmp", (0, 5), (2, 3)))
    with pytest.raises(ConfigError, match="kv_bytes_per_token"):
        PddSpec(pf, dec, KvTransferSpec(), network=FabricSpec(fab))
    with pytest.raises(UnknownNameError):
        FabricSpec(fab, "random")
    path = tmp_path / "fab.toml"
    path.write_text('[fabric]\nn_leaves = 2\nhosts_per_leaf = 4\nn_spines = 2\nhost_link_gbps = 200\n'
                    'path_policy = "reservation"\ndecode_hosts = [4, 5]\n')
    spec = load_fabric_toml(path)
    assert spec.fabric.n_hosts == 8 and spec.path_policy.value == "reservation"
    assert spec.hosts(2, 2) == ((0, 1), (4, 5))
    path.write_text("[fabric]\nn_leaves = 2\nbogus = 1\n")
    with pytest.raises(ConfigError, match="bogus"):
        load_fabric_toml(path)


def test_default_spec_has_no_network_outputs():
    plain, _ = _pair(layerwise=False)
    res = _run(plain, [0.0], [100], [3])
    assert res.flows is None and res.summary.network is None and "kv_flow_s" not in res.requests
