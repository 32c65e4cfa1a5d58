"""Batch builder of the feature kernel: one pass per step for every scheduler policy.

Candidates in the policy's order (``features_policy``): running requests (admission order, or
rank order for MLFQ / H2Q-BR) and the waiting heap's top.  vLLM v1, SGLang and SPF take all
running candidates first; MLFQ and H2Q-BR interleave them with the waiting top by rank.

* running request r: decoding (``GEN > 0`` and ``COMP == TARGET - 1``) gets ``1 + k_r`` tokens,
  ``k_r = max(0, min(spec_k, budget - 1, output - generated - 1))`` drafts (0 with speculative
  decoding off); prefilling gets ``min(TARGET - COMP, budget)``; nothing once the budget is
  spent.  A KV shortage evicts cached blocks, then preempts the lowest-ranked running request
  not yet scheduled in this pass (the last one; SPF: the largest key), possibly r itself;
* waiting top w: admitted while ``n_running < max_num_seqs``, budget > 0 and nobody was
  preempted in this pass, if its first chunk fits (``features_admit``); otherwise admission
  stops for the pass (vLLM v1 ``break``);
* SGLang: a pass is a prefill pass (running decodes get 0 tokens, admission on) when the
  waiting head fits at the start (``sglang_can_admit``), else a decode pass (admission off).
  A prefill pass that schedules nothing is followed by a decode pass (no stall);
* H2Q-BR: after the pass the short streak resets if a QL request was scheduled (else +1
  when anything was), and the released carryover, if scheduled, spends its credit.

Runs of identical pure-decode steps are one event (cruise; when and how long: ``features_runs``).
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.codes import SCHED_H2Q_BR, SCHED_MLFQ, SCHED_SGLANG, SCHED_SPF
from fleetplan.sim._kernels.features_admit import admit, admit_fits, preempt_at, sglang_can_admit, spf_victim
from fleetplan.sim._kernels.features_h2q import h2q_joined, h2q_prepare
from fleetplan.sim._kernels.features_layout import (
    ASEQ,
    COMP,
    DEC,
    F_DT,
    F_START,
    G_H2Q_RUNS,
    GEN,
    HELD,
    K_CTX,
    K_ETA,
    K_FREE,
    K_GSIZE,
    K_GT,
    K_HMIN,
    K_M,
    K_ROOT0,
    K_ROOT1,
    K_RSPEC,
    K_RUN,
    K_SEQS,
    K_SORTED,
    K_TOK,
    KSPEC,
    MATCH,
    OUT,
    QCLS,
    QL,
    REQ,
    SCHED,
    TARGET,
    UNKNOWN,
    WK0,
    WK1,
)
from fleetplan.sim._kernels.features_policy import mlfq_prepare, mlfq_rank, rank_less, set_rank
from fleetplan.sim._kernels.features_runs import may_admit, run_length, spec_run
from fleetplan.sim._kernels.features_time import batch_time_s, graph_size, run_parts, run_step_s
from fleetplan.sim._kernels.jit import njit_borrowed
from fleetplan.sim._kernels.prefix_cache import pc_evict


@njit_borrowed
def schedule_features(k, p, t_s, req, ses, ins, pools, fts, so, pc, stack):
    """Form the batch of instance k at ``t_s``; sets ``step_end_s[k]`` (inf if empty).

    ``so = (out_first_sched_s, out_preemptions, out_cached_tokens, pool_prefix_tokens)``: only the
    outputs a pass writes (every array argument of an out-of-line call costs a refcount pair)."""
    rq, new_tokens, sess_id = req[2], req[4], req[7]
    run_lo, run_req, ki, kf, step_end_s = ins[:5]
    pol = fts[0][p]
    kspec = fts[6][p]
    pc_on = fts[10][p] != 0
    block = pools[3][p]
    max_seqs = pools[1][p]
    full_budget = np.int64(pools[2][p])
    combined = pol == SCHED_MLFQ or pol == SCHED_H2Q_BR
    rel = -1
    live_wait = False
    if pol == SCHED_MLFQ:
        mlfq_prepare(k, rq, run_lo[k], run_req, ki)
    elif pol == SCHED_H2Q_BR:
        rel, live_wait = h2q_prepare(k, fts[1][p, 2], ses[3][G_H2Q_RUNS] == 0, rq, new_tokens, sess_id, ses[2],
                                     run_lo[k], run_req, ki, stack)
    lo = run_lo[k]
    prefill_step = False
    admit_ok = True
    if pol == SCHED_SGLANG:
        prefill_step = sglang_can_admit(k, p, req, ki, pools, fts, pc)
        admit_ok = prefill_step
    n_adm = 0
    preempted = False
    w_ranked = -1  # MLFQ, H2Q-BR: the waiting top whose rank is set
    while True:
        budget = full_budget
        n_seqs = n_decode = prefill = spec_tokens = ctx = attn2 = k_max = n_d = ctx_d = 0
        min_rem = np.int64(1 << 62)
        reserved = 0  # blocks the running requests took in this pass
        any_ql = False
        s = lo
        while True:
            n_run = ki[k, K_RUN]
            has_run = s < lo + n_run
            w = -1
            wcol = K_ROOT0
            if admit_ok and not preempted and n_run + n_adm < max_seqs and budget > 0:
                if pol == SCHED_H2Q_BR:
                    top_s = ki[k, K_ROOT0]
                    top_l = ki[k, K_ROOT1]
                    if top_l >= 0 and (live_wait or top_s < 0):
                        w = top_l
                        wcol = K_ROOT1
                        if w != w_ranked:  # (live_wait changes only when the QL top is admitted)
                            set_rank(rq, w, -1 if live_wait else 1, 1, rq[w, ASEQ], 0)
                    elif top_s >= 0:
                        w = top_s
                        if w != w_ranked:
                            set_rank(rq, w, 0, new_tokens[rq[w, REQ]], 1, rq[w, ASEQ])
                    w_ranked = w
                else:
                    w = ki[k, K_ROOT0]
                    if w >= 0 and pol == SCHED_MLFQ and w != w_ranked:
                        set_rank(rq, w, mlfq_rank(rq[w, WK0], rq[w, WK1]), 0, 0, 0)
                        w_ranked = w
            if w < 0 and not has_run:
                break
            if w >= 0 and (not has_run or (combined and rank_less(rq, w, run_req[s]))):
                fits, m, num, own = admit_fits(k, p, w, budget, req, ki, pools, fts, pc)
                if not fits:
                    admit_ok = False
                    continue
                admit(k, p, w, wcol, m, num, own, t_s, req, ins, pools, fts, so, pc)
                run_req[lo + n_run + n_adm] = w
                n_adm += 1
                if wcol == K_ROOT1:
                    live_wait = False
                if pol == SCHED_H2Q_BR:
                    h2q_joined(ki, k, rq, w, ses[2][sess_id[rq[w, REQ]]] != 0)
                c0 = m * block
                budget -= num
                n_seqs += 1
                prefill += num
                attn2 += num * (2 * c0 + num)
                if pol == SCHED_H2Q_BR and rq[w, QCLS] == QL:
                    any_ql = True
                continue
            r = run_req[s]
            c = rq[r, COMP]
            target = rq[r, TARGET]
            decoding = rq[r, GEN] > 0 and c == target - 1
            if budget == 0 or (prefill_step and decoding):
                rq[r, SCHED] = 0
                rq[r, KSPEC] = 0
                s += 1
                continue
            kr = 0
            if decoding:
                if kspec > 0:
                    kr = min(kspec, budget - 1, rq[r, OUT] - rq[r, GEN] - 1)
                    if kr < 0:
                        kr = 0
                num = 1 + kr
            else:
                num = target - c
                if num > budget:
                    num = budget
            total = rq[r, MATCH] + rq[r, HELD]
            need = 0
            if c + num > total * block:
                need = (c + num + block - 1) // block - total
            gone = False
            while need > ki[k, K_FREE]:
                if pc_on:
                    ki[k, K_FREE] += pc_evict(pc, k, need - ki[k, K_FREE])
                    if need <= ki[k, K_FREE]:
                        break
                end = lo + ki[k, K_RUN]
                v = spf_victim(rq, run_req, s, end) if pol == SCHED_SPF else end - 1
                preempt_at(k, p, v, end + n_adm, req, ses, ins, pools, fts, so, pc)
                preempted = True
                if v == s:
                    gone = True
                    break
            if gone:
                continue
            ki[k, K_FREE] -= need
            reserved += need
            rq[r, HELD] += need
            rq[r, SCHED] = num
            rq[r, KSPEC] = kr
            rq[r, DEC] = 1 if decoding else 0
            budget -= num
            n_seqs += 1
            if pol == SCHED_H2Q_BR and rq[r, QCLS] == QL:  # (H2Q-BR's; another row line)
                any_ql = True
            if decoding:
                n_decode += 1
                ctx += c
                rem = rq[r, OUT] - rq[r, GEN]
                if rem < min_rem:
                    min_rem = rem
                if kr > 0:
                    spec_tokens += kr
                    attn2 += kr * (2 * c + kr)
                    n_d += 1
                    ctx_d += c
                    if kr > k_max:
                        k_max = kr
            else:
                prefill += num
                attn2 += num * (2 * c + num)
            s += 1
        if prefill_step and n_seqs == 0 and ki[k, K_RUN] > 0:
            prefill_step = False  # nothing to prefill after all: a decode pass
            admit_ok = False
            continue
        break
    if n_adm > 0 and ki[k, K_SORTED] > ki[k, K_RUN]:  # admitted at the end, not yet in rank order
        ki[k, K_SORTED] = ki[k, K_RUN]
    ki[k, K_RUN] += n_adm
    if pol == SCHED_H2Q_BR:
        if any_ql:
            ki[k, K_ETA] = 0
        elif n_seqs > 0:
            ki[k, K_ETA] += 1
        if rel >= 0 and rq[rel, SCHED] > 0:
            ses[2][sess_id[rq[rel, REQ]]] = 0
            ki[k, K_HMIN] = UNKNOWN
    if n_seqs == 0:
        step_end_s[k] = np.inf
        ki[k, K_M] = 0
        return
    gmode = fts[2][p]
    size, t_tokens = graph_size(p, n_seqs, n_decode, prefill, spec_tokens, gmode, fts[3], fts[4])
    dt = batch_time_s(n_seqs, n_decode, prefill, spec_tokens, ctx, attn2, k_max, n_d, ctx_d, size, t_tokens,
                      pools[4][p], pools[5][p], gmode, fts[5][p], fts[8][p], fts[9][p])
    m = 1
    if not preempted and prefill == 0 and n_seqs == ki[k, K_RUN]:
        top_s, top_l = ki[k, K_ROOT0], ki[k, K_ROOT1]
        can_admit = (top_s >= 0 or top_l >= 0) and ki[k, K_RUN] < max_seqs
        if can_admit and combined:  # ranks may move a waiting top ahead of running requests in a later pass
            min_budget = full_budget - n_seqs - spec_tokens
            can_admit = top_s >= 0 and may_admit(k, p, top_s, min_budget, reserved, req, ki, pools, fts, pc)
            if not can_admit and top_l >= 0 and (top_s < 0 or not any_ql):  # QL top: alone or as liveness slice
                can_admit = may_admit(k, p, top_l, min_budget, reserved, req, ki, pools, fts, pc)
        if pol == SCHED_H2Q_BR and ses[3][G_H2Q_RUNS] == 0:
            can_admit = True  # sessions shared by instances: no runs (features_h2q)
        m = run_length(pol, kspec, n_seqs, spec_tokens, min_rem, ki[k, K_FREE], block, can_admit)
        if m > 1 and kspec > 0:  # exact length from the acceptance draws, durations into kf
            m = spec_run(k, p, m, kspec, n_seqs, ctx, size, t_tokens, rq, run_req, lo, kf, ins[5], fts[7],
                         pools[4][p], pools[5][p], gmode, fts[5][p], fts[8][p], fts[9][p])
    kf[k, F_START] = t_s
    kf[k, F_DT] = dt
    ki[k, K_SEQS] = n_seqs
    ki[k, K_TOK] = full_budget - budget
    ki[k, K_M] = m
    ki[k, K_CTX] = ctx
    ki[k, K_GSIZE] = size
    ki[k, K_GT] = t_tokens
    ki[k, K_RSPEC] = kspec if m > 1 else 0
    t_end = t_s + dt
    if m > 1:
        gtime = fts[5][p]
        base_s, per_ctx_s = run_parts(k, ki, pools[4][p], pools[5][p])
        for j in range(1, m):
            t_end += run_step_s(k, j, base_s, per_ctx_s, ki, kf, gmode, gtime)
    step_end_s[k] = t_end
