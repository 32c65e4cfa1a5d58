"""Admission, KV allocation and preemption of the feature kernel's batch builder.

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
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.features_heap import ph_pop
from fleetplan.sim._kernels.features_layout import (
    COMP,
    DEC,
    E0,
    E1,
    GEN,
    HELD,
    K_FREE,
    K_ROOT0,
    K_RUN,
    KSPEC,
    MATCH,
    REQ,
    SCHED,
    TARGET,
    WK0,
    WK1,
)
from fleetplan.sim._kernels.features_policy import enqueue_wait
from fleetplan.sim._kernels.jit import njit_borrowed, njit_inline
from fleetplan.sim._kernels.prefix_cache import pc_evict, pc_evictable, pc_match, pc_probe, pc_unpin


@njit_inline
def admit_fits(k, p, w, budget, req, ki, pools, fts, pc):
    """``(fits, matched blocks, first chunk tokens, own blocks)`` of waiting request w."""
    prompt_tokens, rq, prefix_key, prefix_tokens = req[0], req[2], req[5], req[6]
    block = pools[3][p]
    i = rq[w, REQ]
    target = prompt_tokens[i] + rq[w, GEN]
    m = 0
    avail = ki[k, K_FREE]
    if fts[10][p] != 0:
        m, pinned = pc_probe(pc, k, prefix_key[i, 0], prefix_tokens[i, 0] // block, prefix_key[i, 1],
                             prefix_tokens[i, 1] // block, (target - 1) // block)
        avail += pc_evictable(pc, k) - pinned
    c0 = m * block
    num = target - c0
    if num > budget:
        num = budget
    own = (c0 + num + block - 1) // block - m
    return own <= avail, m, num, own


@njit_inline
def admit(k, p, w, root_col, m, num, own, t_s, req, ins, pools, fts, so, pc):
    """Pop w from its heap and start it with ``num`` tokens at offset ``m`` blocks (fits)."""
    prompt_tokens, rq, prefix_key, prefix_tokens = req[0], req[2], req[5], req[6]
    ki = ins[2]
    block = pools[3][p]
    i = rq[w, REQ]
    ki[k, root_col] = ph_pop(rq, ki[k, root_col])
    e0 = -1
    e1 = -1
    if fts[10][p] != 0:
        _, e0, e1 = pc_match(pc, k, prefix_key[i, 0], prefix_tokens[i, 0] // block, prefix_key[i, 1],
                             prefix_tokens[i, 1] // block, (prompt_tokens[i] + rq[w, GEN] - 1) // block)
        if own > ki[k, K_FREE]:
            ki[k, K_FREE] += pc_evict(pc, k, own - ki[k, K_FREE])
        pool_prefix_tokens = so[3]
        pool_prefix_tokens[p, 0] += prompt_tokens[i]
        pool_prefix_tokens[p, 1] += m * block
        so[2][i] = m * block
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
    if so[0][i] == np.inf:
        so[0][i] = t_s


@njit_borrowed
def preempt_at(k, p, v, n_end, req, ses, ins, pools, fts, so, pc):
    """Preempt (recompute) the running request at slot ``v``; slots up to ``n_end`` shift down."""
    rq = req[2]
    run_req, ki = ins[1], ins[2]
    r = run_req[v]
    for s in range(v, n_end - 1):
        run_req[s] = run_req[s + 1]
    ki[k, K_RUN] -= 1
    ki[k, K_FREE] += rq[r, HELD]
    if fts[10][p] != 0:
        pc_unpin(pc, k, rq[r, E0])
        pc_unpin(pc, k, rq[r, E1])
    rq[r, E0] = -1
    rq[r, E1] = -1
    rq[r, HELD] = 0
    rq[r, MATCH] = 0
    rq[r, COMP] = 0
    rq[r, SCHED] = 0
    rq[r, KSPEC] = 0
    so[1][rq[r, REQ]] += 1
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
    if w < 0 or ki[k, K_RUN] >= pools[1][p]:
        return False
    fits, _, _, _ = admit_fits(k, p, w, np.int64(pools[2][p]), req, ki, pools, fts, pc)
    return fits
