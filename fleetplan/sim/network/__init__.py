"""Flow-level model of the network that carries KV-cache transfers (prefill-decode disaggregation).

``fabric`` (leaf-spine topology as directed links), ``flows`` (flow lists, path policies,
results), ``simulate`` (``FlowNetwork.simulate_flows``: max-min fair sharing, exact, numba kernel
``fleetplan.sim._kernels.flows``), ``session`` (incremental interface for an event-driven engine),
``kv_setting`` (the Vidur x NS-3 PD co-simulation report (Lin et al. 2026) experiment, ``compare_policies``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

#: Public name -> submodule.  Loaded on first use (PEP 562): importing the package for a light
#: name (``fabric``, ``flows``) does not compile or import the flow kernel and numba, so
#: ``fleetplan simulate pdd --help`` and ``simulate network --help`` stay light.
_WHERE = {
    "LeafSpineFabric": "fabric", "FlowResult": "flows", "FlowSet": "flows", "PathPolicy": "flows",
    "path_policy": "flows", "MEAN_KV_BYTES": "kv_setting", "PAPER_KV_BYTES": "kv_setting",
    "KvTransferSetting": "kv_setting", "compare_policies": "kv_setting", "FlowSession": "session",
    "FlowNetwork": "simulate", "draw_ecmp_spines": "simulate",
}

if TYPE_CHECKING:
    from fleetplan.sim.network.fabric import LeafSpineFabric
    from fleetplan.sim.network.flows import FlowResult, FlowSet, PathPolicy, path_policy
    from fleetplan.sim.network.kv_setting import MEAN_KV_BYTES, PAPER_KV_BYTES, KvTransferSetting, compare_policies
    from fleetplan.sim.network.session import FlowSession
    from fleetplan.sim.network.simulate import FlowNetwork, draw_ecmp_spines

__all__ = ["LeafSpineFabric", "FlowSet", "FlowResult", "PathPolicy", "path_policy", "FlowNetwork", "FlowSession",
           "draw_ecmp_spines", "KvTransferSetting", "PAPER_KV_BYTES", "MEAN_KV_BYTES",
           "compare_policies"]


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
