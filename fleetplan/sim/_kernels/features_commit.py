"""Commit of the feature kernel's steps: tokens, speculative acceptance, completions, releases.

At the end of the ``m`` steps in flight on instance k (m > 1 only for a cruise), for every
scheduled running request r (``features_steps``):

* cruise: ``m`` decode tokens, blocks allocated lazily (as ``iteration_steps.commit_step``);
* speculative decoding (``KSPEC = k_r > 0``): positions j = 0, 1, ... are accepted while
  ``uniform01(seed, r, draw) < spec_accept[p, j]`` (one draw per position tried, r's own
  counter ``DRAWS``); with ``a`` accepted, ``COMP += 1 + a`` and ``a + 1`` tokens are emitted;
  blocks beyond ``ceil(COMP / B)`` go back to the free pool;
* otherwise ``COMP += SCHED``; when ``COMP == TARGET`` the next token is emitted;
* MLFQ: ``attained += dt``; above the level's quantum ``q0 2^level`` the request drops a
  level (attained restarts at 0); H2Q-BR: the session's H grows by the prefill tokens, and a
  prefill chunk that leaves the prompt unfinished marks the session long (z = 1), grants the
  carryover credit (c = 1) and moves r to QL;
* completion: the prefix cache takes over the request's full blocks (``pc_insert``, then the
  pins are released), and the session's next rounds are pushed on the release heap at
  ``done + delay_s``.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.codes import SCHED_H2Q_BR, SCHED_MLFQ, STATUS_DONE
from fleetplan.sim._kernels.features_heap import rel_push
from fleetplan.sim._kernels.features_layout import (
    COMP,
    DEC,
    DRAWS,
    E0,
    E1,
    F_DT,
    G_SEED,
    GEN,
    HELD,
    K_FREE,
    K_M,
    K_ROOT0,
    K_ROOT1,
    K_RUN,
    K_UNSORTED,
    KSPEC,
    LEVEL,
    MATCH,
    OUT,
    QCLS,
    QL,
    SCHED,
    TARGET,
)
from fleetplan.sim._kernels.features_rng import uniform01
from fleetplan.sim._kernels.features_steps import schedule_features
from fleetplan.sim._kernels.features_time import add_step_stats
from fleetplan.sim._kernels.jit import njit_borrowed, njit_inline
from fleetplan.sim._kernels.prefix_cache import pc_insert, pc_unpin
from fleetplan.sim._kernels.routing import add_outstanding


@njit_borrowed
def complete(k, p, r, t_s, req, ki, pool_inst_start, block, pc_on, out_done_s, out_status, load, rel, pc):
    """Request r emitted its last token at ``t_s`` on instance k (pool p: ``block`` tokens per KV
    block, prefix caching ``pc_on``).  Only the arrays it uses are passed: every array argument of
    an out-of-line call costs a refcount pair."""
    prompt_tokens, output_tokens, rq, prefix_key, prefix_tokens = req
    inst_outstanding, tree, tree_lo, tree_leaves, pool_tokens = load
    succ_head, succ_next, delay_s, rel_t, rel_i, rel_n = rel
    out_done_s[r] = t_s
    out_status[r] = STATUS_DONE
    if pc_on:
        kept, freed = pc_insert(pc, k, prefix_key[r, 0], prefix_tokens[r, 0] // block, prefix_key[r, 1],
                                rq[r, MATCH], rq[r, COMP] // block)
        ki[k, K_FREE] += (rq[r, HELD] - kept) + freed
        pc_unpin(pc, k, rq[r, E0])
        pc_unpin(pc, k, rq[r, E1])
        rq[r, E0] = -1
        rq[r, E1] = -1
    else:
        ki[k, K_FREE] += rq[r, HELD]
    rq[r, HELD] = 0
    rq[r, MATCH] = 0
    add_outstanding(k, p, -1, inst_outstanding, pool_inst_start, tree, tree_lo, tree_leaves)
    pool_tokens[p] -= prompt_tokens[r] + output_tokens[r]
    j = succ_head[r]
    while j >= 0:
        rel_n[0] = rel_push(rel_t, rel_i, rel_n[0], t_s + delay_s[j], j)
        j = succ_next[j]


@njit_inline
def accept_drafts(p, r, kr, rq, seed, spec_accept, out_drafted, out_accepted, pool_accept_pos, pool_draft_pos):
    """Accepted drafts of r's ``kr`` (see the module doc), with the per-position counts."""
    a = 0
    for j in range(kr):
        pool_draft_pos[p, j] += 1
    for j in range(kr):
        u = uniform01(seed, r, rq[r, DRAWS])
        rq[r, DRAWS] += 1
        if u < spec_accept[p, j]:
            a += 1
            pool_accept_pos[p, j] += 1
        else:
            break
    out_drafted[r] += kr
    out_accepted[r] += a
    return a


@njit_inline
def commit_features(k, p, t_s, req, ses, ins, pools, fts, outs, stats, load, rel, pc, stack):
    """Commit the ``m`` steps of instance k ending at ``t_s``, schedule the next; returns m."""
    rq, attained_s, sess_id = req[2], req[3], req[7]
    run_lo, run_req, ki, kf, step_end_s = ins
    pol = fts[0][p]
    m = ki[k, K_M]
    add_step_stats(k, p, m, ki, kf, pools[4][p], pools[5][p], fts[2][p], fts[5][p], stats[:6])
    block = pools[3][p]
    # arrays and pool values the loop reads, bound once: every array a helper call in the loop
    # binds costs a refcount pair per request and step
    spec_accept, out_first_token_s, out_drafted, out_accepted = fts[7], outs[1], outs[6], outs[7]
    pool_accept_pos, pool_draft_pos = stats[6], stats[7]
    sess_z, sess_h, sess_c = ses[0], ses[1], ses[2]
    q0_s = fts[1][p, 0]
    last_level = int(fts[1][p, 1]) - 1
    seed = ses[3][G_SEED]
    lo = run_lo[k]
    kept = lo
    for s in range(lo, lo + ki[k, K_RUN]):
        r = run_req[s]
        num = rq[r, SCHED]
        if num > 0:
            c = rq[r, COMP]
            target = rq[r, TARGET]
            gen = rq[r, GEN]
            if m > 1:
                c += m
                gen += m - 1
                target += m - 1
                total = rq[r, MATCH] + rq[r, HELD]
                if c > total * block:
                    need = (c + block - 1) // block
                    ki[k, K_FREE] -= need - total
                    rq[r, HELD] = need - rq[r, MATCH]
            elif rq[r, KSPEC] > 0:
                a = accept_drafts(p, r, rq[r, KSPEC], rq, seed, spec_accept, out_drafted, out_accepted,
                                  pool_accept_pos, pool_draft_pos)
                c += 1 + a
                gen += a
                target += a
                total = rq[r, MATCH] + rq[r, HELD]
                need = (c + block - 1) // block
                if total > need:
                    ki[k, K_FREE] += total - need
                    rq[r, HELD] = need - rq[r, MATCH]
            else:
                c += num
            if pol == SCHED_MLFQ:
                attained_s[r] += kf[k, F_DT]
                if attained_s[r] > q0_s * 2.0 ** rq[r, LEVEL] and rq[r, LEVEL] < last_level:
                    rq[r, LEVEL] += 1
                    attained_s[r] = 0.0
                    ki[k, K_UNSORTED] = 1
            elif pol == SCHED_H2Q_BR and rq[r, DEC] == 0:
                sess_h[sess_id[r]] += num
                if c < target:  # the chunk spilled: long history, one carryover credit
                    sess_z[sess_id[r]] = 1
                    sess_c[sess_id[r]] = 1
                    rq[r, QCLS] = QL
            rq[r, SCHED] = 0
            rq[r, KSPEC] = 0
            rq[r, COMP] = c
            if c == target:  # all tokens in: emit the next one
                if gen == 0:
                    out_first_token_s[r] = t_s
                gen += 1
                target += 1
                if gen == rq[r, OUT]:
                    rq[r, GEN] = gen
                    rq[r, TARGET] = target
                    complete(k, p, r, t_s, (req[0], req[1], rq, req[5], req[6]), ki, pools[0], block,
                             fts[10][p] != 0, outs[2], outs[4], load, rel, pc)
                    continue
            rq[r, GEN] = gen
            rq[r, TARGET] = target
        run_req[kept] = r
        kept += 1
    ki[k, K_RUN] = kept - lo
    if kept > lo or ki[k, K_ROOT0] >= 0 or ki[k, K_ROOT1] >= 0:
        schedule_features(k, p, t_s, req, ses, ins, pools, fts, (outs[0], outs[3], outs[5], stats[8]), pc,
                          stack)
    else:
        step_end_s[k] = np.inf
        ki[k, K_M] = 0
    return m
