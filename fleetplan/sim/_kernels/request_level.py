"""Request-level simulator kernel: each instance is an FCFS multi-server queue.

Model.  Instance ``k`` has ``c_k = inst_slots[k]`` identical servers (KV slots) and its
own FCFS queue.  A request routed to ``k`` at arrival time ``a`` starts at

    start = max(a, earliest time a slot of k is free)      (FCFS, c_k servers)
    first_token = start + first_token_offset_s
    done = start + service_s

and occupies that slot until ``done``.  Per instance the slot free times are an array
min-heap (a segment of one flat array), so each request costs O(log c).  Routing sees the
number of outstanding requests (dispatched and ``done > a``) of every instance, kept
exact by one global min-heap of ``(done, instance)`` popped at each arrival (O(log N));
least-outstanding routing finds its instance in O(log n) (``routing.py``).
With one instance and exponential service this is exactly M/M/c FCFS.

Status: ``total_tokens > pool_max_context`` -> REJECTED (not routed, ``out_inst = -1``);
``start > horizon_s`` -> UNFINISHED (start/first-token/done reported as ``inf``, the slot
is still occupied for later arrivals); otherwise DONE (``done`` may exceed the horizon).

``inst_busy_slot_s[k]`` = slot-seconds busy inside ``[0, horizon_s]``:
sum of ``min(done, horizon) - start`` over requests started by the horizon.
Returns the number of events: arrivals plus departures popped from the global heap.
The departure heap and outstanding counts are kept only when something reads them
(least-outstanding or power-of-two routing in a pool of several instances, or
``req_pool == POOL_LEAST_LOADED``); otherwise the event count is the number of arrivals.
Arrivals must be sorted (non-decreasing; ValueError otherwise).
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.codes import (
    POOL_LEAST_LOADED,
    ROUTE_LEAST_OUTSTANDING,
    ROUTE_POWER_OF_TWO,
    STATUS_DONE,
    STATUS_REJECTED,
    STATUS_UNFINISHED,
)
from fleetplan.sim._kernels.heaps import heap_pop, heap_push, heap_replace_top
from fleetplan.sim._kernels.jit import njit
from fleetplan.sim._kernels.routing import (
    add_outstanding,
    build_outstanding_trees,
    least_loaded_pool,
    pick_instance,
)


@njit
def run_request_level(
    arrival_s, service_s, first_token_offset_s, total_tokens, req_pool, route_u,
    pool_inst_start, pool_router, pool_max_context, inst_slots, horizon_s,
    out_inst, out_start_s, out_first_token_s, out_done_s, out_status, inst_busy_slot_s,
):
    n_req = arrival_s.shape[0]
    n_inst = inst_slots.shape[0]
    n_pools = pool_router.shape[0]

    inst_pool = np.empty(n_inst, dtype=np.int32)
    for p in range(n_pools):
        for k in range(pool_inst_start[p], pool_inst_start[p + 1]):
            inst_pool[k] = p
    slot_lo = np.zeros(n_inst + 1, dtype=np.int64)
    for k in range(n_inst):
        slot_lo[k + 1] = slot_lo[k] + inst_slots[k]
    slot_free_s = np.zeros(slot_lo[n_inst], dtype=np.float64)
    inst_outstanding = np.zeros(n_inst, dtype=np.int64)
    tree, tree_lo, tree_leaves = build_outstanding_trees(pool_inst_start)
    pool_outstanding = np.zeros(n_pools, dtype=np.int64)
    rr_next = np.zeros(n_pools, dtype=np.int32)
    heap_size = 0
    n_events = 0
    # Outstanding counts are only read by least-outstanding / power-of-two routing in pools
    # of more than one instance and by kernel-chosen pools; otherwise skip their upkeep.
    track = False
    for p in range(n_pools):
        if pool_inst_start[p + 1] - pool_inst_start[p] > 1 and (
                pool_router[p] == ROUTE_LEAST_OUTSTANDING or pool_router[p] == ROUTE_POWER_OF_TWO):
            track = True
    for i in range(n_req):
        if req_pool[i] == POOL_LEAST_LOADED:
            track = True
            break
    heap_capacity = n_req if track else 0
    done_heap_s = np.empty(heap_capacity, dtype=np.float64)
    done_heap_inst = np.empty(heap_capacity, dtype=np.int32)
    for k in range(n_inst):
        inst_busy_slot_s[k] = 0.0

    for i in range(n_req):
        t = arrival_s[i]
        if i > 0 and t < arrival_s[i - 1]:
            raise ValueError("arrival_s must be sorted")
        n_events += 1
        while heap_size > 0 and done_heap_s[0] <= t:
            k = done_heap_inst[0]
            heap_size = heap_pop(done_heap_s, done_heap_inst, heap_size)
            add_outstanding(k, inst_pool[k], -1, inst_outstanding, pool_inst_start, tree, tree_lo, tree_leaves)
            pool_outstanding[inst_pool[k]] -= 1
            n_events += 1

        p = req_pool[i]
        if p == POOL_LEAST_LOADED:
            p = least_loaded_pool(total_tokens[i], pool_outstanding, pool_inst_start, pool_max_context)
        if total_tokens[i] > pool_max_context[p]:
            out_inst[i] = -1
            out_start_s[i] = np.inf
            out_first_token_s[i] = np.inf
            out_done_s[i] = np.inf
            out_status[i] = STATUS_REJECTED
            continue

        k = pick_instance(pool_router[p], p, pool_inst_start, inst_outstanding, tree, tree_lo,
                          tree_leaves, rr_next, route_u[i, 0], route_u[i, 1])
        lo = slot_lo[k]
        free_s = slot_free_s[lo]
        start = t if t >= free_s else free_s
        done = start + service_s[i]
        heap_replace_top(slot_free_s, lo, inst_slots[k], done)
        if track:
            heap_size = heap_push(done_heap_s, done_heap_inst, heap_size, done, k)
            add_outstanding(k, p, 1, inst_outstanding, pool_inst_start, tree, tree_lo, tree_leaves)
            pool_outstanding[p] += 1
        out_inst[i] = k
        if start > horizon_s:
            out_start_s[i] = np.inf
            out_first_token_s[i] = np.inf
            out_done_s[i] = np.inf
            out_status[i] = STATUS_UNFINISHED
        else:
            out_start_s[i] = start
            out_first_token_s[i] = start + first_token_offset_s[i]
            out_done_s[i] = done
            out_status[i] = STATUS_DONE
            end = done if done <= horizon_s else horizon_s
            inst_busy_slot_s[k] += end - start
    return n_events
