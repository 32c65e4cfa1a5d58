"""Slow, readable twin of ``fleetplan.sim._kernels.features.level.run_iteration_features``.

Same signature (plus ``checks``) and semantics (docs/runtime_features_contract.md and the
kernel modules' docstrings); one engine step at a time (no cruise), ``heapq`` waiting queues,
``tests.reference.prefix_cache.PrefixCache``.  After every pass it asserts the block invariant
``free + Σ held + cached == kv_blocks``; with a ``checks`` dict it records every step as
``(instance, n_seqs, n_decode, chunk tokens, admitted, graph size, graph tokens)`` in
``checks["steps"]`` and the admission order per instance in ``checks["admitted"]``.  The
scheduler pass is in ``tests.reference.features_sched``; both halves share the run's state ``st``.
"""

from __future__ import annotations

import heapq
import math
from types import SimpleNamespace

from fleetplan.sim._kernels.codes import (
    POOL_LEAST_LOADED,
    ROUTE_LEAST_OUTSTANDING,
    ROUTE_PREFIX_AFFINITY,
    SCHED_H2Q_BR,
    SCHED_MLFQ,
    STATUS_DONE,
    STATUS_REJECTED,
    STATUS_UNFINISHED,
)
from fleetplan.sim._kernels.features.itl import ITL_OCTAVE_LO, ITL_OCTAVES, ITL_SUB_BINS
from tests.reference.features_parts import QL, Engine, Req, uniform01
from tests.reference.features_sched import enqueue, schedule
from tests.reference.iteration_parts import ceil_div
from tests.reference.prefix_cache import PrefixCache
from tests.reference.request_level import least_loaded_pool, pick_instance

OUT_NAMES = ("out_inst", "out_first_sched_s", "out_first_token_s", "out_done_s", "out_preemptions", "out_status",
             "inst_busy_s", "inst_seq_s", "inst_steps", "inst_tokens", "out_release_s", "out_cached_tokens",
             "out_drafted", "out_accepted", "pool_graph_tokens", "pool_step_kind", "pool_accept_pos",
             "pool_draft_pos", "pool_prefix_tokens", "pool_itl_hist", "out_last_token_s")


def itl_bin(gap_s: float) -> int:
    """Histogram bin of a gap: octave of ``gap_s`` from 2^ITL_OCTAVE_LO s, then ITL_SUB_BINS equal parts of it
    (``fleetplan.sim._kernels.features.itl``); out-of-range gaps in the first / last bin."""
    if gap_s <= 0.0:
        return 0
    mant, e = math.frexp(gap_s)  # gap_s = mant 2^e, 0.5 <= mant < 1
    octave = e - 1 - ITL_OCTAVE_LO
    if octave < 0:
        return 0
    if octave >= ITL_OCTAVES:
        return ITL_OCTAVES * ITL_SUB_BINS - 1
    return octave * ITL_SUB_BINS + int((mant - 0.5) * 2 * ITL_SUB_BINS)


def complete(st, k: int, r: Req, t: float) -> None:
    eng, p = st.engines[k], st.engines[k].pool
    st.o["out_done_s"][r.idx] = t
    st.o["out_status"][r.idx] = STATUS_DONE
    if st.prefix_on[p]:
        block = int(st.pool_block_tokens[p])
        kept, freed = st.pc.insert(k, int(st.prefix_key[r.idx, 0]), int(st.prefix_tokens[r.idx, 0]) // block,
                                   int(st.prefix_key[r.idx, 1]), r.match, r.comp // block)
        eng.free += (r.held - kept) + freed
        st.pc.unpin(k, r.e0)
        st.pc.unpin(k, r.e1)
    else:
        eng.free += r.held
    r.held = r.match = 0
    st.outstanding[k] -= 1
    st.pool_tokens[p] -= r.prompt + r.output
    for j in st.succ[r.idx]:
        heapq.heappush(st.releases, (t + st.delay_s[j], j))

def commit(st, k: int, t: float) -> None:
    eng, p = st.engines[k], st.engines[k].pool
    pol, block = int(st.policy[p]), int(st.pool_block_tokens[p])
    st.o["inst_busy_s"][k] += eng.step_dt_s
    st.o["inst_seq_s"][k] += eng.step_seqs * eng.step_dt_s
    st.o["inst_steps"][k] += 1
    st.o["inst_tokens"][k] += eng.step_tokens
    if eng.step_gsize > 0:
        st.o["pool_graph_tokens"][p, 0] += eng.step_gt
        st.o["pool_graph_tokens"][p, 1] += eng.step_gsize - eng.step_gt
        st.o["pool_step_kind"][p, 1] += 1
    else:
        st.o["pool_step_kind"][p, 0] += 1
    still = []
    for r in eng.running:
        if r.sched > 0:
            if r.kspec > 0:
                a = 0
                for j in range(r.kspec):
                    st.o["pool_draft_pos"][p, j] += 1
                u = uniform01(st.seed, r.idx, r.draws)  # one draw per step
                r.draws += 1
                reach = 1.0  # P(positions 0..j all accepted)
                for j in range(r.kspec):
                    reach *= st.spec_accept[p, j]
                    if u >= reach:
                        break
                    a += 1
                    st.o["pool_accept_pos"][p, j] += 1
                st.o["out_drafted"][r.idx] += r.kspec
                st.o["out_accepted"][r.idx] += a
                r.comp += 1 + a
                r.gen += a
                r.target += a
                need = ceil_div(r.comp, block)
                if r.match + r.held > need:
                    eng.free += r.match + r.held - need
                    r.held = need - r.match
            else:
                r.comp += r.sched
            if pol == SCHED_MLFQ:
                r.attained_ns += int(eng.step_dt_s * 1e9 + 0.5)  # integer ns
                if r.attained_ns > int(st.policy_param[p, 0] * 1e9 + 0.5) << r.level and \
                        r.level < int(st.policy_param[p, 1]) - 1:
                    r.level += 1
                    r.attained_ns = 0
            elif pol == SCHED_H2Q_BR and not r.dec:
                st.sess_h[st.sess_id[r.idx]] += r.sched
                if r.comp < r.target:
                    st.sess_z[st.sess_id[r.idx]] = st.sess_c[st.sess_id[r.idx]] = 1
                    r.qcls = QL
            r.sched = r.kspec = 0
            if r.comp == r.target:
                if r.gen == 0:
                    st.o["out_first_token_s"][r.idx] = t
                hist = st.o["pool_itl_hist"]  # a streamed chunk: its gap since the request's previous one
                if r.gen > 0 and hist.shape[1] > 0:
                    hist[p, itl_bin(t - st.o["out_last_token_s"][r.idx])] += 1
                st.o["out_last_token_s"][r.idx] = t
                r.gen += 1
                r.target += 1
                assert r.gen <= r.output
                if r.gen == r.output:
                    complete(st, k, r, t)
                    continue
        still.append(r)
    eng.running = still
    if eng.running or eng.heaps[0] or eng.heaps[1]:
        schedule(st, k, t)
    else:
        eng.step_end_s = math.inf

def enter(st, k: int, r: Req, t: float) -> None:
    st.outstanding[k] += 1
    enqueue(st, k, r, False)
    if st.engines[k].step_end_s == math.inf:
        schedule(st, k, t)


def run_iteration_features(requests, fleet, features, rounds, out, horizon_s, max_in_flight: int = 0,
                           checks: dict | None = None) -> int:
    """The kernel's calling convention: the named groups of ``fleetplan.sim._kernels.groups``
    (``RequestInputs``, ``FleetInputs``, ``FeatureInputs``, ``RoundInputs``, ``FeatureKernelOutputs``)."""
    return _run(**requests._asdict(), **fleet._asdict(), horizon_s=horizon_s, **features._asdict(),
                **rounds._asdict(), outs=dict(zip(OUT_NAMES, out, strict=True)), max_in_flight=max_in_flight,
                checks=checks)


def _run(
    arrival_s, prompt_tokens, output_tokens, req_pool, route_u,
    pool_inst_start, pool_router, pool_max_context, pool_max_num_seqs, pool_max_batched_tokens,
    pool_kv_blocks, pool_block_tokens, pool_step_code, pool_step_coef, horizon_s,
    policy, policy_param, graph_mode, graph_sizes, graph_n, graph_time_s, spec_k, spec_accept,
    draft_code, draft_coef, prefix_on, prefix_entries, affinity_slack, spec_seed,
    prev_req, delay_s, session, n_sessions, new_tokens, prefix_key, prefix_tokens,
    outs: dict, max_in_flight: int, checks: dict | None,
) -> int:
    o = outs
    f = dict(graph_mode=graph_mode, graph_sizes=graph_sizes, graph_n=graph_n, graph_time_s=graph_time_s,
             draft_code=draft_code, draft_coef=draft_coef)
    n_req, n_pools = len(arrival_s), len(pool_router)
    for name in OUT_NAMES[6:10] + OUT_NAMES[14:]:
        o[name][...] = 0
    o["out_inst"][:] = -1
    for name in ("out_first_sched_s", "out_first_token_s", "out_done_s", "out_release_s", "out_last_token_s"):
        o[name][:] = math.inf
    for name in ("out_preemptions", "out_cached_tokens", "out_drafted", "out_accepted"):
        o[name][:] = 0
    o["out_status"][:] = STATUS_UNFINISHED
    engines = [Engine(p, int(pool_kv_blocks[p])) for p in range(n_pools)
               for _ in range(pool_inst_start[p], pool_inst_start[p + 1])]
    n_inst = len(engines)
    pc = PrefixCache([int(prefix_entries[e.pool]) if prefix_on[e.pool] else 0 for e in engines])
    reqs = [Req(i, int(prompt_tokens[i]), int(output_tokens[i])) for i in range(n_req)]
    sess_id = [int(session[i]) if session[i] >= 0 else n_sessions + i for i in range(n_req)]
    sess_z, sess_h, sess_c = {}, {}, {}
    for s in range(n_sessions + n_req):
        sess_z[s] = sess_h[s] = sess_c[s] = 0
    succ = {i: [j for j in range(n_req) if prev_req[j] == i] for i in range(n_req)}
    outstanding = [0] * n_inst
    pool_tokens = [0] * n_pools
    rr_next = [0] * n_pools
    glob = {"enq": 0, "front": 0}
    releases: list = []
    steps_log, admitted_log = [], [[] for _ in range(n_inst)]
    seed = int(spec_seed)

    st = SimpleNamespace(
        o=o, f=f, engines=engines, pc=pc, sess_id=sess_id, sess_z=sess_z, sess_h=sess_h, sess_c=sess_c, succ=succ,
        outstanding=outstanding, pool_tokens=pool_tokens, glob=glob, releases=releases, steps_log=steps_log,
        admitted_log=admitted_log, seed=seed, policy=policy, policy_param=policy_param,
        pool_block_tokens=pool_block_tokens, prefix_on=prefix_on, prefix_key=prefix_key, prefix_tokens=prefix_tokens,
        new_tokens=new_tokens, pool_step_code=pool_step_code, pool_step_coef=pool_step_coef, spec_k=spec_k,
        pool_max_num_seqs=pool_max_num_seqs, pool_max_batched_tokens=pool_max_batched_tokens,
        pool_kv_blocks=pool_kv_blocks, spec_accept=spec_accept, delay_s=delay_s,
    )

    n_steps = 0
    arrivals = [i for i in range(n_req) if prev_req[i] < 0]
    ai = 0
    t_last = 0.0
    while True:
        k = min(range(n_inst), key=lambda m: (engines[m].step_end_s, m))
        t_step = engines[k].step_end_s
        t_rel = releases[0][0] if releases else math.inf
        t_arr = arrival_s[arrivals[ai]] if ai < len(arrivals) else math.inf
        if max_in_flight > 0 and ai < len(arrivals):  # closed loop: wait while max_in_flight are outstanding
            t_arr = math.inf if sum(outstanding) >= max_in_flight else max(t_arr, t_last)
        if t_step <= t_rel and t_step <= t_arr:
            if t_step > horizon_s or t_step == math.inf:
                break
            t_last = t_step
            commit(st, k, t_step)
            n_steps += 1
            continue
        if t_rel <= t_arr:
            if t_rel > horizon_s:
                break
            t, i = heapq.heappop(releases)
            kk = int(o["out_inst"][prev_req[i]])
            p = engines[kk].pool
        else:
            if t_arr > horizon_s:
                break
            t, i = t_arr, arrivals[ai]
            ai += 1
            p = int(req_pool[i])
            if p == POOL_LEAST_LOADED:
                p = least_loaded_pool(int(prompt_tokens[i] + output_tokens[i]), pool_tokens, pool_inst_start,
                                      pool_max_context)
            kk = -1
        r = reqs[i]
        t_last = t
        o["out_release_s"][i] = t
        total = r.prompt + r.output
        if total > pool_max_context[p] or ceil_div(total, int(pool_block_tokens[p])) > pool_kv_blocks[p]:
            o["out_status"][i] = STATUS_REJECTED
            continue
        pool_tokens[p] += total
        if kk < 0:
            if pool_router[p] == ROUTE_PREFIX_AFFINITY:
                least = pick_instance(ROUTE_LEAST_OUTSTANDING, p, pool_inst_start, outstanding, rr_next,
                                      route_u[i, 0], route_u[i, 1])
                key = int(prefix_key[i, 0]) if prefix_key[i, 0] >= 0 else int(prefix_key[i, 1])
                kk = least
                if key >= 0:
                    first, n = int(pool_inst_start[p]), int(pool_inst_start[p + 1] - pool_inst_start[p])
                    target = first + key % n
                    kk = least if outstanding[target] > outstanding[least] + affinity_slack[p] else target
            else:
                kk = pick_instance(pool_router[p], p, pool_inst_start, outstanding, rr_next, route_u[i, 0],
                                   route_u[i, 1])
        o["out_inst"][i] = kk
        enter(st, kk, r, t)
    if checks is not None:
        checks["steps"] = steps_log
        checks["admitted"] = admitted_log
        checks["engines"] = engines
        checks["prefix_cache"] = pc
        checks["reqs"] = reqs
    return n_steps
