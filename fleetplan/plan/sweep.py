"""Phase 1: the analytical sweep over candidate fleets (core paper §3.1).

Every layout of ``plan.space`` is combined with GPU types per pool; each pool is
sized by ``plan.pools.size_one_pool`` (results cached per (range, GPU, router),
so a sweep of thousands of candidates sizes only a few hundred pools).  A
candidate's cost is the sum over pools of (count + spares) x price x 8760 h; it
is feasible when every pool is and the fleet stays within ``max_gpus``.  Compress-and-route
layouts whose last pool receives no traffic are skipped (a fleet has no such phantom pool to
squeeze requests below), and layouts that build the same fleet (they differ only in a pool no
request reaches) are kept once (``Candidate.fleet_key``).
Candidates are ranked by annual cost, ties broken by the latency percentile
over all of the fleet's requests (``fleet_latency_p_s``; for a large sweep computed for every
fleet at once, ``fleet_latencies_p_s``), then by fewer GPUs.  No rank reads the TPOT: a
candidate's fleet TPOT (and its pools' TPOT tables) is computed when first read
(``queueing.engine.Deferred``), for the few candidates shown, verified or written.
The Pareto frontier keeps the feasible candidates that no other beats on
both cost and P99 TTFT.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from fleetplan.hardware import GpuProfile
from fleetplan.plan.points import LengthPoints
from fleetplan.plan.pools import PlanSettings, PoolPlan, fleet_usd_per_h, size_one_pool
from fleetplan.plan.space import Layout, PoolRange, SizingRouter, Topology
from fleetplan.plan.verification import Verification
from fleetplan.queueing.engine import Deferred, Lazy, mixture_quantile_s, mixture_quantiles_s
from fleetplan.units import H_PER_YEAR, S_PER_H

ProgressFn = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Candidate:
    """One candidate fleet with its analytic figures (times in seconds)."""

    topology: Topology
    router: SizingRouter
    pools: tuple[PoolPlan, ...]
    total_gpus_needed: int
    cost_usd_per_year: float
    cost_usd_per_mtok: float
    ttft_p_s: float
    feasible: bool
    reason: str | None
    rank: int = 0
    verification: Verification | None = None  # set for candidates simulated in phase 2
    # analytic TPOT at the SLO percentile over all requests (nan: not modelled); with the engine model
    # computed on first read (``fleet_tpot_p_s``: only the candidates shown, verified or written need it)
    tpot_p_s: float = Deferred(float("nan"))
    # Why the fleet is infeasible, as a code of ``fleetplan.errors.REASONS`` (None when feasible)
    reason_code: str | None = None

    @property
    def thresholds_tokens(self) -> tuple[int, ...]:
        return tuple(p.hi_tokens for p in self.pools[:-1])

    @property
    def gpu_label(self) -> str:
        names = [p.gpu for p in self.pools]
        return names[0] if len(set(names)) == 1 else "+".join(names)

    def key(self) -> tuple:
        """Identity of the fleet shape (topology, thresholds, GPUs, router)."""
        return (self.topology.value, self.router.value, self.thresholds_tokens, tuple(p.gpu for p in self.pools))

    def fleet_key(self) -> tuple:
        """Identity of the fleet as built: the pools that have traffic or GPUs, with their token
        ranges, GPU and count.  Layouts that differ only in a pool nobody is routed to (a threshold
        above the longest request, with any GPU type named for it) are the same fleet."""
        return fleet_key_of(self.topology, self.router, self.pools)


def fleet_key_of(topology: Topology, router: SizingRouter, pools: Sequence[PoolPlan]) -> tuple:
    """``Candidate.fleet_key`` of a fleet of ``pools`` (known before the candidate is built)."""
    live = tuple((p.lo_tokens, p.hi_tokens, p.gpu, p.total_gpus) for p in pools
                 if p.traffic_share > 0 or p.total_gpus > 0)
    return (topology.value, router.value, live)


def candidate_label(c: Candidate) -> str:
    """``two-pool@4096 3xH100-SXM+1xA100``: topology, thresholds and GPUs with spares."""
    pools = "+".join(f"{p.count + p.spares}x{p.gpu}" for p in c.pools if p.count + p.spares)
    split = "/".join(str(b) for b in c.thresholds_tokens)
    return f"{c.topology.value}{'@' + split if split else ''} {pools}"


def _rank_key_of_fields(f: dict) -> tuple:
    """The rank order of the candidate ``Candidate(**f)`` (known before it is built): feasible first,
    cheapest first, then the lower fleet TTFT percentile, fewer GPUs, and ``Candidate.key()``."""
    key = (f["topology"].value, f["router"].value, tuple(p.hi_tokens for p in f["pools"][:-1]),
           tuple(p.gpu for p in f["pools"]))
    return (not f["feasible"], f["cost_usd_per_year"] if f["feasible"] else 0.0, f["ttft_p_s"],
            f["total_gpus_needed"], key)


def _combine_fields(
    layout: Layout, router: SizingRouter, pools: Sequence[PoolPlan], settings: PlanSettings, mean_tokens: float,
    latency: tuple[float, float | Lazy],
) -> dict:
    """The candidate of ``pools`` as its constructor's keyword arguments (the sweep ranks before it
    builds); ``latency``: its ``fleet_latency_p_s`` (the TPOT may be a ``Lazy`` of it)."""
    total = sum(p.total_gpus for p in pools)
    cost = fleet_usd_per_h(pools) * H_PER_YEAR
    tokens_per_year = settings.rate_per_s * mean_tokens * H_PER_YEAR * S_PER_H
    ttft, tpot = latency
    reason = code = None
    for i, p in enumerate(pools):
        if not p.feasible:
            reason = f"pool {i + 1} ({p.lo_tokens}-{p.hi_tokens} tokens, {p.gpu}): {p.reason}"
            code = p.reason_code or "other"
            break
    if reason is None and total > settings.max_gpus:
        reason, code = f"needs {total} GPUs, more than max_gpus {settings.max_gpus}", "max-gpus"
    return dict(
        topology=layout.topology,
        router=router,
        pools=tuple(pools),
        total_gpus_needed=total,
        cost_usd_per_year=cost,
        cost_usd_per_mtok=cost / tokens_per_year * 1e6 if tokens_per_year > 0 else float("inf"),
        ttft_p_s=ttft,
        feasible=reason is None,
        reason=reason,
        tpot_p_s=tpot,
        reason_code=code,
    )


def fleet_latency_p_s(pools: Sequence[PoolPlan], percentile: float) -> tuple[float, float]:
    """(TTFT, TPOT) at ``percentile`` over all requests of the fleet, seconds.

    With the engine model each pool carries survival tables at its count and the fleet's figure is
    the quantile of the traffic-weighted mixture (the definition the simulator's summary uses).
    Otherwise (the paper's eqs. 3-5) it is the worst pool's figure, an upper bound of the mixture's.
    """
    return fleet_ttft_p_s(pools, percentile), fleet_tpot_p_s(pools, percentile)


def _fleet_p_s(pools: Sequence[PoolPlan], percentile: float, metric: str) -> float:
    """``metric`` ("ttft" or "tpot") of ``fleet_latency_p_s``: the mixture of the pools' ``<metric>_table``
    when every live pool has an engine-model table (its TTFT table says so), else the worst ``<metric>_p_s``."""
    live = [p for p in pools if p.traffic_share > 0]
    if not live:
        return 0.0
    if all(p.ttft_table is not None for p in live):
        return mixture_quantile_s([getattr(x, f"{metric}_table") for x in live], [p.traffic_share for p in live],
                                  percentile / 100.0)
    return max(getattr(p, f"{metric}_p_s") for p in live)


def fleet_ttft_p_s(pools: Sequence[PoolPlan], percentile: float) -> float:
    """The TTFT of ``fleet_latency_p_s``."""
    return _fleet_p_s(pools, percentile, "ttft")


def fleet_tpot_p_s(pools: Sequence[PoolPlan], percentile: float) -> float:
    """The TPOT of ``fleet_latency_p_s`` (reads the pools' TPOT tables, which they build on first read)."""
    return _fleet_p_s(pools, percentile, "tpot")


#: Fewest fleets whose latency mixtures ``fleet_latencies_p_s`` computes in the compiled pass: below it
#: one by one in Python (the same figures; about 60-90 µs a fleet against 3 µs compiled, but the
#: compiled pass's first call in a process loads numba's machinery, about 0.25 s of CPU on two cores:
#: the 70B command's 33,033 candidates compiled) ...
KERNEL_MIN_FLEETS = 4000
#: ... unless a kernel is loaded in this process already (``fleetplan.jit.kernels_warm``; the command
#: line loads the simulator's while the sweep's pools are sized, and then this one,
#: ``queueing.engine.load_mixture_kernel``): the mixture kernel then loads in about 13 ms, and from
#: this many fleets on the compiled pass is the faster (the README command's 1,477 candidates: about
#: 20 ms against 90 ms; 12 ms with the kernel loaded beforehand).
KERNEL_WARM_MIN_FLEETS = 300


def _kernels_warm() -> bool:
    """``fleetplan.jit.kernels_warm``, without importing numba when nothing has (then nothing is warm)."""
    jit = sys.modules.get("fleetplan.jit")
    return jit is not None and jit.kernels_warm()


def fleet_latencies_p_s(fleets: Sequence[Sequence[PoolPlan]], percentile: float, *,
                        lazy_tpot: bool = False) -> list[tuple[float, float | Lazy]]:
    """``fleet_latency_p_s`` of each fleet, bit for bit: the engine model's mixtures, from
    ``KERNEL_MIN_FLEETS`` fleets on (``KERNEL_WARM_MIN_FLEETS`` once a kernel is loaded), in
    compiled passes over all fleets (``queueing.engine.mixture_quantiles_s``; a sweep's fleets share
    a few hundred pool tables), the others one by one.  ``lazy_tpot``: each TPOT as a ``Lazy`` of
    ``fleet_tpot_p_s`` (the same figure, computed when a ``Deferred`` field holding it is read)."""
    lives = [[p for p in pools if p.traffic_share > 0] for pools in fleets]
    mixed = [i for i, live in enumerate(lives) if live and all(p.ttft_table is not None for p in live)]
    q = percentile / 100.0

    def tpots(idx: list[int]) -> list[float | Lazy]:
        if lazy_tpot:
            return [Lazy(fleet_tpot_p_s, tuple(fleets[i]), percentile) for i in idx]
        if not idx:
            return []
        return [float(t) for t in mixture_quantiles_s([([p.tpot_table for p in lives[i]],
                                                          [p.traffic_share for p in lives[i]]) for i in idx], q)]

    if len(mixed) < KERNEL_MIN_FLEETS and (len(mixed) < KERNEL_WARM_MIN_FLEETS or not _kernels_warm()):
        tpot = tpots(list(range(len(fleets)))) if lazy_tpot else [fleet_tpot_p_s(pools, percentile)
                                                                  for pools in fleets]
        return [(fleet_ttft_p_s(pools, percentile), t) for pools, t in zip(fleets, tpot, strict=True)]
    is_mixed = set(mixed)
    out = [(0.0, 0.0) if i in is_mixed else fleet_latency_p_s(pools, percentile) for i, pools in enumerate(fleets)]
    shares = [[p.traffic_share for p in lives[i]] for i in mixed]
    ttft = mixture_quantiles_s([([p.ttft_table for p in lives[i]], s) for i, s in zip(mixed, shares, strict=True)], q)
    for k, (i, t) in enumerate(zip(mixed, tpots(mixed), strict=True)):
        out[i] = (float(ttft[k]), t)
    return out


def sweep(
    points: LengthPoints,
    layouts: Sequence[Layout],
    gpus: Sequence[GpuProfile],
    routers: Sequence[SizingRouter],
    settings: PlanSettings,
    availability: Callable[[GpuProfile], float],
    progress: ProgressFn | None = None,
    presized: Mapping[tuple[PoolRange, str, SizingRouter], PoolPlan] | None = None,
) -> list[Candidate]:
    """Size and rank every candidate (feasible first, cheapest first).  ``presized``: pools already
    sized (``size_one_pool`` of ``sweep_pools``' keys, e.g. in parallel), keyed (range, GPU name, router)."""
    # keyed by the range's fields, the GPU's name and the router's value (plain values hash fastest)
    cache: dict[tuple, PoolPlan] = {(r.lo_tokens, r.hi_tokens, r.last, name, router.value): plan
                                    for (r, name, router), plan in (presized or {}).items()}
    mean_tokens = points.mean_total_tokens

    def pool(rng_: PoolRange, gpu: GpuProfile, router: SizingRouter) -> PoolPlan:
        key = (rng_.lo_tokens, rng_.hi_tokens, rng_.last, gpu.name, router.value)
        plan = cache.get(key)
        if plan is None:
            plan = cache[key] = size_one_pool(points, rng_, gpu, router, settings, availability(gpu))
        return plan

    def cheapest(plans: list[PoolPlan]) -> PoolPlan:
        return min(plans, key=lambda p: (not p.feasible, p.total_gpus * p.price_usd_per_h, p.ttft_p_s))

    built: dict[tuple, tuple[Layout, SizingRouter, list[PoolPlan]]] = {}  # by fleet key, first layout first
    n_layouts = len(layouts)
    for i, layout in enumerate(layouts):
        if progress is not None:
            progress("sweep", i, n_layouts)
        for router in routers:
            if router is SizingRouter.COMPRESS and layout.topology is Topology.HOMO:
                continue  # nothing to compress into with one pool
            k = len(layout.ranges)
            if k <= 2:
                assignments = itertools.product(gpus, repeat=k)
            else:
                assignments = [(g,) * k for g in gpus]
            if router is SizingRouter.COMPRESS and pool(layout.ranges[-1], gpus[0], router).traffic_share <= 0:
                continue  # the last pool gets nothing: it would exist only to let compress-and-route
                # squeeze requests into the pool below it, which a fleet without it cannot do
            fleets = [[pool(r, g, router) for r, g in zip(layout.ranges, combo, strict=True)] for combo in assignments]
            if k > 2 and len(gpus) > 1:
                fleets.append([cheapest([pool(r, g, router) for g in gpus]) for r in layout.ranges])
            for plans in fleets:
                key = fleet_key_of(layout.topology, router, plans)
                if key not in built:  # the first layout to build a fleet keeps it
                    built[key] = (layout, router, plans)
    if progress is not None:
        progress("sweep", n_layouts, n_layouts)
    latencies = fleet_latencies_p_s([plans for _, _, plans in built.values()], settings.percentile, lazy_tpot=True)
    fields = [_combine_fields(layout, router, plans, settings, mean_tokens, lat)
              for (layout, router, plans), lat in zip(built.values(), latencies, strict=True)]
    fields.sort(key=_rank_key_of_fields)
    return [Candidate(**f, rank=i + 1) for i, f in enumerate(fields)]


def sweep_pools(layouts: Sequence[Layout], gpus: Sequence[GpuProfile],
                routers: Sequence[SizingRouter]) -> list[tuple[PoolRange, GpuProfile, SizingRouter]]:
    """Every (range, GPU, router) ``sweep`` may size, each once, in its order: the pools of every
    layout with every GPU type under every router (compress-and-route not for one pool).  ``sweep``
    skips a compress-and-route layout whose last pool gets no traffic, so a few of these may go
    unused; any it needs that are not here it sizes itself."""
    out: dict[tuple[PoolRange, str, SizingRouter], tuple[PoolRange, GpuProfile, SizingRouter]] = {}
    for layout in layouts:
        for router in routers:
            if router is SizingRouter.COMPRESS and layout.topology is Topology.HOMO:
                continue
            for rng_ in layout.ranges:
                for gpu in gpus:
                    out.setdefault((rng_, gpu.name, router), (rng_, gpu, router))
    return list(out.values())


def pareto_frontier(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Feasible candidates not beaten on both cost and TTFT percentile (cheapest first)."""
    feasible = sorted((c for c in candidates if c.feasible), key=lambda c: (c.cost_usd_per_year, c.ttft_p_s))
    out: list[Candidate] = []
    best_ttft = np.inf
    for c in feasible:
        if c.ttft_p_s < best_ttft:
            out.append(c)
            best_ttft = c.ttft_p_s
    return out
