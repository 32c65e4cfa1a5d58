"""The deployment result types (``plan.deployment`` builds them; ``plan.optimize.OptimizeResult``
carries them), in a module of their own so the result and its builder import no loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Deployment", "FleetDelta", "PoolDeployment"]


@dataclass(frozen=True)
class PoolDeployment:
    """One pool as deployed: its fleet-file name, 1-based place in the candidate, catalog GPU, GPUs per
    instance, vLLM parallelism keywords (empty without a served model), token band and traffic."""

    name: str
    pool_index: int
    gpu: str
    gpus_per_instance: int
    parallelism: tuple[tuple[str, int | bool], ...]
    min_tokens: int
    max_tokens: int
    traffic_share: float
    lam_per_s: float
    spares: int = 0  # instances kept for node availability (verification's, else the sizing's)
    # which source timed the pool's steps in the simulator (``perf.measured.timing_source``)
    timing_source: str = ""


@dataclass(frozen=True)
class Deployment:
    """A candidate's fleet as the simulator ran it (module docstring)."""

    rank: int
    counts: str  # "verified" or "analytic"
    fleet: dict[str, Any]  # sim.fleet_toml document
    pools: tuple[PoolDeployment, ...]
    model: str | None
    weight_dtype: str | None
    kv_cache_dtype: str | None
    calibrated_gpus: tuple[str, ...]  # pools timed by a calibrated profile (--perf-profile) run on these
    step_time_margin: float
    max_model_len_tokens: int | None
    # A prefill-decode fleet: the KV transfer and decode assignment the PDD simulator ran (``fleet`` then holds
    # the two role pools, prefill first, in the fleet-file pool format; no fleet file reads them as one fleet)
    disaggregated: dict[str, Any] | None = None


@dataclass(frozen=True)
class FleetDelta:
    """What it takes to go from an owned fleet to a deployment, per catalog GPU type (GPUs, spares
    included): ``buy`` = needed - owned where positive, ``retire`` = owned - needed where positive."""

    owned: tuple[tuple[str, int], ...]
    needed: tuple[tuple[str, int], ...]
    buy: tuple[tuple[str, int], ...]
    retire: tuple[tuple[str, int], ...]
