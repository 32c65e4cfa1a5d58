"""Scheduler policies of the feature kernel: waiting keys, pass ranks, preemption victims.

Keys (``rq[r, WK0], rq[r, WK1]``; the second field makes them unique) set when request r
enters the waiting set of instance k (release or preemption; ``seq`` = global enqueue counter,
``a = rq[r, ASEQ]`` = ``seq`` at release):

* ``SCHED_VLLM_V1`` / ``SCHED_SGLANG``: ``(seq, 0)`` at release, ``(front, 0)`` at preemption
  with ``front = -1, -2, ...`` (the front of the queue, last preempted first);
* ``SCHED_SPF``: ``(prompt + generated - cached, seq)``, ``cached`` from ``pc_probe`` at enqueue;
* ``SCHED_MLFQ``: ``(level, a)``; the level is set at release (skip-join) and kept on preemption;
* ``SCHED_H2Q_BR``: classified at every entry (eq. 3 with ``l`` = the round's new tokens; a QL
  class sets the session's sticky flag); QS heap ``(l, a)``, QL heap ``(a, 0)``; a preempted
  request loses its session's carryover credit (its prefill restarts).

Pass ranks (MLFQ, H2Q-BR: running and waiting compete in one order) are 4-tuples
``rq[r, RK0:RK3+1]``: MLFQ ``(level 2^40 + a, 0, 0, 0)`` (``mlfq_rank``); H2Q-BR's in
``h2q`` (waiting requests have d = 1).  Running requests are kept sorted by rank
(insertion sort, O(n) when nearly sorted); the preemption victim is the last.
"""

from __future__ import annotations

from fleetplan.sim._kernels.codes import SCHED_H2Q_BR, SCHED_MLFQ, SCHED_SPF
from fleetplan.sim._kernels.features.state import (
    ALL_SORTED,
    ASEQ,
    ATT,
    G_ENQ,
    G_FRONT,
    GEN,
    K_HMIN,
    K_QMIN,
    K_ROOT0,
    K_ROOT1,
    K_RUN,
    K_SORTED,
    LEVEL,
    QCLS,
    QL,
    QS,
    REQ,
    RK0,
    RK1,
    RK2,
    RK3,
    UNKNOWN,
    WK0,
    WK1,
    own_segment,
    ph_push,
)
from fleetplan.sim._kernels.jit import njit_borrowed, njit_inline
from fleetplan.sim._kernels.prefix_cache import pc_probe
from fleetplan.sim._kernels.step_model import step_time_s


@njit_borrowed
def mlfq_entry_level(code, coef, prompt, q0_s, n_levels):
    """Skip-join: smallest level whose quantum covers the estimated prefill time."""
    est_s = step_time_s(code, coef, 1, 0, prompt, 0, prompt * prompt)
    level = 0
    while level < n_levels - 1 and est_s > q0_s * 2.0 ** level:
        level += 1
    return level


@njit_borrowed
def enqueue_wait(k, p, x, is_preempt, req, ses, ki, pools, fts, pc):
    """Key the request of row x for instance k's waiting set and push it (see the module doc)."""
    prompt_tokens, rq, new_tokens, sess_id = req.prompt_tokens, req.rq, req.new_tokens, req.sess_id
    prefix_key, prefix_tokens = req.prefix_key, req.prefix_tokens
    r = rq[x, REQ]
    sess_z, sess_h, sess_c, glob = ses.sess_z, ses.sess_h, ses.sess_c, ses.glob
    policy, policy_param, prefix_on = fts.policy, fts.policy_param, fts.prefix_on
    pol = policy[p]
    seq = glob[G_ENQ]
    glob[G_ENQ] = seq + 1
    if not is_preempt:
        rq[x, ASEQ] = seq
    root = K_ROOT0
    if pol == SCHED_SPF:
        rem = prompt_tokens[r] + rq[x, GEN]
        if prefix_on[p] != 0:
            block = pools.pool_block_tokens[p]
            key0, nb0, key1, nb1, cap = own_segment(r, prefix_key, prefix_tokens, block, (rem - 1) // block)
            m, _ = pc_probe(pc, k, key0, nb0, key1, nb1, cap)
            rem -= m * block
        rq[x, WK0] = rem
        rq[x, WK1] = seq
    elif pol == SCHED_MLFQ:
        if not is_preempt:
            rq[x, LEVEL] = mlfq_entry_level(pools.pool_step_code[p], pools.pool_step_coef[p], prompt_tokens[r],
                                            policy_param[p, 0], int(policy_param[p, 1]))
            rq[x, ATT] = 0
        rq[x, WK0] = rq[x, LEVEL]
        rq[x, WK1] = rq[x, ASEQ]
    elif pol == SCHED_H2Q_BR:
        sid = sess_id[r]
        if is_preempt:
            sess_c[sid] = 0
            ki[k, K_HMIN] = ki[k, K_QMIN] = UNKNOWN  # (h2q.py)
        ell = new_tokens[r]
        if sess_z[sid] != 0 or sess_h[sid] > policy_param[p, 1] or ell > policy_param[p, 0]:
            sess_z[sid] = 1
            rq[x, QCLS] = QL
            rq[x, WK0] = rq[x, ASEQ]
            rq[x, WK1] = 0
            root = K_ROOT1
        else:
            rq[x, QCLS] = QS
            rq[x, WK0] = ell
            rq[x, WK1] = rq[x, ASEQ]
    elif is_preempt:  # vLLM v1 / SGLang: the front, last preempted first
        glob[G_FRONT] -= 1
        rq[x, WK0] = glob[G_FRONT]
        rq[x, WK1] = 0
    else:
        rq[x, WK0] = seq
        rq[x, WK1] = 0
    ki[k, root] = ph_push(rq, ki[k, root], x)


@njit_inline
def rank_less(rq, a, b):
    """Pass rank of ``a`` below that of ``b``."""
    if rq[a, RK0] != rq[b, RK0]:
        return rq[a, RK0] < rq[b, RK0]
    if rq[a, RK1] != rq[b, RK1]:
        return rq[a, RK1] < rq[b, RK1]
    if rq[a, RK2] != rq[b, RK2]:
        return rq[a, RK2] < rq[b, RK2]
    return rq[a, RK3] < rq[b, RK3]


@njit_inline
def mlfq_rank(level, aseq):
    """MLFQ's rank ``(level, a)`` as one int64 (``a`` < 2**40), so comparisons end at the first field."""
    return (level << 40) | aseq


@njit_inline
def set_rank(rq, r, r0, r1, r2, r3):
    rq[r, RK0] = r0
    rq[r, RK1] = r1
    rq[r, RK2] = r2
    rq[r, RK3] = r3


@njit_inline
def sort_running(rq, run_req, lo, first, end):
    """Insertion sort of ``run_req[lo:end]`` by rank, ``run_req[lo:first]`` being in order (stable,
    O(n) when nearly sorted)."""
    for s in range(first, end):
        r = run_req[s]
        j = s
        while j > lo and rank_less(rq, r, run_req[j - 1]):
            run_req[j] = run_req[j - 1]
            j -= 1
        run_req[j] = r


@njit_inline
def insert_ranked(rq, run_req, lo, end, r):
    """Insert r into ``run_req[lo:end]``, sorted by rank (binary search; ranks are unique)."""
    a = lo
    b = end
    while a < b:
        mid = (a + b) >> 1
        if rank_less(rq, run_req[mid], r):
            a = mid + 1
        else:
            b = mid
    for s in range(end, a, -1):
        run_req[s] = run_req[s - 1]
    run_req[a] = r


@njit_borrowed
def mlfq_prepare(k, rq, lo, run_req, ki):
    """Instance k's running requests (slots from ``lo``) in MLFQ rank order for a pass.

    Ranks ``(level, a)`` are set at admission (as the waiting top) and at each demotion (RK0 =
    level); the list stays sorted otherwise (removals keep the order; keys are unique, so
    re-sorting the sorted prefix ``K_SORTED`` is a no-op)."""
    n = ki[k, K_RUN]
    if ki[k, K_SORTED] >= n:
        return
    first = max(ki[k, K_SORTED], 1)
    ki[k, K_SORTED] = ALL_SORTED
    sort_running(rq, run_req, lo, lo + first, lo + n)
