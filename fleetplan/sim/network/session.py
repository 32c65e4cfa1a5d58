"""Incremental flow-level network for an event-driven engine (e.g. a PDD simulator).

The engine owns the clock; the session holds the flows in flight.  Protocol, at each engine
event of time ``t`` (non-decreasing):

1. ``done = session.advance_to(t)`` -- flows that finished by ``t``, as ``(flow_id, done_at_s)``
   in completion order (ties by flow id); deliver them (e.g. admit the request to decode);
2. ``fid = session.start_flow(t, src, dst, size_bytes)`` for each transfer starting at ``t``;
3. ``session.next_done_at_s()`` -- when the next flow will finish if nothing else starts; an
   engine schedules a network event then (and re-asks after every start: a start changes rates).

The session runs the same kernel helpers as ``FlowNetwork.simulate_flows`` in the same order,
so driving it with a whole flow list gives bit-identical completion times (tested).  A numba
engine can call the same helpers (``fleetplan.sim._kernels.flows``: ``next_done_at_s``,
``retire_until``, ``admit_flow``, ``maxmin_rates``) on its own state arrays; this class is the
Python reference of that protocol.  ECMP hashes are drawn per flow from the stream given.
"""

from __future__ import annotations

import math

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.sim._kernels.flows import admit_flow, maxmin_rates, next_done_at_s, retire_until
from fleetplan.sim.network.flows import PathPolicy, path_policy
from fleetplan.sim.network.simulate import FlowNetwork

__all__ = ["FlowSession"]

INITIAL_FLOWS = 1024  # array capacity; doubled when exceeded


class FlowSession:
    """Flows in flight on ``network`` under ``policy`` (module docstring for the protocol)."""

    def __init__(self, network: FlowNetwork, policy: PathPolicy | str, rng: np.random.Generator | None = None):
        if not isinstance(network, FlowNetwork):
            raise ConfigError(f"FlowSession needs a FlowNetwork, got {type(network).__name__}")
        self.network = network
        self.policy = path_policy(policy)
        if self.policy is PathPolicy.ECMP and rng is None:
            raise ConfigError("ECMP needs a random stream for its hashes; pass rng=stream(seed, 'ecmp')")
        self._rng = rng
        self._links, self._hops, self._capacity = network.kernel_inputs()
        n_links = self._capacity.shape[0]
        self._link_flows = np.zeros(n_links, dtype=np.int64)
        self._cap_left = np.empty(n_links)
        self._n_left = np.empty(n_links, dtype=np.int64)
        self._alloc(INITIAL_FLOWS)
        self._n_flows = 0
        self._n_active = 0
        self.now_s = 0.0

    def _alloc(self, n: int) -> None:
        def grow(name: str, shape, dtype, fill) -> None:
            new = np.full(shape, fill, dtype=dtype)
            old = getattr(self, name, None)
            if old is not None:
                new[: old.shape[0]] = old
            setattr(self, name, new)

        grow("_flow_links", (n, self._links.shape[1]), np.int64, -1)
        for name, dtype, fill in (("_flow_hops", np.int64, 0), ("_remaining", np.float64, 0.0),
                                  ("_rate", np.float64, 0.0), ("_frozen", np.bool_, False),
                                  ("_active", np.int64, 0), ("_ecmp", np.int64, 0),
                                  ("_done_at_s", np.float64, np.nan), ("_spine", np.int64, -1)):
            grow(name, (n,), dtype, fill)

    @property
    def n_active(self) -> int:
        """Flows in flight."""
        return self._n_active

    def spine_of(self, flow_id: int) -> int:
        """Spine the flow crosses (-1 within a leaf)."""
        return int(self._spine[flow_id])

    def next_done_at_s(self) -> float:
        """Time the next flow finishes at the current rates (``inf`` when none is in flight)."""
        return float(next_done_at_s(self._active, self._n_active, self.now_s, self._remaining, self._rate))

    def _check_time(self, t_s: float) -> None:
        if not (math.isfinite(t_s) and t_s >= self.now_s):
            raise ConfigError(f"time {t_s!r} s is before the session's clock {self.now_s} s (or not finite); "
                              f"drive the session with non-decreasing times")

    def _rates(self) -> None:
        maxmin_rates(self._active, self._n_active, self._flow_links, self._flow_hops, self._capacity,
                     self._link_flows, self._rate, self._cap_left, self._n_left, self._frozen)

    def _retire(self, t_s: float) -> list[tuple[int, float]]:
        before = self._active[: self._n_active].copy()
        self._n_active = retire_until(t_s, self.now_s, self._active, self._n_active, self._remaining, self._rate,
                                      self._flow_links, self._flow_hops, self._link_flows, self._done_at_s)
        still = set(self._active[: self._n_active].tolist())
        return [(int(f), float(self._done_at_s[f])) for f in before if int(f) not in still]

    def advance_to(self, t_s: float) -> list[tuple[int, float]]:
        """Run the network to ``t_s``; the flows that finished, ``(flow_id, done_at_s)`` in order."""
        self._check_time(t_s)
        done: list[tuple[int, float]] = []
        while True:
            t_done = self.next_done_at_s()
            if t_done > t_s:
                break
            done.extend(self._retire(t_done))
            self._rates()
            self.now_s = t_done
        self._retire(t_s)  # no flow finishes: every finish time exceeds t_s
        self.now_s = t_s
        return done

    def start_flow(self, t_s: float, src: int, dst: int, size_bytes: float, ecmp_spine: int | None = None) -> int:
        """Start a transfer at ``t_s`` (call ``advance_to(t_s)`` first); returns its flow id.

        ``ecmp_spine`` overrides the ECMP hash (drawn from the session's stream otherwise)."""
        fab = self.network.fabric
        fab.check_host(src)
        fab.check_host(dst)
        if src == dst:
            raise ConfigError(f"flow from host {src} to itself: give src != dst")
        if not (math.isfinite(size_bytes) and size_bytes > 0):
            raise ConfigError(f"flow size {size_bytes!r} bytes must be finite and > 0; drop empty transfers")
        if t_s != self.now_s:
            raise ConfigError(f"start_flow at t={t_s} s but the session is at {self.now_s} s; call "
                              f"advance_to(t) first so finished flows are reported")
        f = self._n_flows
        if f == self._active.shape[0]:
            self._alloc(2 * f)
        if ecmp_spine is None:
            ecmp_spine = int(self._rng.integers(0, fab.n_spines)) if self._rng is not None else 0
        if not 0 <= ecmp_spine < fab.n_spines:
            raise ConfigError(f"ecmp_spine {ecmp_spine} is not a spine; use 0..{fab.n_spines - 1}")
        self._ecmp[f] = ecmp_spine
        self._spine[f] = admit_flow(f, int(src), int(dst), float(size_bytes), self.policy.code, self._ecmp,
                                    fab.n_hosts, fab.n_spines, self._links, self._hops, self._flow_links,
                                    self._flow_hops, self._link_flows, self._remaining, self._active, self._n_active)
        self._n_active += 1
        self._n_flows += 1
        self._rates()
        return f
