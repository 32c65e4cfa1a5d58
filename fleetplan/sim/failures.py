"""Instance failures for the iteration-level simulator: the spec and the pre-drawn schedule.

Model.  Every instance (one serving engine; one GPU as the fleet specs price it) alternates
between up and down as an alternating renewal process: up times are exponential with mean
MTBF, down (repair) times exponential with mean MTTR, or fixed at MTTR (``repair="fixed"``).
Its availability is

    A = MTBF / (MTBF + MTTR) = 1 / (1 + r_f * MTTR),   r_f = 1 / MTBF     (core paper eq. 6)

With ``start="stationary"`` (default) the run observes the fleet at a random time of a long
life: an instance starts down with probability 1 - A, with a residual repair time
exponential(MTTR) (exponential repairs) or uniform(0, MTTR) (fixed repairs; the equilibrium
residual of a fixed length), and otherwise its first failure comes after exponential(MTBF)
(memoryless).  ``start="up"`` starts every instance up.  Failures start in ``[0, window]``
(default: the run's horizon, or the last arrival when the run has none, so the drain after
the last arrival is failure-free); every started outage is repaired.  A zero-length outage
(MTTR = 0) is no outage: it draws no event, so MTTR = 0 equals failures off exactly.

MTBF and MTTR come from the GPU catalog (``failure_rate_per_day`` per node-day -> MTBF =
1 / r_f days; ``mttr_days``), applied per instance as the paper applies node availability per
GPU, or are given directly (``mtbf_s``/``mttr_s``; one value for every pool or one per pool).
Draws come from the named stream ``fleetplan.rng.stream(seed, "failures")``, instance by
instance in fleet order.  What a failure does inside the engine: ``_kernels/failures.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan import rng as fp_rng
from fleetplan.errors import ConfigError
from fleetplan.names import NameRegistry
from fleetplan.sim.spec import FleetSpec

__all__ = [
    "FailureSpec",
    "FailureStart",
    "FailureSummary",
    "RepairTimes",
    "draw_failure_schedule",
    "failure_spec_from_catalog",
    "summarise_failures",
]

SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86_400.0
MAX_FAILURE_EVENTS = 2_000_000  # guard against an MTBF far below the run length


class RepairTimes(NameRegistry):
    """Distribution of repair (down) times: ``exponential`` (mean MTTR) or ``fixed`` (= MTTR)."""

    EXPONENTIAL = "exponential"
    FIXED = "fixed"

    @classmethod
    def kind(cls) -> str:
        return "repair-time distribution"


class FailureStart(NameRegistry):
    """Instance states at t = 0: ``stationary`` (a random time of a long life) or ``up`` (all up)."""

    STATIONARY = "stationary"
    UP = "up"

    @classmethod
    def kind(cls) -> str:
        return "failure start"


def _per_pool(name: str, value: float | tuple[float, ...], n_pools: int, allow_zero: bool) -> np.ndarray:
    values = np.array(value if isinstance(value, tuple) else (value,) * n_pools, dtype=np.float64)
    if values.shape != (n_pools,):
        raise ConfigError(f"{name} has {values.size} values for {n_pools} pools; give one value or one per pool")
    low_ok = values >= 0 if allow_zero else values > 0
    if not np.all(low_ok) or np.any(np.isnan(values)) or (allow_zero and not np.all(np.isfinite(values))):
        rule = "finite and >= 0" if allow_zero else "> 0 (inf: never fails)"
        raise ConfigError(f"{name} = {value!r} must be {rule}; give seconds")
    return values


@dataclass(frozen=True)
class FailureSpec:
    """Failure injection settings (see the module docstring for the model).

    Parameters
    ----------
    mtbf_s : float or tuple of float
        Mean up time of an instance (s), > 0 (``inf``: never fails); one value or one per pool.
    mttr_s : float or tuple of float
        Mean repair time (s), >= 0; one value or one per pool.
    repair : RepairTimes
        ``exponential`` (default) or ``fixed`` repair times.
    start : FailureStart
        ``stationary`` (default) or ``up``.
    window_s : float, optional
        Failures start in ``[0, window_s]``; default the horizon, else the last arrival.
    """

    mtbf_s: float | tuple[float, ...]
    mttr_s: float | tuple[float, ...]
    repair: RepairTimes | str = RepairTimes.EXPONENTIAL
    start: FailureStart | str = FailureStart.STATIONARY
    window_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("mtbf_s", "mttr_s"):
            value = getattr(self, name)
            if isinstance(value, list | tuple):
                object.__setattr__(self, name, tuple(float(v) for v in value))
            elif isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"{name} = {value!r} must be a number of seconds or a tuple of them")
        n = len(self.mtbf_s) if isinstance(self.mtbf_s, tuple) else 1
        _per_pool("mtbf_s", self.mtbf_s, n, allow_zero=False)
        n = len(self.mttr_s) if isinstance(self.mttr_s, tuple) else 1
        _per_pool("mttr_s", self.mttr_s, n, allow_zero=True)
        object.__setattr__(self, "repair", RepairTimes.parse(self.repair))
        object.__setattr__(self, "start", FailureStart.parse(self.start))
        w = self.window_s
        if w is not None and (isinstance(w, bool) or not isinstance(w, int | float) or not w > 0
                              or not math.isfinite(w)):
            raise ConfigError(f"window_s = {w!r} must be a finite number of seconds > 0, or None")

    def pool_times_s(self, n_pools: int) -> tuple[np.ndarray, np.ndarray]:
        """``(mtbf_s, mttr_s)`` per pool."""
        return (_per_pool("mtbf_s", self.mtbf_s, n_pools, allow_zero=False),
                _per_pool("mttr_s", self.mttr_s, n_pools, allow_zero=True))

    def pool_availability(self, n_pools: int) -> np.ndarray:
        """A = MTBF / (MTBF + MTTR) per pool (1 when MTBF is inf)."""
        mtbf, mttr = self.pool_times_s(n_pools)
        with np.errstate(invalid="ignore"):
            return np.where(np.isinf(mtbf), 1.0, mtbf / (mtbf + mttr))


@dataclass(frozen=True)
class FailureSummary:
    """Instance failures of one run (``fleetplan.sim.failures``), over ``[0, end]`` with ``end`` the
    last completion or the horizon.  ``n_evictions`` counts running requests that lost their KV
    cache to a failure (all requests, warm-up included); ``availability`` is MTBF / (MTBF + MTTR)
    per pool, ``up_fraction`` the instance-time actually up."""

    mtbf_s: tuple[float, ...]
    mttr_s: tuple[float, ...]
    availability: tuple[float, ...]
    repair: str
    n_outages: int
    up_fraction: float
    min_instances_up: int
    n_evictions: int
    n_requests_evicted: int


def failure_spec_from_catalog(
    spec: FleetSpec,
    catalog,
    mtbf_s: float | None = None,
    mttr_s: float | None = None,
    repair: RepairTimes | str = RepairTimes.EXPONENTIAL,
    start: FailureStart | str = FailureStart.STATIONARY,
    window_s: float | None = None,
) -> FailureSpec:
    """Per-pool MTBF/MTTR from each pool's GPU profile (``catalog.get(pool.gpu)``), unless given.

    ``ConfigError`` when a pool's GPU publishes no failure rate or repair time and none is given.
    """
    mtbfs, mttrs = [], []
    for pool in spec.pools:
        profile = catalog.get(pool.gpu)
        if mtbf_s is None:
            rate = profile.failure_rate_per_day
            if rate is None:
                raise ConfigError(f"pool {pool.name!r}: GPU {pool.gpu} publishes no failure rate; "
                                  "give the MTBF (`mtbf_s`)", param="mtbf_s")
            mtbfs.append(math.inf if rate == 0 else SECONDS_PER_DAY / rate)
        else:
            mtbfs.append(float(mtbf_s))
        if mttr_s is None:
            if profile.mttr_days is None:
                raise ConfigError(f"pool {pool.name!r}: GPU {pool.gpu} publishes no repair time; "
                                  "give the MTTR (`mttr_s`)", param="mttr_s")
            mttrs.append(SECONDS_PER_DAY * profile.mttr_days)
        else:
            mttrs.append(float(mttr_s))
    return FailureSpec(tuple(mtbfs), tuple(mttrs), repair=repair, start=start, window_s=window_s)


def _repair_s(rng: np.random.Generator, mttr_s: float, repair: RepairTimes) -> float:
    return float(rng.exponential(mttr_s)) if repair is RepairTimes.EXPONENTIAL else mttr_s


def draw_failure_schedule(
    failures: FailureSpec, inst_pool: np.ndarray, window_s: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(inst_fail_event_s, inst_fail_lo)``: per instance, alternating down/up times (s), flat.

    ``inst_pool`` is each instance's pool index; failures start in ``[0, window_s]``.
    """
    inst_pool = np.asarray(inst_pool, dtype=np.int64)
    n_pools = int(inst_pool.max()) + 1 if inst_pool.size else 0
    mtbf, mttr = failures.pool_times_s(n_pools)
    expected = float(np.sum(window_s / (mtbf[inst_pool] + mttr[inst_pool]))) if inst_pool.size else 0.0
    if expected * 2 > MAX_FAILURE_EVENTS:
        raise ConfigError(f"failures would draw ~{expected * 2:,.0f} events over {window_s:g} s; the limit is "
                          f"{MAX_FAILURE_EVENTS:,}; raise the MTBF or shorten the run")
    rng = fp_rng.stream(seed, "failures")
    events: list[float] = []
    lo = [0]
    for p in inst_pool:
        up_s, down_s = float(mtbf[p]), float(mttr[p])
        if down_s > 0 and math.isfinite(up_s):
            t = 0.0
            if failures.start is FailureStart.STATIONARY and rng.random() < down_s / (up_s + down_s):
                residual = rng.exponential(down_s) if failures.repair is RepairTimes.EXPONENTIAL \
                    else rng.random() * down_s
                events += [0.0, float(residual)]
                t = float(residual)
            while True:
                t += float(rng.exponential(up_s))
                if t > window_s:
                    break
                d = _repair_s(rng, down_s, failures.repair)
                if d > 0:
                    events += [t, t + d]
                t += d
        lo.append(len(events))
    return np.array(events, dtype=np.float64), np.array(lo, dtype=np.int64)


def summarise_failures(
    failures: FailureSpec,
    fail_event_s: np.ndarray,
    fail_lo: np.ndarray,
    end_s: float,
    out_failures: np.ndarray,
    n_pools: int,
) -> FailureSummary:
    """Outages, instance-time up and evictions over ``[0, end_s]`` of one run."""
    n_inst = fail_lo.size - 1
    mtbf, mttr = failures.pool_times_s(n_pools)
    down = fail_event_s[0::2]
    up = fail_event_s[1::2]  # every drawn outage is repaired: events come in pairs
    down_s = float(np.sum(np.clip(np.minimum(up, end_s) - down, 0.0, None)))
    starts = down[down <= end_s]
    # instances up just after each event (down events first at equal times), the fewest over the run
    times = np.concatenate([down, up])
    delta = np.concatenate([-np.ones(down.size, np.int64), np.ones(up.size, np.int64)])
    order = np.lexsort((delta, times))
    keep = times[order] <= end_s
    running_up = n_inst + np.cumsum(delta[order][keep])
    return FailureSummary(
        mtbf_s=tuple(float(x) for x in mtbf),
        mttr_s=tuple(float(x) for x in mttr),
        availability=tuple(float(x) for x in failures.pool_availability(n_pools)),
        repair=failures.repair.value,
        n_outages=int(starts.size),
        up_fraction=1.0 - down_s / (n_inst * end_s) if end_s > 0 and n_inst else 1.0,
        min_instances_up=int(running_up.min()) if running_up.size else n_inst,
        n_evictions=int(np.sum(out_failures)),
        n_requests_evicted=int(np.count_nonzero(out_failures)),
    )
