"""A two-tier leaf-spine (folded Clos) fabric of hosts, leaves and spines, as directed links.

Every host has one NIC link to its leaf; every leaf one link to every spine.  Links are full
duplex, modelled as two directed links of the same capacity, numbered

    host h -> its leaf              h                                  (0 <= h < H)
    leaf -> host h                  H + h
    leaf l -> spine s               2H + l S + s                        (0 <= l < L, 0 <= s < S)
    spine s -> leaf l               2H + L S + l S + s

with ``H = n_leaves * hosts_per_leaf`` hosts (host ``h`` on leaf ``h // hosts_per_leaf``) and
``S = n_spines``.  A flow between hosts on one leaf crosses two links (up, down); between leaves
it crosses four (host up, leaf->spine, spine->leaf, host down) and there are ``S`` equal-cost
paths, one per spine -- the choice ECMP hashes over (RFC 2992) and a path controller makes.

Link rates are Gb/s (10^9 bit/s) at the edge and bytes/s inside (``capacity_bytes_per_s``).
Propagation and switching latency are not modelled: a KV transfer of ~1 GB at 100 Gb/s takes
~80 ms, against microseconds of latency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError

__all__ = ["LeafSpineFabric", "BITS_PER_BYTE", "MAX_HOPS"]

BITS_PER_BYTE = 8.0
MAX_HOPS = 4


def _check_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}={value!r} must be an integer >= 1; give a positive count")


def _check_rate(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name}={value!r} must be a finite number of Gb/s > 0; give a link rate such as 100")


@dataclass(frozen=True)
class LeafSpineFabric:
    """Leaf-spine fabric (module docstring).

    Attributes
    ----------
    n_leaves, hosts_per_leaf, n_spines : int
        Leaf switches, hosts under each leaf, spine switches (one link from each leaf to each).
    host_link_gbps : float
        Host NIC to leaf link rate, Gb/s (each direction).
    spine_link_gbps : float
        Leaf to spine link rate, Gb/s (each direction).
    """

    n_leaves: int
    hosts_per_leaf: int
    n_spines: int
    host_link_gbps: float = 100.0
    spine_link_gbps: float = 100.0

    def __post_init__(self) -> None:
        for name in ("n_leaves", "hosts_per_leaf", "n_spines"):
            _check_count(name, getattr(self, name))
        for name in ("host_link_gbps", "spine_link_gbps"):
            _check_rate(name, getattr(self, name))

    @property
    def n_hosts(self) -> int:
        return self.n_leaves * self.hosts_per_leaf

    @property
    def n_links(self) -> int:
        return 2 * self.n_hosts + 2 * self.n_leaves * self.n_spines

    @property
    def oversubscription(self) -> float:
        """Host bandwidth under a leaf over its spine uplink bandwidth (1 = non-blocking)."""
        return self.hosts_per_leaf * self.host_link_gbps / (self.n_spines * self.spine_link_gbps)

    def leaf_of(self, host: int) -> int:
        """Leaf switch of ``host``."""
        self.check_host(host)
        return host // self.hosts_per_leaf

    def check_host(self, host: int) -> None:
        """Raise ``ConfigError`` unless ``host`` is a host index of this fabric."""
        if isinstance(host, bool) or not isinstance(host, (int, np.integer)) or not 0 <= host < self.n_hosts:
            raise ConfigError(f"host {host!r} is not a host of this fabric; use 0..{self.n_hosts - 1}")

    def capacity_bytes_per_s(self) -> np.ndarray:
        """Capacity of every directed link (numbering in the module docstring), bytes/s."""
        host = self.host_link_gbps * 1e9 / BITS_PER_BYTE
        spine = self.spine_link_gbps * 1e9 / BITS_PER_BYTE
        n_fabric = 2 * self.n_leaves * self.n_spines
        return np.concatenate([np.full(2 * self.n_hosts, host), np.full(n_fabric, spine)])

    def path(self, src: int, dst: int, spine: int) -> tuple[int, ...]:
        """Directed links from ``src`` to ``dst`` through ``spine`` (ignored within one leaf)."""
        self.check_host(src)
        self.check_host(dst)
        if src == dst:
            raise ConfigError(f"flow from host {src} to itself: a KV transfer needs two hosts; give src != dst")
        h, s_count = self.n_hosts, self.n_spines
        ls, ld = src // self.hosts_per_leaf, dst // self.hosts_per_leaf
        if ls == ld:
            return (src, h + dst)
        if not 0 <= spine < s_count:
            raise ConfigError(f"spine {spine} is not a spine of this fabric; use 0..{s_count - 1}")
        up = 2 * h + ls * s_count + spine
        down = 2 * h + self.n_leaves * s_count + ld * s_count + spine
        return (src, up, down, h + dst)

    def path_table(self) -> tuple[np.ndarray, np.ndarray]:
        """``(path_links, path_hops)`` for the kernel: row ``(src * H + dst) * S + spine`` of
        ``path_links`` (shape ``(H * H * S, MAX_HOPS)``, padding -1) lists the links; ``path_hops[src,
        dst]`` is 2 within a leaf, 4 across leaves, 0 for ``src == dst`` (not a path)."""
        h, s_count = self.n_hosts, self.n_spines
        links = np.full((h * h * s_count, MAX_HOPS), -1, dtype=np.int64)
        hops = np.zeros((h, h), dtype=np.int64)
        for src in range(h):
            for dst in range(h):
                if src == dst:
                    continue
                for spine in range(s_count):
                    p = self.path(src, dst, spine)
                    links[(src * h + dst) * s_count + spine, : len(p)] = p
                    hops[src, dst] = len(p)
        return links, hops

    def ideal_s(self, src: np.ndarray, dst: np.ndarray, size_bytes: np.ndarray) -> np.ndarray:
        """Seconds each flow takes alone: bytes / the smallest capacity on its path."""
        cap = self.capacity_bytes_per_s()
        cross = (np.asarray(src) // self.hosts_per_leaf) != (np.asarray(dst) // self.hosts_per_leaf)
        host = cap[0]
        bottleneck = np.where(cross, min(host, cap[-1]), host)
        return np.asarray(size_bytes, dtype=np.float64) / bottleneck
