"""Peak and valley: a rate profile in place of a single λ.

A profile is a rate (req/s) per interval, piecewise constant, taken as repeating (a daily curve):
the 24 hourly rates ``workloads fit`` saves (``Workload.arrival_stats``), or a CSV of
``timestamp,rate`` rows (ISO date-times or seconds; each rate holds until the next row, the last
for the median step).

* Sizing: the fleet is sized for the SLO at the busiest window's mean rate, the largest mean of
  the profile over any window of ``window_s`` (circular), default one hour.
* Utilisation over the day: λ(t) / capacity of the sized fleet (``horizon.schedule.capacity_per_s``,
  the rate at which its busiest pool saturates).
* Rented peak: per GPU type g, n_g(t) GPUs are needed at λ(t) (the sized fleet's topology,
  thresholds and GPU types re-sized analytically at λ(t)); owning b_g of them costs the owned rate
  (amortised capex per GPU-hour where the type can be bought, else the reserved rate) all day and
  renting the rest on demand costs max(0, n_g(t) - b_g) x on-demand per hour.  The best base b_g
  (searched over 0 .. max(n_g, the sized fleet's count), so never dearer than owning the sized
  fleet all day) against owning the sized fleet all day.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from fleetplan.errors import ConfigError, DataFormatError
from fleetplan.hardware.procurement import GpuPrices
from fleetplan.plan.horizon.forecast import DAYS_PER_MONTH, H_PER_DAY
from fleetplan.plan.horizon.schedule import capacity_per_s
from fleetplan.plan.optimize import OptimizeRequest, analytical_phase
from fleetplan.plan.sweep import Candidate

DEFAULT_WINDOW_S = 3600.0
S_PER_HOUR = 3600.0


@dataclass(frozen=True)
class RateProfile:
    """Rates (req/s) on consecutive intervals of ``step_s`` seconds each, repeating."""

    rates_per_s: tuple[float, ...]
    step_s: float
    source: str

    def __post_init__(self) -> None:
        if not self.rates_per_s:
            raise ConfigError(f"rate profile {self.source} is empty: give at least one rate")
        if not (math.isfinite(self.step_s) and self.step_s > 0):
            raise ConfigError(f"rate profile {self.source}: step {self.step_s!r} s must be > 0")
        for r in self.rates_per_s:
            if not (math.isfinite(r) and r >= 0):
                raise ConfigError(f"rate profile {self.source}: rate {r!r} req/s must be >= 0")
        if max(self.rates_per_s) <= 0:
            raise ConfigError(f"rate profile {self.source} has no traffic: give a rate > 0 somewhere")

    def busiest_window_rate(self, window_s: float = DEFAULT_WINDOW_S) -> tuple[float, int]:
        """(largest mean rate over a window of ``window_s``, index of the window's first interval)."""
        if not (math.isfinite(window_s) and window_s > 0):
            raise ConfigError(f"peak window {window_s!r} s is invalid: give a window > 0 s, e.g. 3600")
        r = np.asarray(self.rates_per_s)
        n = r.size
        k_full, frac = divmod(window_s / self.step_s, 1.0)
        k_full = int(k_full)
        if k_full >= n:
            return float(r.mean()), 0
        tiled = np.concatenate([r, r, r])
        best, where = -1.0, 0
        for i in range(n):
            mass = tiled[i:i + k_full].sum() * self.step_s + frac * self.step_s * tiled[i + k_full]
            if mass > best:
                best, where = mass, i
        return float(best / window_s), where


def hourly_profile(rates_per_s: tuple[float, ...], source: str) -> RateProfile:
    """The 24 hourly rates ``workloads fit`` saves (uncovered hours, nan, are refused)."""
    if any(math.isnan(r) for r in rates_per_s):
        raise ConfigError(f"{source}: the trace does not cover every hour of a day, so it has no daily profile; "
                          "give a rate profile CSV")
    return RateProfile(tuple(rates_per_s), S_PER_HOUR, source)


def _timestamp_s(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return dt.datetime.fromisoformat(text).timestamp()


def read_rate_profile_csv(path: str | os.PathLike) -> RateProfile:
    """``timestamp,rate`` rows (see module docstring); timestamps strictly increasing and evenly spaced."""
    p = str(path)
    try:
        with open(p, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise DataFormatError(p, None, f"cannot read the rate profile ({exc})", "give a CSV file") from exc
    if not rows or {"timestamp", "rate"} - {k.strip().lower() for k in rows[0] if k}:
        raise DataFormatError(p, "header", "needs timestamp and rate columns", "write timestamp,rate then rows")
    ts, rates = [], []
    for i, raw in enumerate(rows, start=2):
        r = {k.strip().lower(): (v or "").strip() for k, v in raw.items() if k}
        try:
            t, rate = _timestamp_s(r["timestamp"]), float(r["rate"])
        except ValueError as exc:
            raise DataFormatError(p, f"row {i}", f"{exc}", "give an ISO date-time or seconds and a rate in req/s"
                                  ) from exc
        if ts and t <= ts[-1]:
            raise DataFormatError(p, f"row {i}, column timestamp", "timestamps must increase", "sort the rows")
        if not (math.isfinite(rate) and rate >= 0):
            raise DataFormatError(p, f"row {i}, column rate", f"rate {rate!r} must be >= 0", "give req/s >= 0")
        ts.append(t)
        rates.append(rate)
    if len(ts) < 2:
        raise DataFormatError(p, None, "needs at least two rows", "give one row per interval")
    steps = np.diff(ts)
    if not np.allclose(steps, steps[0], rtol=1e-6):
        raise DataFormatError(p, "column timestamp", "rows are not evenly spaced", "resample to a fixed step")
    return RateProfile(tuple(rates), float(steps[0]), p)


@dataclass(frozen=True)
class PeakValley:
    """The sized fleet's day, and owning a base with the peak rented on demand (USD per day)."""

    profile: RateProfile
    window_s: float
    peak_rate_per_s: float
    peak_starts_at_s: float
    utilisation: tuple[float, ...]  # per profile interval
    all_owned_usd_per_day: float
    base_gpus: tuple[tuple[str, int], ...]
    peak_gpus: tuple[tuple[str, int], ...]
    base_plus_on_demand_usd_per_day: float


def _owned_usd_per_h(p: GpuPrices) -> float:
    if p.buyable:
        return p.capex_usd / (p.amortisation_months * DAYS_PER_MONTH * H_PER_DAY)
    return p.reserved_usd_per_h


def peak_valley(request: OptimizeRequest, fleet: Candidate, profile: RateProfile, window_s: float,
                prices: Mapping[str, GpuPrices]) -> PeakValley:
    """Utilisation over the profile and the rented-peak alternative (see module docstring)."""
    peak, where = profile.busiest_window_rate(window_s)
    cap = capacity_per_s(fleet)
    util = tuple(r / cap for r in profile.rates_per_s)
    types = sorted({p.gpu for p in fleet.pools if p.total_gpus})
    same = replace(request, gpus=tuple(g for g in request.gpus if g.name in types), topologies=(fleet.topology,),
                   thresholds_tokens=fleet.thresholds_tokens or request.thresholds_tokens, routers=(fleet.router,))
    need = np.zeros((len(profile.rates_per_s), len(types)))
    cache: dict[float, np.ndarray] = {}
    for i, r in enumerate(profile.rates_per_s):
        if r <= 0:
            continue
        key = round(r, 6)
        if key not in cache:
            ranked = [c for c in analytical_phase(replace(same, rate_per_s=r)) if c.feasible]
            if not ranked:
                raise ConfigError(f"no fleet of {', '.join(types)} meets the SLO at {r:g} req/s in the profile")
            best = ranked[0]
            cache[key] = np.array([sum(p.total_gpus for p in best.pools if p.gpu == g) for g in types], float)
        need[i] = cache[key]
    step_h = profile.step_s / S_PER_HOUR
    day_scale = H_PER_DAY / (step_h * len(profile.rates_per_s))
    peak_n = [sum(p.total_gpus for p in fleet.pools if p.gpu == g) for g in types]
    all_owned = sum(n * _owned_usd_per_h(prices[g]) * H_PER_DAY for g, n in zip(types, peak_n, strict=True))
    base, total = [], 0.0
    for j, g in enumerate(types):
        col = need[:, j]
        own, od = _owned_usd_per_h(prices[g]), prices[g].on_demand_usd_per_h

        def cost(b: int, col=col, own=own, od=od) -> float:
            return (b * own * step_h * col.size + np.maximum(col - b, 0).sum() * od * step_h) * day_scale

        b = min(range(max(int(col.max()), peak_n[j]) + 1), key=cost)
        base.append((g, b))
        total += cost(b)
    return PeakValley(profile, window_s, peak, where * profile.step_s, util, all_owned, tuple(base),
                      tuple(zip(types, peak_n, strict=True)), total)
