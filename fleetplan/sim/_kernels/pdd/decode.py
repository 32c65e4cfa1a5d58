"""Decode instances of the PDD kernel: vLLM-style steps or SIBYL's processor sharing.

A request handed off to decode instance ``d`` (KV of its prompt in ``RI_HELD_D`` blocks,
slot reserved at the grant, ``transfer``) joins ``d``'s running batch with ``computed =
prompt - 1`` and ``target = prompt``; the waiting queue holds only preempted requests.  Its
first decode step recomputes the last prompt token and emits the first output token (as
vLLM's KV connectors do), so TTFT includes that first decode step.

Steps (``DECODE_STEPS``), as the co-located kernel (runs of pure-decode steps: the cruise
below): running requests in admission order get ``min(target - computed, budget)`` tokens;
while free blocks are short for ``ceil((computed + num) / block)``, the most recently
admitted is preempted (recompute:
blocks freed, ``computed = 0``, ``target = prompt + generated``, pushed to the FRONT of the
queue); if nobody was preempted, waiting requests are admitted FCFS while ``running <
DEC_MAX_SEQS``, budget is left and their blocks fit.  A scheduled token is a decode token
when ``num = 1`` and ``computed = target - 1`` (context ``computed``), else prefill
(recompute).  At step end a request reaching its target emits a token and finishes when
``generated = output``.  Admission from the queue also needs ``running + in-flight
transfers < DEC_MAX_SEQS`` (slots reserved by grants).

Processor sharing (``DECODE_PS``, SIBYL appendix I, Algorithm 3): ``n`` running tasks each
advance at ``v(n) = TPS(n) / n`` tokens/s with ``TPS(n) = a n^2 + b n + c`` (eq. 15); the
virtual time ``V`` (tokens served per task) grows at ``v(n)``; a task joining at ``V_join``
emits its first token at ``V = V_join + 1`` and finishes at ``V_join + output``.  At an
event ``V`` is set to the event's target exactly.  At most ``DEC_MAX_SEQS`` run (FIFO queue
beyond); KV blocks are not modelled (unbounded decode memory).

Cruise: a run of identical pure-decode steps advanced as one event.

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
from fleetplan.sim._kernels.pdd.assign import completion_stats, ps_rate
from fleetplan.sim._kernels.pdd.codes import (
    CI_CRUISE,
    CI_DEC_BLOCK,
    CI_DEC_BUDGET,
    CI_DEC_MAX_SEQS,
    CI_DEC_STEP_CODE,
    DF_CR_BASE,
    DF_CR_E0,
    DF_CR_END,
    DF_CR_PER_CTX,
    DF_STEP_START,
    DF_T_LAST,
    DF_V,
    DI_CR_CTX,
    DI_CR_K,
    DI_CR_KREQ,
    DI_CR_M,
    DI_CR_N,
    DI_FREE,
    DI_INFLIGHT,
    DI_LEN,
    DI_LOAD_TOKENS,
    DI_N_IN_DECODE,
    DI_WHEAD,
    DI_WTAIL,
    OI_PREEMPTIONS,
    OI_STATUS,
    OT_DONE,
    OT_FIRST_TOKEN,
    OT_HANDOFF,
    RI_COMP,
    RI_GEN,
    RI_HELD_D,
    RI_NXT,
    RI_SCHED,
    RI_TARGET,
    ST_DONE,
)
from fleetplan.sim._kernels.pdd.queues import fifo_pop
from fleetplan.sim._kernels.step_model import decode_step_parts, step_time_s

CRUISE_MAX_STEPS = 512  # bounds the re-summing of a run; ending a run early is exact


@njit_inline
def _add_to_step(num, c, target, n_seqs, n_dec, ctx, tokens, attn2):
    """Batch aggregates after scheduling ``num`` tokens of a request at ``c`` of ``target``: a
    decode token adds to ``n_dec`` and ``ctx``, prefill tokens to ``tokens`` and ``attn2``."""
    if num == 1 and c == target - 1:
        return n_seqs + 1, n_dec + 1, ctx + c, tokens, attn2
    return n_seqs + 1, n_dec, ctx, tokens + num, attn2 + num * (2 * c + num)


@njit_inline
def _chunk(c, target, budget, block, held_blocks):
    """Tokens a request at ``c`` of ``target`` gets from ``budget``, and the blocks it needs beyond
    ``held_blocks``."""
    num = target - c if target - c < budget else budget
    new_blocks = (c + num + block - 1) // block - held_blocks
    return num, (new_blocks if new_blocks > 0 else 0)


@njit_inline
def dec_schedule(d, t, config, requests, reqs, dec, outputs):
    """Form the next decode step of instance ``d`` at ``t`` (sets ``dec_end_s[d]``)."""
    cfg_i, dec_coef = config.cfg_i, config.dec_coef
    prompt = requests.prompt_tokens
    R_i = reqs.ri
    D_i, D_f, D_run, dec_end_s = dec.di, dec.df, dec.run, dec.step_end_s
    out_i = outputs.request_i
    budget = cfg_i[CI_DEC_BUDGET]
    block = cfg_i[CI_DEC_BLOCK]
    n_seqs = n_dec = tokens = ctx = attn2 = 0
    preempted = False
    s = 0
    while s < D_i[d, DI_LEN]:
        r = D_run[d, s]
        if budget == 0:
            R_i[r, RI_SCHED] = 0
            s += 1
            continue
        c = R_i[r, RI_COMP]
        target = R_i[r, RI_TARGET]
        num, new_blocks = _chunk(c, target, budget, block, R_i[r, RI_HELD_D])
        while new_blocks > D_i[d, DI_FREE]:  # preempt the most recently admitted (recompute)
            last = D_i[d, DI_LEN] - 1
            v = D_run[d, last]
            D_i[d, DI_LEN] = last
            D_i[d, DI_FREE] += R_i[v, RI_HELD_D]
            R_i[v, RI_HELD_D] = 0
            R_i[v, RI_COMP] = 0
            R_i[v, RI_TARGET] = prompt[v] + R_i[v, RI_GEN]
            R_i[v, RI_SCHED] = 0
            out_i[v, OI_PREEMPTIONS] += 1
            R_i[v, RI_NXT] = D_i[d, DI_WHEAD]
            D_i[d, DI_WHEAD] = v
            if D_i[d, DI_WTAIL] < 0:
                D_i[d, DI_WTAIL] = v
            preempted = True
            if last == s:
                break
        if s >= D_i[d, DI_LEN]:
            break
        D_i[d, DI_FREE] -= new_blocks
        R_i[r, RI_HELD_D] += new_blocks
        R_i[r, RI_SCHED] = num
        budget -= num
        n_seqs, n_dec, ctx, tokens, attn2 = _add_to_step(num, c, target, n_seqs, n_dec, ctx, tokens, attn2)
        s += 1
    while (not preempted and D_i[d, DI_WHEAD] >= 0 and budget > 0
           and D_i[d, DI_LEN] + D_i[d, DI_INFLIGHT] < cfg_i[CI_DEC_MAX_SEQS]):
        r = D_i[d, DI_WHEAD]
        c = R_i[r, RI_COMP]
        target = R_i[r, RI_TARGET]
        num, new_blocks = _chunk(c, target, budget, block, R_i[r, RI_HELD_D])
        if new_blocks > D_i[d, DI_FREE]:
            break
        fifo_pop(D_i, d, DI_WHEAD, DI_WTAIL, R_i)
        D_i[d, DI_FREE] -= new_blocks
        R_i[r, RI_HELD_D] += new_blocks
        D_run[d, D_i[d, DI_LEN]] = r
        D_i[d, DI_LEN] += 1
        R_i[r, RI_SCHED] = num
        budget -= num
        n_seqs, n_dec, ctx, tokens, attn2 = _add_to_step(num, c, target, n_seqs, n_dec, ctx, tokens, attn2)
    D_i[d, DI_CR_M] = 1
    D_i[d, DI_CR_K] = 0
    D_i[d, DI_CR_KREQ] = 0
    pure = not preempted and tokens == 0 and n_dec == n_seqs and n_seqs == D_i[d, DI_LEN]
    D_i[d, DI_CR_N] = n_seqs if pure else 0
    D_i[d, DI_CR_CTX] = ctx
    if n_seqs == 0:
        dec_end_s[d] = np.inf
        return
    dec_end_s[d] = t + step_time_s(cfg_i[CI_DEC_STEP_CODE], dec_coef, n_seqs, n_dec, tokens, ctx, attn2)
    D_f[d, DF_STEP_START] = t


@njit_inline
def _finish(r, d, t, gen_tokens, config, requests, dec, stats, outputs):
    output, prompt = requests.output_tokens, requests.prompt_tokens
    D_i = dec.di
    out_t, out_i = outputs.request_t, outputs.request_i
    out_t[r, OT_DONE] = t
    out_i[r, OI_STATUS] = ST_DONE
    D_i[d, DI_LOAD_TOKENS] -= prompt[r] + gen_tokens
    D_i[d, DI_N_IN_DECODE] -= 1
    completion_stats(output[r], t - out_t[r, OT_HANDOFF], config, stats)


@njit_inline
def dec_commit(d, t, config, requests, reqs, dec, stats, outputs):
    """Commit the step of decode instance ``d`` ending at ``t`` (emissions, completions)."""
    output = requests.output_tokens
    R_i = reqs.ri
    D_i, D_f, D_run = dec.di, dec.df, dec.run
    out_t, dec_busy_s = outputs.request_t, outputs.decode_busy_s
    dec_busy_s[d] += t - D_f[d, DF_STEP_START]
    kept = 0
    for s in range(D_i[d, DI_LEN]):
        r = D_run[d, s]
        num = R_i[r, RI_SCHED]
        if num > 0:
            c = R_i[r, RI_COMP] + num
            R_i[r, RI_COMP] = c
            R_i[r, RI_SCHED] = 0
            if c == R_i[r, RI_TARGET]:
                if R_i[r, RI_GEN] == 0:
                    out_t[r, OT_FIRST_TOKEN] = t
                R_i[r, RI_GEN] += 1
                R_i[r, RI_TARGET] += 1
                D_i[d, DI_LOAD_TOKENS] += 1
                if R_i[r, RI_GEN] == output[r]:
                    D_i[d, DI_FREE] += R_i[r, RI_HELD_D]
                    R_i[r, RI_HELD_D] = 0
                    _finish(r, d, t, output[r], config, requests, dec, stats, outputs)
                    continue
        D_run[d, kept] = r
        kept += 1
    D_i[d, DI_LEN] = kept


@njit_inline
def ps_advance(d, t, config, dec, outputs):
    """Bring instance ``d``'s virtual time to ``t``."""
    cfg_f = config.cfg_f
    D_i, D_f = dec.di, dec.df
    dec_busy_s = outputs.decode_busy_s
    n = D_i[d, DI_LEN]
    if n > 0:
        D_f[d, DF_V] += ps_rate(n, cfg_f) * (t - D_f[d, DF_T_LAST])
        dec_busy_s[d] += t - D_f[d, DF_T_LAST]
    D_f[d, DF_T_LAST] = t


@njit_inline
def _ps_target(d, requests, reqs, dec, outputs):
    """Smallest virtual time at which a running task of ``d`` emits its first token or finishes."""
    output = requests.output_tokens
    R_f = reqs.v_join_tokens
    D_i, D_run = dec.di, dec.run
    out_t = outputs.request_t
    best = np.inf
    for s in range(D_i[d, DI_LEN]):
        r = D_run[d, s]
        x = R_f[r] + 1.0 if out_t[r, OT_FIRST_TOKEN] == np.inf else R_f[r] + output[r]
        if x < best:
            best = x
    return best


@njit_inline
def ps_admit_and_plan(d, config, requests, reqs, dec, outputs):
    """Admit waiting tasks FCFS (``V_join = V``) and set ``d``'s next event time."""
    cfg_i, cfg_f = config.cfg_i, config.cfg_f
    R_i, R_f = reqs.ri, reqs.v_join_tokens
    D_i, D_f, D_run, dec_end_s = dec.di, dec.df, dec.run, dec.step_end_s
    while D_i[d, DI_WHEAD] >= 0 and D_i[d, DI_LEN] < cfg_i[CI_DEC_MAX_SEQS]:
        r = fifo_pop(D_i, d, DI_WHEAD, DI_WTAIL, R_i)
        R_f[r] = D_f[d, DF_V]
        D_run[d, D_i[d, DI_LEN]] = r
        D_i[d, DI_LEN] += 1
    n = D_i[d, DI_LEN]
    if n == 0:
        dec_end_s[d] = np.inf
        return
    gap = _ps_target(d, requests, reqs, dec, outputs) - D_f[d, DF_V]
    dec_end_s[d] = D_f[d, DF_T_LAST] + (gap if gap > 0.0 else 0.0) / ps_rate(n, cfg_f)


@njit_inline
def ps_event(d, t, config, requests, reqs, dec, stats, outputs):
    """The first-token or completion event of processor-sharing instance ``d`` at ``t``."""
    output = requests.output_tokens
    R_f = reqs.v_join_tokens
    D_i, D_f, D_run = dec.di, dec.df, dec.run
    out_t, dec_busy_s = outputs.request_t, outputs.decode_busy_s
    dec_busy_s[d] += t - D_f[d, DF_T_LAST]
    v = _ps_target(d, requests, reqs, dec, outputs)
    D_f[d, DF_V] = v
    D_f[d, DF_T_LAST] = t
    kept = 0
    for s in range(D_i[d, DI_LEN]):
        r = D_run[d, s]
        if out_t[r, OT_FIRST_TOKEN] == np.inf and R_f[r] + 1.0 <= v:
            out_t[r, OT_FIRST_TOKEN] = t
        if R_f[r] + output[r] <= v:
            _finish(r, d, t, 0, config, requests, dec, stats, outputs)
            continue
        D_run[d, kept] = r
        kept += 1
    D_i[d, DI_LEN] = kept
    ps_admit_and_plan(d, config, requests, reqs, dec, outputs)


@njit_inline
def cruise_plan(d, config, requests, reqs, dec):
    """Extend the pure-decode step just formed on ``d`` into a run (module docstring)."""
    cfg_i, dec_coef = config.cfg_i, config.dec_coef
    output = requests.output_tokens
    R_i = reqs.ri
    D_i, D_f, D_run, dec_end_s = dec.di, dec.df, dec.run, dec.step_end_s
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
def cruise_walk(d, t, incl, dec, outputs):
    """Commit the run's steps of ``d`` ending before ``t`` (at or before with ``incl``), time and load."""
    D_i, D_f = dec.di, dec.df
    dec_busy_s = outputs.decode_busy_s
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
def cruise_apply(d, config, reqs, dec, outputs):
    """Bring the requests of ``d``'s run up to the walked steps (module docstring)."""
    cfg_i = config.cfg_i
    R_i = reqs.ri
    D_i, D_f, D_run = dec.di, dec.df, dec.run
    out_t = outputs.request_t
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
def cruise_sync(d, t, incl, config, reqs, dec, outputs):
    """Walk and apply: ``d``'s state exactly as the one-step-at-a-time simulation has it at ``t``."""
    cruise_walk(d, t, incl, dec, outputs)
    cruise_apply(d, config, reqs, dec, outputs)


@njit_inline
def cruise_cut(d, dec):
    """End ``d``'s run after the step in progress (call ``cruise_sync`` first)."""
    D_i, D_f, dec_end_s = dec.di, dec.df, dec.step_end_s
    if D_i[d, DI_CR_M] > D_i[d, DI_CR_K] + 1:
        D_i[d, DI_CR_M] = D_i[d, DI_CR_K] + 1
        dec_end_s[d] = D_f[d, DF_CR_END]
