"""KV transfers of the PDD kernel as flows on a leaf-spine fabric (``CI_NETWORK = 1``).

Each transfer is a flow from the prefill instance's host to the decode instance's host
(``prefill_host``, ``decode_host``) whose rate is its max-min fair share of the links it crosses,
recomputed at every flow start and finish (``fleetplan.sim._kernels.flows``: progressive
filling, ECMP or path reservation).  Per request (phases ``NET_*`` in ``R_i[:, RI_NET]``):

* layer-wise (``layer_bytes > 0``, all but the last layer's KV): a ``FLOW_LAYERS`` flow starts
  at the grant (it may run while prefill does);
* ready = max(prefill end, layers' flow end) (the grant without layer-wise); after the transfer
  latency (the decode instance's pull reaching the prefill host: a transfer-heap event, none
  when the latency is 0) the ``FLOW_LAST`` flow of ``last_bytes`` starts; its end is the handoff.

So with one flow at a time on links of ``bandwidth`` bytes/s the handoff is ``max(prefill end,
grant + layers / bandwidth) + latency + last / bandwidth``, the first-order model's formula.

Clock and events: the network state is advanced only at its own events: a start at ``t``
moves every active flow on by ``rate * (t - now)`` bytes; a completion event at ``t`` (the
earliest ``now + remaining / rate``, never before ``now``) retires every flow with ``now +
remaining / rate <= t`` into a pending list, handled one per event in flow order, before any
other event at ``t``.  Rates are recomputed lazily (``net_refresh``) before the next event is
chosen, so several starts at one instant cost one max-min computation.  Flows are numbered in
start order; active flows are kept sorted by number (``flows.admit_flow``).
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.flows import admit_flow, maxmin_rates, next_done_at_s
from fleetplan.sim._kernels.jit import njit_helper, njit_inline
from fleetplan.sim._kernels.pdd.codes import (
    CI_N_HOSTS,
    CI_N_SPINES,
    CI_NET_POLICY,
    FI_KIND,
    FI_REQ,
    FI_SPINE,
    FLOW_LAYERS,
    FT_DONE,
    FT_START,
    N_NF,
    N_NI,
    NF_NEXT,
    NF_NOW,
    NI_ACTIVE,
    NI_DIRTY,
    NI_FLOWS,
    NI_PEAK,
    NI_PENDING,
    NI_PHEAD,
    OI_DEC_INST,
    OI_PF_INST,
)
from fleetplan.sim._kernels.pdd.state import FabricState


@njit_helper
def net_alloc(n_requests, n_links, max_hops):
    """Network state (``state.FabricState``) for at most two flows per request."""
    n_flows = 2 * n_requests
    net_f = np.zeros(N_NF)
    net_f[NF_NEXT] = np.inf
    return FabricState(
        net_f=net_f, net_i=np.zeros(N_NI, dtype=np.int64), active=np.zeros(n_flows, dtype=np.int64),
        remaining_bytes=np.zeros(n_flows), rate_bytes_per_s=np.zeros(n_flows), frozen=np.zeros(n_flows, dtype=np.bool_),
        flow_links=np.full((n_flows, max_hops), -1, dtype=np.int64), flow_hops=np.zeros(n_flows, dtype=np.int64),
        link_flows=np.zeros(n_links, dtype=np.int64), cap_left_bytes_per_s=np.zeros(n_links),
        n_left=np.zeros(n_links, dtype=np.int64), done=np.zeros(n_flows, dtype=np.int64))


@njit_helper
def net_start(r, kind, t, config, outputs, fabric, net):
    """Start request ``r``'s flow of ``kind`` at ``t`` (rates are recomputed before the next event).

    Not inlined: called about twice per request from many sites, it would bloat compile time."""
    cfg_i = config.cfg_i
    out_i, fl_t, fl_i = outputs.request_i, outputs.flow_t, outputs.flow_i
    net_f, net_i, active = net.net_f, net.net_i, net.active
    remaining, rate = net.remaining_bytes, net.rate_bytes_per_s
    dt = t - net_f[NF_NOW]
    for k in range(net_i[NI_ACTIVE]):
        f = active[k]
        remaining[f] -= rate[f] * dt
    net_f[NF_NOW] = t
    f = net_i[NI_FLOWS]
    size = fabric.layer_bytes[r] if kind == FLOW_LAYERS else fabric.last_bytes[r]
    spine = admit_flow(f, fabric.prefill_host[out_i[r, OI_PF_INST]], fabric.decode_host[out_i[r, OI_DEC_INST]], size,
                       cfg_i[CI_NET_POLICY], fabric.ecmp_spine, cfg_i[CI_N_HOSTS], cfg_i[CI_N_SPINES],
                       fabric.path_links, fabric.path_hops, net.flow_links, net.flow_hops, net.link_flows, remaining,
                       active, net_i[NI_ACTIVE])
    rate[f] = 0.0
    net_i[NI_ACTIVE] += 1
    net_i[NI_FLOWS] = f + 1
    if net_i[NI_ACTIVE] > net_i[NI_PEAK]:
        net_i[NI_PEAK] = net_i[NI_ACTIVE]
    net_i[NI_DIRTY] = 1
    fl_t[f, FT_START] = t
    fl_i[f, FI_REQ] = r
    fl_i[f, FI_KIND] = kind
    fl_i[f, FI_SPINE] = spine


@njit_inline
def net_refresh(fabric, net):
    """Recompute the max-min rates and the next completion time if flows started or ended."""
    net_f, net_i = net.net_f, net.net_i
    if net_i[NI_DIRTY] == 0:
        return
    net_i[NI_DIRTY] = 0
    n_active = net_i[NI_ACTIVE]
    maxmin_rates(net.active, n_active, net.flow_links, net.flow_hops, fabric.capacity_bytes_per_s, net.link_flows,
                 net.rate_bytes_per_s, net.cap_left_bytes_per_s, net.n_left, net.frozen)
    now = net_f[NF_NOW]
    t_next = next_done_at_s(net.active, n_active, now, net.remaining_bytes, net.rate_bytes_per_s)
    net_f[NF_NEXT] = t_next if t_next > now else now


@njit_inline
def net_next_event_s(net):
    """Time of the next network event: a pending completion now, else the next completion."""
    net_f, net_i = net.net_f, net.net_i
    if net_i[NI_PENDING] > net_i[NI_PHEAD]:
        return net_f[NF_NOW]
    return net_f[NF_NEXT]


@njit_inline
def net_pop(t, outputs, net):
    """The next flow completing at ``t`` (retiring every flow due by ``t`` first when none is pending)."""
    fl_t = outputs.flow_t
    net_f, net_i, active, done = net.net_f, net.net_i, net.active, net.done
    remaining, rate, flow_links, flow_hops = net.remaining_bytes, net.rate_bytes_per_s, net.flow_links, net.flow_hops
    if net_i[NI_PENDING] == net_i[NI_PHEAD]:
        now = net_f[NF_NOW]
        dt = t - now
        kept = 0
        n_done = 0
        for k in range(net_i[NI_ACTIVE]):
            f = active[k]
            if now + remaining[f] / rate[f] <= t:
                fl_t[f, FT_DONE] = t
                for h in range(flow_hops[f]):
                    net.link_flows[flow_links[f, h]] -= 1
                done[n_done] = f
                n_done += 1
            else:
                remaining[f] -= rate[f] * dt
                active[kept] = f
                kept += 1
        net_i[NI_ACTIVE] = kept
        net_i[NI_PENDING] = n_done
        net_i[NI_PHEAD] = 0
        net_i[NI_DIRTY] = 1
        net_f[NF_NOW] = t
    f = done[net_i[NI_PHEAD]]
    net_i[NI_PHEAD] += 1
    return f
