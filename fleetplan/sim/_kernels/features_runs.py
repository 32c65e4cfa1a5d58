"""Runs of identical steps as one event ("cruise") in the feature kernel.

A pass (``features_steps.schedule_features``) that schedules every running request of instance
k for decode only (no prefill chunk, no admission, no preemption) repeats unchanged until a
request finishes, the KV blocks run short or a request joins the instance
(``features_time.cut_run`` then ends the run after the step in progress).  Such a run of ``m``
steps is one event, bit for bit the ``m`` single steps of the twin (``tests/reference``):

* **plain** (no drafts): ``m = min(R, (F // n) B, 512)`` with ``R`` the fewest remaining
  output tokens, ``F`` the free blocks after the pass, ``n`` the batch, ``B`` tokens per block
  (as ``iteration_steps``); step j lasts ``base + per_ctx (ctx + n j)``;
* **speculative** (every request drafts ``k``, i.e. no budget or length cap bit): step j's
  context is ``ctx_j = ctx_0 + sum_{i<j} (n + A_i)``, ``A_i`` the batch's accepted drafts in
  step i.  Draws are pure functions of ``(seed, r, counter)`` (``features_rng``), so they are
  drawn ahead here for the durations and the length, and the accepted counts kept per slot and
  step (``run_acc``) are what the commit replays (``features_commit.spec_replay``; a cut run
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
  (``features_h2q.h2q_replay``), when sessions are local to an instance (else no runs).
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.codes import SCHED_H2Q_BR, SCHED_MLFQ
from fleetplan.sim._kernels.features_admit import admit_fits
from fleetplan.sim._kernels.features_layout import (
    ASEQ,
    ATT,
    DKEY,
    DRAWS,
    F_D0,
    F_DT,
    GEN,
    K_FREE,
    K_SORTED,
    LEVEL,
    OUT,
    RK0,
    SPEC_RUN_MAX,
)
from fleetplan.sim._kernels.features_policy import mlfq_rank
from fleetplan.sim._kernels.features_rng import keyed_bits53
from fleetplan.sim._kernels.features_time import graph_adjust_s, run_step_s
from fleetplan.sim._kernels.iteration_steps import CRUISE_MAX_STEPS
from fleetplan.sim._kernels.jit import njit_borrowed, njit_inline
from fleetplan.sim._kernels.step_model import decode_step_parts, verify_step_parts, verify_step_s


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
    accepted drafts of step j - 1, then holds step j's duration, as ``features_steps`` computes a
    pass's (``n_seqs`` decodes with ``kspec`` drafts each, context ``ctx_j``, graph ``size,
    t_tokens``).  ``spec_bits``: ``features_rng.accept_thresholds``."""
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
