"""Commit of the feature kernel's steps: tokens, speculative acceptance, completions, releases.

At the end of the ``m`` steps in flight on instance k (m > 1 only for a run, ``features_runs``),
for every scheduled running request r (``features_steps``):

* plain run: ``m`` decode tokens, blocks allocated lazily (as ``iteration_steps.commit_step``);
  speculative run: the acceptance of each of the ``m`` steps in turn (below), blocks to
  ``ceil(COMP / B)``; MLFQ run: ``mlfq_replay`` of steps 0..m-2 and the re-sort first;
* speculative decoding (``KSPEC = k_r > 0``): one draw per step, ``u = uniform01(seed, r,
  DRAWS)`` (r's own counter); position j is accepted while ``u < prod_{i <= j} spec_accept[p,
  i]`` (so j is accepted with probability ``spec_accept[p, j]`` given the positions before it
  were); with ``a`` accepted, ``COMP += 1 + a`` and ``a + 1`` tokens are emitted;
  blocks beyond ``ceil(COMP / B)`` go back to the free pool;
* otherwise ``COMP += SCHED``; when ``COMP == TARGET`` the next token is emitted;
* MLFQ: ``attained += ns(dt)`` in integer nanoseconds (``ns(x) = int(x 1e9 + 0.5)``, so a
  run's steps add up exactly in any grouping); above the level's quantum ``ns(q0) 2^level``
  the request drops a level (attained restarts at 0); the last level's is not kept;
* H2Q-BR: the session's H grows by the prefill tokens, and a prefill chunk that leaves the
  prompt unfinished marks the session long (z = 1), grants the carryover credit (c = 1) and
  moves r to QL;
* completion: the prefix cache takes over the request's full blocks (``pc_insert``, then the
  pins are released), and the session's next rounds are pushed on the release heap at
  ``done + delay_s``.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.codes import SCHED_H2Q_BR, SCHED_MLFQ, STATUS_DONE
from fleetplan.sim._kernels.features_heap import rel_push
from fleetplan.sim._kernels.features_layout import (
    ASEQ,
    COMP,
    DEC,
    DKEY,
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
    K_RUN,
    K_UNSORTED,
    KSPEC,
    LEVEL,
    MATCH,
    OUT,
    QCLS,
    QL,
    RK0,
    SCHED,
    TARGET,
)
from fleetplan.sim._kernels.features_policy import mlfq_rank, prepare_pass
from fleetplan.sim._kernels.features_rng import keyed_uniform01
from fleetplan.sim._kernels.features_runs import mlfq_replay
from fleetplan.sim._kernels.features_steps import schedule_features
from fleetplan.sim._kernels.features_time import add_step_stats, run_parts, run_step_s
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
def accept_drafts(p, r, kr, rq, spec_accept, out_drafted, out_accepted, pool_accept_pos, pool_draft_pos):
    """Accepted drafts of r's ``kr`` (see the module doc), with the per-position counts."""
    a = 0
    for j in range(kr):
        pool_draft_pos[p, j] += 1
    u = keyed_uniform01(rq[r, DKEY], rq[r, DRAWS])
    rq[r, DRAWS] += 1
    reach = 1.0
    for j in range(kr):
        reach *= spec_accept[p, j]
        if u < reach:
            a += 1
            pool_accept_pos[p, j] += 1
        else:
            break
    out_drafted[r] += kr
    out_accepted[r] += a
    return a


@njit_borrowed
def drafts_by_horizon(k, p, n_done, req, ses, ins, fts, outs, stats):
    """Acceptance counts of the first ``n_done`` steps of the speculative run in flight on instance
    k at the horizon (the twin commits those steps; their other effects are not reported)."""
    rq = req[2]
    run_lo, run_req, ki = ins[0], ins[1], ins[2]
    lo = run_lo[k]
    for s in range(lo, lo + ki[k, K_RUN]):
        r = run_req[s]
        for _ in range(n_done):
            accept_drafts(p, r, rq[r, KSPEC], rq, fts[7], outs[6], outs[7], stats[6], stats[7])


@njit_inline
def commit_features(k, p, t_s, req, ses, ins, pools, fts, outs, stats, load, rel, pc, stack):
    """Commit the ``m`` steps of instance k ending at ``t_s``, schedule the next; returns m."""
    rq, attained_ns, sess_id = req[2], req[3], req[7]
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
    q0_ns = np.int64(fts[1][p, 0] * 1e9 + 0.5)
    last_level = int(fts[1][p, 1]) - 1
    lo = run_lo[k]
    dt_last_ns = np.int64(kf[k, F_DT] * 1e9 + 0.5)  # MLFQ's attained service of the last step
    if m > 1 and pol == SCHED_MLFQ:  # steps 0..m-2, then the twin's sort before the last step
        base_s, per_ctx_s = run_parts(k, ki, pools[4][p], pools[5][p])
        gmode, gtime = fts[2][p], fts[5][p]
        mlfq_replay(k, m, q0_ns, last_level, rq, attained_ns, run_req, lo, ki[k, K_RUN], ki, kf, base_s,
                    per_ctx_s, gmode, gtime)
        prepare_pass(k, pol, 0, rq, req[4], sess_id, sess_c, lo, run_req, ki, stack)
        dt_last_ns = np.int64(run_step_s(k, m - 1, base_s, per_ctx_s, ki, kf, gmode, gtime) * 1e9 + 0.5)
    kept = lo
    for s in range(lo, lo + ki[k, K_RUN]):
        r = run_req[s]
        num = rq[r, SCHED]
        if num > 0:
            c = rq[r, COMP]
            target = rq[r, TARGET]
            gen = rq[r, GEN]
            kr = rq[r, KSPEC]
            if kr > 0:  # one step, or a speculative run (features_runs): every step emits a + 1
                for _ in range(m - 1):
                    a = accept_drafts(p, r, kr, rq, spec_accept, out_drafted, out_accepted, pool_accept_pos,
                                      pool_draft_pos)
                    c += 1 + a
                    gen += 1 + a
                    target += 1 + a
                a = accept_drafts(p, r, kr, rq, spec_accept, out_drafted, out_accepted, pool_accept_pos,
                                  pool_draft_pos)
                c += 1 + a
                gen += a
                target += a
                total = rq[r, MATCH] + rq[r, HELD]
                need = (c + block - 1) // block
                if total != need:  # blocks of rejected drafts back (a run may also need more)
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
                attained_ns[r] += dt_last_ns
                if attained_ns[r] > q0_ns << rq[r, LEVEL]:
                    rq[r, LEVEL] += 1
                    rq[r, RK0] = mlfq_rank(rq[r, LEVEL], rq[r, ASEQ])
                    attained_ns[r] = 0
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
