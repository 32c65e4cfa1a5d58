"""Buy, reserved and on-demand prices of a GPU (USD), each with its source.

The bundled file ``gpu_profiles/procurement/prices.toml`` (layout there) gives per GPU
``capex_usd`` (absent: the GPU can only be rented) and optionally ``reserved_usd_per_h``;
``[defaults]`` gives the amortisation period, the resale value as a fraction of capex, the term of a
reserved rental (``reserved_term_months``: reserved GPUs are paid for the whole term, used or not)
and, for GPUs without their own reserved price, reserved = fraction x on-demand.  The on-demand price is
the GPU profile's ``price_usd_per_h`` (with any price override).
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from fleetplan.errors import ConfigError, DataFormatError
from fleetplan.hardware.catalog import GpuCatalog
from fleetplan.paths import gpu_profiles_dir


@dataclass(frozen=True)
class GpuPrices:
    """One GPU type's prices (``capex_usd`` None: rent only) and their sources."""

    gpu: str
    on_demand_usd_per_h: float
    reserved_usd_per_h: float
    capex_usd: float | None
    amortisation_months: int
    resale_fraction: float
    sources: tuple[tuple[str, str], ...]
    reserved_term_months: int = 12

    def __post_init__(self) -> None:
        for name in ("on_demand_usd_per_h", "reserved_usd_per_h"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ConfigError(f"{self.gpu}: {name} = {v!r} must be a price > 0 USD per GPU-hour")
        if self.capex_usd is not None and not (math.isfinite(self.capex_usd) and self.capex_usd > 0):
            raise ConfigError(f"{self.gpu}: capex_usd = {self.capex_usd!r} must be > 0 USD (or absent: rent only)")
        if int(self.amortisation_months) != self.amortisation_months or self.amortisation_months < 1:
            raise ConfigError(f"amortisation_months = {self.amortisation_months!r} must be a whole number >= 1")
        if int(self.reserved_term_months) != self.reserved_term_months or self.reserved_term_months < 1:
            raise ConfigError(f"reserved_term_months = {self.reserved_term_months!r} must be a whole number >= 1")
        if not 0 <= self.resale_fraction < 1:
            raise ConfigError(f"resale_fraction = {self.resale_fraction!r} must lie in [0, 1)")

    @property
    def buyable(self) -> bool:
        return self.capex_usd is not None

    @property
    def amortised_usd_per_month(self) -> float:
        """Straight-line ownership charge per GPU-month (0 for rent-only GPUs)."""
        return 0.0 if self.capex_usd is None else self.capex_usd / self.amortisation_months

    @property
    def resale_usd(self) -> float:
        return 0.0 if self.capex_usd is None else self.capex_usd * self.resale_fraction


def default_prices_path() -> Path:
    return gpu_profiles_dir() / "procurement" / "prices.toml"


def load_gpu_prices(catalog: GpuCatalog, gpus: tuple[str, ...],
                    path: str | os.PathLike | None = None) -> dict[str, GpuPrices]:
    """Prices of ``gpus`` (catalog names or aliases) from ``path`` (default: the bundled file)."""
    p = Path(path) if path is not None else default_prices_path()
    try:
        with open(p, "rb") as fh:
            doc = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DataFormatError(str(p), None, f"cannot read procurement prices ({exc})",
                              "give a TOML file laid out like gpu_profiles/procurement/prices.toml") from exc
    try:
        defaults = doc["defaults"]
        table = doc.get("gpu", {})
        names = {catalog.get(k).name: v for k, v in table.items()}
        out = {}
        for name in gpus:
            g = catalog.get(name)
            entry = names.get(g.name, {})
            on_demand = g.require_price_usd_per_h()
            reserved = entry.get("reserved_usd_per_h")
            sources = {**{f"defaults.{k}": v for k, v in defaults.get("sources", {}).items()},
                       **entry.get("sources", {}), "on_demand_usd_per_h": g.sources.get("price_usd_per_h", "")}
            out[g.name] = GpuPrices(
                gpu=g.name,
                on_demand_usd_per_h=on_demand,
                reserved_usd_per_h=float(reserved) if reserved is not None
                else on_demand * float(defaults["reserved_fraction_of_on_demand"]),
                capex_usd=None if entry.get("capex_usd") is None else float(entry["capex_usd"]),
                amortisation_months=int(defaults["amortisation_months"]),
                resale_fraction=float(defaults["resale_fraction"]),
                sources=tuple(sorted(sources.items())),
                reserved_term_months=int(defaults["reserved_term_months"]),
            )
        return out
    except (KeyError, TypeError, ValueError) as exc:
        raise DataFormatError(str(p), None, f"missing or malformed price field {exc}",
                              "lay it out like gpu_profiles/procurement/prices.toml") from exc
