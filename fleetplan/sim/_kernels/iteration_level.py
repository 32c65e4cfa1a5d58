"""Iteration-level simulator kernel: continuous batching with chunked prefill (vLLM v1 style).

Model.  Each instance is one engine with its own FIFO waiting queue, a running list in
admission order, ``pool_kv_blocks`` KV blocks of ``pool_block_tokens`` tokens and limits
``max_num_seqs`` / ``max_num_batched_tokens``.  A request needs ``prompt + generated``
tokens computed before it emits its next token; ``computed`` counts tokens whose KV is held.

* Arrival: REJECTED (not routed, ``out_inst = -1``) if ``prompt + output > max_context`` or
  ``ceil((prompt + output) / block) > kv_blocks``; else routed (``routing.py``) and
  appended to the instance's waiting queue; an idle instance starts a step at once.
  ``req_pool = POOL_LEAST_LOADED``: the pool with the fewest outstanding tokens per
  instance, a request counting ``prompt + output`` from routing until it completes.
* Step scheduling (budget = max_num_batched_tokens): running requests in admission order
  get ``min(prompt + generated - computed, budget)`` tokens (1 when decoding; none when the
  budget is spent).  KV blocks needed = ``ceil((computed + scheduled) / block)``; while
  free blocks are short, the most recently admitted running request is preempted
  (recompute: its blocks freed, ``computed = 0``, pushed to the FRONT of the waiting
  queue); if that is the request being scheduled it is skipped.  Then, only if nobody was
  preempted in this step (as vLLM v1), waiting requests are admitted FCFS while
  ``n_running < max_num_seqs``, budget remains and their first chunk's blocks fit.
  These are ``Scheduler.schedule``'s rules in vllm-project/vllm ``vllm/v1/core/sched/scheduler.py``
  (v0.10-v0.13; read at 00024d314514900f361ad072af6931e403b7f589): running requests first with
  ``min(tokens left, budget)`` (``long_prefill_token_threshold`` 0, its default), a failed
  ``allocate_slots`` preempts ``self.running.pop()`` (itself last: the running pass ends), waiting
  requests only ``if not preempted_reqs`` and a failed allocation ends admission (``break``).
  Consequence for runs that keep more requests in flight than the KV cache holds:
  ``tests/sim/test_saturated_itl.py``.
* Step time: ``step_model.step_time_s`` of (scheduled seqs, decoding seqs, prefill tokens,
  decode context, attention work).  At step end the tokens are committed; a request whose computed tokens
  reach ``prompt + generated`` emits a token (first emission sets ``out_first_token_s``)
  and completes when ``generated == output``.  The next step starts immediately if there
  is work.
* Events are ordered by ``(time, kind, seq)``: all step ends (tournament tree over the
  instances' next step end, ties to the lower instance) before arrivals (sorted input,
  ties by index) at equal times.  The run stops when no event remains or the next event is
  later than ``horizon_s``; unreached times stay ``inf`` and unfinished requests (including
  arrivals after the horizon, ``out_inst = -1``) are UNFINISHED.
* Runs of identical pure-decode steps are advanced as one event (``iteration_steps``,
  "cruise"); every float still equals the step-by-step result.
* Preconditions (ValueError otherwise): arrivals sorted, prompt and output >= 1, known
  step-model codes; the wrapper guarantees ``route_u`` in [0, 1) and valid pool indices.
* Instance statistics (committed steps only): busy seconds, integral of batch size,
  steps, scheduled tokens.  Returns the number of committed steps.
* Instance failures (``run_iteration_level_failures``; model in ``failures.py``): pre-drawn
  per-instance down/up times ``inst_fail_event_s`` with offsets ``inst_fail_lo``; at equal
  times step ends come first, then down/up events, then arrivals.  ``out_failures`` counts the
  times each request lost its KV cache to a failure.  ``run_iteration_level`` is this kernel
  with no events (bit-identical outputs); it passes ``out_failures=None``, so numba prunes the
  failure branches at compile time and the featureless engine never compiles the failure handlers.
* Closed-loop clients (``max_in_flight = N > 0``, ``vllm bench serve``'s ``max_concurrency``): at
  most N routed requests are outstanding (dispatched, not completed).  Request ``i`` is released
  at ``max(arrival_s[i], t)``, ``t`` the event that brings the outstanding count below N (a
  completion); releases stay in index order (the client's FIFO semaphore).  The release time is
  written back into ``arrival_s[i]`` (the wrapper passes a copy).  ``N = 0`` (default) is the
  open loop, bit-identical to the kernel without the option.  Requests held by a pool with no
  healthy instance do not count (use the closed loop without failures).
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.codes import FAIL_EVENT_DOWN, POOL_LEAST_LOADED, STATUS_REJECTED
from fleetplan.sim._kernels.failures import check_fail_events, dispatch, instance_down, instance_up
from fleetplan.sim._kernels.groups import (
    FailureInputs,
    Health,
    Instances,
    Load,
    Outputs,
    Pools,
    Requests,
    Routing,
    Slots,
    Statistics,
    StepLog,
)
from fleetplan.sim._kernels.heaps import tree_build, tree_leaves, tree_update
from fleetplan.sim._kernels.iteration_steps import (
    N_SLOT_FIELDS,
    add_step_stats,
    commit_step,
    steps_by_horizon,
)
from fleetplan.sim._kernels.jit import njit, njit_helper
from fleetplan.sim._kernels.routing import build_outstanding_trees, least_loaded_pool
from fleetplan.sim._kernels.step_model import check_step_codes


@njit
def run_iteration_level(requests, fleet, out, horizon_s, max_in_flight=0):
    """The engine without failures: ``run_iteration_level_failures`` with no down events (the
    shared core called directly: one compiled layer fewer on a cold start).  Arguments: the
    ``RequestInputs``, ``FleetInputs`` and ``IterationOutputs`` groups of ``groups.py``."""
    n_inst = fleet.pool_inst_start[fleet.pool_router.shape[0]]
    no_failures = FailureInputs(np.empty(0, dtype=np.float64), np.zeros(n_inst + 1, dtype=np.int64))
    # None: numba prunes the failure branches, so they are never compiled here
    return _iteration_core(requests, fleet, no_failures, out, None, horizon_s, max_in_flight, _no_log())


@njit_helper
def _no_log():
    """An empty step log (``iteration_steps`` docstring): nothing is logged."""
    return StepLog(np.empty(0, dtype=np.float64), np.empty(0, dtype=np.int64), np.zeros(2, dtype=np.int64))


@njit_helper
def _released_s(t_arr, t_now, max_in_flight, inst_outstanding, n_inst):
    """Closed loop: the release time of the next request, ``inf`` while ``max_in_flight`` are out."""
    n_out = 0
    for k in range(n_inst):
        n_out += inst_outstanding[k]
    if n_out >= max_in_flight:
        return np.inf
    return t_arr if t_arr > t_now else t_now


@njit
def run_iteration_level_failures(requests, fleet, failures, out, out_failures, horizon_s, max_in_flight=0):
    """The engine (module docstring), without a step log: ``failures`` (``FailureInputs``) are the
    instances' down/up times, ``out_failures`` i4[N] counts each request's lost KV caches."""
    return _iteration_core(requests, fleet, failures, out, out_failures, horizon_s, max_in_flight, _no_log())


@njit
def run_iteration_level_logged(requests, fleet, out, horizon_s, max_in_flight, log):
    """``run_iteration_level`` that also fills the step log ``log`` (``StepLog``; ``iteration_steps``
    docstring)."""
    n_inst = fleet.pool_inst_start[fleet.pool_router.shape[0]]
    log.log_len[0] = 0
    log.log_len[1] = 0
    no_failures = FailureInputs(np.empty(0, dtype=np.float64), np.zeros(n_inst + 1, dtype=np.int64))
    # None: no failures, so the failure branches are pruned here too
    return _iteration_core(requests, fleet, no_failures, out, None, horizon_s, max_in_flight, log)


@njit_helper
def _iteration_core(requests, fleet, failures, out, out_failures, horizon_s, max_in_flight, log):
    arrival_s, prompt_tokens, output_tokens = requests.arrival_s, requests.prompt_tokens, requests.output_tokens
    req_pool, route_u = requests.req_pool, requests.route_u
    pool_inst_start, pool_router, pool_max_context = fleet.pool_inst_start, fleet.pool_router, fleet.pool_max_context
    pool_max_num_seqs, pool_max_batched_tokens = fleet.pool_max_num_seqs, fleet.pool_max_batched_tokens
    pool_kv_blocks, pool_block_tokens = fleet.pool_kv_blocks, fleet.pool_block_tokens
    pool_step_code, pool_step_coef = fleet.pool_step_code, fleet.pool_step_coef
    inst_fail_event_s, inst_fail_lo = failures.fail_event_s, failures.fail_lo
    out_inst, out_first_sched_s, out_first_token_s = out.inst, out.first_sched_s, out.first_token_s
    out_done_s, out_preemptions, out_status = out.done_s, out.preemptions, out.status
    inst_busy_s, inst_seq_s, inst_steps, inst_tokens = out.busy_s, out.seq_s, out.steps, out.tokens
    n_req = arrival_s.shape[0]
    n_pools = pool_router.shape[0]
    n_inst = pool_inst_start[n_pools]

    check_step_codes(pool_step_code)
    check_fail_events(inst_fail_event_s, inst_fail_lo, n_inst)
    for i in range(n_req):
        if prompt_tokens[i] < 1 or output_tokens[i] < 1:
            raise ValueError("prompt_tokens and output_tokens must be >= 1")
        if i > 0 and arrival_s[i] < arrival_s[i - 1]:
            raise ValueError("arrival_s must be sorted")
        out_inst[i] = -1
        out_first_sched_s[i] = np.inf
        out_first_token_s[i] = np.inf
        out_done_s[i] = np.inf
        out_preemptions[i] = 0
        if out_failures is not None:
            out_failures[i] = 0
        out_status[i] = 1  # STATUS_UNFINISHED until proven otherwise
    # Per-request state; running requests keep theirs in slot-local arrays (iteration_steps).
    generated = np.zeros(n_req, dtype=np.int32)
    next_waiting = np.full(n_req, -1, dtype=np.int32)
    # Per-instance state; the running slots of k are run_lo[k] .. run_lo[k] + max_num_seqs - 1.
    inst_pool = np.empty(n_inst, dtype=np.int64)  # int64 like every index: one specialisation per helper
    run_lo = np.zeros(n_inst + 1, dtype=np.int64)
    free_blocks = np.empty(n_inst, dtype=np.int64)
    for p in range(n_pools):
        for k in range(pool_inst_start[p], pool_inst_start[p + 1]):
            inst_pool[k] = p
            run_lo[k + 1] = run_lo[k] + pool_max_num_seqs[p]
            free_blocks[k] = pool_kv_blocks[p]
    run_req = np.empty(run_lo[n_inst], dtype=np.int32)
    run_state = np.zeros((run_lo[n_inst], N_SLOT_FIELDS), dtype=np.int64)
    run_len = np.zeros(n_inst, dtype=np.int64)
    wait_ends = np.full((n_inst, 2), -1, dtype=np.int32)  # head, tail
    inst_outstanding = np.zeros(n_inst, dtype=np.int64)
    tree_out, tree_out_lo, tree_out_leaves = build_outstanding_trees(pool_inst_start)
    pool_tokens = np.zeros(n_pools, dtype=np.int64)
    rr_next = np.zeros(n_pools, dtype=np.int32)
    # steps in flight (see iteration_steps): step_f = (start, first step), step_i =
    # (n_seqs, tokens per step, number of identical steps m, decode context of the first)
    step_f = np.zeros((n_inst, 2), dtype=np.float64)
    step_i = np.zeros((n_inst, 4), dtype=np.int64)
    for k in range(n_inst):
        inst_busy_s[k] = 0.0
        inst_seq_s[k] = 0.0
        inst_steps[k] = 0
        inst_tokens[k] = 0
    n_leaves = tree_leaves(n_inst)
    step_end_s = np.full(n_leaves, np.inf)
    tree = np.empty(2 * n_leaves, dtype=np.int64)
    tree_build(step_end_s, tree, n_leaves)
    # failures: per-instance health, the pools' hold queues and a tournament tree over each
    # instance's next down/up event
    inst_up = np.ones(n_inst, dtype=np.bool_)
    pool_n_up = np.empty(n_pools, dtype=np.int64)
    for p in range(n_pools):
        pool_n_up[p] = pool_inst_start[p + 1] - pool_inst_start[p]
    hold_ends = np.full((n_pools, 2), -1, dtype=np.int32)
    fail_next = inst_fail_lo[:n_inst].copy()
    fail_next_s = np.full(n_leaves, np.inf)
    for k in range(n_inst):
        if fail_next[k] < inst_fail_lo[k + 1]:
            fail_next_s[k] = inst_fail_event_s[fail_next[k]]
    fail_tree = np.empty(2 * n_leaves, dtype=np.int64)
    tree_build(fail_next_s, fail_tree, n_leaves)

    reqs = Requests(prompt_tokens, output_tokens, generated, next_waiting)
    slots = Slots(run_lo, run_len, run_req, run_state)
    inst = Instances(wait_ends, free_blocks, step_f, step_i, step_end_s)
    pools = Pools(pool_inst_start, pool_max_num_seqs, pool_max_batched_tokens, pool_block_tokens,
                  pool_step_code, pool_step_coef)
    outs = Outputs(out_first_sched_s, out_first_token_s, out_done_s, out_preemptions, out_status)
    stats = Statistics(inst_busy_s, inst_seq_s, inst_steps, inst_tokens, log.log_dt_s, log.log_n, log.log_len)
    load = Load(inst_outstanding, tree_out, tree_out_lo, tree_out_leaves, pool_tokens)
    route = Routing(pool_router, route_u, rr_next, out_inst)
    health = Health(inst_up, pool_n_up, hold_ends, pool_kv_blocks)

    n_steps = 0
    i = 0
    t_now = 0.0  # time of the last event (closed loop only)
    while True:
        k = tree[1]
        t_step = step_end_s[k]
        kf = fail_tree[1]
        t_fail = fail_next_s[kf]
        t_arr = arrival_s[i] if i < n_req else np.inf
        if max_in_flight > 0 and i < n_req:
            t_arr = _released_s(t_arr, t_now, max_in_flight, inst_outstanding, n_inst)
        if t_step <= t_fail and t_step <= t_arr:
            if t_step > horizon_s or t_step == np.inf:
                break
            t_now = t_step
            n_steps += commit_step(k, inst_pool[k], t_step, reqs, slots, inst, pools, outs, stats, load)
            tree_update(step_end_s, tree, n_leaves, k)
            continue
        if out_failures is not None and t_fail <= t_arr:  # the first test is decided at compile time
            if t_fail > horizon_s:
                break
            t_now = t_fail
            is_down = (fail_next[kf] - inst_fail_lo[kf]) % 2 == FAIL_EVENT_DOWN
            fail_next[kf] += 1
            fail_next_s[kf] = inst_fail_event_s[fail_next[kf]] if fail_next[kf] < inst_fail_lo[kf + 1] else np.inf
            tree_update(fail_next_s, fail_tree, n_leaves, kf)
            if is_down:
                n_steps += instance_down(kf, inst_pool[kf], t_fail, out_failures, route, health, reqs, slots,
                                         inst, pools, outs, stats, load, tree, n_leaves)
            else:
                instance_up(kf, inst_pool[kf], t_fail, route, health, reqs, slots, inst, pools, outs, load, tree,
                            n_leaves)
            continue
        if t_arr > horizon_s:
            break
        if max_in_flight > 0:
            arrival_s[i] = t_arr  # the release time (module docstring)
            t_now = t_arr
        total = prompt_tokens[i] + output_tokens[i]
        p = req_pool[i]
        if p == POOL_LEAST_LOADED:
            p = least_loaded_pool(total, pool_tokens, pool_inst_start, pool_max_context)
        block = pool_block_tokens[p]
        if total > pool_max_context[p] or (total + block - 1) // block > pool_kv_blocks[p]:
            out_status[i] = STATUS_REJECTED
            i += 1
            continue
        pool_tokens[p] += total
        dispatch(i, p, t_arr, route, health, reqs, slots, inst, pools, outs, load, tree, n_leaves)
        i += 1
    # Runs of steps in flight past the horizon: account the steps that ended by then.
    for k in range(n_inst):
        if step_end_s[k] < np.inf and step_i[k, 2] > 1:
            n_done = steps_by_horizon(k, inst_pool[k], horizon_s, inst, pools)
            add_step_stats(k, inst_pool[k], n_done, inst, pools, stats)
            n_steps += n_done
    return n_steps
