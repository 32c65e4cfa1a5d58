"""The candidate space of the fleet planner.

A candidate fleet is a list of pools that partition requests by total tokens
(prompt + output): pool i takes ``lo_i < L <= hi_i`` with ``lo_0 = 0`` and
``hi_last`` = the workload's longest request.  Topologies (``Topology``):

* ``homo``: one pool for every request;
* ``two-pool``: one split threshold B_short (core paper §2.1);
* ``multi-pool``: 3 or 4 pools from 2 or 3 thresholds (``max_pools``);
* ``pdd``: prefill-decode disaggregation, a prefill pool and a decode pool, each its own GPU
  type (``plan.disagg.candidates``); no length split;
* ``afd``: PDD whose decode instances are attention-FFN disaggregated units of ``a``
  attention and ``f`` FFN GPUs (``plan.disagg.candidates``).

``layouts`` enumerates the co-located topologies only; ``DISAGGREGATED`` ones are sized by
``plan.disagg.candidates``.

GPU type per pool: every combination for homo and two-pool (mixed types allowed);
for 3-4 pools each GPU type alone plus the cheapest type per pool (pools are
independent once thresholds fix their traffic, so the cheapest mix is the
per-pool cheapest, and enumerating every |G|^k mix adds no cheaper fleet).

Sizing router (``SizingRouter``): ``length`` (send to the pool whose range holds L) or
``compress`` (compress-and-route, Chen et al. 2026: requests with
B < L <= gamma*B are squeezed to B at the gateway and served by the pool ending
at B; core paper §3.4).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from fleetplan.errors import ConfigError
from fleetplan.names import lookup

#: Default split-threshold grid (tokens), the core paper's §4.1 sweep extended both ways.
DEFAULT_THRESHOLDS_TOKENS = (512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 32768, 65536)
#: Compress-and-route band factor gamma (Chen et al. 2026 use a 1.5x band).
DEFAULT_COMPRESS_GAMMA = 1.5
#: Largest number of pools the multi-pool topology considers (issue: up to 4).
DEFAULT_MAX_POOLS = 4


class Topology(enum.Enum):
    """Pool topology family."""

    HOMO = "homo"
    TWO_POOL = "two-pool"
    MULTI_POOL = "multi-pool"
    PDD = "pdd"
    AFD = "afd"


#: Topologies served by prefill-decode (PDD) or attention-FFN (AFD) disaggregation.
DISAGGREGATED = frozenset({Topology.PDD, Topology.AFD})


def family(topo: Topology) -> str:
    """``"colocated"`` for the length-pool topologies, else the topology's name (``pdd``, ``afd``)."""
    return topo.value if topo in DISAGGREGATED else "colocated"


class SizingRouter(enum.Enum):
    """How requests are assigned to pools when sizing."""

    LENGTH = "length"
    COMPRESS = "compress"


def topology(name: str | Topology) -> Topology:
    """Look up a ``Topology`` by its CLI name."""
    return lookup(Topology, "topology", name)


def sizing_router(name: str | SizingRouter) -> SizingRouter:
    """Look up a ``SizingRouter`` by its CLI name."""
    return lookup(SizingRouter, "sizing router", name)


@dataclass(frozen=True)
class PoolRange:
    """Requests with ``lo_tokens < L <= hi_tokens`` (hi is the pool's max context)."""

    lo_tokens: int
    hi_tokens: int
    last: bool  # the pool holding the longest requests (no compression above it)

    def __post_init__(self) -> None:
        if not 0 <= self.lo_tokens < self.hi_tokens:
            raise ConfigError(f"pool range ({self.lo_tokens}, {self.hi_tokens}] is empty")


@dataclass(frozen=True)
class Layout:
    """Pool ranges of one candidate, shortest first."""

    topology: Topology
    ranges: tuple[PoolRange, ...]

    @property
    def thresholds_tokens(self) -> tuple[int, ...]:
        return tuple(r.hi_tokens for r in self.ranges[:-1])


def check_thresholds(thresholds_tokens: tuple[int, ...]) -> tuple[int, ...]:
    """Sorted, de-duplicated thresholds; each must be a positive integer."""
    for b in thresholds_tokens:
        if int(b) != b or b <= 0:
            raise ConfigError(f"split threshold {b!r} is invalid: `thresholds_tokens` must be integers > 0",
                              param="thresholds_tokens", value=b)
    return tuple(sorted(set(int(b) for b in thresholds_tokens)))


def layouts(
    topologies: tuple[Topology, ...],
    thresholds_tokens: tuple[int, ...],
    max_tokens: int,
    max_pools: int = DEFAULT_MAX_POOLS,
) -> Iterator[Layout]:
    """Every pool layout of the requested co-located topologies (thresholds >= max are dropped;
    disaggregated topologies have no length layout and are skipped)."""
    grid = [b for b in check_thresholds(thresholds_tokens) if b < max_tokens]
    for topo in topologies:
        if topo in DISAGGREGATED:
            continue
        if topo is Topology.HOMO:
            sizes = [0]
        elif topo is Topology.TWO_POOL:
            sizes = [1]
        else:
            sizes = list(range(2, max_pools))
        for n_cuts in sizes:
            for cuts in itertools.combinations(grid, n_cuts):
                bounds = (0, *cuts, max_tokens)
                ranges = tuple(
                    PoolRange(bounds[i], bounds[i + 1], last=i == len(bounds) - 2) for i in range(len(bounds) - 1)
                )
                yield Layout(topo, ranges)
