"""Batch builder of the feature kernel: one pass per step for every scheduler policy, with admission,
KV allocation and preemption, and runs of identical passes as one event.

Candidates in the policy's order (``policy``): running requests (admission order, or
rank order for MLFQ / H2Q-BR) and the waiting heap's top.  vLLM v1, SGLang and SPF take all
running candidates first; MLFQ and H2Q-BR interleave them with the waiting top by rank.

* running request r: decoding (``GEN > 0`` and ``COMP == TARGET - 1``) gets ``1 + k_r`` tokens,
  ``k_r = max(0, min(spec_k, budget - 1, output - generated - 1))`` drafts (0 with speculative
  decoding off); prefilling gets ``min(TARGET - COMP, budget)``; nothing once the budget is
  spent.  A KV shortage evicts cached blocks, then preempts the lowest-ranked running request
  not yet scheduled in this pass (the last one; SPF: the largest key), possibly r itself;
* waiting top w: admitted while ``n_running < max_num_seqs``, budget > 0 and nobody was
  preempted in this pass, if its first chunk fits (admission, below); otherwise admission
  stops for the pass (vLLM v1 ``break``);
* SGLang: a pass is a prefill pass (running decodes get 0 tokens, admission on) when the
  waiting head fits at the start (``sglang_can_admit``), else a decode pass (admission off).
  A prefill pass that schedules nothing is followed by a decode pass (no stall);
* H2Q-BR: after the pass the short streak resets if a QL request was scheduled (else +1
  when anything was), and the released carryover, if scheduled, spends its credit.

Runs of identical pure-decode steps are one event (cruise; when and how long: below).

Admission, KV allocation and preemption
---------------------------------------

KV accounting per instance k: ``ki[k, K_FREE]`` free blocks; a running request r owns
``rq[r, HELD]`` blocks covering block positions ``[MATCH, MATCH + HELD)``; its first
``rq[r, MATCH]`` blocks are prefix-cache blocks pinned through entries ``E0``/``E1``.  So
``free + Σ HELD + cached blocks == kv_blocks`` (cached = pinned or not).  Allocation evicts
unpinned cached blocks (``pc_evict``) before preempting.

Admission of waiting request w (prompt + generated = target tokens): matched blocks ``m`` from
``pc_probe`` (prefix caching on) count as computed; first chunk ``num = min(target - m B,
budget)``; own blocks ``ceil((m B + num) / B) - m`` must fit in ``free + evictable - pinned``
(the probe's blocks that the match would pin), else admission stops.  Then ``pc_match`` pins,
eviction covers any shortage, and ``pool_prefix_tokens[p] += (prompt, m B)``.

Preemption with prefix caching on (``preempt_at``): the victim's computed full blocks stay cached
under its own segment-1 key (``state.own_segment``: its session key, else ``OWN_KEY_BASE + i``),
the rest are freed.  At re-admission they are matched (unless evicted) and re-pinned, and its first
chunk's own blocks must fit beside them, so a request that cannot grow waits while the running ones
decode instead of re-prefilling from zero in every step (vLLM v1: blocks freed with their hashes
kept, ``get_computed_blocks`` at re-admission; sources in ``state.own_segment``).  Without prefix
caching a preempted request recomputes from zero, as vLLM does with prefix caching turned off.

Runs of identical steps as one event ("cruise")
-----------------------------------------------

A pass (``schedule_features``) that schedules every running request of instance
k for decode only (no prefill chunk, no admission, no preemption) repeats unchanged until a
request finishes, the KV blocks run short or a request joins the instance
(``timing.cut_run`` then ends the run after the step in progress).  Such a run of ``m``
steps is one event, bit for bit the ``m`` single steps of the twin (``tests/reference``):

* **plain** (no drafts): ``m = min(R, (F // n) B, 512)`` with ``R`` the fewest remaining
  output tokens, ``F`` the free blocks after the pass, ``n`` the batch, ``B`` tokens per block
  (as ``iteration_steps``); step j lasts ``base + per_ctx (ctx + n j)``;
* **speculative** (every request drafts ``k``, i.e. no budget or length cap bit): step j's
  context is ``ctx_j = ctx_0 + sum_{i<j} (n + A_i)``, ``A_i`` the batch's accepted drafts in
  step i.  Draws are pure functions of ``(seed, r, counter)`` (``rng``), so they are
  drawn ahead here for the durations and the length, and the accepted counts kept per slot and
  step (``run_acc``) are what the commit replays (``commit.spec_replay``; a cut run
  replays its first steps).  The run ends with the first step after which a request has
  ``<= k`` tokens left (it finishes, or would draft fewer), and ``m <= floor((F // n) B /
  (k + 1)) + 1`` and ``SPEC_RUN_MAX``: step j needs at most ``j (k + 1)`` tokens of blocks
  beyond the first pass's per request;
* **MLFQ** and **H2Q-BR** run only while nothing can be admitted: nothing waits, ``max_num_seqs``
  run, or no waiting top that may be a candidate in a later pass can fit there (``may_admit``).
  Then ranks order nothing but the running requests, which all get the same tokens in any
  order.  MLFQ: attained service and demotions are replayed per step at commit
  (``mlfq_replay``), and the running list is re-sorted before the last step's commit, where the
  twin sorts it, so completions are handled in the twin's order (only from the first slot a
  demotion or an admission may have put out of order: ``K_SORTED``).  H2Q-BR: the short streak,
  the carryover credits spent and the last pass's order are replayed at commit
  (``h2q.h2q_replay``), when sessions are local to an instance (else no runs).
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.codes import SCHED_H2Q_BR, SCHED_MLFQ, SCHED_SGLANG, SCHED_SPF
from fleetplan.sim._kernels.features.h2q import h2q_joined, h2q_prepare
from fleetplan.sim._kernels.features.policy import enqueue_wait, mlfq_prepare, mlfq_rank, rank_less, set_rank
from fleetplan.sim._kernels.features.rng import keyed_bits53
from fleetplan.sim._kernels.features.state import (
    ASEQ,
    ATT,
    COMP,
    DEC,
    DKEY,
    DRAWS,
    E0,
    E1,
    F_D0,
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
    LEVEL,
    MATCH,
    OUT,
    QCLS,
    QL,
    REQ,
    RK0,
    SCHED,
    SPEC_RUN_MAX,
    TARGET,
    UNKNOWN,
    WK0,
    WK1,
    own_segment,
    ph_pop,
)
from fleetplan.sim._kernels.features.timing import batch_time_s, graph_adjust_s, graph_size, run_parts, run_step_s
from fleetplan.sim._kernels.iteration_steps import CRUISE_MAX_STEPS
from fleetplan.sim._kernels.jit import njit_borrowed, njit_inline
from fleetplan.sim._kernels.prefix_cache import pc_evict, pc_evictable, pc_insert, pc_match, pc_probe, pc_unpin
from fleetplan.sim._kernels.step_model import decode_step_parts, verify_step_parts, verify_step_s


@njit_borrowed
def schedule_features(k, p, t_s, req, ses, ins, pools, fts, outs, stats, pc, stack):
    """Form the batch of instance k at ``t_s``; sets ``step_end_s[k]`` (inf if empty).  A pass writes
    ``outs.first_sched_s``, ``outs.preemptions``, ``outs.cached_tokens`` and ``stats.pool_prefix_tokens``."""
    rq, new_tokens, sess_id = req.rq, req.new_tokens, req.sess_id
    run_lo, run_req, ki, kf, step_end_s = ins.run_lo, ins.run_req, ins.ki, ins.kf, ins.step_end_s
    pol = fts.policy[p]
    kspec = fts.spec_k[p]
    pc_on = fts.prefix_on[p] != 0
    block = pools.pool_block_tokens[p]
    max_seqs = pools.pool_max_num_seqs[p]
    full_budget = np.int64(pools.pool_max_batched_tokens[p])
    combined = pol == SCHED_MLFQ or pol == SCHED_H2Q_BR
    rel = -1
    live_wait = False
    if pol == SCHED_MLFQ:
        mlfq_prepare(k, rq, run_lo[k], run_req, ki)
    elif pol == SCHED_H2Q_BR:
        rel, live_wait = h2q_prepare(k, fts.policy_param[p, 2], ses.glob[G_H2Q_RUNS] == 0, rq, new_tokens, sess_id,
                                     ses.sess_c, run_lo[k], run_req, ki, stack)
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
                admit(k, p, w, wcol, m, num, own, t_s, req, ins, pools, fts, outs, stats, pc)
                run_req[lo + n_run + n_adm] = w
                n_adm += 1
                if wcol == K_ROOT1:
                    live_wait = False
                if pol == SCHED_H2Q_BR:
                    h2q_joined(ki, k, rq, w, ses.sess_c[sess_id[rq[w, REQ]]] != 0)
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
                preempt_at(k, p, v, end + n_adm, req, ses, ins, pools, fts, outs, pc)
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
            ses.sess_c[sess_id[rq[rel, REQ]]] = 0
            ki[k, K_HMIN] = UNKNOWN
    if n_seqs == 0:
        step_end_s[k] = np.inf
        ki[k, K_M] = 0
        return
    gmode = fts.graph_mode[p]
    size, t_tokens = graph_size(p, n_seqs, n_decode, prefill, spec_tokens, gmode, fts.graph_sizes, fts.graph_n)
    code, coef, gtime = pools.pool_step_code[p], pools.pool_step_coef[p], fts.graph_time_s[p]
    dt = batch_time_s(n_seqs, n_decode, prefill, spec_tokens, ctx, attn2, k_max, n_d, ctx_d, size, t_tokens,
                      code, coef, gmode, gtime, fts.draft_code[p], fts.draft_coef[p])
    m = 1
    if not preempted and prefill == 0 and n_seqs == ki[k, K_RUN]:
        top_s, top_l = ki[k, K_ROOT0], ki[k, K_ROOT1]
        can_admit = (top_s >= 0 or top_l >= 0) and ki[k, K_RUN] < max_seqs
        if can_admit and combined:  # ranks may move a waiting top ahead of running requests in a later pass
            min_budget = full_budget - n_seqs - spec_tokens
            can_admit = top_s >= 0 and may_admit(k, p, top_s, min_budget, reserved, req, ki, pools, fts, pc)
            if not can_admit and top_l >= 0 and (top_s < 0 or not any_ql):  # QL top: alone or as liveness slice
                can_admit = may_admit(k, p, top_l, min_budget, reserved, req, ki, pools, fts, pc)
        if pol == SCHED_H2Q_BR and ses.glob[G_H2Q_RUNS] == 0:
            can_admit = True  # sessions shared by instances: no runs (h2q.py)
        m = run_length(pol, kspec, n_seqs, spec_tokens, min_rem, ki[k, K_FREE], block, can_admit)
        if m > 1 and kspec > 0:  # exact length from the acceptance draws, durations into kf
            m = spec_run(k, p, m, kspec, n_seqs, ctx, size, t_tokens, rq, run_req, lo, kf, ins.run_acc, fts.spec_bits,
                         code, coef, gmode, gtime, fts.draft_code[p], fts.draft_coef[p])
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
        base_s, per_ctx_s = run_parts(k, ki, code, coef)
        for j in range(1, m):
            t_end += run_step_s(k, j, base_s, per_ctx_s, ki, kf, gmode, gtime)
    step_end_s[k] = t_end


@njit_inline
def admit_fits(k, p, w, budget, req, ki, pools, fts, pc):
    """``(fits, matched blocks, first chunk tokens, own blocks)`` of waiting request w."""
    prompt_tokens, rq, prefix_key, prefix_tokens = req.prompt_tokens, req.rq, req.prefix_key, req.prefix_tokens
    block = pools.pool_block_tokens[p]
    i = rq[w, REQ]
    target = prompt_tokens[i] + rq[w, GEN]
    m = 0
    avail = ki[k, K_FREE]
    if fts.prefix_on[p] != 0:
        key0, nb0, key1, nb1, cap = own_segment(i, prefix_key, prefix_tokens, block, (target - 1) // block)
        m, pinned = pc_probe(pc, k, key0, nb0, key1, nb1, cap)
        avail += pc_evictable(pc, k) - pinned
    c0 = m * block
    num = target - c0
    if num > budget:
        num = budget
    own = (c0 + num + block - 1) // block - m
    return own <= avail, m, num, own


@njit_inline
def admit(k, p, w, root_col, m, num, own, t_s, req, ins, pools, fts, outs, stats, pc):
    """Pop w from its heap and start it with ``num`` tokens at offset ``m`` blocks (fits)."""
    prompt_tokens, rq, prefix_key, prefix_tokens = req.prompt_tokens, req.rq, req.prefix_key, req.prefix_tokens
    ki = ins.ki
    block = pools.pool_block_tokens[p]
    i = rq[w, REQ]
    ki[k, root_col] = ph_pop(rq, ki[k, root_col])
    e0 = -1
    e1 = -1
    if fts.prefix_on[p] != 0:
        key0, nb0, key1, nb1, cap = own_segment(i, prefix_key, prefix_tokens, block,
                                                (prompt_tokens[i] + rq[w, GEN] - 1) // block)
        _, e0, e1 = pc_match(pc, k, key0, nb0, key1, nb1, cap)
        if own > ki[k, K_FREE]:
            ki[k, K_FREE] += pc_evict(pc, k, own - ki[k, K_FREE])
        pool_prefix_tokens = stats.pool_prefix_tokens
        pool_prefix_tokens[p, 0] += prompt_tokens[i]
        pool_prefix_tokens[p, 1] += m * block
        outs.cached_tokens[i] = m * block
    ki[k, K_FREE] -= own
    rq[w, COMP] = m * block
    rq[w, TARGET] = prompt_tokens[i] + rq[w, GEN]
    rq[w, HELD] = own
    rq[w, MATCH] = m
    rq[w, E0] = e0
    rq[w, E1] = e1
    rq[w, SCHED] = num
    rq[w, KSPEC] = 0
    rq[w, DEC] = 0
    if outs.first_sched_s[i] == np.inf:
        outs.first_sched_s[i] = t_s


@njit_borrowed
def preempt_at(k, p, v, n_end, req, ses, ins, pools, fts, outs, pc):
    """Preempt (recompute) the running request at slot ``v``; slots up to ``n_end`` shift down."""
    rq = req.rq
    run_req, ki = ins.run_req, ins.ki
    r = run_req[v]
    for s in range(v, n_end - 1):
        run_req[s] = run_req[s + 1]
    ki[k, K_RUN] -= 1
    if fts.prefix_on[p] != 0:  # its computed full blocks stay cached under its own key (state.own_segment)
        block = pools.pool_block_tokens[p]
        key0, nb0, key1, _, _ = own_segment(rq[r, REQ], req.prefix_key, req.prefix_tokens, block, 0)
        kept, freed = pc_insert(pc, k, key0, nb0, key1, rq[r, MATCH], rq[r, COMP] // block)
        ki[k, K_FREE] += (rq[r, HELD] - kept) + freed
        pc_unpin(pc, k, rq[r, E0])
        pc_unpin(pc, k, rq[r, E1])
    else:
        ki[k, K_FREE] += rq[r, HELD]
    rq[r, E0] = -1
    rq[r, E1] = -1
    rq[r, HELD] = 0
    rq[r, MATCH] = 0
    rq[r, COMP] = 0
    rq[r, SCHED] = 0
    rq[r, KSPEC] = 0
    outs.preemptions[rq[r, REQ]] += 1
    enqueue_wait(k, p, r, True, req, ses, ki, pools, fts, pc)
    return r


@njit_inline
def spf_victim(rq, run_req, s, end):
    """Slot in ``[s, end)`` of the running request with the largest SPF key (keys are unique)."""
    v = end - 1
    for j in range(s, end - 1):
        a = run_req[j]
        b = run_req[v]
        if rq[a, WK0] > rq[b, WK0] or (rq[a, WK0] == rq[b, WK0] and rq[a, WK1] > rq[b, WK1]):
            v = j
    return v


@njit_inline
def sglang_can_admit(k, p, req, ki, pools, fts, pc):
    """SGLang prefill-first test at the start of a pass: the waiting head fits (full budget)."""
    w = ki[k, K_ROOT0]
    if w < 0 or ki[k, K_RUN] >= pools.pool_max_num_seqs[p]:
        return False
    fits, _, _, _ = admit_fits(k, p, w, np.int64(pools.pool_max_batched_tokens[p]), req, ki, pools, fts, pc)
    return fits


@njit_inline
def run_length(pol, kspec, n_seqs, spec_tokens, min_rem, free_blocks, block, can_admit):
    """Steps in the run formed by a decode-only pass that scheduled every running request (see the
    module doc); ``can_admit``: a waiting request could be admitted in a later pass.

    For a speculative run this is an upper bound that ``spec_run`` shortens from the draws: the
    steps in which no request can near its end (``R // (k + 1)``), or ``R`` once that is below 2
    (so the last tokens of a request are not one event per step).  Any bound is exact; a short
    one costs another event, a long one acceptance draws made ahead for steps a cut discards."""
    if (pol == SCHED_MLFQ or pol == SCHED_H2Q_BR) and can_admit:
        return 1
    m_blocks = (free_blocks // n_seqs) * block
    if kspec == 0:
        m = min(min_rem, m_blocks, CRUISE_MAX_STEPS)
    elif spec_tokens != n_seqs * kspec:
        return 1
    else:  # without any draw, no request nears its end within R // (k + 1) steps
        near_end = min_rem // (kspec + 1)
        m = min(m_blocks // (kspec + 1) + 1, SPEC_RUN_MAX, near_end if near_end >= 2 else min_rem)
    return m if m > 1 else 1


@njit_borrowed
def may_admit(k, p, w, min_budget, reserved, req, ki, pools, fts, pc):
    """Whether the waiting top w of MLFQ or H2Q-BR might be admitted in a later pass of a run (then
    no run).

    Ranks that change from pass to pass (MLFQ demotions, H2Q-BR's released carryover and liveness
    slice) can move running requests after w in the pass order, so w may be checked with more
    budget and before their blocks are taken.  Its own blocks grow with the budget (chunk
    ``min(tokens, budget)``), the budget before it is at least ``min_budget`` (everything running
    ahead of it), and the free plus evictable blocks at its check are at most this pass's before
    the running requests took ``reserved`` (they only shrink in a run: no completions, no cache
    inserts).  So w cannot be admitted if its own blocks at ``min_budget`` exceed that bound."""
    if min_budget <= 0:
        return True
    ki[k, K_FREE] += reserved
    fits, _, _, _ = admit_fits(k, p, w, min_budget, req, ki, pools, fts, pc)
    ki[k, K_FREE] -= reserved
    return fits


@njit_borrowed
def spec_run(k, p, m_max, kspec, n_seqs, ctx, size, t_tokens, rq, run_req, lo, kf, run_acc, spec_bits, code, coef,
             gmode, gtime, dcode, dcoef):
    """Length ``m <= m_max`` of a speculative run on instance k, the durations of its steps 1..m-1
    in ``kf[k, F_D0 + j]`` and the accepted drafts of slot s in step j in ``run_acc[s, j]``.

    Each request's acceptances are drawn ahead (counters untouched; the commit replays them from
    ``run_acc``): the run ends with the first step after which some request has at most ``kspec``
    tokens left (it finishes, or drafts fewer in the next pass).  Slot j first sums the batch's
    accepted drafts of step j - 1, then holds step j's duration, as ``schedule_features`` computes a
    pass's (``n_seqs`` decodes with ``kspec`` drafts each, context ``ctx_j``, graph ``size,
    t_tokens``).  ``spec_bits``: ``rng.accept_thresholds``."""
    for j in range(1, m_max):
        kf[k, F_D0 + j] = 0.0
    m = m_max
    for s in range(lo, lo + n_seqs):
        r = run_req[s]
        key = rq[r, DKEY]
        d = rq[r, DRAWS]
        rem = rq[r, OUT] - rq[r, GEN]
        for j in range(m):
            b = keyed_bits53(key, d + j)
            a = 0
            for i in range(kspec):  # the accepted positions are a prefix: count, no branch
                a += 1 if b < spec_bits[p, i] else 0
            run_acc[s, j] = a
            if j + 1 < m:
                kf[k, F_D0 + j + 1] += a
            rem -= a + 1
            if rem <= kspec:
                m = j + 1
                break
    # batch_time_s(n_seqs, n_seqs, 0, n_seqs k, c, attn2, k, n_seqs, c, size, t_tokens, ...) with the
    # terms that do not depend on the context evaluated once (bit for bit the same value)
    pad = size - t_tokens if size > 0 else 0
    vparts = verify_step_parts(code, coef, n_seqs + pad, n_seqs + pad, n_seqs * kspec)
    dbase_s, dper_ctx_s = decode_step_parts(dcode, dcoef, n_seqs)
    c = ctx
    for j in range(1, m):
        c += n_seqs + int(kf[k, F_D0 + j])
        attn2 = 2 * kspec * c + n_seqs * kspec * kspec  # = sum over requests of k (2 c_r + k)
        x = verify_step_s(code, coef, vparts, c, attn2)
        if size > 0:
            x = graph_adjust_s(x, gmode, gtime)
        kf[k, F_D0 + j] = x + kspec * (dbase_s + dper_ctx_s * c)
    return m


@njit_inline
def step_ns(k, j, base_s, per_ctx_s, ki, kf, gmode, gtime):
    """Duration of step j of the run in flight on instance k in integer nanoseconds (MLFQ's unit)."""
    dt = kf[k, F_DT] if j == 0 else run_step_s(k, j, base_s, per_ctx_s, ki, kf, gmode, gtime)
    return np.int64(dt * 1e9 + 0.5)


@njit_borrowed
def mlfq_replay(k, m, q0_ns, last_level, rq, run_req, lo, n, ki, kf, base_s, per_ctx_s, gmode, gtime):
    """MLFQ attained service and demotions of instance k's ``n`` running requests over steps
    0..m-2 of the run in flight (the commit adds the last step's, as for a single step).

    Attained service is in integer nanoseconds, so a request that cannot cross its quantum in
    the run takes the run's total at once; one that can is replayed step by step.  Requests at
    the last level are skipped (their attained service is never read)."""
    total_ns = np.int64(0)
    for j in range(m - 1):
        total_ns += step_ns(k, j, base_s, per_ctx_s, ki, kf, gmode, gtime)
    for s in range(lo, lo + n):
        r = run_req[s]
        level = rq[r, LEVEL]
        if level >= last_level:
            continue
        if rq[r, ATT] + total_ns <= q0_ns << level:
            rq[r, ATT] += total_ns
            continue
        attained = rq[r, ATT]
        for j in range(m - 1):
            attained += step_ns(k, j, base_s, per_ctx_s, ki, kf, gmode, gtime)
            if attained > q0_ns << level and level < last_level:
                level += 1
                attained = 0
                if ki[k, K_SORTED] > s - lo + 1:  # a demoted rank may now exceed those after it
                    ki[k, K_SORTED] = s - lo + 1
        rq[r, LEVEL] = level
        rq[r, RK0] = mlfq_rank(level, rq[r, ASEQ])
        rq[r, ATT] = attained
