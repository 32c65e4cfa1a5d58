"""The KV-transfer experiment of the Vidur x NS-3 PD co-simulation report (Lin et al. 2026) (section 7), as a flow list.

The paper: LLaMA-3-8B on 16 replicas, 8 prefill + 8 decode, on a leaf-spine ("DCN+") fabric of
100 Gb/s links simulated in NS-3; Poisson arrivals at 6 requests/s; transfers go from prefill
host ``i`` to decode host ``8 + i`` in turn (the trace's 0 -> 8, 1 -> 9, 2 -> 10, ...).  Its findings (section 7.2-7.4):
under ECMP, slowdowns of 1.07x to 3.2x over size / one 100 Gb/s link, with 35-45 % of flows
above 2x; the path-reservation controllers cut mean FCT by 23 % and p99 by 34 %.

Sizes.  The trace excerpt's flows are 0.94 GB, but the 500-request run's table (section 7.3) gives
the trivial mode's mean FCT as 21.2 ms at Vidur's ``pd_p2p_comm_bandwidth`` of 800 Gb/s, converted
as 800 * 2^30 / 8 bytes/s (section 6.3, gotcha 2): a mean transfer of 0.0212 * 107.4e9 = 2.28 GB
(its Zipf prompts vary; its prompt cap of 4,096 tokens and LLaMA-3-8B's 128 KiB of KV per token
do not reproduce either size, so we take the sizes as the paper measured them).  At 0.94 GB and
6 req/s the fabric carries 0.45 flows on average and hash collisions are rare (ECMP mean slowdown
~1.17 on the default fabric); at 2.28 GB it carries ~1.1, the regime of the paper's "peaking at 7
simultaneous transfers".  ``MEAN_KV_BYTES`` (2.28 GB, every flow the same size) is the default.

What the paper does not state, and what we assume (``KvTransferSetting`` defaults):

* leaf and spine counts: 4 leaves of 4 hosts (prefill hosts 0-7 on leaves 0-1, decode hosts
  8-15 on leaves 2-3) and 2 spines, all links 100 Gb/s: each leaf is 2:1 oversubscribed, so two
  flows hashed onto one spine link halve each other while the other spine link may sit idle;
* a prefill host is chosen in turn and its decode host is the next decode host in turn, as in
  the trace;
* no propagation latency and no transport overheads (the paper's 1.07x floor is NS-3's headers
  and RDMA ramp-up, which a fluid model does not have): our slowdown floor is exactly 1.

With these (5 x 2,000 flows), ECMP gives mean FCT 262 ms, p99 595 ms, slowdown mean 1.44 and
p99 3.3, peak 8-9 concurrent flows; the reservation controller gives 206 ms and 352 ms (-21 %
mean, -41 % p99), against the paper's 241.5 / 773 ms and 186.7 / 509.1 ms (-23 %, -34 %).

``compare_policies`` replicates the experiment: replication ``r`` draws its arrivals from the
stream ``(seed, "network", r, "arrivals")`` and its ECMP hashes from ``(seed, "network", r,
"ecmp")``; every policy sees the same arrivals, so the comparison is paired.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fleetplan.errors import ConfigError
from fleetplan.rng import stream
from fleetplan.sim.network.fabric import LeafSpineFabric
from fleetplan.sim.network.flows import FlowResult, FlowSet, PathPolicy, path_policy

__all__ = ["KvTransferSetting", "PAPER_KV_BYTES", "MEAN_KV_BYTES", "compare_policies", "SUMMARY_COLUMNS"]

PAPER_KV_BYTES = 941_359_104  # Vidur x NS-3 report (Lin et al. 2026) §3.2, flow size
MEAN_KV_BYTES = 0.0212 * 800 * 2**30 / 8  # 2.28 GB: section 7.3 trivial mean FCT x Vidur's 800 Gb/s


@dataclass(frozen=True)
class KvTransferSetting:
    """Prefill-to-decode KV transfers with Poisson arrivals (module docstring).

    Attributes
    ----------
    rate_per_s : float
        Poisson arrival rate of requests (one transfer each), 1/s.
    transfer_bytes : float
        Bytes per transfer.
    n_prefill_hosts, n_decode_hosts : int
        Hosts ``0..n_prefill-1`` send; hosts ``n_prefill..n_prefill+n_decode-1`` receive.
    fabric : LeafSpineFabric
        The fabric; its host count must equal ``n_prefill_hosts + n_decode_hosts``.
    """

    rate_per_s: float = 6.0
    transfer_bytes: float = MEAN_KV_BYTES
    n_prefill_hosts: int = 8
    n_decode_hosts: int = 8
    fabric: LeafSpineFabric = LeafSpineFabric(n_leaves=4, hosts_per_leaf=4, n_spines=2)

    def __post_init__(self) -> None:
        for name in ("rate_per_s", "transfer_bytes"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
                raise ConfigError(f"{name}={v!r} must be a finite number > 0")
        for name in ("n_prefill_hosts", "n_decode_hosts"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name}={v!r} must be an integer >= 1")
        hosts = self.n_prefill_hosts + self.n_decode_hosts
        if not isinstance(self.fabric, LeafSpineFabric) or self.fabric.n_hosts != hosts:
            raise ConfigError(f"the fabric must hold the {hosts} prefill + decode hosts; "
                              f"give n_leaves * hosts_per_leaf = {hosts}")

    def flows(self, n_flows: int, rng: np.random.Generator) -> FlowSet:
        """``n_flows`` transfers: Poisson start times from ``rng``, hosts taken in turn."""
        if isinstance(n_flows, bool) or not isinstance(n_flows, int) or n_flows < 1:
            raise ConfigError(f"n_flows={n_flows!r} must be an integer >= 1")
        start = np.cumsum(rng.exponential(1.0 / self.rate_per_s, size=n_flows))
        i = np.arange(n_flows)
        src = i % self.n_prefill_hosts
        dst = self.n_prefill_hosts + i % self.n_decode_hosts
        return FlowSet(src, dst, np.full(n_flows, float(self.transfer_bytes)), start)


SUMMARY_COLUMNS = ("replication", "policy", "n_flows", "mean_fct_s", "p99_fct_s", "mean_slowdown", "p50_slowdown",
                   "p99_slowdown", "max_slowdown", "peak_active_flows")


def compare_policies(setting: KvTransferSetting, n_flows: int,
                     policies: tuple[PathPolicy | str, ...] = tuple(PathPolicy), seed: int = 0,
                     n_replications: int = 1) -> tuple[pd.DataFrame, dict[str, FlowResult]]:
    """Per (replication, policy) summary rows, and the first replication's per-flow results by policy.

    Parameters
    ----------
    setting : KvTransferSetting
        Fabric, hosts, transfer size and arrival rate.
    n_flows : int
        Transfers per replication.
    policies : tuple of PathPolicy or str
        Path policies to compare (each name checked against the registry).
    seed : int
        Run seed (named child streams, module docstring).
    n_replications : int
        Independent replications.
    """
    if not isinstance(setting, KvTransferSetting):
        raise ConfigError(f"compare_policies needs a KvTransferSetting, got {type(setting).__name__}")
    if isinstance(n_replications, bool) or not isinstance(n_replications, int) or n_replications < 1:
        raise ConfigError(f"n_replications={n_replications!r} must be an integer >= 1")
    resolved = tuple(dict.fromkeys(path_policy(p) for p in policies))
    if not resolved:
        raise ConfigError("no path policy given; name at least one of " + ", ".join(p.value for p in PathPolicy))
    from fleetplan.sim.network.simulate import FlowNetwork  # the numba flow kernel: only when run

    net = FlowNetwork(setting.fabric)
    rows, first = [], {}
    for rep in range(n_replications):
        flows = setting.flows(n_flows, stream(seed, "network", rep, "arrivals"))
        for policy in resolved:
            res = net.simulate_flows(flows, policy, rng=stream(seed, "network", rep, "ecmp"))
            if rep == 0:
                first[policy.value] = res
            rows.append({"replication": rep, "policy": policy.value, **res.summary()})
    df = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    df["n_flows"] = df["n_flows"].astype(int)
    df["peak_active_flows"] = df["peak_active_flows"].astype(int)
    return df, first
