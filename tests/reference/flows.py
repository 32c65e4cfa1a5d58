"""Slow, readable twin of ``fleetplan.sim._kernels.flows.run_flows``.

Same inputs, same float operations in the same order, so outputs must be identical.  Flows are
dicts; the active set is a sorted list of flow ids; max-min rates come from ``progressive_filling``
written over Python sets.  It also records every (flow, rate, seconds) segment so tests can check
conservation: the bytes each flow receives sum to its size.
"""

from __future__ import annotations

import math

from fleetplan.sim._kernels.flows import POLICY_ECMP


def progressive_filling(paths: dict[int, list[int]], capacity) -> dict[int, float]:
    """Max-min fair rate of each flow (id -> its links): freeze the flows of the link with the
    smallest fair share (lowest index on ties), subtract, repeat."""
    cap_left = {link: float(capacity[link]) for link in range(len(capacity))}
    users = {link: sum(1 for links in paths.values() if link in links) for link in range(len(capacity))}
    rate: dict[int, float] = {}
    while len(rate) < len(paths):
        shares = [(cap_left[link] / users[link], link) for link in range(len(capacity)) if users[link] > 0]
        best = min(share for share, _ in shares)
        best_link = min(link for share, link in shares if share == best)
        for f in sorted(paths):
            if f in rate or best_link not in paths[f]:
                continue
            rate[f] = best
            for link in paths[f]:
                cap_left[link] = max(cap_left[link] - best, 0.0)
                users[link] -= 1
    return rate


def pick_spine(policy, f, src, dst, n_hosts, n_spines, ecmp_spine, path_links, path_hops, paths) -> int:
    """ECMP: the pre-drawn hash; reservation: least-loaded spine links (max, then sum, then index)."""
    hops = int(path_hops[src, dst])
    if hops <= 2:
        return -1
    if policy == POLICY_ECMP:
        return int(ecmp_spine[f])
    load = {link: 0 for link in range(int(path_links.max()) + 1)}
    for links in paths.values():
        for link in links:
            load[link] += 1
    base = (src * n_hosts + dst) * n_spines
    keys = []
    for s in range(n_spines):
        counts = [load[int(path_links[base + s, h])] for h in (1, 2)]  # leaf -> spine, spine -> leaf
        keys.append((max(counts), sum(counts), s))
    return min(keys)[2]


def run_flows(start_at_s, src, dst, size_bytes, ecmp_spine, policy, n_hosts, n_spines, path_links, path_hops,
              capacity, out_done_at_s, out_spine, segments=None):
    """Twin of the kernel; ``segments`` (a list) receives ``(flow, rate, seconds)`` tuples."""
    n_flows = len(start_at_s)
    paths: dict[int, list[int]] = {}  # active flow -> its links
    remaining: dict[int, float] = {}
    rate: dict[int, float] = {}
    now, nxt, peak = 0.0, 0, 0
    while nxt < n_flows or paths:
        finish = {f: now + remaining[f] / rate[f] for f in sorted(paths)}
        t_done = min(finish.values(), default=math.inf)
        t_start = float(start_at_s[nxt]) if nxt < n_flows else math.inf
        t = t_done if t_done < t_start else t_start
        dt = t - now
        for f in sorted(paths):
            if segments is not None:
                segments.append((f, rate[f], dt))
            if finish[f] <= t:
                out_done_at_s[f] = t
                del paths[f]
            else:
                remaining[f] -= rate[f] * dt
        while nxt < n_flows and start_at_s[nxt] <= t:
            f, s, d = nxt, int(src[nxt]), int(dst[nxt])
            spine = pick_spine(policy, f, s, d, n_hosts, n_spines, ecmp_spine, path_links, path_hops, paths)
            out_spine[f] = spine
            row = (s * n_hosts + d) * n_spines + max(spine, 0)
            paths[f] = [int(path_links[row, h]) for h in range(int(path_hops[s, d]))]
            remaining[f] = float(size_bytes[f])
            nxt += 1
        peak = max(peak, len(paths))
        rate = progressive_filling(paths, capacity)
        now = t
    return peak
