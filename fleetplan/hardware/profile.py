"""One GPU's specification, price, reliability, power curve and calibrated constants.

``GpuProfile`` is a frozen record built from one ``gpu_profiles/*.toml`` file (see
``fleetplan.hardware.catalog`` for the format).  Every spec value has a citation in
``sources`` (keyed by field name; ``"serving"`` and ``"power"`` cite those tables).
A value a vendor does not have -- FP8 on Ampere, NVLink on a PCIe-only card, a
published failure rate -- is ``None``, never a zero standing in for a number.

Units: TFLOPS are dense (no 2:4 sparsity), memory in GiB and TB/s, NVLink/xGMI in GB/s
per GPU (bidirectional aggregate), scale-out network in Gb/s per GPU, power in W,
price in USD per GPU-hour, failures per node-day, repair time in days.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from fleetplan.errors import ConfigError
from fleetplan.hardware.availability import node_availability
from fleetplan.hardware.power import PowerCurve
from fleetplan.hardware.serving import ServingConstants

__all__ = ["GpuProfile", "SPEC_FIELDS", "REQUIRED_SPEC_FIELDS", "OPTIONAL_SPEC_FIELDS"]

#: Spec fields in display order.
SPEC_FIELDS = (
    "bf16_tflops", "fp8_tflops", "hbm_gib", "hbm_tb_per_s", "nvlink_gb_per_s", "network_gbps",
    "gpus_per_node", "tdp_w", "idle_w", "price_usd_per_h", "failure_rate_per_day", "mttr_days",
)
#: Spec fields that are a number, or ``None`` when the hardware or the literature has none.
OPTIONAL_SPEC_FIELDS = (
    "fp8_tflops", "nvlink_gb_per_s", "price_usd_per_h", "failure_rate_per_day", "mttr_days",
)
#: Spec fields that must be a positive number.
REQUIRED_SPEC_FIELDS = tuple(f for f in SPEC_FIELDS if f not in OPTIONAL_SPEC_FIELDS)
#: Optional fields for which 0 is a meaningful value (a GPU that never fails).
_ZERO_ALLOWED = ("failure_rate_per_day", "mttr_days")


def _is_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


@dataclass(frozen=True)
class GpuProfile:
    """A GPU type: specs with sources, default price, reliability, power, serving constants.

    Attributes
    ----------
    name : str
        Canonical name, e.g. ``"H100-SXM"``.
    aliases : tuple of str
        Other names (lower case) that resolve to this GPU and no other.
    description : str
        Vendor product name and form factor.
    bf16_tflops, fp8_tflops : float, float | None
        Dense tensor-core TFLOPS; ``fp8_tflops`` is None without FP8 tensor cores.
    hbm_gib, hbm_tb_per_s : float
        Device memory capacity (GiB) and peak bandwidth (TB/s).
    nvlink_gb_per_s : float | None
        Scale-up link bandwidth per GPU (GB/s, bidirectional); None for PCIe-only cards.
    network_gbps : float
        Scale-out NIC bandwidth per GPU in the reference server (Gb/s).
    gpus_per_node : int
        GPUs one scale-up domain (server) holds: a parallel group larger than this crosses the
        scale-out network (``fleetplan.perf.comm``).  8 for HGX/DGX and MI300X platforms.
    tdp_w, idle_w : float
        Board power limit and idle draw (W).
    price_usd_per_h : float | None
        Default on-demand price per GPU-hour; None when no public price was found.
    failure_rate_per_day, mttr_days : float | None
        Failures per node-day and mean repair time in days, where published.
    sources : Mapping[str, str]
        Citation per field (and ``"serving"``, ``"power"`` for those tables).
    serving : ServingConstants | None
        The core paper's calibrated Llama-3-70B constants, where calibrated.
    power : PowerCurve | None
        Logistic power-vs-batch curve, where a fit is published.
    """

    name: str
    aliases: tuple[str, ...]
    description: str
    bf16_tflops: float
    fp8_tflops: float | None
    hbm_gib: float
    hbm_tb_per_s: float
    nvlink_gb_per_s: float | None
    network_gbps: float
    gpus_per_node: int
    tdp_w: float
    idle_w: float
    price_usd_per_h: float | None
    failure_rate_per_day: float | None
    mttr_days: float | None
    sources: Mapping[str, str] = field(hash=False)
    serving: ServingConstants | None = None
    power: PowerCurve | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip() or self.name != self.name.strip():
            raise ConfigError(f"GPU name {self.name!r} must be a non-empty name without surrounding spaces")
        self._check_aliases()
        if not isinstance(self.description, str) or not self.description.strip():
            raise ConfigError(f"GPU {self.name!r}: description must be a non-empty string")
        for name in REQUIRED_SPEC_FIELDS:
            value = getattr(self, name)
            if not _is_number(value) or value <= 0:
                raise ConfigError(f"GPU {self.name!r}: {name}={value!r} must be a finite number > 0")
        for name in OPTIONAL_SPEC_FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            rule = ">= 0" if name in _ZERO_ALLOWED else "> 0"
            if not _is_number(value) or not (value >= 0 if name in _ZERO_ALLOWED else value > 0):
                raise ConfigError(
                    f"GPU {self.name!r}: {name}={value!r} must be a finite number {rule}, or None when absent"
                )
        if float(self.gpus_per_node) != int(self.gpus_per_node):
            raise ConfigError(f"GPU {self.name!r}: gpus_per_node={self.gpus_per_node!r} must be a whole number of "
                              f"GPUs (8 for an HGX/DGX server)")
        object.__setattr__(self, "gpus_per_node", int(self.gpus_per_node))
        if self.idle_w >= self.tdp_w:
            raise ConfigError(f"GPU {self.name!r}: idle_w={self.idle_w} must be below tdp_w={self.tdp_w}")
        if self.serving is not None and not isinstance(self.serving, ServingConstants):
            raise ConfigError(f"GPU {self.name!r}: serving must be ServingConstants or None")
        if self.power is not None and not isinstance(self.power, PowerCurve):
            raise ConfigError(f"GPU {self.name!r}: power must be PowerCurve or None")
        self._check_sources()

    def _check_aliases(self) -> None:
        if not isinstance(self.aliases, tuple) or not all(isinstance(a, str) for a in self.aliases):
            raise ConfigError(f"GPU {self.name!r}: aliases must be a tuple of strings")
        seen = {self.name.lower()}
        for alias in self.aliases:
            if not alias or alias != alias.strip().lower():
                raise ConfigError(f"GPU {self.name!r}: alias {alias!r} must be non-empty lower case")
            if alias in seen:
                raise ConfigError(f"GPU {self.name!r}: alias {alias!r} repeats its name or another alias")
            seen.add(alias)

    def _check_sources(self) -> None:
        if not isinstance(self.sources, Mapping):
            raise ConfigError(f"GPU {self.name!r}: sources must map field names to citations")
        required = list(SPEC_FIELDS)
        required += ["serving"] if self.serving is not None else []
        required += ["power"] if self.power is not None else []
        missing = [k for k in required if not str(self.sources.get(k, "")).strip()]
        if missing:
            raise ConfigError(
                f"GPU {self.name!r}: no source for {', '.join(missing)}; every value needs a citation "
                f"(or, for an estimate, the basis of the estimate)"
            )
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    @property
    def availability(self) -> float | None:
        """Eq. (6) from ``failure_rate_per_day`` and ``mttr_days``; None unless both are published."""
        if self.failure_rate_per_day is None or self.mttr_days is None:
            return None
        return node_availability(self.failure_rate_per_day, self.mttr_days)

    @property
    def calibrated(self) -> bool:
        """True when the core paper's serving constants exist for this GPU."""
        return self.serving is not None

    def require_serving(self) -> ServingConstants:
        """The calibrated serving constants, or ``ConfigError`` naming the fix."""
        if self.serving is None:
            raise ConfigError(
                f"GPU {self.name!r} has no calibrated serving constants (W, H, KV blocks); "
                f"use A10G, A100-80GB or H100-SXM, or add a [serving] table in a `extra_toml` TOML"
            )
        return self.serving

    def require_price_usd_per_h(self) -> float:
        """The price per GPU-hour, or ``ConfigError`` when the catalog has none."""
        if self.price_usd_per_h is None:
            raise ConfigError(
                f"GPU {self.name!r} has no default price (no public on-demand listing); "
                f"give one with `price_overrides` {self.name}=USD_PER_HOUR or price_usd_per_h in a `extra_toml` TOML"
            )
        return self.price_usd_per_h

    def with_price(self, price_usd_per_h: float, source: str) -> GpuProfile:
        """A copy with another price per GPU-hour, citing ``source``."""
        sources = dict(self.sources)
        sources["price_usd_per_h"] = source
        return replace(self, price_usd_per_h=price_usd_per_h, sources=sources)
