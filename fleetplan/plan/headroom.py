"""Headroom of a verified fleet: how much slower steps, or how much more traffic, it still serves.

For a co-located fleet at its verified counts (``plan.verify``), two searches with the simulator:

    step_slowdown_max   = the largest s on the grid  margin, margin + r, ..., <= max_step_slowdown
                          at which the fleet passes with every step (1 + s) times the step model's
                          (``perf.scaled``; s is relative to the step model as given, so a fleet sized
                          with ``step_time_margin`` m starts the search at s = m)
    rate_multiplier_max = the largest x on the grid  1, 1 + r, ..., <= max_rate_multiplier
                          at which the fleet passes at x · λ (steps at the margin it was sized for)

with r the ``resolution`` (default 0.02: 2 % of the step time, 2 % of λ), each grid cut where the
slowdown it simulates (a rate point's below) reaches the largest step-time margin the simulator takes
(``plan.defaults.MAX_STEP_TIME_MARGIN``, 300 %): with no margin the rate grid ends at 3.98 λ, not 4 λ.

Pass rule: verification's.  Every pool, simulated on its own at its verified count (its sub-stream,
``n_replications`` replications), is not drifting and the upper end of the 95 % Student-t interval of
its SLO-percentile TTFT (and TPOT with a TPOT SLO) is within the SLO; the fleet passes when every
pool does.  Run length: verification's rule (``verify.run_length_requests``) with the pool's rate
λ_p · x and its mean request lifetime R · (1 + s) / (1 + margin) (a request's life is a sum of steps;
the warm-up floor scales alike; a rate point runs as the slowdown below, the same number of requests);
a fixed ``VerifySettings.n_requests`` stays fixed.  Seeds: verification's own
per pool (common random numbers), so every point of both grids sees the same traffic and the bottom
of each grid (s = margin, x = 1) is verification's passing check, which is not run again.

One simulation serves both searches (time scaling).  A fleet at x · λ whose steps take (1 + m) times
the model's is, event for event, the fleet at λ with steps (1 + m) x times the model's with every
time divided by x: the arrival gaps, every step and so every latency scale by the same factor (the
kernel has no other clock: routing, batching, KV blocks and preemption follow counts and the order of
events).  So the rate point x is simulated as the slowdown (1 + m) x - 1 at λ, with the pool's
run length and warm-up floor in the same scaled time, and judged against the SLOs times x (the pass
rule's bound, drift test and warm-up cut are invariant under scaling).  With no margin (m = 0) the
two grids are the same simulations: x = 1 + k r is the slowdown k r, and every probe either search
shares with the other (both gallop through k = 1, 2, 4, ... together) is simulated once.  Runs are
kept by (pool, slowdown) for the whole search.

Search: on the grid index k = 0..K (k = 0 passes), an exponential search up from the bottom, then
bisection: probe k = 1, 2, 4, 8, ... (capped at K) while the fleet passes; the first failing probe
sets hi (the top of the grid, hi = K + 1, when none fails) and the last passing one lo; then probe
floor((lo + hi) / 2) until hi = lo + 1.  A verified fleet is the cheapest that passes, so its
headroom is usually a few resolutions: the answer k* takes about 2 log2(k*) + 2 probes (2 for
k* = 1), and no probe runs the fleet far beyond its capacity, where runs are long.  The answer lo
passed and lo + 1 failed, unless hi is beyond the grid (the answer is the range's top: a lower
bound, ``capped``).  Simulation noise can make the pass test non-monotone near the boundary; the
search still returns a passing/failing pair one resolution apart.

Replications: only the verdict of a probe is read, so a pool's replications at a point stop at one that
fails alone (``plan.verify``: with n <= 4 replications one replication above the SLO fails the pool
whatever the others show), judged against the loosest SLO the point's runs answer for in that round (a
rate probe's SLOs times x); a point first judged against a stricter SLO and later needed against a
looser one runs its remaining replications then.  Verdicts and answers are those of every replication.

Pools: a pool that passed at a grid point is taken to pass at every lower point of the same search
(the pass test is monotone in the slowdown and in the rate: with common random numbers the same
requests take longer, or arrive sooner), so once a probe fails only the pools that have not passed
above the next probe are simulated again (the binding ones).  Both searches advance together: each
round's probes, every pool and replication simulated, run as one batch of tasks through ``map_fn``
(results identical for every executor).  The pools failing at the answer's upper neighbour are
reported (``*_binding_pools``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from fleetplan.errors import ConfigError
from fleetplan.hardware import GpuProfile
from fleetplan.parallel import MapFn
from fleetplan.plan.defaults import MAX_STEP_TIME_MARGIN
from fleetplan.plan.sweep import Candidate, ProgressFn
from fleetplan.plan.verify import (
    VerifySettings,
    decisive_runs,
    fails_alone,
    fails_alone_is_exact,
    pool_check,
    pool_tasks,
    run_length_requests,
    run_pool_tasks,
)
from fleetplan.workload import Workload

DEFAULT_MAX_STEP_SLOWDOWN = 2.0  # search steps up to 200 % slower (3x)
DEFAULT_MAX_RATE_MULTIPLIER = 4.0
DEFAULT_HEADROOM_RESOLUTION = 0.02
HEADROOM_METHOD = ("simulated: exponential search then bisection on a grid of the resolution; verification's pass "
                   "rule per pool at the verified counts, same seeds")


@dataclass(frozen=True)
class HeadroomSettings:
    """Search ranges and resolution (fractions: 2.0 = 200 % slower steps; multipliers of λ)."""

    max_step_slowdown: float = DEFAULT_MAX_STEP_SLOWDOWN
    max_rate_multiplier: float = DEFAULT_MAX_RATE_MULTIPLIER
    resolution: float = DEFAULT_HEADROOM_RESOLUTION

    def __post_init__(self) -> None:
        if not (math.isfinite(self.resolution) and 0 < self.resolution <= 0.5):
            raise ConfigError(f"headroom resolution {self.resolution!r} is invalid: give a fraction in (0, 0.5], "
                              "e.g. 0.02")
        if not (math.isfinite(self.max_step_slowdown) and self.max_step_slowdown > 0):
            raise ConfigError(f"max_step_slowdown {self.max_step_slowdown!r} must be a finite fraction > 0, e.g. 2.0")
        if not (math.isfinite(self.max_rate_multiplier) and self.max_rate_multiplier > 1):
            raise ConfigError(f"max_rate_multiplier {self.max_rate_multiplier!r} must be a finite number > 1, e.g. 4")


@dataclass(frozen=True)
class Headroom:
    """How far the fleet's step times and arrival rate may grow with the SLOs still met."""

    step_slowdown_max: float  # 0.23: every step may be 23 % longer than the step model says
    step_slowdown_capped: bool  # passed at the top of the range (a lower bound)
    rate_multiplier_max: float  # 1.31: 31 % more traffic
    rate_multiplier_capped: bool
    resolution: float
    step_time_margin: float  # the margin the fleet was sized for (the slowdown search's start)
    step_binding_pools: tuple[int, ...]  # pools (1-based) failing one resolution above the answer
    rate_binding_pools: tuple[int, ...]
    n_simulations: int  # pool runs, replications included (those the verdicts read: module docstring)
    time_s: float
    method: str = HEADROOM_METHOD


class GridSearch:
    """The largest passing index of ``0..n_points - 1``, index 0 known to pass (module docstring):
    exponential search up from 0, then bisection.  ``next_index`` proposes a probe (None when
    settled), ``record`` takes its outcome."""

    def __init__(self, n_points: int) -> None:
        if n_points < 1:
            raise ValueError("a grid needs at least its known-passing point")
        self.n_points = int(n_points)
        self.lo, self.hi = 0, self.n_points  # hi: the smallest index known (or, beyond the grid, taken) to fail
        self.galloping = True

    def next_index(self) -> int | None:
        if self.hi - self.lo <= 1:
            return None
        if self.galloping:
            return min(2 * self.lo if self.lo else 1, self.n_points - 1)
        return (self.lo + self.hi) // 2

    def record(self, index: int, passed: bool) -> None:
        if passed:
            self.lo = max(self.lo, index)
        else:
            self.hi = min(self.hi, index)
            self.galloping = False

    @property
    def capped(self) -> bool:
        """The top of the grid passed (the answer is a lower bound)."""
        return self.hi >= self.n_points

    @staticmethod
    def max_probes(n_points: int) -> int:
        """At most this many probes settle a grid of ``n_points``."""
        return 2 * math.ceil(math.log2(n_points)) + 1 if n_points > 1 else 0


def largest_passing(passes: Callable[[int], bool], n_points: int) -> tuple[int, bool]:
    """(largest passing index found, capped) of ``GridSearch`` driven by ``passes`` (index 0 is not
    probed: it is known to pass)."""
    search = GridSearch(n_points)
    while (k := search.next_index()) is not None:
        search.record(k, bool(passes(k)))
    return search.lo, search.capped


def _grid_points(start: float, stop: float, resolution: float) -> int:
    return int(math.floor((stop - start) / resolution + 1e-9)) + 1 if stop > start else 1


def fleet_headroom(fleet: Candidate, gpus: Mapping[str, GpuProfile], workload: Workload, verify: VerifySettings,
                   settings: HeadroomSettings = HeadroomSettings(), map_fn: MapFn | None = None,
                   progress: ProgressFn | None = None) -> Headroom:
    """Step-time and arrival-rate headroom of ``fleet`` (module docstring).

    ``fleet`` is a co-located candidate at its verified counts (``plan.optimize.verified_fleet``)
    whose ``verification`` passed under ``verify``; ``progress("headroom", round, rounds)``.
    """
    v = fleet.verification
    if v is None or not v.passed or getattr(fleet, "roles", ()):
        raise ConfigError("headroom needs a co-located fleet that passed simulation verification")
    t0 = time.perf_counter()
    r = settings.resolution
    margin = verify.step_time_margin
    pools = [i for i, p in enumerate(fleet.pools) if p.count > 0]
    steady = {i: v.steady[i] for i in pools}

    def tasks_at(slowdown: float, i: int, limits, reps) -> list:
        s = replace(verify, step_time_margin=slowdown)
        st = steady[i]
        if verify.n_requests is not None or st is None or not math.isfinite(st.lifetime_s):
            return pool_tasks(fleet, i, gpus, workload, s, verify.fixed_requests(), 0.0, limits, reps)  # n_requests
        lifetime_s = st.lifetime_s * (1.0 + slowdown) / (1.0 + margin)
        n = run_length_requests(s.rate_per_s * fleet.pools[i].traffic_share, lifetime_s, s)
        return pool_tasks(fleet, i, gpus, workload, s, n, s.warmup_lifetimes * lifetime_s, limits, reps)

    exact = fails_alone_is_exact(verify.n_replications)

    def limits_at(slo_factor: float) -> tuple[float, float | None] | None:
        """The limits one replication fails alone above, judged against the SLOs times ``slo_factor``."""
        if not exact:
            return None
        return (verify.slo_ttft_s * slo_factor, None if verify.slo_tpot_s is None else verify.slo_tpot_s * slo_factor)

    def point(name: str, k: int) -> tuple[float, float]:
        """(slowdown simulated at λ, factor of the SLOs it is judged against): module docstring."""
        if name == "step":
            return round(margin + k * r, 12), 1.0
        x = 1.0 + k * r
        return round((1.0 + margin) * x - 1.0, 12), x

    n_points = {"step": _grid_points(margin, settings.max_step_slowdown, r),
                "rate": _grid_points(1.0, settings.max_rate_multiplier, r)}
    for name in n_points:  # the simulator takes slowdowns below MAX_STEP_TIME_MARGIN only
        while n_points[name] > 1 and point(name, n_points[name] - 1)[0] >= MAX_STEP_TIME_MARGIN:
            n_points[name] -= 1
    n_step, n_rate = n_points["step"], n_points["rate"]
    searches = {"step": GridSearch(n_step), "rate": GridSearch(n_rate)}

    passed_up_to = {name: dict.fromkeys(pools, 0) for name in searches}  # pool -> highest index it passed at
    failing: dict[tuple[str, int], tuple[int, ...]] = {}
    runs: dict[tuple[int, float], list] = {}  # (pool, slowdown) -> its replications' PoolRuns (a decisive prefix)
    n_rounds = max(GridSearch.max_probes(n_step), GridSearch.max_probes(n_rate))
    n_sims = 0
    done_rounds = 0
    if progress is not None:
        progress("headroom", 0, n_rounds)
    while True:
        probes = [(name, k) for name, sr in searches.items() if (k := sr.next_index()) is not None]
        if not probes:
            break
        needed = [(name, k, i) for name, k in probes for i in pools if passed_up_to[name][i] < k]
        # (a pool that passed at a higher point of this search is not simulated again)
        loosest: dict[tuple[int, float], float] = {}  # (pool, slowdown) -> the largest SLO factor judged at
        for name, k, i in needed:
            slowdown, slo_factor = point(name, k)
            loosest[(i, slowdown)] = max(loosest.get((i, slowdown), 0.0), slo_factor)
        batch, owners = [], []
        for (i, slowdown), slo_factor in loosest.items():
            have, limits = runs.get((i, slowdown)), limits_at(slo_factor)
            if have is None:
                mine = tasks_at(slowdown, i, limits, None)
            elif len(have) < verify.n_replications and (limits is None or not fails_alone(have[-1], *limits)):
                # stopped at a replication failing a stricter SLO: the rest, for this looser one
                mine = tasks_at(slowdown, i, limits, range(len(have), verify.n_replications))
            else:
                continue
            batch += mine
            owners.append((i, slowdown, len(mine), limits))
        outcomes = run_pool_tasks(batch, map_fn)
        at = 0
        for i, slowdown, n_tasks, limits in owners:
            mine = outcomes[at:at + n_tasks]
            at += n_tasks
            if limits is not None:
                mine = decisive_runs(mine, *limits)
            bad = [o for o in mine if not o.ok]
            if bad:
                raise ConfigError(f"headroom: pool {i + 1}'s simulation failed: {bad[0].error}")
            runs[(i, slowdown)] = runs.get((i, slowdown), []) + [o.value for o in mine]
            n_sims += len(mine)
        fails: dict[tuple[str, int], list[int]] = {probe: [] for probe in probes}
        for name, k, i in needed:
            slowdown, slo_factor = point(name, k)
            s = replace(verify, step_time_margin=slowdown, slo_ttft_s=verify.slo_ttft_s * slo_factor,
                        slo_tpot_s=None if verify.slo_tpot_s is None else verify.slo_tpot_s * slo_factor)
            if pool_check(fleet.pools[i].count, runs[(i, slowdown)], s).passes:
                passed_up_to[name][i] = max(passed_up_to[name][i], k)
            else:
                fails[(name, k)].append(i + 1)
        for (name, k), failed in fails.items():
            searches[name].record(k, not failed)
            if failed:
                failing[(name, k)] = tuple(failed)
        done_rounds += 1
        if progress is not None:
            progress("headroom", done_rounds, n_rounds)
    if progress is not None:
        progress("headroom", n_rounds, n_rounds)
    step, rate = searches["step"], searches["rate"]
    return Headroom(
        step_slowdown_max=round(margin + step.lo * r, 12),
        step_slowdown_capped=step.capped,
        rate_multiplier_max=round(1.0 + rate.lo * r, 12),
        rate_multiplier_capped=rate.capped,
        resolution=r,
        step_time_margin=margin,
        step_binding_pools=failing.get(("step", step.hi), ()),
        rate_binding_pools=failing.get(("rate", rate.hi), ()),
        n_simulations=n_sims,
        time_s=time.perf_counter() - t0,
    )
