"""Cruise of the PDD decode steps: a run of identical pure-decode steps advanced as one event.

When the step just formed on decode instance ``d`` is pure decode (every running request
gets its one decode token; nobody preempted, admitted or recomputing; ``dec_schedule`` sets
``DI_CR_N`` to the batch size then, else 0), the next ``m - 1`` steps have the same batch
until the first completion, ``m = min(output - generated)``, provided the KV blocks they may
need are free (``m <= (free // n) * block``, checked after the grants that follow the step's
formation) and at most ``CRUISE_MAX_STEPS``.  Step ``j`` of the run lasts ``base + per_ctx *
(ctx + n j)`` (``step_model.decode_step_parts``: bit for bit the one-step evaluation) and the
end times are summed step by step, so each equals the one-step-at-a-time value
(``iteration_steps`` does the same for the co-located kernel).  The run's last step end is
the instance's event (``dec_end_s``).

Nothing may observe the run's intermediate states differently, so observers catch up first:

* ``cruise_walk(d, t, incl)`` commits the steps ending before ``t`` (``incl``: at or before;
  prefill and network events precede decode events at equal times, transfer heap events and
  arrivals follow them): busy time per step in order and ``DI_LOAD_TOKENS`` (``n`` tokens a
  step).  Amortised O(1) per step, never past the run's last step (a real event).
* ``cruise_apply(d)`` brings the requests of the run up to the walked steps: computed,
  generated and target tokens, first-token time (end of the run's first step), and the KV
  blocks of the step in progress, as ``dec_schedule`` would have allocated them.  O(batch).
* ``cruise_cut(d)`` ends the run after the step in progress (a grant took blocks, or a
  handoff joined the batch): the caller updates the tournament tree.

Intermediate steps would not grant reservations: during a run the free blocks only fall and
running, in-flight and waiting counts are fixed, so a grant refused at the run's start stays
refused.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.jit import njit_inline
from fleetplan.sim._kernels.pdd_codes import (
    CI_CRUISE,
    CI_DEC_BLOCK,
    CI_DEC_STEP_CODE,
    DF_CR_BASE,
    DF_CR_E0,
    DF_CR_END,
    DF_CR_PER_CTX,
    DF_STEP_START,
    DI_CR_CTX,
    DI_CR_K,
    DI_CR_KREQ,
    DI_CR_M,
    DI_CR_N,
    DI_FREE,
    DI_LOAD_TOKENS,
    OT_FIRST_TOKEN,
    RI_COMP,
    RI_GEN,
    RI_HELD_D,
    RI_TARGET,
)
from fleetplan.sim._kernels.step_model import decode_step_parts

CRUISE_MAX_STEPS = 512  # bounds the re-summing of a run; ending a run early is exact


@njit_inline
def cruise_plan(d, cfg_i, dec_coef, output, R_i, D_i, D_f, D_run, dec_end_s):
    """Extend the pure-decode step just formed on ``d`` into a run (module docstring)."""
    n = D_i[d, DI_CR_N]
    if cfg_i[CI_CRUISE] == 0 or n == 0 or dec_end_s[d] == np.inf:
        return
    m = CRUISE_MAX_STEPS
    for s in range(n):
        r = D_run[d, s]
        rem = output[r] - R_i[r, RI_GEN]
        if rem < m:
            m = rem
    m_blocks = (D_i[d, DI_FREE] // n) * cfg_i[CI_DEC_BLOCK]
    if m_blocks < m:
        m = m_blocks
    if m <= 1:
        return
    base_s, per_ctx_s = decode_step_parts(cfg_i[CI_DEC_STEP_CODE], dec_coef, n)
    ctx = D_i[d, DI_CR_CTX]
    t_end = dec_end_s[d]
    D_f[d, DF_CR_END] = t_end
    D_f[d, DF_CR_E0] = t_end
    for j in range(1, m):
        t_end += base_s + per_ctx_s * (ctx + n * j)
    D_f[d, DF_CR_BASE] = base_s
    D_f[d, DF_CR_PER_CTX] = per_ctx_s
    D_i[d, DI_CR_M] = m
    dec_end_s[d] = t_end


@njit_inline
def cruise_walk(d, t, incl, D_i, D_f, dec_busy_s):
    """Commit the run's steps of ``d`` ending before ``t`` (at or before with ``incl``), time and load."""
    m = D_i[d, DI_CR_M]
    k = D_i[d, DI_CR_K]
    if k >= m - 1:
        return
    end = D_f[d, DF_CR_END]
    if end > t or (end == t and not incl):
        return
    n = D_i[d, DI_CR_N]
    ctx = D_i[d, DI_CR_CTX]
    base_s = D_f[d, DF_CR_BASE]
    per_ctx_s = D_f[d, DF_CR_PER_CTX]
    while k < m - 1 and (end < t or (incl and end == t)):
        dec_busy_s[d] += end - D_f[d, DF_STEP_START]
        D_f[d, DF_STEP_START] = end
        k += 1
        D_i[d, DI_LOAD_TOKENS] += n
        end += base_s + per_ctx_s * (ctx + n * k)
    D_i[d, DI_CR_K] = k
    D_f[d, DF_CR_END] = end


@njit_inline
def cruise_apply(d, cfg_i, R_i, D_i, D_f, D_run, out_t):
    """Bring the requests of ``d``'s run up to the walked steps (module docstring)."""
    delta = D_i[d, DI_CR_K] - D_i[d, DI_CR_KREQ]
    if delta == 0:
        return
    block = cfg_i[CI_DEC_BLOCK]
    for s in range(D_i[d, DI_CR_N]):
        r = D_run[d, s]
        if R_i[r, RI_GEN] == 0:
            out_t[r, OT_FIRST_TOKEN] = D_f[d, DF_CR_E0]
        c = R_i[r, RI_COMP] + delta
        R_i[r, RI_COMP] = c
        R_i[r, RI_GEN] += delta
        R_i[r, RI_TARGET] += delta
        need = (c + block) // block - R_i[r, RI_HELD_D]  # blocks for c + 1 tokens (the step in progress)
        if need > 0:
            D_i[d, DI_FREE] -= need
            R_i[r, RI_HELD_D] += need
    D_i[d, DI_CR_KREQ] = D_i[d, DI_CR_K]


@njit_inline
def cruise_sync(d, t, incl, cfg_i, R_i, D_i, D_f, D_run, out_t, dec_busy_s):
    """Walk and apply: ``d``'s state exactly as the one-step-at-a-time simulation has it at ``t``."""
    cruise_walk(d, t, incl, D_i, D_f, dec_busy_s)
    cruise_apply(d, cfg_i, R_i, D_i, D_f, D_run, out_t)


@njit_inline
def cruise_cut(d, D_i, D_f, dec_end_s):
    """End ``d``'s run after the step in progress (call ``cruise_sync`` first)."""
    if D_i[d, DI_CR_M] > D_i[d, DI_CR_K] + 1:
        D_i[d, DI_CR_M] = D_i[d, DI_CR_K] + 1
        dec_end_s[d] = D_f[d, DF_CR_END]
