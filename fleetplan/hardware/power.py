"""GPU power versus batch size: the logistic curve of GPU-to-Grid (Hassan et al., 2025).

The core paper (inference-fleet-sim, §4.8) models the board power of a GPU serving
``b`` concurrent sequences (vLLM ``max_num_seqs``) as

    P(b) = P_range / (1 + exp(-k * (log2(b) - x0))) + P_idle,   P_range = P_nom - P_idle

and fits ``k = 1.0``, ``x0 = 4.2`` to ML.ENERGY Benchmark v3.0 data for H100-SXM5 running
vLLM (Chung et al., 2025), which puts ``P_idle`` near 300 W (batch ~ 1) and ``P_nom``
near 600 W (batch 128).  The fit gives P(1) ~ 304 W and P(128) ~ 583 W.

Here ``floor_w`` is the paper's ``P_idle`` -- the curve's asymptote as the batch shrinks
with the model loaded, not the board's idle draw (``GpuProfile.idle_w``) -- and
``nominal_w`` is ``P_nom``.  The inverse, used to turn a power cap into a batch cap, is

    b(P) = 2 ** (x0 - ln(P_range / (P - P_idle) - 1) / k),   P_idle < P < P_nom.

Only GPUs with a published fit carry a curve; asking for the power of any other GPU
raises ``ConfigError`` instead of inventing one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from fleetplan.errors import ConfigError

__all__ = ["PowerCurve", "power_w", "batch_for_power"]


@dataclass(frozen=True)
class PowerCurve:
    """Logistic power curve ``P(b)`` of one GPU (watts versus concurrent sequences).

    Attributes
    ----------
    k : float
        Steepness per unit of ``log2(batch)``, > 0.
    x0_log2_batch : float
        Midpoint of the rise, in ``log2(batch)`` units (batch ``2**x0`` sits halfway).
    floor_w : float
        ``P_idle`` of the paper: watts as the batch tends to zero with the model loaded.
    nominal_w : float
        ``P_nom``: watts the curve saturates at for large batches, > ``floor_w``.
    """

    k: float
    x0_log2_batch: float
    floor_w: float
    nominal_w: float

    def __post_init__(self) -> None:
        for name in ("k", "x0_log2_batch", "floor_w", "nominal_w"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"power {name}={value!r} must be a finite number; fix the [power] table")
        if self.k <= 0:
            raise ConfigError(f"power k={self.k} must be > 0 (power rises with batch size)")
        if self.floor_w <= 0:
            raise ConfigError(f"power floor_w={self.floor_w} must be > 0 watts")
        if self.nominal_w <= self.floor_w:
            raise ConfigError(
                f"power nominal_w={self.nominal_w} must exceed floor_w={self.floor_w}; "
                f"give the saturated and the batch-1 power in watts"
            )

    @property
    def range_w(self) -> float:
        """``P_range = P_nom - P_idle`` in watts."""
        return self.nominal_w - self.floor_w

    def power_w(self, batch: float | np.ndarray) -> float | np.ndarray:
        """Watts drawn with ``batch`` concurrent sequences (> 0); vectorised."""
        b = np.asarray(batch, dtype=np.float64)
        if b.size and (not np.all(np.isfinite(b)) or np.any(b <= 0)):
            raise ConfigError("batch must be finite and > 0 concurrent sequences")
        out = self.range_w / (1.0 + np.exp(-self.k * (np.log2(b) - self.x0_log2_batch))) + self.floor_w
        return float(out) if out.ndim == 0 else out

    def batch_for_power(self, watts: float | np.ndarray) -> float | np.ndarray:
        """Batch size (real-valued) at which the curve draws ``watts``; vectorised.

        ``watts`` must lie strictly between ``floor_w`` and ``nominal_w``; callers
        floor the result to get an integer batch cap.
        """
        w = np.asarray(watts, dtype=np.float64)
        if w.size and (not np.all(np.isfinite(w)) or np.any(w <= self.floor_w)
                       or np.any(w >= self.nominal_w)):
            raise ConfigError(
                f"watts={watts!r} is outside the curve's open range "
                f"({self.floor_w:g}, {self.nominal_w:g}) W; "
                f"give a power strictly between floor_w and nominal_w"
            )
        log2_b = self.x0_log2_batch - np.log(self.range_w / (w - self.floor_w) - 1.0) / self.k
        out = np.exp2(log2_b)
        return float(out) if out.ndim == 0 else out


class HasPowerCurve(Protocol):
    """What the functions below read of a GPU (``hardware.profile.GpuProfile`` is one; that module
    imports this one, so the functions name the fields they need rather than the class)."""

    name: str
    power: PowerCurve | None


def _curve(profile: HasPowerCurve) -> PowerCurve:
    if profile.power is None:
        raise ConfigError(
            f"GPU {profile.name!r} has no published power curve; add a [power] table "
            f"(k, x0_log2_batch, floor_w, nominal_w) for it in a `extra_toml` TOML"
        )
    return profile.power


def power_w(profile: HasPowerCurve, batch: float | np.ndarray) -> float | np.ndarray:
    """Board power in watts of ``profile`` serving ``batch`` concurrent sequences.

    Parameters
    ----------
    profile : GpuProfile (or any HasPowerCurve)
        A GPU with a fitted ``power`` curve (else ``ConfigError``).
    batch : float or array
        Concurrent sequences, > 0.

    Returns
    -------
    float or numpy.ndarray
        Watts per GPU, same shape as ``batch``.
    """
    return _curve(profile).power_w(batch)


def batch_for_power(profile: HasPowerCurve, watts: float | np.ndarray) -> float | np.ndarray:
    """Inverse of :func:`power_w`: the (real-valued) batch at which ``profile`` draws ``watts``.

    Parameters
    ----------
    profile : GpuProfile (or any HasPowerCurve)
        A GPU with a fitted ``power`` curve (else ``ConfigError``).
    watts : float or array
        Power per GPU in watts, strictly between the curve's floor and nominal power.

    Returns
    -------
    float or numpy.ndarray
        Concurrent sequences; floor it for a batch cap.
    """
    return _curve(profile).batch_for_power(watts)
