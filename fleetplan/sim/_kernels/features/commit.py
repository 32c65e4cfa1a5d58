"""Commit of the feature kernel's steps: tokens, speculative acceptance, completions, releases.

At the end of the ``m`` steps in flight on instance k (m > 1 only for a run, ``timing``),
for every scheduled running request r (``schedule``):

* plain run: ``m`` decode tokens, blocks allocated lazily (as ``iteration_steps.commit_step``);
  speculative run: the acceptances of its ``m`` steps as ``timing.spec_run`` drew them
  ahead (``spec_replay``: the same draws, kept per slot), blocks to ``ceil(COMP / B)``; MLFQ
  run: ``mlfq_replay`` of steps 0..m-2 and the re-sort first; H2Q-BR run: ``h2q_replay`` of
  passes 2..m first (short streak, carryover credits, the last pass's order);
* speculative decoding (``KSPEC = k_r > 0``): one draw per step, ``u = uniform01(seed, r,
  DRAWS)`` (r's own counter); position j is accepted while ``u < prod_{i <= j} spec_accept[p,
  i]`` (so j is accepted with probability ``spec_accept[p, j]`` given the positions before it
  were; compared as integers, ``rng``); with ``a`` accepted, ``COMP += 1 + a`` and
  ``a + 1`` tokens are emitted; blocks beyond ``ceil(COMP / B)`` go back to the free pool;
  drafts proposed / accepted are counted in the request's row (copied out when it leaves) and
  per position through ``counts`` (``fold_counts``, once per commit);
* otherwise ``COMP += SCHED``; when ``COMP == TARGET`` the next token is emitted;
* MLFQ: ``attained += ns(dt)`` in integer nanoseconds (``ns(x) = int(x 1e9 + 0.5)``, so a
  run's steps add up exactly in any grouping); above the level's quantum ``ns(q0) 2^level``
  the request drops a level (attained restarts at 0); the last level's is not kept;
* H2Q-BR: the session's H grows by the prefill tokens, and a prefill chunk that leaves the
  prompt unfinished marks the session long (z = 1), grants the carryover credit (c = 1) and
  moves r to QL; requests that got a prefill chunk are re-ranked and re-inserted in rank order;
* streamed chunks: each emission after a request's first counts its gap since the request's
  previous one in the pool's inter-token histogram (``itl``; a run's chunks by ``itl_run``);
* completion: the prefix cache takes over the request's full blocks (``pc_insert``, then the
  pins are released), and the session's next rounds are pushed on the release heap at
  ``done + delay_s``.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.codes import SCHED_H2Q_BR, SCHED_MLFQ, STATUS_DONE
from fleetplan.sim._kernels.features.h2q import h2q_chunk, h2q_left, h2q_reinsert, h2q_replay
from fleetplan.sim._kernels.features.itl import itl_emit, itl_run
from fleetplan.sim._kernels.features.policy import mlfq_prepare, mlfq_rank
from fleetplan.sim._kernels.features.rng import keyed_bits53
from fleetplan.sim._kernels.features.schedule import mlfq_replay, schedule_features
from fleetplan.sim._kernels.features.state import (
    ACCEPTED,
    ALL_SORTED,
    ASEQ,
    ATT,
    COMP,
    DEC,
    DKEY,
    DRAFTED,
    DRAWS,
    E0,
    E1,
    F_DT,
    GEN,
    HELD,
    K_FREE,
    K_M,
    K_ROOT0,
    K_ROOT1,
    K_RSPEC,
    K_RUN,
    K_SORTED,
    KSPEC,
    LEVEL,
    MATCH,
    OUT,
    REQ,
    RK0,
    SCHED,
    TARGET,
    rel_push,
    row_close,
)
from fleetplan.sim._kernels.features.timing import add_step_stats, run_parts, run_step_s
from fleetplan.sim._kernels.jit import njit_borrowed, njit_inline
from fleetplan.sim._kernels.prefix_cache import pc_insert, pc_unpin
from fleetplan.sim._kernels.routing import add_outstanding


@njit_borrowed
def complete(k, p, x, t_s, req, ki, pool_inst_start, block, pc_on, outs, load, rel, pc, glob):
    """The request of row x emitted its last token at ``t_s`` on instance k (pool p: ``block``
    tokens per KV block, prefix caching ``pc_on``); its row goes back."""
    out_done_s, out_status, out_drafted, out_accepted = outs.done_s, outs.status, outs.drafted, outs.accepted
    prompt_tokens, output_tokens, rq, row_free = req.prompt_tokens, req.output_tokens, req.rq, req.row_free
    prefix_key, prefix_tokens = req.prefix_key, req.prefix_tokens
    inst_outstanding, pool_tokens = load.inst_outstanding, load.pool_tokens
    succ_head, succ_next, delay_s = rel.succ_head, rel.succ_next, rel.delay_s
    rel_t, rel_i, rel_n = rel.heap_s, rel.heap_req, rel.heap_n
    r = rq[x, REQ]
    out_done_s[r] = t_s
    out_status[r] = STATUS_DONE
    if pc_on:
        kept, freed = pc_insert(pc, k, prefix_key[r, 0], prefix_tokens[r, 0] // block, prefix_key[r, 1],
                                rq[x, MATCH], rq[x, COMP] // block)
        ki[k, K_FREE] += (rq[x, HELD] - kept) + freed
        pc_unpin(pc, k, rq[x, E0])
        pc_unpin(pc, k, rq[x, E1])
    else:
        ki[k, K_FREE] += rq[x, HELD]
    row_close(x, rq, row_free, glob, out_drafted, out_accepted)
    add_outstanding(k, p, -1, inst_outstanding, pool_inst_start, load.tree, load.tree_lo, load.tree_leaves)
    pool_tokens[p] -= prompt_tokens[r] + output_tokens[r]
    j = succ_head[r]
    while j >= 0:
        rel_n[0] = rel_push(rel_t, rel_i, rel_n[0], t_s + delay_s[j], j)
        j = succ_next[j]


@njit_inline
def accept_drafts(p, x, kr, rq, spec_bits, counts):
    """Accepted drafts of the ``kr`` of row x's request (see the module doc); ``counts[0, kr]`` and
    ``counts[1, a]`` count the step for the per-position totals (``fold_counts``)."""
    b = keyed_bits53(rq[x, DKEY], rq[x, DRAWS])
    rq[x, DRAWS] += 1
    a = 0
    for j in range(kr):  # the accepted positions are a prefix (rng.accept_thresholds)
        a += 1 if b < spec_bits[p, j] else 0
    counts[0, kr] += 1
    counts[1, a] += 1
    rq[x, DRAFTED] += kr
    rq[x, ACCEPTED] += a
    return a


@njit_inline
def fold_counts(p, k_max, counts, pool_accept_pos, pool_draft_pos):
    """Position j is drafted (accepted) in every step that drafted (accepted) more than j drafts:
    add ``counts`` (steps by number drafted, by number accepted) to the pool's totals, reset it."""
    drafted = 0
    accepted = 0
    for v in range(k_max, 0, -1):
        drafted += counts[0, v]
        accepted += counts[1, v]
        pool_draft_pos[p, v - 1] += drafted
        pool_accept_pos[p, v - 1] += accepted
    for v in range(k_max + 1):
        counts[0, v] = 0
        counts[1, v] = 0


@njit_borrowed
def spec_replay(k, p, m, kr, block, rq, run_req, lo, n, ki, run_acc, counts, pool_accept_pos, pool_draft_pos):
    """Tokens, blocks and draft counts of the ``m`` steps of the speculative run in flight on
    instance k (``n`` requests drafting ``kr`` each), from the acceptances ``spec_run`` drew ahead
    into ``run_acc``: every step emits ``1 + a`` tokens, the last one's final token is left for the
    commit to emit (``COMP == TARGET``); each request ends holding ``ceil(COMP / B)`` blocks."""
    for s in range(lo, lo + n):
        r = run_req[s]
        accepted = 0
        for j in range(m):
            a = run_acc[s, j]
            accepted += a
            counts[1, a] += 1
        rq[r, DRAFTED] += kr * m
        rq[r, ACCEPTED] += accepted
        rq[r, DRAWS] += m
        c = rq[r, COMP] + m + accepted
        rq[r, COMP] = c
        rq[r, GEN] += m - 1 + accepted
        rq[r, TARGET] += m - 1 + accepted
        need = (c + block - 1) // block
        ki[k, K_FREE] -= need - rq[r, MATCH] - rq[r, HELD]
        rq[r, HELD] = need - rq[r, MATCH]
    counts[0, kr] += n * m
    fold_counts(p, kr, counts, pool_accept_pos, pool_draft_pos)


@njit_borrowed
def drafts_by_horizon(k, p, n_done, req, ses, ins, fts, outs, stats):
    """Acceptance counts of the first ``n_done`` steps of the speculative run in flight on instance
    k at the horizon (the twin commits those steps; their other effects are not reported)."""
    rq = req.rq
    run_lo, run_req, ki = ins.run_lo, ins.run_req, ins.ki
    lo = run_lo[k]
    for s in range(lo, lo + ki[k, K_RUN]):
        r = run_req[s]
        for _ in range(n_done):
            accept_drafts(p, r, rq[r, KSPEC], rq, fts.spec_bits, ins.acc_count)
    fold_counts(p, fts.spec_k[p], ins.acc_count, stats.pool_accept_pos, stats.pool_draft_pos)


@njit_inline
def commit_features(k, p, t_s, req, ses, ins, pools, fts, outs, stats, load, rel, pc, stack):
    """Commit the ``m`` steps of instance k ending at ``t_s``, schedule the next; returns m."""
    rq, sess_id = req.rq, req.sess_id
    run_lo, run_req, ki, kf, step_end_s = ins.run_lo, ins.run_req, ins.ki, ins.kf, ins.step_end_s
    run_acc, counts = ins.run_acc, ins.acc_count
    pol = fts.policy[p]
    m = ki[k, K_M]
    add_step_stats(k, p, m, ki, kf, pools.pool_step_code[p], pools.pool_step_coef[p], fts.graph_mode[p],
                   fts.graph_time_s[p], stats)
    block = pools.pool_block_tokens[p]
    # arrays and pool values the loop reads, bound once: every array a helper call in the loop
    # binds costs a refcount pair per request and step
    spec_bits, out_first_token_s = fts.spec_bits, outs.first_token_s
    pool_accept_pos, pool_draft_pos = stats.pool_accept_pos, stats.pool_draft_pos
    sess_z, sess_h, sess_c = ses.sess_z, ses.sess_h, ses.sess_c
    q0_ns = np.int64(fts.policy_param[p, 0] * 1e9 + 0.5)
    last_level = int(fts.policy_param[p, 1]) - 1
    lo = run_lo[k]
    dt_last_ns = np.int64(kf[k, F_DT] * 1e9 + 0.5)  # MLFQ's attained service of the last step
    itl_hist, last_token_s = stats.pool_itl_hist, outs.last_token_s
    if m > 1:  # a run: every running request streams a chunk at each of its step ends (itl.py)
        itl_run(k, p, m, rq, run_req, lo, ki[k, K_RUN], ki, kf, pools.pool_step_code[p], pools.pool_step_coef[p],
                fts.graph_mode[p], fts.graph_time_s[p], itl_hist, last_token_s)
    if m > 1 and ki[k, K_RSPEC] > 0:  # a speculative run: its tokens from the draws made ahead
        spec_replay(k, p, m, ki[k, K_RSPEC], block, rq, run_req, lo, ki[k, K_RUN], ki, run_acc, counts,
                    pool_accept_pos, pool_draft_pos)
    if m > 1 and pol == SCHED_MLFQ:  # steps 0..m-2, then the twin's sort before the last step
        base_s, per_ctx_s = run_parts(k, ki, pools.pool_step_code[p], pools.pool_step_coef[p])
        gmode, gtime = fts.graph_mode[p], fts.graph_time_s[p]
        mlfq_replay(k, m, q0_ns, last_level, rq, run_req, lo, ki[k, K_RUN], ki, kf, base_s, per_ctx_s, gmode,
                    gtime)
        mlfq_prepare(k, rq, lo, run_req, ki)
        dt_last_ns = np.int64(run_step_s(k, m - 1, base_s, per_ctx_s, ki, kf, gmode, gtime) * 1e9 + 0.5)
    elif m > 1 and pol == SCHED_H2Q_BR:  # passes 2..m: streak, credits spent, the last pass's order
        h2q_replay(k, m, fts.policy_param[p, 2], rq, req.new_tokens, sess_id, sess_c, lo, run_req, ki, stack)
    kept = lo
    n_moved = 0
    sorted_n = ki[k, K_SORTED]  # MLFQ's sorted prefix, renumbered as completed requests leave
    ki[k, K_SORTED] = ALL_SORTED
    for s in range(lo, lo + ki[k, K_RUN]):
        if s - lo == sorted_n and kept - lo < ki[k, K_SORTED]:
            ki[k, K_SORTED] = kept - lo
        r = run_req[s]
        num = rq[r, SCHED]
        if num > 0:
            c = rq[r, COMP]
            target = rq[r, TARGET]
            gen = rq[r, GEN]
            kr = rq[r, KSPEC]
            if m > 1 and kr > 0:
                pass  # a speculative run: spec_replay committed its tokens and blocks
            elif kr > 0:  # one step
                a = accept_drafts(p, r, kr, rq, spec_bits, counts)
                c += 1 + a
                gen += a
                target += a
                total = rq[r, MATCH] + rq[r, HELD]
                need = total
                while (need - 1) * block >= c:  # ceil(c / B): blocks of rejected drafts back
                    need -= 1
                if total != need:
                    ki[k, K_FREE] += total - need
                    rq[r, HELD] = need - rq[r, MATCH]
            elif m > 1:
                c += m
                gen += m - 1
                target += m - 1
                total = rq[r, MATCH] + rq[r, HELD]
                if c > total * block:
                    need = (c + block - 1) // block
                    ki[k, K_FREE] -= need - total
                    rq[r, HELD] = need - rq[r, MATCH]
            else:
                c += num
            if pol == SCHED_MLFQ and rq[r, LEVEL] < last_level:  # the last level's attained is never read
                rq[r, ATT] += dt_last_ns
                if rq[r, ATT] > q0_ns << rq[r, LEVEL]:
                    rq[r, LEVEL] += 1
                    rq[r, RK0] = mlfq_rank(rq[r, LEVEL], rq[r, ASEQ])
                    rq[r, ATT] = 0
                    if ki[k, K_SORTED] > kept - lo + 1:
                        ki[k, K_SORTED] = kept - lo + 1
            elif pol == SCHED_H2Q_BR and rq[r, DEC] == 0:
                h2q_chunk(k, r, num, c < target, rq, ki, sess_id, sess_z, sess_h, sess_c)
            rq[r, SCHED] = 0
            rq[r, KSPEC] = 0
            rq[r, COMP] = c
            if c == target:  # all tokens in: emit the next one
                if gen == 0:
                    out_first_token_s[rq[r, REQ]] = t_s
                if m == 1:  # (a run's chunks: itl_run above)
                    itl_emit(p, rq[r, REQ], t_s, gen == 0, itl_hist, last_token_s)
                gen += 1
                target += 1
                if gen == rq[r, OUT]:
                    rq[r, GEN] = gen
                    rq[r, TARGET] = target
                    if pol == SCHED_H2Q_BR:
                        h2q_left(ki, k, rq, r)
                    complete(k, p, r, t_s, req, ki, pools.pool_inst_start, block, fts.prefix_on[p] != 0, outs, load,
                             rel, pc, ses.glob)
                    continue
            rq[r, GEN] = gen
            rq[r, TARGET] = target
            if pol == SCHED_H2Q_BR and rq[r, DEC] == 0:  # a prefill chunk: new rank, placed below
                stack[n_moved] = r
                n_moved += 1
                continue
        run_req[kept] = r
        kept += 1
    kept = h2q_reinsert(rq, req.new_tokens, run_req, lo, kept, stack, n_moved)  # (H2Q-BR's prefill chunks)
    ki[k, K_RUN] = kept - lo
    if fts.spec_k[p] > 0:  # the speculative steps' per-position counts
        fold_counts(p, fts.spec_k[p], counts, pool_accept_pos, pool_draft_pos)
    if kept > lo or ki[k, K_ROOT0] >= 0 or ki[k, K_ROOT1] >= 0:
        schedule_features(k, p, t_s, req, ses, ins, pools, fts, outs, stats, pc, stack)
    else:
        step_end_s[k] = np.inf
        ki[k, K_M] = 0
    return m
