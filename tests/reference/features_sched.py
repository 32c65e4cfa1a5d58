"""Scheduling half of the feature-kernel twin (``tests.reference.features_level``): waiting-queue
entry per policy, admission fit, preemption and one scheduler pass (``schedule``).

Functions take the twin's state ``st`` (a ``types.SimpleNamespace`` built by
``_kernels.features.level.run_iteration_features``: the run's input arrays, outputs ``st.o`` and the
engines, prefix cache and H2Q-BR session state); semantics in docs/runtime_features_contract.md.
"""

from __future__ import annotations

import math

from fleetplan.sim._kernels.codes import SCHED_H2Q_BR, SCHED_MLFQ, SCHED_SGLANG, SCHED_SPF
from fleetplan.sim._kernels.features.state import OWN_KEY_BASE
from tests.reference.features_parts import (
    QL,
    QS,
    Req,
    batch_time_s,
    graph_size,
    mlfq_entry_level,
    prepare_pass,
    spf_victim,
)
from tests.reference.iteration_parts import ceil_div


def pc_args(st, r: Req, block: int, cap: int) -> tuple:
    """(key0, nb0, key1, nb1, cap): segment 1 holds the request's own blocks, under its session's key or
    else its private key, and reaches the cap (a preempted request's computed blocks are cached)."""
    i = r.idx
    key1 = int(st.prefix_key[i, 1])
    if key1 < 0:
        key1 = OWN_KEY_BASE + i
    return (int(st.prefix_key[i, 0]), int(st.prefix_tokens[i, 0]) // block, key1,
            max(int(st.prefix_tokens[i, 1]) // block, cap), cap)


def enqueue(st, k: int, r: Req, is_preempt: bool) -> None:
    eng, p = st.engines[k], st.engines[k].pool
    pol = int(st.policy[p])
    seq = st.glob["enq"]
    st.glob["enq"] += 1
    if not is_preempt:
        r.aseq = seq
    q = 0
    if pol == SCHED_SPF:
        rem = r.prompt + r.gen
        if st.prefix_on[p]:
            block = int(st.pool_block_tokens[p])
            m, _ = st.pc.probe(k, *pc_args(st, r, block, (rem - 1) // block))
            rem -= m * block
        r.key = (rem, seq)
    elif pol == SCHED_MLFQ:
        if not is_preempt:
            r.level = mlfq_entry_level(st.pool_step_code[p], st.pool_step_coef[p], r.prompt, st.policy_param[p, 0],
                                       int(st.policy_param[p, 1]))
            r.attained_ns = 0
        r.key = (r.level, r.aseq)
    elif pol == SCHED_H2Q_BR:
        sid = st.sess_id[r.idx]
        if is_preempt:
            st.sess_c[sid] = 0
        ell = int(st.new_tokens[r.idx])
        if st.sess_z[sid] or st.sess_h[sid] > st.policy_param[p, 1] or ell > st.policy_param[p, 0]:
            st.sess_z[sid] = 1
            r.qcls, r.key, q = QL, (r.aseq, 0), 1
        else:
            r.qcls, r.key = QS, (ell, r.aseq)
    elif is_preempt:
        st.glob["front"] -= 1
        r.key = (st.glob["front"], 0)
    else:
        r.key = (seq, 0)
    eng.push(q, r)


def admit_fits(st, k: int, w: Req, budget: int) -> tuple:
    eng, p = st.engines[k], st.engines[k].pool
    block = int(st.pool_block_tokens[p])
    target = w.prompt + w.gen
    m, avail = 0, eng.free
    if st.prefix_on[p]:
        m, pinned = st.pc.probe(k, *pc_args(st, w, block, (target - 1) // block))
        avail += st.pc.evictable(k) - pinned
    num = min(target - m * block, budget)
    own = ceil_div(m * block + num, block) - m
    return own <= avail, m, num, own


def preempt(st, k: int, v: int) -> None:
    eng, p = st.engines[k], st.engines[k].pool
    r = eng.running.pop(v)
    if st.prefix_on[p]:  # vLLM v1: the freed blocks keep their hashes; the computed full ones are hits later
        block = int(st.pool_block_tokens[p])
        key0, nb0, key1, _, _ = pc_args(st, r, block, 0)
        kept, freed = st.pc.insert(k, key0, nb0, key1, r.match, r.comp // block)
        eng.free += (r.held - kept) + freed
        st.pc.unpin(k, r.e0)
        st.pc.unpin(k, r.e1)
    else:
        eng.free += r.held
    r.e0 = r.e1 = -1
    r.held = r.match = r.comp = r.sched = r.kspec = 0
    st.o["out_preemptions"][r.idx] += 1
    enqueue(st, k, r, True)


def schedule(st, k: int, t: float) -> None:
    eng, p = st.engines[k], st.engines[k].pool
    pol, kspec, pc_on = int(st.policy[p]), int(st.spec_k[p]), bool(st.prefix_on[p])
    block, max_seqs, full_budget = int(st.pool_block_tokens[p]), int(st.pool_max_num_seqs[p]), \
        int(st.pool_max_batched_tokens[p])
    combined = pol in (SCHED_MLFQ, SCHED_H2Q_BR)
    rel, live_wait = None, False
    if combined:
        rel, live_wait = prepare_pass(eng, pol, st.policy_param[p], st.sess_c, st.sess_id, st.new_tokens)
    prefill_step, admit_ok = False, True
    if pol == SCHED_SGLANG:
        w = eng.top(0)
        prefill_step = w is not None and len(eng.running) < max_seqs and admit_fits(st, k, w, full_budget)[0]
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
                        w.rank = (0, int(st.new_tokens[w.idx]), 1, w.aseq)
                else:
                    w = eng.top(0)
                    if w is not None and pol == SCHED_MLFQ:
                        w.rank = (w.key[0], w.key[1], 0, 0)
            if w is None and not has_run:
                break
            if w is not None and (not has_run or (combined and w.rank < eng.running[s].rank)):
                fits, m, num, own = admit_fits(st, k, w, budget)
                if not fits:
                    admit_ok = False
                    continue
                eng.pop(q)
                if pc_on:
                    m2, w.e0, w.e1 = st.pc.match(k, *pc_args(st, w, block, (w.prompt + w.gen - 1) // block))
                    assert m2 == m
                    if own > eng.free:
                        eng.free += st.pc.evict(k, own - eng.free)
                    st.o["pool_prefix_tokens"][p, 0] += w.prompt
                    st.o["pool_prefix_tokens"][p, 1] += m * block
                    st.o["out_cached_tokens"][w.idx] = m * block
                eng.free -= own
                w.comp, w.target, w.held, w.match, w.sched, w.kspec, w.dec = \
                    m * block, w.prompt + w.gen, own, m, num, 0, False
                if st.o["out_first_sched_s"][w.idx] == math.inf:
                    st.o["out_first_sched_s"][w.idx] = t
                admitted.append(w)
                st.admitted_log[k].append(w.idx)
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
                    eng.free += st.pc.evict(k, need - eng.free)
                    if need <= eng.free:
                        break
                v = spf_victim(eng.running, s) if pol == SCHED_SPF else len(eng.running) - 1
                preempt(st, k, v)
                preempted = True
                gone = v == s  # the request itself was the victim
                if gone:
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
            st.sess_c[st.sess_id[rel.idx]] = 0
    cached = st.pc.cached(k) if pc_on else 0
    assert eng.free >= 0 and eng.free + sum(r.held for r in eng.running) + cached == st.pool_kv_blocks[p]
    if n_seqs == 0:
        eng.step_end_s = math.inf
        return
    size, t_tokens = graph_size(st.f, p, n_seqs, n_decode, prefill, spec_tokens)
    eng.step_dt_s = batch_time_s(st.f, st.pool_step_code[p], st.pool_step_coef[p], p, n_seqs, n_decode, prefill,
                                 spec_tokens, ctx, attn2, k_max, n_d, ctx_d, size, t_tokens)
    eng.step_seqs, eng.step_tokens = n_seqs, full_budget - budget
    eng.step_gsize, eng.step_gt = size, t_tokens
    eng.step_end_s = t + eng.step_dt_s
    st.steps_log.append((k, n_seqs, n_decode, prefill, len(admitted), size, t_tokens))
