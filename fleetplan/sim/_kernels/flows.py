"""Flow-level network kernel: max-min fair sharing recomputed at every flow start and finish.

Model (the wrapper is ``fleetplan.sim.network``; the slow twin is ``tests/reference/flows.py``).
Links are directed, each with a capacity in bytes/s.  A flow crosses the links of one path
(``path_links[(src * n_hosts + dst) * n_spines + spine, :path_hops[src, dst]]``).  Between two
events every active flow sends at a constant rate; at each event (flows finishing, then flows
starting, at the same instant) the rates are recomputed as the max-min fair allocation by
progressive filling (Bertsekas & Gallager, *Data Networks*, 2nd ed., 1992, section 6.5.2):
repeatedly take the link with the smallest fair share ``remaining capacity / unfrozen flows``
(ties: lowest link index), freeze its unfrozen flows at that share, subtract it from every link
they cross.  Exact for any path set; ``O(links x active)`` per round, at most ``links`` rounds.

Path choice at a flow's start: ``POLICY_ECMP`` takes the pre-drawn spine ``ecmp_spine[f]`` (the
hash); ``POLICY_RESERVATION`` takes the spine whose path is least loaded now: smallest maximum
count of active flows over the path's two leaf-spine links, then smallest sum, then lowest spine.

Canonical order (so the twin matches to the last bit): active flows are kept sorted by flow
index (flows are indexed in start order); a finished flow is removed by shifting.  A flow
finishes at ``t`` when ``now + remaining / rate <= t`` with ``t`` the earliest such time.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.codes import POLICY_ECMP
from fleetplan.sim._kernels.jit import njit, njit_inline


@njit_inline
def maxmin_rates(active, n_active, flow_links, flow_hops, capacity, link_flows, rate, cap_left, n_left,
                 frozen):
    """Max-min fair ``rate[f]`` of every active flow (progressive filling); scratch arrays given."""
    n_links = capacity.shape[0]
    for link in range(n_links):
        cap_left[link] = capacity[link]
        n_left[link] = link_flows[link]
    for k in range(n_active):
        frozen[active[k]] = False
    unfrozen = n_active
    while unfrozen > 0:
        best = np.inf
        best_link = -1
        for link in range(n_links):
            if n_left[link] > 0:
                share = cap_left[link] / n_left[link]
                if share < best:
                    best = share
                    best_link = link
        for k in range(n_active):
            f = active[k]
            if frozen[f]:
                continue
            crosses = False
            for h in range(flow_hops[f]):
                if flow_links[f, h] == best_link:
                    crosses = True
            if crosses:
                rate[f] = best
                frozen[f] = True
                unfrozen -= 1
                for h in range(flow_hops[f]):
                    link = flow_links[f, h]
                    left = cap_left[link] - best
                    cap_left[link] = left if left > 0.0 else 0.0
                    n_left[link] -= 1


@njit_inline
def choose_spine(policy, f, src, dst, n_hosts, n_spines, ecmp_spine, path_links, path_hops, link_flows):
    """Spine of flow ``f`` at its start (module docstring); -1 when the path crosses no spine."""
    hops = path_hops[src, dst]
    if hops <= 2:
        return -1
    if policy == POLICY_ECMP:
        return ecmp_spine[f]
    base = (src * n_hosts + dst) * n_spines
    best = -1
    best_max = 0
    best_sum = 0
    for s in range(n_spines):
        worst = 0
        total = 0
        for h in range(1, hops - 1):  # the leaf-spine links: the host links are common to every spine
            n = link_flows[path_links[base + s, h]]
            total += n
            if n > worst:
                worst = n
        if best < 0 or worst < best_max or (worst == best_max and total < best_sum):
            best = s
            best_max = worst
            best_sum = total
    return best


@njit_inline
def next_done_at_s(active, n_active, now, remaining, rate):
    """Earliest finish time of the active flows at their current rates (``inf`` when none)."""
    t_done = np.inf
    for k in range(n_active):
        f = active[k]
        t_f = now + remaining[f] / rate[f]
        if t_f < t_done:
            t_done = t_f
    return t_done


@njit_inline
def retire_until(t, now, active, n_active, remaining, rate, flow_links, flow_hops, link_flows, out_done_at_s):
    """Advance from ``now`` to ``t``: flows finishing by ``t`` get ``out_done_at_s = t`` and leave
    (order kept), the others lose ``rate * (t - now)`` bytes.  Returns the number still active."""
    dt = t - now
    kept = 0
    for k in range(n_active):
        f = active[k]
        if now + remaining[f] / rate[f] <= t:
            out_done_at_s[f] = t
            for h in range(flow_hops[f]):
                link_flows[flow_links[f, h]] -= 1
        else:
            remaining[f] -= rate[f] * dt
            active[kept] = f
            kept += 1
    return kept


@njit_inline
def admit_flow(f, s, d, size, policy, ecmp_spine, n_hosts, n_spines, path_links, path_hops, flow_links, flow_hops,
               link_flows, remaining, active, n_active):
    """Put flow ``f`` (``s -> d``, ``size`` bytes) on its path; returns its spine (-1: none).

    ``f`` must exceed every active flow id (ids in start order); the caller bumps ``n_active``."""
    spine = choose_spine(policy, f, s, d, n_hosts, n_spines, ecmp_spine, path_links, path_hops, link_flows)
    row = (s * n_hosts + d) * n_spines + (spine if spine >= 0 else 0)
    flow_hops[f] = path_hops[s, d]
    for h in range(flow_hops[f]):
        flow_links[f, h] = path_links[row, h]
        link_flows[path_links[row, h]] += 1
    remaining[f] = size
    active[n_active] = f
    return spine


@njit
def run_flows(start_at_s, src, dst, size_bytes, ecmp_spine, policy, n_hosts, n_spines, path_links, path_hops,
              capacity, out_done_at_s, out_spine):
    """Simulate flows sorted by ``start_at_s``; fills ``out_done_at_s`` and ``out_spine``.

    Returns the largest number of flows active at once."""
    n_flows = start_at_s.shape[0]
    n_links = capacity.shape[0]
    flow_links = np.empty((n_flows, path_links.shape[1]), dtype=np.int64)
    flow_hops = np.zeros(n_flows, dtype=np.int64)
    remaining = np.empty(n_flows, dtype=np.float64)
    rate = np.zeros(n_flows, dtype=np.float64)
    frozen = np.zeros(n_flows, dtype=np.bool_)
    active = np.empty(n_flows, dtype=np.int64)
    link_flows = np.zeros(n_links, dtype=np.int64)
    cap_left = np.empty(n_links, dtype=np.float64)
    n_left = np.empty(n_links, dtype=np.int64)
    n_active = 0
    peak = 0
    now = 0.0
    nxt = 0
    while nxt < n_flows or n_active > 0:
        t_done = next_done_at_s(active, n_active, now, remaining, rate)
        t_start = start_at_s[nxt] if nxt < n_flows else np.inf
        t = t_done if t_done < t_start else t_start
        n_active = retire_until(t, now, active, n_active, remaining, rate, flow_links, flow_hops, link_flows,
                                out_done_at_s)
        while nxt < n_flows and start_at_s[nxt] <= t:
            out_spine[nxt] = admit_flow(nxt, src[nxt], dst[nxt], size_bytes[nxt], policy, ecmp_spine, n_hosts,
                                        n_spines, path_links, path_hops, flow_links, flow_hops, link_flows,
                                        remaining, active, n_active)
            n_active += 1
            nxt += 1
        if n_active > peak:
            peak = n_active
        maxmin_rates(active, n_active, flow_links, flow_hops, capacity, link_flows, rate, cap_left, n_left, frozen)
        now = t
    return peak
