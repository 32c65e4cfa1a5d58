"""Slow, readable twin of ``fleetplan.sim._kernels.request_level.run_request_level``.

Same signature, same pre-drawn randomness, same float operations, so outputs must be
identical.  Each instance keeps a ``heapq`` of its slots' free times (FCFS with c servers:
a request starts when the earliest slot frees); a global ``heapq`` of (done, instance)
tells routing how many requests each instance still holds at an arrival.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from fleetplan.sim._kernels.codes import (
    POOL_LEAST_LOADED,
    ROUTE_LEAST_OUTSTANDING,
    ROUTE_POWER_OF_TWO,
    ROUTE_RANDOM,
    ROUTE_ROUND_ROBIN,
    STATUS_DONE,
    STATUS_REJECTED,
    STATUS_UNFINISHED,
)


def scaled_index(u: float, n: int) -> int:
    """floor(u * n) clamped into [0, n-1]."""
    return min(max(int(u * n), 0), n - 1)


def pick_instance(router, p, pool_inst_start, outstanding, rr_next, u0, u1) -> int:
    """Within-pool routing (see ``fleetplan.sim._kernels.routing``), written plainly."""
    first, last = int(pool_inst_start[p]), int(pool_inst_start[p + 1])
    n = last - first
    if n == 1:
        return first
    if router == ROUTE_LEAST_OUTSTANDING:
        start = scaled_index(u0, n)
        order = [first + (start + j) % n for j in range(n)]
        return min(order, key=lambda k: outstanding[k])  # min() keeps the first minimum
    if router == ROUTE_ROUND_ROBIN:
        j = rr_next[p]
        rr_next[p] = (j + 1) % n
        return first + j
    if router == ROUTE_RANDOM:
        return first + scaled_index(u0, n)
    if router == ROUTE_POWER_OF_TWO:
        a = first + scaled_index(u0, n)
        b = first + (a - first + 1 + scaled_index(u1, n - 1)) % n
        return b if outstanding[b] < outstanding[a] else a
    raise ValueError(f"unknown router {router}")


def least_loaded_pool(total_tokens, pool_load, pool_inst_start, pool_max_context) -> int:
    """Pool with the least load per instance that fits; else the largest max context."""
    fitting = [q for q in range(len(pool_max_context)) if pool_max_context[q] >= total_tokens]
    if not fitting:
        return max(range(len(pool_max_context)), key=lambda q: (pool_max_context[q], -q))
    best = fitting[0]
    for q in fitting[1:]:
        n_q = pool_inst_start[q + 1] - pool_inst_start[q]
        n_b = pool_inst_start[best + 1] - pool_inst_start[best]
        if pool_load[q] * n_b < pool_load[best] * n_q:  # exact comparison of load / n
            best = q
    return best


def run_request_level(
    arrival_s, service_s, first_token_offset_s, total_tokens, req_pool, route_u,
    pool_inst_start, pool_router, pool_max_context, inst_slots, horizon_s,
    out_inst, out_start_s, out_first_token_s, out_done_s, out_status, inst_busy_slot_s,
) -> int:
    n_inst = len(inst_slots)
    n_pools = len(pool_router)
    inst_pool = [p for p in range(n_pools) for _ in range(pool_inst_start[p], pool_inst_start[p + 1])]
    slots = [[0.0] * int(inst_slots[k]) for k in range(n_inst)]  # each a heap of free times
    outstanding = [0] * n_inst
    pool_outstanding = [0] * n_pools
    rr_next = [0] * n_pools
    departures: list[tuple[float, int]] = []
    n_events = 0
    # departures are tracked (and counted as events) only if routing can read them
    track = any(
        pool_inst_start[p + 1] - pool_inst_start[p] > 1 and pool_router[p] in (ROUTE_LEAST_OUTSTANDING,
                                                                              ROUTE_POWER_OF_TWO)
        for p in range(n_pools)
    ) or bool(np.any(np.asarray(req_pool) == POOL_LEAST_LOADED))
    inst_busy_slot_s[:] = 0.0
    if any(arrival_s[i] < arrival_s[i - 1] for i in range(1, len(arrival_s))):
        raise ValueError("arrival_s must be sorted")
    for i in range(len(arrival_s)):
        t = arrival_s[i]
        n_events += 1
        while departures and departures[0][0] <= t:
            _, k = heapq.heappop(departures)
            outstanding[k] -= 1
            pool_outstanding[inst_pool[k]] -= 1
            n_events += 1
        p = int(req_pool[i])
        if p == POOL_LEAST_LOADED:
            p = least_loaded_pool(total_tokens[i], pool_outstanding, pool_inst_start, pool_max_context)
        if total_tokens[i] > pool_max_context[p]:
            out_inst[i] = -1
            out_start_s[i] = out_first_token_s[i] = out_done_s[i] = math.inf
            out_status[i] = STATUS_REJECTED
            continue
        k = pick_instance(pool_router[p], p, pool_inst_start, outstanding, rr_next,
                          route_u[i, 0], route_u[i, 1])
        start = max(t, slots[k][0])
        done = start + service_s[i]
        heapq.heapreplace(slots[k], done)
        if track:
            heapq.heappush(departures, (done, k))
            outstanding[k] += 1
            pool_outstanding[p] += 1
        out_inst[i] = k
        if start > horizon_s:
            out_start_s[i] = out_first_token_s[i] = out_done_s[i] = math.inf
            out_status[i] = STATUS_UNFINISHED
        else:
            out_start_s[i] = start
            out_first_token_s[i] = start + first_token_offset_s[i]
            out_done_s[i] = done
            out_status[i] = STATUS_DONE
            inst_busy_slot_s[k] += min(done, horizon_s) - start
    return n_events
