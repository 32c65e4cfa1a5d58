"""Instance failures in the iteration-level kernel: dispatch, down and up events.

Model (``iteration_level.py`` states the engine; this module adds failures).  Each instance
``k`` has pre-drawn event times ``inst_fail_event_s[inst_fail_lo[k] : inst_fail_lo[k + 1]]``,
non-decreasing, alternating down (even position), up (odd position).

* Order at equal times: step ends, then down/up events (lower instance first), then arrivals.
* Down at ``t`` (``instance_down``): the steps of a decode run ("cruise") that ended by ``t``
  are committed first (exactly as the step-by-step engine would have: such steps complete
  no request, so nobody could have been admitted after them); the step in flight
  is lost (not counted in the instance statistics).  Every running request loses its KV
  cache (recompute, as a preemption: its generated tokens are kept, its prompt + generated
  tokens are prefilled again) and counts one ``out_failures``; running and waiting requests
  are then re-dispatched in arrival order (request index).  The instance takes no request
  while down.
* Dispatch (``dispatch``, also used for arrivals): the pool's router chooses among healthy
  instances: least outstanding ignores down instances (their min-tree key is
  ``ROUTE_KEY_DOWN``); round robin advances its counter past down instances; random and
  power-of-two take the router's choice or, if it is down, the next healthy instance in
  cyclic order (power of two compares the two healthy picks, ties to the first).  The
  request joins the tail of the chosen instance's waiting queue (a re-dispatched request
  is treated as a new arrival there) and ``out_inst`` records the instance.
* A pool with no healthy instance holds requests in a pool queue (FIFO, never dropped);
  ``pool_tokens`` (least-loaded pool routing) still counts them.
* Up at ``t`` (``instance_up``): the instance rejoins empty with all KV blocks free; the
  pool's held requests are dispatched in queue order.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.codes import (
    ROUTE_KEY_DOWN,
    ROUTE_LEAST_OUTSTANDING,
    ROUTE_POWER_OF_TWO,
    ROUTE_RANDOM,
    ROUTE_ROUND_ROBIN,
)
from fleetplan.sim._kernels.heaps import tree_update
from fleetplan.sim._kernels.iteration_steps import GEN, commit_step, cut_cruise, schedule_step, steps_by_horizon
from fleetplan.sim._kernels.jit import njit_helper, njit_inline
from fleetplan.sim._kernels.routing import _scaled_index, add_outstanding, pick_instance, set_route_key
from fleetplan.sim._kernels.step_model import decode_step_parts


@njit_inline
def _next_up(first, n, j, inst_up):
    """First healthy instance at or after position ``j`` of the pool, cyclically."""
    while not inst_up[first + j]:
        j = j + 1 if j + 1 < n else 0
    return first + j


@njit_inline
def pick_healthy(router, p, pool_inst_start, inst_up, pool_n_up, inst_outstanding, tree, tree_lo, tree_leaves,
                 rr_next, u0, u1):
    """Like ``routing.pick_instance`` but never a down instance (the pool has one up)."""
    first = pool_inst_start[p]
    n = pool_inst_start[p + 1] - first
    if pool_n_up[p] == n or router == ROUTE_LEAST_OUTSTANDING:
        return pick_instance(router, p, pool_inst_start, inst_outstanding, tree, tree_lo, tree_leaves,
                             rr_next, u0, u1)
    if router == ROUTE_ROUND_ROBIN:
        while True:
            j = rr_next[p]
            rr_next[p] = j + 1 if j + 1 < n else 0
            if inst_up[first + j]:
                return first + j
    if router == ROUTE_RANDOM:
        return _next_up(first, n, _scaled_index(u0, n), inst_up)
    if router == ROUTE_POWER_OF_TWO:  # n >= 2 here: one instance is down, one is up
        a = _scaled_index(u0, n)
        b = (a + 1 + _scaled_index(u1, n - 1)) % n
        ka = _next_up(first, n, a, inst_up)
        kb = _next_up(first, n, b, inst_up)
        return kb if inst_outstanding[kb] < inst_outstanding[ka] else ka
    return -1


@njit_inline
def enqueue(k, p, r, t_s, reqs, slots, inst, pools, outs, tree, n_leaves):
    """Append request ``r`` to instance ``k``'s waiting queue at ``t_s``; start or cut its step."""
    next_waiting = reqs.next_waiting
    wait_ends, step_i, step_end_s = inst.wait_ends, inst.step_i, inst.step_end_s
    tail = wait_ends[k, 1]
    if tail < 0:
        wait_ends[k, 0] = r
    else:
        next_waiting[tail] = r
    wait_ends[k, 1] = r
    if step_end_s[k] == np.inf:
        schedule_step(k, p, t_s, reqs, slots, inst, pools, outs)
        tree_update(step_end_s, tree, n_leaves, k)
    elif step_i[k, 2] > 1:
        cut_cruise(k, p, t_s, inst, pools)
        tree_update(step_end_s, tree, n_leaves, k)


@njit_inline
def dispatch(r, p, t_s, route, health, reqs, slots, inst, pools, outs, load, tree, n_leaves):
    """Route request ``r`` to a healthy instance of pool ``p`` and enqueue it (or hold it)."""
    pool_router, route_u, rr_next, out_inst = route.pool_router, route.route_u, route.rr_next, route.out_inst
    inst_up, pool_n_up, hold_ends = health.inst_up, health.pool_n_up, health.hold_ends
    inst_outstanding, tree_out = load.inst_outstanding, load.tree
    tree_out_lo, tree_out_leaves = load.tree_lo, load.tree_leaves
    if pool_n_up[p] == 0:  # no healthy instance: hold in the pool's queue
        next_waiting = reqs.next_waiting
        if hold_ends[p, 1] < 0:
            hold_ends[p, 0] = r
        else:
            next_waiting[hold_ends[p, 1]] = r
        hold_ends[p, 1] = r
        return
    k = pick_healthy(pool_router[p], p, pools.pool_inst_start, inst_up, pool_n_up, inst_outstanding, tree_out,
                     tree_out_lo, tree_out_leaves, rr_next, route_u[r, 0], route_u[r, 1])
    out_inst[r] = k
    add_outstanding(k, p, 1, inst_outstanding, pools.pool_inst_start, tree_out, tree_out_lo, tree_out_leaves)
    enqueue(k, p, r, t_s, reqs, slots, inst, pools, outs, tree, n_leaves)


@njit_inline
def _run_end_s(k, p, n_done, inst, pools):
    """End time of step ``n_done`` (>= 1) of the run in flight on instance ``k``."""
    step_f, step_i = inst.step_f, inst.step_i
    n_seqs = step_i[k, 0]
    base_s, per_ctx_s = decode_step_parts(pools.pool_step_code[p], pools.pool_step_coef[p], n_seqs)
    t_end = step_f[k, 0] + step_f[k, 1]
    for j in range(1, n_done):
        t_end += base_s + per_ctx_s * (step_i[k, 3] + n_seqs * j)
    return t_end


@njit_helper  # rare events: an out-of-line call keeps the event loop small
def instance_down(k, p, t_s, out_failures, route, health, reqs, slots, inst, pools, outs, stats, load, tree,
                  n_leaves):
    """Instance ``k`` fails at ``t_s`` (see the module doc); returns the steps committed."""
    generated, next_waiting = reqs.generated, reqs.next_waiting
    run_lo, run_len, run_req, st = slots.run_lo, slots.run_len, slots.run_req, slots.run_state
    wait_ends, free_blocks, step_i, step_end_s = inst.wait_ends, inst.free_blocks, inst.step_i, inst.step_end_s
    inst_up, pool_n_up = health.inst_up, health.pool_n_up
    inst_outstanding, tree_out = load.inst_outstanding, load.tree
    tree_out_lo, tree_out_leaves = load.tree_lo, load.tree_leaves
    n_committed = 0
    if step_end_s[k] < np.inf and step_i[k, 2] > 1:
        n_done = steps_by_horizon(k, p, t_s, inst, pools)
        if n_done > 0:
            # Commit the steps that ended by t_s.  The step-by-step engine would next schedule the
            # same pure-decode batch (no completion, no preemption, the queue head still blocked):
            # requests queued since (after t_s's earlier steps) must not be admitted, so the queue
            # is detached while committing.
            head, tail = wait_ends[k, 0], wait_ends[k, 1]
            wait_ends[k, 0] = -1
            wait_ends[k, 1] = -1
            step_i[k, 2] = n_done
            step_end_s[k] = _run_end_s(k, p, n_done, inst, pools)
            n_committed = commit_step(k, p, step_end_s[k], reqs, slots, inst, pools, outs, stats, load)
            wait_ends[k, 0] = head
            wait_ends[k, 1] = tail
    step_end_s[k] = np.inf
    tree_update(step_end_s, tree, n_leaves, k)
    n_wait = 0
    r = wait_ends[k, 0]
    while r >= 0:
        n_wait += 1
        r = next_waiting[r]
    lo = run_lo[k]
    n_run = run_len[k]
    moved = np.empty(n_run + n_wait, dtype=np.int64)
    for j in range(n_run):
        r = run_req[lo + j]
        generated[r] = st[lo + j, GEN]
        out_failures[r] += 1
        moved[j] = r
    r = wait_ends[k, 0]
    for j in range(n_run, n_run + n_wait):
        moved[j] = r
        nxt = next_waiting[r]
        next_waiting[r] = -1
        r = nxt
    moved.sort()
    run_len[k] = 0
    wait_ends[k, 0] = -1
    wait_ends[k, 1] = -1
    free_blocks[k] = health.pool_kv_blocks[p]
    inst_outstanding[k] = 0
    set_route_key(k, p, ROUTE_KEY_DOWN, pools.pool_inst_start, tree_out, tree_out_lo, tree_out_leaves)
    inst_up[k] = False
    pool_n_up[p] -= 1
    for j in range(moved.shape[0]):
        dispatch(moved[j], p, t_s, route, health, reqs, slots, inst, pools, outs, load, tree, n_leaves)
    return n_committed


@njit_helper
def instance_up(k, p, t_s, route, health, reqs, slots, inst, pools, outs, load, tree, n_leaves):
    """Instance ``k`` is repaired at ``t_s``: it rejoins empty; the pool's held requests are dispatched."""
    next_waiting = reqs.next_waiting
    inst_up, pool_n_up, hold_ends = health.inst_up, health.pool_n_up, health.hold_ends
    inst_outstanding, tree_out = load.inst_outstanding, load.tree
    tree_out_lo, tree_out_leaves = load.tree_lo, load.tree_leaves
    inst_up[k] = True
    pool_n_up[p] += 1
    set_route_key(k, p, inst_outstanding[k], pools.pool_inst_start, tree_out, tree_out_lo, tree_out_leaves)
    r = hold_ends[p, 0]
    hold_ends[p, 0] = -1
    hold_ends[p, 1] = -1
    while r >= 0:
        nxt = next_waiting[r]
        next_waiting[r] = -1
        dispatch(np.int64(r), p, t_s, route, health, reqs, slots, inst, pools, outs, load, tree, n_leaves)
        r = nxt


@njit_helper
def check_fail_events(inst_fail_event_s, inst_fail_lo, n_inst):
    """Preconditions of the failure schedule (ValueError otherwise)."""
    n_events = inst_fail_event_s.shape[0]
    if inst_fail_lo.shape[0] != n_inst + 1 or inst_fail_lo[0] != 0 or inst_fail_lo[n_inst] != n_events:
        raise ValueError("inst_fail_lo must have n_instances + 1 offsets from 0 to the number of events")
    for k in range(n_inst):
        if inst_fail_lo[k + 1] < inst_fail_lo[k]:
            raise ValueError("inst_fail_lo must be non-decreasing")
        for j in range(inst_fail_lo[k], inst_fail_lo[k + 1]):
            t_s = inst_fail_event_s[j]
            if not t_s >= 0.0 or (j > inst_fail_lo[k] and t_s < inst_fail_event_s[j - 1]):
                raise ValueError("each instance's failure event times must be >= 0 and non-decreasing")
