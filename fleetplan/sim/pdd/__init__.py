"""Prefill-decode disaggregated (PDD) fleets: spec, compile, engine, result.

A prefill pool runs chunked prefill only; each request's KV then moves to a decode instance
(``latency + prompt * KV bytes per token / bandwidth``, optionally layer-wise so all but the
last layer's share overlaps prefill) once that instance can hold it (pull-based
backpressure: until then the prefill instance keeps the KV and it counts against its
admissions); decode instances run vLLM-style decode steps or SIBYL's processor-sharing
model.  The decode instance is bound at prefill start (early) or end (late) by round-robin,
ILS (least tokens or requests now), SIBYL (projected load at the handoff moment, §4) or a
late-binding oracle.  ``TTFT = queue + prefill + transfer + first decode step``; TPOT from
the decode side.  Sources: SIBYL (XPYD scheduling) §3-4, Algorithm 1, appendix I;
FrontierSim's PDD event graph and backpressure; the Vidur x NS-3 PD co-simulation report (Lin et al. 2026) and
inference-fleet-sim §4.7 for the first-order KV-transfer model; with ``PddSpec.network`` the
transfers are flows on a leaf-spine fabric sharing links max-min fairly (``fabric``, ``flows``).  Kernel:
``fleetplan.sim._kernels.pdd`` (entry ``kernel.run_pdd``; twin in ``tests/reference/pdd_sim.py``).

The engine (``simulate_pdd``, ``simulate_pdd_arrays``) is loaded on first use (PEP 562, as
``fleetplan.sim._kernels`` loads its kernels): the spec, the fabric and the results import without numba,
so the CLI's help for ``simulate pdd`` and the planner's screen stay light.
"""

from fleetplan.sim.pdd.fabric import FabricSpec, load_fabric_toml
from fleetplan.sim.pdd.flows import NetworkSummary
from fleetplan.sim.pdd.result import TTFT_DEFINITION, PddResult, PddSummary
from fleetplan.sim.pdd.spec import (
    AssignPolicy,
    Binding,
    DecodeModel,
    KvTransferSpec,
    PddSpec,
    PsThroughputCurve,
    SibylAblation,
    SibylParams,
    SibylPressure,
)

__all__ = [
    "AssignPolicy", "Binding", "DecodeModel", "FabricSpec", "KvTransferSpec", "NetworkSummary", "PddResult",
    "PddSpec", "PddSummary", "PsThroughputCurve", "SibylAblation", "SibylParams", "SibylPressure", "TTFT_DEFINITION",
    "load_fabric_toml", "simulate_pdd", "simulate_pdd_arrays",
]


#: Names served by ``engine``, loaded on first access (module docstring).
_ENGINE = ("simulate_pdd", "simulate_pdd_arrays")


def __getattr__(name: str):
    if name not in _ENGINE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from fleetplan.sim.pdd import engine

    value = getattr(engine, name)
    globals()[name] = value
    return value
