"""Discrete-event simulator of LLM serving fleets (phase 2 of the planner; authoritative).

Pipeline: ``spec`` (frozen, validated fleet description; ``builders.build_pool`` and
``fleet_toml.load_fleet_toml`` make one) -> ``compile`` (flat arrays) -> ``_kernels``
(numba) -> ``engine.simulate`` / ``replications.replicate`` -> ``result.SimResult``.
``validate.validate_queueing`` checks the request-level kernel against exact M/M/c.

Public names are imported lazily, so ``import fleetplan.sim.spec`` does not load numba.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ArrivalProcess": "spec",
    "FleetSpec": "spec",
    "InstanceRouter": "spec",
    "Level": "spec",
    "PoolRouter": "spec",
    "PoolSpec": "spec",
    "SchedulerLimits": "spec",
    "build_pool": "builders",
    "load_fleet_toml": "fleet_toml",
    "read_fleet_toml": "fleet_toml",
    "build_fleet": "fleet_toml",
    "CompiledRun": "compile",
    "compile_run": "compile",
    "ReplicatedResult": "replications",
    "replicate": "replications",
    "simulate": "engine",
    "FailureSpec": "failures",
    "GroupSummary": "result",
    "LatencyStats": "result",
    "SimResult": "result",
    "SimSummary": "result",
    "validate_queueing": "validate",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fleetplan.sim' has no attribute {name!r}")
    return getattr(importlib.import_module(f"fleetplan.sim.{module}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
