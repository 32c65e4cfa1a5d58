"""Network side of the PDD twin (model in ``fleetplan.sim._kernels.pdd.network``).

Flows are kept in dicts keyed by flow number; rates come from ``tests.reference.flows``'
``progressive_filling`` and spines from its ``pick_spine`` (the twins of the flow kernel's
helpers), with the same float operations in the same order as the kernel.
"""

from __future__ import annotations

from collections import deque

from fleetplan.sim._kernels.pdd import codes as pc
from tests.reference.flows import pick_spine, progressive_filling

INF = float("inf")


class NetTwin:
    def __init__(self, ci, net_in) -> None:
        self.host_p, self.host_d = net_in.prefill_host, net_in.decode_host
        self.links, self.hops, self.capacity = net_in.path_links, net_in.path_hops, net_in.capacity_bytes_per_s
        self.ecmp, self.layer_bytes, self.last_bytes = net_in.ecmp_spine, net_in.layer_bytes, net_in.last_bytes
        self.policy, self.n_hosts, self.n_spines = ci[pc.CI_NET_POLICY], ci[pc.CI_N_HOSTS], ci[pc.CI_N_SPINES]
        self.now, self.next, self.dirty, self.peak = 0.0, INF, False, 0
        self.paths: dict[int, list[int]] = {}
        self.remaining: dict[int, float] = {}
        self.rate: dict[int, float] = {}
        self.flows: list[list] = []  # [request, kind, spine, start, done]
        self.pending: deque = deque()

    def start(self, r, kind: int, t: float) -> None:
        dt = t - self.now
        for f in sorted(self.paths):
            self.remaining[f] -= self.rate[f] * dt
        self.now = t
        f = len(self.flows)
        src, dst = int(self.host_p[r.pf_inst]), int(self.host_d[r.dec_inst])
        spine = pick_spine(self.policy, f, src, dst, self.n_hosts, self.n_spines, self.ecmp, self.links, self.hops,
                           self.paths)
        row = (src * self.n_hosts + dst) * self.n_spines + max(spine, 0)
        self.paths[f] = [int(self.links[row, h]) for h in range(int(self.hops[src, dst]))]
        size = self.layer_bytes[r.idx] if kind == pc.FLOW_LAYERS else self.last_bytes[r.idx]
        self.remaining[f] = float(size)
        self.rate[f] = 0.0
        self.flows.append([r.idx, kind, spine, t, INF])
        self.peak = max(self.peak, len(self.paths))
        self.dirty = True

    def refresh(self) -> None:
        if not self.dirty:
            return
        self.dirty = False
        self.rate.update(progressive_filling(self.paths, self.capacity))
        nxt = INF
        for f in sorted(self.paths):
            t_f = self.now + self.remaining[f] / self.rate[f]
            if t_f < nxt:
                nxt = t_f
        self.next = nxt if nxt > self.now else self.now

    def next_event_s(self) -> float:
        return self.now if self.pending else self.next

    def pop(self, t: float) -> int:
        if not self.pending:
            dt = t - self.now
            for f in sorted(self.paths):
                if self.now + self.remaining[f] / self.rate[f] <= t:
                    self.flows[f][4] = t
                    del self.paths[f]
                    self.pending.append(f)
                else:
                    self.remaining[f] -= self.rate[f] * dt
            self.now = t
            self.dirty = True
        return self.pending.popleft()
