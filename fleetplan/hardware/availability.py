"""Hardware availability and spare sizing (core paper §3.5, eq. 6).

A node that fails ``r_f`` times per node-day and takes ``MTTR`` days to repair is in
service a fraction

    A = 1 / (1 + r_f * MTTR)                                       (paper eq. 6)

of the time.  A pool sized analytically to ``n`` GPUs therefore needs ``ceil(n / A)``
GPUs in production.  Availability is independent of the queueing utilisation cap:
both apply.

Presets (``AVAILABILITY_PRESETS``, the preset names) reproduce the
paper's constants:

* ``a100-soft``: RSC-1 failure rate 6.50 per 1000 node-days (Kokolis et al., 2024) with
  a soft-failure repair (driver reset) of ~4 h -> A = 0.9989.
* ``a100-hard``: the same rate with a hard-failure repair (GPU/NVLink swap) of ~48 h
  -> A = 0.9871 (the paper truncates 0.98717).
* ``h100-5pct``: the ~5 % H100 over-provisioning rule of Cui et al. (2025) -> A = 0.95,
  stated directly (not derived from a rate and a repair time).
* ``ideal``: no failures, A = 1 (no spares).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError, UnknownNameError

__all__ = [
    "node_availability",
    "with_spares",
    "AvailabilityPreset",
    "AVAILABILITY_PRESETS",
    "availability_preset",
    "RSC1_FAILURES_PER_NODE_DAY",
]

HOURS_PER_DAY = 24.0
#: Kokolis et al. (2024), RSC-1 (A100 cluster): 6.50 failures per 1000 node-days.
RSC1_FAILURES_PER_NODE_DAY = 6.50 / 1000.0
#: Relative tolerance under which n / A is treated as an exact integer in ``with_spares``.
SPARES_REL_TOL = 1e-9


def node_availability(failures_per_day: float, mttr_days: float) -> float:
    """Steady-state fraction of nodes in service, eq. (6): ``1 / (1 + r_f * MTTR)``.

    Parameters
    ----------
    failures_per_day : float
        ``r_f``, failures per node-day, >= 0.
    mttr_days : float
        Mean time to repair in days, >= 0.

    Returns
    -------
    float
        Availability in (0, 1].
    """
    for name, value in (("failures_per_day", failures_per_day), ("mttr_days", mttr_days)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value < 0:
            raise ConfigError(f"{name}={value!r} must be a finite number >= 0")
    return 1.0 / (1.0 + failures_per_day * mttr_days)


def with_spares(n: int, availability: float) -> int:
    """GPUs to deploy so that ``n`` are in service on average: ``ceil(n / A)``.

    A quotient within ``SPARES_REL_TOL`` of an integer counts as that integer, so
    floating-point noise (``21 / 0.7 = 30.000000000000004``) never adds a GPU.

    Parameters
    ----------
    n : int
        GPUs the pool needs in service, >= 0.
    availability : float
        A in (0, 1].

    Returns
    -------
    int
        GPUs to deploy, >= n.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ConfigError(f"n={n!r} must be a non-negative integer count of GPUs")
    n = int(n)
    if isinstance(availability, bool) or not isinstance(availability, (int, float)) \
            or not math.isfinite(availability) or not 0.0 < availability <= 1.0:
        raise ConfigError(f"availability={availability!r} must be in (0, 1]; e.g. 0.95 for 5% spares")
    quotient = n / availability
    nearest = round(quotient)
    if math.isclose(quotient, nearest, rel_tol=SPARES_REL_TOL, abs_tol=SPARES_REL_TOL):
        return int(nearest)
    return math.ceil(quotient)


@dataclass(frozen=True)
class AvailabilityPreset:
    """A named availability: either from a failure rate and a repair time (eq. 6) or
    stated directly by its source.  Exactly one of the two forms is given."""

    name: str
    description: str
    source: str
    failures_per_day: float | None = None
    mttr_days: float | None = None
    stated_availability: float | None = None

    def __post_init__(self) -> None:
        derived = self.failures_per_day is not None and self.mttr_days is not None
        partial = (self.failures_per_day is None) != (self.mttr_days is None)
        stated = self.stated_availability is not None
        if partial or derived == stated:
            raise ConfigError(
                f"availability preset {self.name!r} must give either failures_per_day and mttr_days "
                f"or stated_availability, not both or neither"
            )
        if stated and not 0.0 < self.stated_availability <= 1.0:
            raise ConfigError(f"preset {self.name!r}: stated_availability must be in (0, 1]")
        self.availability  # noqa: B018 -- validates the rate and repair time

    @property
    def availability(self) -> float:
        """A in (0, 1]."""
        if self.stated_availability is not None:
            return self.stated_availability
        return node_availability(self.failures_per_day, self.mttr_days)


AVAILABILITY_PRESETS: dict[str, AvailabilityPreset] = {
    p.name: p
    for p in (
        AvailabilityPreset(
            name="a100-soft",
            description="A100 soft failure (driver reset), ~4 h MTTR",
            source="Kokolis et al. 2024 (RSC-1: 6.50 failures / 1000 node-days); core paper §3.5 "
            "A100_AVAIL_RSC1_FAST = 0.9989",
            failures_per_day=RSC1_FAILURES_PER_NODE_DAY,
            mttr_days=4.0 / HOURS_PER_DAY,
        ),
        AvailabilityPreset(
            name="a100-hard",
            description="A100 hard failure (GPU/NVLink swap), ~48 h MTTR",
            source="Kokolis et al. 2024 (RSC-1: 6.50 failures / 1000 node-days); core paper §3.5 "
            "A100_AVAIL_RSC1_SLOW = 0.9871",
            failures_per_day=RSC1_FAILURES_PER_NODE_DAY,
            mttr_days=48.0 / HOURS_PER_DAY,
        ),
        AvailabilityPreset(
            name="h100-5pct",
            description="H100 ~5% over-provisioning rule",
            source="Cui et al. 2025 (Delta, 11.7M GPU-hours); core paper §3.5 H100_AVAIL_5PCT = 0.95",
            stated_availability=0.95,
        ),
        AvailabilityPreset(
            name="ideal",
            description="no hardware failures (no spares)",
            source="definition: A = 1",
            stated_availability=1.0,
        ),
    )
}


def availability_preset(name: str) -> AvailabilityPreset:
    """The preset called ``name`` (case-insensitive); unknown -> ``UnknownNameError``."""
    key = str(name).strip().lower()
    if key not in AVAILABILITY_PRESETS:
        raise UnknownNameError("availability preset", name, sorted(AVAILABILITY_PRESETS))
    return AVAILABILITY_PRESETS[key]
