"""Iteration-level kernel with the runtime features (docs/runtime_features_contract.md).

``run_iteration_features`` generalises ``run_iteration_level`` (no failures): scheduler policies
(``policy``), a shared batch builder with token budget, KV admission, prefix caching
and recompute preemption (``schedule``; with prefix caching on, a preempted request's computed
full blocks stay cached under its own key, ``state.own_segment``), CUDA-graph padding and
speculative decoding (``timing``, ``commit``), multi-round sessions and the
prefix-affinity router (this module).  With every feature off and ``prev_req == -1`` it gives
bit-identical outputs to ``run_iteration_level`` (tested).

Events at equal times: step ends (lowest instance first), then releases of session rounds (by
time, then index), then arrivals (rows with ``prev_req < 0``, by index).  A round with
``prev_req[r] = q >= 0`` is released at ``done_s[q] + delay_s[r]`` to the instance that served
q (never if q does not complete); ``out_release_s[r]`` is when r entered the system.
Closed-loop clients (``max_in_flight = N > 0``, as ``iteration_level.py``): a fresh arrival
(``prev_req < 0``) waits while N routed requests are outstanding and is released at
``max(arrival, the event that frees a slot)`` (``out_release_s``); session rounds keep their
own release rule.  ``N = 0`` (default) is the open loop.
Preconditions (ValueError otherwise): prompt and output >= 1, ``arrival_s`` non-decreasing over
rows with ``prev_req < 0``, ``prev_req[r] < r``, known step-model codes, ``spec_k <=
SPEC_K_MAX``, ``0 <= spec_seed < 2**63``.  Returns the number of committed steps.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.codes import (
    N_STEP_MODELS,
    POOL_LEAST_LOADED,
    ROUTE_LEAST_OUTSTANDING,
    ROUTE_PREFIX_AFFINITY,
    SCHED_H2Q_BR,
    STATUS_REJECTED,
)
from fleetplan.sim._kernels.features.commit import commit_features, drafts_by_horizon
from fleetplan.sim._kernels.features.h2q import h2q_setup
from fleetplan.sim._kernels.features.itl import itl_run
from fleetplan.sim._kernels.features.policy import enqueue_wait
from fleetplan.sim._kernels.features.rng import accept_thresholds
from fleetplan.sim._kernels.features.schedule import schedule_features
from fleetplan.sim._kernels.features.state import (
    ALL_SORTED,
    G_FRONT,
    G_SEED,
    K_FREE,
    K_M,
    K_ROOT0,
    K_ROOT1,
    K_RSPEC,
    K_RUN,
    K_SORTED,
    N_GLOB,
    N_KF,
    N_KI,
    N_RQ,
    SPEC_RUN_MAX,
    rel_pop,
    row_open,
    rows_flush,
)
from fleetplan.sim._kernels.features.timing import add_step_stats, cut_run, steps_by_horizon
from fleetplan.sim._kernels.groups import (
    FeatureInstances,
    FeatureOutputs,
    FeatureRequests,
    FeatureRouting,
    Features,
    FeatureStatistics,
    Load,
    Pools,
    Releases,
    Sessions,
)
from fleetplan.sim._kernels.heaps import tree_build, tree_leaves, tree_update
from fleetplan.sim._kernels.jit import njit, njit_borrowed, njit_inline
from fleetplan.sim._kernels.prefix_cache import pc_new
from fleetplan.sim._kernels.routing import add_outstanding, build_outstanding_trees, least_loaded_pool, pick_instance
from fleetplan.sim._kernels.step_model import check_step_codes

SPEC_K_MAX = 16  # = fleetplan.sim.features.arrays.SPEC_K_MAX (kernels do not import the sim package)


@njit_borrowed
def route_prefix_affinity(p, r, pools, load, route, prefix_key, slack):
    """``ROUTE_PREFIX_AFFINITY``: the key's home instance unless it is ``slack`` above the least loaded."""
    pool_inst_start = pools.pool_inst_start
    inst_outstanding = load.inst_outstanding
    route_u = route.route_u
    first = pool_inst_start[p]
    n = pool_inst_start[p + 1] - first
    least = pick_instance(ROUTE_LEAST_OUTSTANDING, p, pool_inst_start, inst_outstanding, load.tree, load.tree_lo,
                          load.tree_leaves, route.rr_next, route_u[r, 0], route_u[r, 1])
    key = prefix_key[r, 0] if prefix_key[r, 0] >= 0 else prefix_key[r, 1]
    if key < 0:
        return least
    target = first + key % n
    if inst_outstanding[target] > inst_outstanding[least] + slack:
        return least
    return target


@njit_inline
def enter(k, p, x, t_s, req, ses, ins, pools, fts, outs, stats, load, pc, stack):
    """The request of row x joins instance k's waiting set at ``t_s`` (routed, counted outstanding)."""
    add_outstanding(k, p, 1, load.inst_outstanding, pools.pool_inst_start, load.tree, load.tree_lo, load.tree_leaves)
    enqueue_wait(k, p, x, False, req, ses, ins.ki, pools, fts, pc)
    if ins.step_end_s[k] == np.inf:
        schedule_features(k, p, t_s, req, ses, ins, pools, fts, outs, stats, pc, stack)
    else:
        cut_run(k, p, t_s, ins, pools, fts)


@njit
def run_iteration_features(requests, fleet, features, rounds, out, horizon_s, max_in_flight=0):
    """Run the feature kernel (module docstring) and return the committed steps.  Arguments are the
    named groups of ``groups.py``: ``RequestInputs``, ``FleetInputs``, ``FeatureInputs``,
    ``RoundInputs`` and the outputs ``FeatureKernelOutputs`` (written here)."""
    arrival_s, prompt_tokens, output_tokens = requests.arrival_s, requests.prompt_tokens, requests.output_tokens
    pool_inst_start, pool_router, pool_max_num_seqs = fleet.pool_inst_start, fleet.pool_router, fleet.pool_max_num_seqs
    pool_kv_blocks, pool_step_code = fleet.pool_kv_blocks, fleet.pool_step_code
    policy, spec_k, draft_code, spec_seed = features.policy, features.spec_k, features.draft_code, features.spec_seed
    prefix_on, prefix_entries = features.prefix_on, features.prefix_entries
    prev_req, session, n_sessions = rounds.prev_req, rounds.session, rounds.n_sessions
    n_req = arrival_s.shape[0]
    n_pools = pool_router.shape[0]
    n_inst = pool_inst_start[n_pools]
    check_step_codes(pool_step_code)
    for p in range(n_pools):
        if spec_k[p] < 0 or spec_k[p] > SPEC_K_MAX or (spec_k[p] > 0 and (draft_code[p] < 0
                                                                          or draft_code[p] >= N_STEP_MODELS)):
            raise ValueError("spec_k must be in [0, SPEC_K_MAX] with a known draft step-model code")
    if spec_seed < 0:
        raise ValueError("spec_seed must be >= 0")
    last_arrival_s = -np.inf
    succ_head = np.full(n_req, -1, dtype=np.int64)
    succ_next = np.full(n_req, -1, dtype=np.int64)
    any_h2q = np.any(policy == SCHED_H2Q_BR)  # session state is read by H2Q-BR only
    sess_id = np.empty(n_req if any_h2q else 0, dtype=np.int64)
    for i in range(n_req):
        if prompt_tokens[i] < 1 or output_tokens[i] < 1:
            raise ValueError("prompt_tokens and output_tokens must be >= 1")
        if prev_req[i] >= i:
            raise ValueError("prev_req[r] must be < r")
        if prev_req[i] < 0:
            if arrival_s[i] < last_arrival_s:
                raise ValueError("arrival_s must be sorted over rows with prev_req < 0")
            last_arrival_s = arrival_s[i]
        if any_h2q:
            sess_id[i] = session[i] if session[i] >= 0 else n_sessions + i
        out.inst[i] = -1
        out.first_sched_s[i] = np.inf
        out.first_token_s[i] = np.inf
        out.done_s[i] = np.inf
        out.release_s[i] = np.inf
        out.preemptions[i] = 0
        out.status[i] = 1  # STATUS_UNFINISHED until proven otherwise
        out.cached_tokens[i] = 0
        out.drafted[i] = 0
        out.accepted[i] = 0
        out.last_token_s[i] = np.inf
    for i in range(n_req - 1, -1, -1):  # successors in index order
        q = prev_req[i]
        if q >= 0:
            succ_next[i] = succ_head[q]
            succ_head[q] = i
    rq = np.empty((n_req, N_RQ), dtype=np.int64)  # rows are reset when taken (state.py)
    row_free = np.empty(n_req, dtype=np.int64)
    n_sess_all = n_sessions + n_req if any_h2q else 0
    sess_z = np.zeros(n_sess_all, dtype=np.int64)
    sess_h = np.zeros(n_sess_all, dtype=np.int64)
    sess_c = np.zeros(n_sess_all, dtype=np.int64)
    glob = np.zeros(N_GLOB, dtype=np.int64)
    glob[G_FRONT] = 0
    glob[G_SEED] = spec_seed
    inst_pool = np.empty(n_inst, dtype=np.int64)
    run_lo = np.zeros(n_inst + 1, dtype=np.int64)
    ki = np.zeros((n_inst, N_KI), dtype=np.int64)
    kf = np.zeros((n_inst, N_KF), dtype=np.float64)
    entries = np.zeros(n_inst, dtype=np.int64)
    for p in range(n_pools):
        for k in range(pool_inst_start[p], pool_inst_start[p + 1]):
            inst_pool[k] = p
            run_lo[k + 1] = run_lo[k] + pool_max_num_seqs[p]
            ki[k, K_FREE] = pool_kv_blocks[p]
            ki[k, K_ROOT0] = -1
            ki[k, K_ROOT1] = -1
            ki[k, K_SORTED] = ALL_SORTED
            entries[k] = prefix_entries[p] if prefix_on[p] != 0 else 0
    run_req = np.empty(run_lo[n_inst], dtype=np.int64)
    h2q_setup(any_h2q, prev_req, session, n_sessions, glob, ki)
    pc = pc_new(n_inst, entries)
    inst_outstanding = np.zeros(n_inst, dtype=np.int64)
    tree_out, tree_out_lo, tree_out_leaves = build_outstanding_trees(pool_inst_start)
    pool_tokens = np.zeros(n_pools, dtype=np.int64)
    rr_next = np.zeros(n_pools, dtype=np.int32)
    for k in range(n_inst):
        out.busy_s[k] = 0.0
        out.seq_s[k] = 0.0
        out.steps[k] = 0
        out.tokens[k] = 0
    out.pool_graph_tokens[:] = 0
    out.pool_step_kind[:] = 0
    out.pool_accept_pos[:] = 0
    out.pool_draft_pos[:] = 0
    out.pool_prefix_tokens[:] = 0
    out.pool_itl_hist[:] = 0
    n_leaves = tree_leaves(n_inst)
    step_end_s = np.full(n_leaves, np.inf)
    tree = np.empty(2 * n_leaves, dtype=np.int32)
    tree_build(step_end_s, tree, n_leaves)
    rel_t = np.empty(n_req, dtype=np.float64)
    rel_i = np.empty(n_req, dtype=np.int64)
    rel_n = np.zeros(1, dtype=np.int64)
    stack = np.empty(n_req + 1, dtype=np.int64)

    req = FeatureRequests(prompt_tokens, output_tokens, rq, row_free, rounds.new_tokens, rounds.prefix_key,
                          rounds.prefix_tokens, sess_id)
    ses = Sessions(sess_z, sess_h, sess_c, glob)
    run_acc = np.zeros((run_lo[n_inst] if np.any(spec_k > 0) else 0, SPEC_RUN_MAX), dtype=np.int8)
    ins = FeatureInstances(run_lo, run_req, ki, kf, step_end_s, run_acc, np.zeros((2, SPEC_K_MAX + 1), dtype=np.int64))
    pools = Pools(pool_inst_start, pool_max_num_seqs, fleet.pool_max_batched_tokens, fleet.pool_block_tokens,
                  pool_step_code, fleet.pool_step_coef)
    fts = Features(policy, features.policy_param, features.graph_mode, features.graph_sizes, features.graph_n,
                   features.graph_time_s, spec_k, accept_thresholds(features.spec_accept), draft_code,
                   features.draft_coef, prefix_on)
    outs = FeatureOutputs(out.first_sched_s, out.first_token_s, out.done_s, out.preemptions, out.status,
                          out.cached_tokens, out.drafted, out.accepted, out.last_token_s)
    stats = FeatureStatistics(out.busy_s, out.seq_s, out.steps, out.tokens, out.pool_graph_tokens,
                              out.pool_step_kind, out.pool_accept_pos, out.pool_draft_pos, out.pool_prefix_tokens,
                              out.pool_itl_hist)
    load = Load(inst_outstanding, tree_out, tree_out_lo, tree_out_leaves, pool_tokens)
    rel = Releases(succ_head, succ_next, rounds.delay_s, rel_t, rel_i, rel_n)
    route = FeatureRouting(pool_router, requests.route_u, rr_next)

    return event_loop(n_inst, n_leaves, tree, horizon_s, arrival_s, prev_req, requests.req_pool, inst_pool, out.inst,
                      out.release_s, fleet.pool_max_context, pool_kv_blocks, features.affinity_slack, req, ses, ins,
                      pools, fts, outs, stats, load, rel, route, pc, stack, max_in_flight)


@njit_borrowed
def event_loop(n_inst, n_leaves, tree, horizon_s, arrival_s, prev_req, req_pool, inst_pool, out_inst, out_release_s,
               pool_max_context, pool_kv_blocks, affinity_slack, req, ses, ins, pools, fts, outs, stats, load, rel,
               route, pc, stack, max_in_flight):
    """The event loop of ``run_iteration_features`` over its preallocated state; returns the steps.

    Compiled without reference counting (``njit_borrowed``): it allocates nothing and the caller
    holds every array, so the per-event calls and inlined helpers pay no refcount pairs."""
    prompt_tokens, output_tokens, rq, row_free = req.prompt_tokens, req.output_tokens, req.rq, req.row_free
    prefix_key, glob = req.prefix_key, ses.glob
    ki, kf, step_end_s = ins.ki, ins.kf, ins.step_end_s
    pool_inst_start, pool_block_tokens = pools.pool_inst_start, pools.pool_block_tokens
    pool_step_code, pool_step_coef = pools.pool_step_code, pools.pool_step_coef
    graph_mode, graph_time_s = fts.graph_mode, fts.graph_time_s
    out_status = outs.status
    inst_outstanding, tree_out, tree_out_lo = load.inst_outstanding, load.tree, load.tree_lo
    tree_out_leaves, pool_tokens = load.tree_leaves, load.pool_tokens
    rel_t, rel_i, rel_n = rel.heap_s, rel.heap_req, rel.heap_n
    pool_router, route_u, rr_next = route.pool_router, route.route_u, route.rr_next
    n_req = arrival_s.shape[0]
    n_steps = 0
    i = 0
    while i < n_req and prev_req[i] >= 0:
        i += 1
    t_last = 0.0  # time of the last event (closed loop only)
    while True:
        k = np.int64(tree[1])
        t_step = step_end_s[k]
        t_rel = rel_t[0] if rel_n[0] > 0 else np.inf
        t_arr = arrival_s[i] if i < n_req else np.inf
        if max_in_flight > 0 and i < n_req:  # closed loop (iteration_level.py): fresh arrivals wait for a slot
            n_out = 0
            for kq in range(n_inst):
                n_out += inst_outstanding[kq]
            t_arr = np.inf if n_out >= max_in_flight else max(t_arr, t_last)
        if t_step <= t_rel and t_step <= t_arr:
            if t_step > horizon_s or t_step == np.inf:
                break
            t_last = t_step
            n_steps += commit_features(k, inst_pool[k], t_step, req, ses, ins, pools, fts, outs, stats, load, rel,
                                       pc, stack)
            tree_update(step_end_s, tree, n_leaves, k)
            continue
        if t_rel <= t_arr:
            if t_rel > horizon_s:
                break
            r = rel_i[0]
            rel_n[0] = rel_pop(rel_t, rel_i, rel_n[0])
            kk = out_inst[prev_req[r]]
            p = inst_pool[kk]
        else:
            if t_arr > horizon_s:
                break
            r = i
            i += 1
            while i < n_req and prev_req[i] >= 0:
                i += 1
            p = np.int64(req_pool[r])
            if p == POOL_LEAST_LOADED:
                p = np.int64(least_loaded_pool(prompt_tokens[r] + output_tokens[r], pool_tokens, pool_inst_start,
                                               pool_max_context))
            kk = np.int64(-1)
        t_now = t_rel if t_rel <= t_arr else t_arr
        t_last = t_now
        out_release_s[r] = t_now
        total = prompt_tokens[r] + output_tokens[r]
        block = pool_block_tokens[p]
        if total > pool_max_context[p] or (total + block - 1) // block > pool_kv_blocks[p]:
            out_status[r] = STATUS_REJECTED
            continue
        pool_tokens[p] += total
        if kk < 0:
            if pool_router[p] == ROUTE_PREFIX_AFFINITY:
                kk = np.int64(route_prefix_affinity(p, r, pools, load, route, prefix_key, affinity_slack[p]))
            else:
                kk = np.int64(pick_instance(pool_router[p], p, pool_inst_start, inst_outstanding, tree_out,
                                            tree_out_lo, tree_out_leaves, rr_next, route_u[r, 0], route_u[r, 1]))
        out_inst[r] = kk
        x = row_open(r, rq, row_free, glob, output_tokens)
        enter(kk, p, x, t_now, req, ses, ins, pools, fts, outs, stats, load, pc, stack)
        tree_update(step_end_s, tree, n_leaves, kk)
    for k in range(n_inst):  # runs of steps in flight past the horizon
        if step_end_s[k] < np.inf and ki[k, K_M] > 1:
            n_done = steps_by_horizon(k, inst_pool[k], horizon_s, ins, pools, fts)
            p = inst_pool[k]
            add_step_stats(k, p, n_done, ki, kf, pool_step_code[p], pool_step_coef[p], graph_mode[p], graph_time_s[p],
                           stats)
            if ki[k, K_RSPEC] > 0:
                drafts_by_horizon(k, p, n_done, req, ses, ins, fts, outs, stats)
            if n_done > 0:  # their chunks (the twin commits these steps)
                itl_run(k, p, n_done, rq, ins.run_req, ins.run_lo[k], ki[k, K_RUN], ki, kf, pool_step_code[p],
                        pool_step_coef[p], graph_mode[p], graph_time_s[p], stats.pool_itl_hist, outs.last_token_s)
            n_steps += n_done
    rows_flush(rq, glob, outs.drafted, outs.accepted)
    return n_steps
