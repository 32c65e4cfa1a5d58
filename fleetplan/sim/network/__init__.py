"""Flow-level model of the network that carries KV-cache transfers (prefill-decode disaggregation).

``fabric`` (leaf-spine topology as directed links), ``flows`` (flow lists, path policies,
results), ``simulate`` (``FlowNetwork.simulate_flows``: max-min fair sharing, exact, numba kernel
``fleetplan.sim._kernels.flows``), ``session`` (incremental interface for an event-driven engine),
``kv_setting`` (the Vidur x NS-3 PD co-simulation report (Lin et al. 2026) experiment, ``compare_policies``).
"""

from __future__ import annotations

from fleetplan.sim.network.fabric import LeafSpineFabric
from fleetplan.sim.network.flows import FlowResult, FlowSet, PathPolicy, path_policy
from fleetplan.sim.network.kv_setting import MEAN_KV_BYTES, PAPER_KV_BYTES, KvTransferSetting, compare_policies
from fleetplan.sim.network.session import FlowSession
from fleetplan.sim.network.simulate import FlowNetwork, draw_ecmp_spines

__all__ = ["LeafSpineFabric", "FlowSet", "FlowResult", "PathPolicy", "path_policy", "FlowNetwork", "FlowSession",
           "draw_ecmp_spines", "KvTransferSetting", "PAPER_KV_BYTES", "MEAN_KV_BYTES",
           "compare_policies"]
