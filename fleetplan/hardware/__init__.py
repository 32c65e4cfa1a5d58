"""GPU hardware: specs with sources, prices, power curves, availability, calibrated constants.

The catalog lives in ``gpu_profiles/*.toml`` (one file per GPU); ``load_catalog`` reads it.
"""

from fleetplan.hardware.availability import (
    AVAILABILITY_PRESETS,
    AvailabilityPreset,
    availability_preset,
    node_availability,
    with_spares,
)
from fleetplan.hardware.catalog import GpuCatalog, load_catalog
from fleetplan.hardware.power import PowerCurve, batch_for_power, power_w
from fleetplan.hardware.profile import GpuProfile
from fleetplan.hardware.serving import ServingConstants

__all__ = [
    "AVAILABILITY_PRESETS",
    "AvailabilityPreset",
    "GpuCatalog",
    "GpuProfile",
    "PowerCurve",
    "ServingConstants",
    "availability_preset",
    "batch_for_power",
    "load_catalog",
    "node_availability",
    "power_w",
    "with_spares",
]
