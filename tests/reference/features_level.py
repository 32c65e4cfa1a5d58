"""Slow, readable twin of ``fleetplan.sim._kernels.features_level.run_iteration_features``.

Same signature (plus ``checks``) and semantics (docs/runtime_features_contract.md and the
kernel modules' docstrings); one engine step at a time (no cruise), ``heapq`` waiting queues,
``tests.reference.prefix_cache.PrefixCache``.  After every pass it asserts the block invariant
``free + Σ held + cached == kv_blocks``; with a ``checks`` dict it records every step as
``(instance, n_seqs, n_decode, chunk tokens, admitted, graph size, graph tokens)`` in
``checks["steps"]`` and the admission order per instance in ``checks["admitted"]``.
"""

from __future__ import annotations

import heapq
import math

from fleetplan.sim._kernels.codes import (
    POOL_LEAST_LOADED,
    ROUTE_LEAST_OUTSTANDING,
    ROUTE_PREFIX_AFFINITY,
    SCHED_H2Q_BR,
    SCHED_MLFQ,
    SCHED_SGLANG,
    SCHED_SPF,
    STATUS_DONE,
    STATUS_REJECTED,
    STATUS_UNFINISHED,
)
from tests.reference.features_parts import (
    QL,
    QS,
    Engine,
    Req,
    batch_time_s,
    graph_size,
    mlfq_entry_level,
    prepare_pass,
    spf_victim,
    uniform01,
)
from tests.reference.iteration_parts import ceil_div
from tests.reference.prefix_cache import PrefixCache
from tests.reference.request_level import least_loaded_pool, pick_instance

OUT_NAMES = ("out_inst", "out_first_sched_s", "out_first_token_s", "out_done_s", "out_preemptions", "out_status",
             "inst_busy_s", "inst_seq_s", "inst_steps", "inst_tokens", "out_release_s", "out_cached_tokens",
             "out_drafted", "out_accepted", "pool_graph_tokens", "pool_step_kind", "pool_accept_pos",
             "pool_draft_pos", "pool_prefix_tokens")


def run_iteration_features(
    arrival_s, prompt_tokens, output_tokens, req_pool, route_u,
    pool_inst_start, pool_router, pool_max_context, pool_max_num_seqs, pool_max_batched_tokens,
    pool_kv_blocks, pool_block_tokens, pool_step_code, pool_step_coef, horizon_s,
    policy, policy_param, graph_mode, graph_sizes, graph_n, graph_time_s, spec_k, spec_accept,
    draft_code, draft_coef, prefix_on, prefix_entries, affinity_slack, spec_seed,
    prev_req, delay_s, session, n_sessions, new_tokens, prefix_key, prefix_tokens,
    *outs, checks: dict | None = None,
) -> int:
    o = dict(zip(OUT_NAMES, outs, strict=True))
    f = dict(graph_mode=graph_mode, graph_sizes=graph_sizes, graph_n=graph_n, graph_time_s=graph_time_s,
             draft_code=draft_code, draft_coef=draft_coef)
    n_req, n_pools = len(arrival_s), len(pool_router)
    for name in OUT_NAMES[6:10] + OUT_NAMES[14:]:
        o[name][...] = 0
    o["out_inst"][:] = -1
    for name in ("out_first_sched_s", "out_first_token_s", "out_done_s", "out_release_s"):
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

    def pc_args(r: Req, block: int, cap: int) -> tuple:
        i = r.idx
        return (int(prefix_key[i, 0]), int(prefix_tokens[i, 0]) // block, int(prefix_key[i, 1]),
                int(prefix_tokens[i, 1]) // block, cap)

    def enqueue(k: int, r: Req, is_preempt: bool) -> None:
        eng, p = engines[k], engines[k].pool
        pol = int(policy[p])
        seq = glob["enq"]
        glob["enq"] += 1
        if not is_preempt:
            r.aseq = seq
        q = 0
        if pol == SCHED_SPF:
            rem = r.prompt + r.gen
            if prefix_on[p]:
                block = int(pool_block_tokens[p])
                m, _ = pc.probe(k, *pc_args(r, block, (rem - 1) // block))
                rem -= m * block
            r.key = (rem, seq)
        elif pol == SCHED_MLFQ:
            if not is_preempt:
                r.level = mlfq_entry_level(pool_step_code[p], pool_step_coef[p], r.prompt, policy_param[p, 0],
                                           int(policy_param[p, 1]))
                r.attained_ns = 0
            r.key = (r.level, r.aseq)
        elif pol == SCHED_H2Q_BR:
            sid = sess_id[r.idx]
            if is_preempt:
                sess_c[sid] = 0
            ell = int(new_tokens[r.idx])
            if sess_z[sid] or sess_h[sid] > policy_param[p, 1] or ell > policy_param[p, 0]:
                sess_z[sid] = 1
                r.qcls, r.key, q = QL, (r.aseq, 0), 1
            else:
                r.qcls, r.key = QS, (ell, r.aseq)
        elif is_preempt:
            glob["front"] -= 1
            r.key = (glob["front"], 0)
        else:
            r.key = (seq, 0)
        eng.push(q, r)

    def admit_fits(k: int, w: Req, budget: int) -> tuple:
        eng, p = engines[k], engines[k].pool
        block = int(pool_block_tokens[p])
        target = w.prompt + w.gen
        m, avail = 0, eng.free
        if prefix_on[p]:
            m, pinned = pc.probe(k, *pc_args(w, block, (target - 1) // block))
            avail += pc.evictable(k) - pinned
        num = min(target - m * block, budget)
        own = ceil_div(m * block + num, block) - m
        return own <= avail, m, num, own

    def preempt(k: int, v: int) -> None:
        eng, p = engines[k], engines[k].pool
        r = eng.running.pop(v)
        eng.free += r.held
        if prefix_on[p]:
            pc.unpin(k, r.e0)
            pc.unpin(k, r.e1)
        r.e0 = r.e1 = -1
        r.held = r.match = r.comp = r.sched = r.kspec = 0
        o["out_preemptions"][r.idx] += 1
        enqueue(k, r, True)

    def schedule(k: int, t: float) -> None:
        eng, p = engines[k], engines[k].pool
        pol, kspec, pc_on = int(policy[p]), int(spec_k[p]), bool(prefix_on[p])
        block, max_seqs, full_budget = int(pool_block_tokens[p]), int(pool_max_num_seqs[p]), \
            int(pool_max_batched_tokens[p])
        combined = pol in (SCHED_MLFQ, SCHED_H2Q_BR)
        rel, live_wait = None, False
        if combined:
            rel, live_wait = prepare_pass(eng, pol, policy_param[p], sess_c, sess_id, new_tokens)
        prefill_step, admit_ok = False, True
        if pol == SCHED_SGLANG:
            w = eng.top(0)
            prefill_step = w is not None and len(eng.running) < max_seqs and admit_fits(k, w, full_budget)[0]
            admit_ok = prefill_step
        admitted: list = []
        preempted = False
        while True:
            budget = full_budget
            n_seqs = n_decode = prefill = spec_tokens = ctx = attn2 = k_max = n_d = ctx_d = 0
            any_ql = False
            s = 0
            while True:
                has_run = s < len(eng.running)
                w, q = None, 0
                if admit_ok and not preempted and len(eng.running) + len(admitted) < max_seqs and budget > 0:
                    if pol == SCHED_H2Q_BR:
                        ts, tl = eng.top(0), eng.top(1)
                        if tl is not None and (live_wait or ts is None):
                            w, q = tl, 1
                            w.rank = (-1 if live_wait else 1, 1, w.aseq, 0)
                        elif ts is not None:
                            w = ts
                            w.rank = (0, int(new_tokens[w.idx]), 1, w.aseq)
                    else:
                        w = eng.top(0)
                        if w is not None and pol == SCHED_MLFQ:
                            w.rank = (w.key[0], w.key[1], 0, 0)
                if w is None and not has_run:
                    break
                if w is not None and (not has_run or (combined and w.rank < eng.running[s].rank)):
                    fits, m, num, own = admit_fits(k, w, budget)
                    if not fits:
                        admit_ok = False
                        continue
                    eng.pop(q)
                    if pc_on:
                        m2, w.e0, w.e1 = pc.match(k, *pc_args(w, block, (w.prompt + w.gen - 1) // block))
                        assert m2 == m
                        if own > eng.free:
                            eng.free += pc.evict(k, own - eng.free)
                        o["pool_prefix_tokens"][p, 0] += w.prompt
                        o["pool_prefix_tokens"][p, 1] += m * block
                        o["out_cached_tokens"][w.idx] = m * block
                    eng.free -= own
                    w.comp, w.target, w.held, w.match, w.sched, w.kspec, w.dec = \
                        m * block, w.prompt + w.gen, own, m, num, 0, False
                    if o["out_first_sched_s"][w.idx] == math.inf:
                        o["out_first_sched_s"][w.idx] = t
                    admitted.append(w)
                    admitted_log[k].append(w.idx)
                    if q == 1:
                        live_wait = False
                    budget -= num
                    n_seqs += 1
                    prefill += num
                    attn2 += num * (2 * m * block + num)
                    any_ql = any_ql or w.qcls == QL
                    continue
                r = eng.running[s]
                c, target, decoding = r.comp, r.target, r.decoding()
                if budget == 0 or (prefill_step and decoding):
                    r.sched = r.kspec = 0
                    s += 1
                    continue
                kr = 0
                if decoding:
                    if kspec > 0:
                        kr = max(min(kspec, budget - 1, r.output - r.gen - 1), 0)
                    num = 1 + kr
                else:
                    num = min(target - c, budget)
                total = r.match + r.held
                need = ceil_div(c + num, block) - total if c + num > total * block else 0
                gone = False
                while need > eng.free:
                    if pc_on:
                        eng.free += pc.evict(k, need - eng.free)
                        if need <= eng.free:
                            break
                    v = spf_victim(eng.running, s) if pol == SCHED_SPF else len(eng.running) - 1
                    preempt(k, v)
                    preempted = True
                    if v == s:
                        gone = True
                        break
                if gone:
                    continue
                eng.free -= need
                r.held += need
                r.sched, r.kspec, r.dec = num, kr, decoding
                budget -= num
                n_seqs += 1
                any_ql = any_ql or r.qcls == QL
                if decoding:
                    n_decode += 1
                    ctx += c
                    if kr > 0:
                        spec_tokens += kr
                        attn2 += kr * (2 * c + kr)
                        n_d += 1
                        ctx_d += c
                        k_max = max(k_max, kr)
                else:
                    prefill += num
                    attn2 += num * (2 * c + num)
                s += 1
            if prefill_step and n_seqs == 0 and eng.running:
                prefill_step = admit_ok = False
                continue
            break
        eng.running.extend(admitted)
        if pol == SCHED_H2Q_BR:
            if any_ql:
                eng.eta = 0
            elif n_seqs > 0:
                eng.eta += 1
            if rel is not None and rel.sched > 0:
                sess_c[sess_id[rel.idx]] = 0
        cached = pc.cached(k) if pc_on else 0
        assert eng.free >= 0 and eng.free + sum(r.held for r in eng.running) + cached == pool_kv_blocks[p]
        if n_seqs == 0:
            eng.step_end_s = math.inf
            return
        size, t_tokens = graph_size(f, p, n_seqs, n_decode, prefill, spec_tokens)
        eng.step_dt_s = batch_time_s(f, pool_step_code[p], pool_step_coef[p], p, n_seqs, n_decode, prefill,
                                     spec_tokens, ctx, attn2, k_max, n_d, ctx_d, size, t_tokens)
        eng.step_seqs, eng.step_tokens = n_seqs, full_budget - budget
        eng.step_gsize, eng.step_gt = size, t_tokens
        eng.step_end_s = t + eng.step_dt_s
        steps_log.append((k, n_seqs, n_decode, prefill, len(admitted), size, t_tokens))

    def complete(k: int, r: Req, t: float) -> None:
        eng, p = engines[k], engines[k].pool
        o["out_done_s"][r.idx] = t
        o["out_status"][r.idx] = STATUS_DONE
        if prefix_on[p]:
            block = int(pool_block_tokens[p])
            kept, freed = pc.insert(k, int(prefix_key[r.idx, 0]), int(prefix_tokens[r.idx, 0]) // block,
                                    int(prefix_key[r.idx, 1]), r.match, r.comp // block)
            eng.free += (r.held - kept) + freed
            pc.unpin(k, r.e0)
            pc.unpin(k, r.e1)
        else:
            eng.free += r.held
        r.held = r.match = 0
        outstanding[k] -= 1
        pool_tokens[p] -= r.prompt + r.output
        for j in succ[r.idx]:
            heapq.heappush(releases, (t + delay_s[j], j))

    def commit(k: int, t: float) -> None:
        eng, p = engines[k], engines[k].pool
        pol, block = int(policy[p]), int(pool_block_tokens[p])
        o["inst_busy_s"][k] += eng.step_dt_s
        o["inst_seq_s"][k] += eng.step_seqs * eng.step_dt_s
        o["inst_steps"][k] += 1
        o["inst_tokens"][k] += eng.step_tokens
        if eng.step_gsize > 0:
            o["pool_graph_tokens"][p, 0] += eng.step_gt
            o["pool_graph_tokens"][p, 1] += eng.step_gsize - eng.step_gt
            o["pool_step_kind"][p, 1] += 1
        else:
            o["pool_step_kind"][p, 0] += 1
        still = []
        for r in eng.running:
            if r.sched > 0:
                if r.kspec > 0:
                    a = 0
                    for j in range(r.kspec):
                        o["pool_draft_pos"][p, j] += 1
                    u = uniform01(seed, r.idx, r.draws)  # one draw per step
                    r.draws += 1
                    reach = 1.0  # P(positions 0..j all accepted)
                    for j in range(r.kspec):
                        reach *= spec_accept[p, j]
                        if u >= reach:
                            break
                        a += 1
                        o["pool_accept_pos"][p, j] += 1
                    o["out_drafted"][r.idx] += r.kspec
                    o["out_accepted"][r.idx] += a
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
                    if r.attained_ns > int(policy_param[p, 0] * 1e9 + 0.5) << r.level and \
                            r.level < int(policy_param[p, 1]) - 1:
                        r.level += 1
                        r.attained_ns = 0
                elif pol == SCHED_H2Q_BR and not r.dec:
                    sess_h[sess_id[r.idx]] += r.sched
                    if r.comp < r.target:
                        sess_z[sess_id[r.idx]] = sess_c[sess_id[r.idx]] = 1
                        r.qcls = QL
                r.sched = r.kspec = 0
                if r.comp == r.target:
                    if r.gen == 0:
                        o["out_first_token_s"][r.idx] = t
                    r.gen += 1
                    r.target += 1
                    assert r.gen <= r.output
                    if r.gen == r.output:
                        complete(k, r, t)
                        continue
            still.append(r)
        eng.running = still
        if eng.running or eng.heaps[0] or eng.heaps[1]:
            schedule(k, t)
        else:
            eng.step_end_s = math.inf

    def enter(k: int, r: Req, t: float) -> None:
        outstanding[k] += 1
        enqueue(k, r, False)
        if engines[k].step_end_s == math.inf:
            schedule(k, t)

    n_steps = 0
    arrivals = [i for i in range(n_req) if prev_req[i] < 0]
    ai = 0
    while True:
        k = min(range(n_inst), key=lambda m: (engines[m].step_end_s, m))
        t_step = engines[k].step_end_s
        t_rel = releases[0][0] if releases else math.inf
        t_arr = arrival_s[arrivals[ai]] if ai < len(arrivals) else math.inf
        if t_step <= t_rel and t_step <= t_arr:
            if t_step > horizon_s or t_step == math.inf:
                break
            commit(k, t_step)
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
        enter(kk, r, t)
    if checks is not None:
        checks["steps"] = steps_log
        checks["admitted"] = admitted_log
        checks["engines"] = engines
        checks["prefix_cache"] = pc
        checks["reqs"] = reqs
    return n_steps
