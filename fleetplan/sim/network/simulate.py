"""``FlowNetwork``: simulate KV-cache transfers as flows on a leaf-spine fabric.

Flow level, not packet level: each active flow has a rate; rates are the max-min fair
allocation of link capacities (progressive filling), recomputed exactly at every flow start and
finish, so a flow's completion time is the instant its bytes are delivered at those piecewise
constant rates.  This is the fluid limit of fair congestion control (max-min fairness,
Bertsekas & Gallager 1992, section 6.5); it omits packet-level effects (slow start, queueing
delay, incast loss, DCQCN dynamics), so it is a lower bound on a packet simulator's FCT under
the same path choices.  Paths: ECMP hashing or a path-reservation controller (``PathPolicy``).

Offline use (a whole trace, as the Vidur x NS-3 PD co-simulation report (Lin et al. 2026) phase 2 runs NS-3 once)::

    net = FlowNetwork(LeafSpineFabric(n_leaves=4, hosts_per_leaf=4, n_spines=2))
    result = net.simulate_flows(flows, PathPolicy.ECMP, rng=stream(seed, "ecmp"))

Online use by an event-driven engine: ``FlowSession`` (``fleetplan.sim.network.session``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.sim._kernels.flows import run_flows
from fleetplan.sim.network.fabric import LeafSpineFabric
from fleetplan.sim.network.flows import FlowResult, FlowSet, PathPolicy, path_policy

__all__ = ["FlowNetwork", "draw_ecmp_spines"]


def draw_ecmp_spines(n_flows: int, n_spines: int, rng: np.random.Generator) -> np.ndarray:
    """The ECMP hash of each flow: uniform over ``n_spines`` (a random source port's hash)."""
    return rng.integers(0, n_spines, size=n_flows).astype(np.int64)


@dataclass(frozen=True)
class FlowNetwork:
    """The flow-level model of one fabric (module docstring)."""

    fabric: LeafSpineFabric

    def __post_init__(self) -> None:
        if not isinstance(self.fabric, LeafSpineFabric):
            raise ConfigError(f"FlowNetwork needs a LeafSpineFabric, got {type(self.fabric).__name__}")

    def kernel_inputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(path_links, path_hops, capacity_bytes_per_s)`` as the kernel reads them."""
        links, hops = self.fabric.path_table()
        return links, hops, self.fabric.capacity_bytes_per_s()

    def check_flows(self, flows: FlowSet) -> None:
        """Raise ``ConfigError`` when a flow names a host outside the fabric."""
        n = self.fabric.n_hosts
        bad = (flows.src < 0) | (flows.src >= n) | (flows.dst < 0) | (flows.dst >= n)
        if bad.any():
            i = int(np.argmax(bad))
            raise ConfigError(f"flow {i} ({int(flows.src[i])} -> {int(flows.dst[i])}) names a host outside "
                              f"the fabric's 0..{n - 1}; use more leaves or renumber the hosts")

    def simulate_flows(self, flows: FlowSet, policy: PathPolicy | str, rng: np.random.Generator | None = None,
                       ecmp_spine: np.ndarray | None = None) -> FlowResult:
        """Completion, ideal time and slowdown of every flow.

        Parameters
        ----------
        flows : FlowSet
            Flows in any order; ties in start time are taken in the given order.
        policy : PathPolicy or str
            ``"ecmp"`` or ``"reservation"``.
        rng : numpy.random.Generator, optional
            Stream for the ECMP hashes (required for ECMP unless ``ecmp_spine`` is given).
        ecmp_spine : array of int, optional
            Pre-drawn hash (spine index) per flow, in the order of ``flows``.
        """
        if not isinstance(flows, FlowSet):
            raise ConfigError(f"simulate_flows needs a FlowSet, got {type(flows).__name__}")
        policy = path_policy(policy)
        self.check_flows(flows)
        n, n_spines = flows.n_flows, self.fabric.n_spines
        if ecmp_spine is None:
            if rng is None:
                if policy is PathPolicy.ECMP:
                    raise ConfigError("ECMP needs a random stream for its hashes; pass rng=stream(seed, 'ecmp')")
                ecmp_spine = np.zeros(n, dtype=np.int64)
            else:
                ecmp_spine = draw_ecmp_spines(n, n_spines, rng)
        ecmp_spine = np.asarray(ecmp_spine, dtype=np.int64)
        if ecmp_spine.shape != (n,) or (n and (ecmp_spine.min() < 0 or ecmp_spine.max() >= n_spines)):
            raise ConfigError(f"ecmp_spine must hold one spine in 0..{n_spines - 1} per flow; redraw it")
        order = np.argsort(flows.start_at_s, kind="stable")
        links, hops, capacity = self.kernel_inputs()
        done = np.full(n, np.nan)
        spine = np.full(n, -1, dtype=np.int64)
        peak = 0
        if n:
            peak = run_flows(np.ascontiguousarray(flows.start_at_s[order]), np.ascontiguousarray(flows.src[order]),
                             np.ascontiguousarray(flows.dst[order]), np.ascontiguousarray(flows.size_bytes[order]),
                             np.ascontiguousarray(ecmp_spine[order]), policy.code, self.fabric.n_hosts, n_spines,
                             links, hops, capacity, done, spine)
        done_at_s = np.empty(n)
        spine_out = np.empty(n, dtype=np.int64)
        done_at_s[order] = done
        spine_out[order] = spine
        ideal = self.fabric.ideal_s(flows.src, flows.dst, flows.size_bytes)
        for arr in (done_at_s, spine_out, ideal):
            arr.setflags(write=False)
        return FlowResult(flows, policy, done_at_s, ideal, spine_out, int(peak))
