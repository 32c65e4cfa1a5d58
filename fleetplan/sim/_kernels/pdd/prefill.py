"""Prefill instances of the PDD kernel: chunked prefill only (no decode steps).

Each prefill instance has a FIFO waiting queue, a running list in admission order and
``PF_KV_BLOCKS`` blocks.  A step (token budget ``PF_BUDGET``) gives every running request
``min(prompt - computed, budget left)`` tokens in admission order, then admits waiting
requests FCFS while ``running < PF_MAX_SEQS``, budget is left and the WHOLE prompt's blocks
``ceil(prompt / block)`` are free (allocated at admission, so the prefill side never
preempts).  Step time: ``step_model.step_time_s(code, coef, n_seqs, 0, prefill_tokens, 0,
attn2)`` with ``attn2 = sum chunk * (2 * offset + chunk)``.  A request whose last chunk ends
leaves the running list (``OT_PF_END``) but keeps its blocks until its KV transfer ends:
held KV counts against the instance's admissions (pull-based backpressure, FrontierSim).

``pf_schedule`` writes the requests it admitted (their prefill start) to ``scratch`` and
returns how many; ``pf_commit`` writes the requests whose prefill ended and returns how many.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.jit import njit, njit_inline
from fleetplan.sim._kernels.pdd.codes import (
    CI_PF_BLOCK,
    CI_PF_BUDGET,
    CI_PF_MAX_SEQS,
    CI_PF_STEP_CODE,
    OT_PF_END,
    OT_PF_SCHED,
    PI_FREE,
    PI_LEN,
    PI_WHEAD,
    PI_WTAIL,
    RI_COMP,
    RI_HELD_P,
    RI_SCHED,
)
from fleetplan.sim._kernels.pdd.queues import fifo_pop
from fleetplan.sim._kernels.step_model import step_time_s


@njit_inline
def pf_schedule(k, t, config, requests, reqs, pf, outputs, scratch):
    """Form the next prefill step of instance ``k`` at ``t``; sets ``pf_end_s[k]`` (inf if idle)."""
    cfg_i, pf_coef = config.cfg_i, config.pf_coef
    prompt = requests.prompt_tokens
    R_i = reqs.ri
    P_i, P_f, P_run, pf_end_s = pf.pi, pf.step_start_s, pf.run, pf.step_end_s
    out_t = outputs.request_t
    budget = cfg_i[CI_PF_BUDGET]
    block = cfg_i[CI_PF_BLOCK]
    n_seqs = 0
    tokens = 0
    attn2 = 0
    for s in range(P_i[k, PI_LEN]):
        r = P_run[k, s]
        if budget == 0:
            R_i[r, RI_SCHED] = 0
            continue
        c = R_i[r, RI_COMP]
        num = prompt[r] - c
        if num > budget:
            num = budget
        R_i[r, RI_SCHED] = num
        budget -= num
        n_seqs += 1
        tokens += num
        attn2 += num * (2 * c + num)
    n_adm = 0
    while P_i[k, PI_WHEAD] >= 0 and P_i[k, PI_LEN] < cfg_i[CI_PF_MAX_SEQS] and budget > 0:
        r = P_i[k, PI_WHEAD]
        need = (prompt[r] + block - 1) // block
        if need > P_i[k, PI_FREE]:
            break
        fifo_pop(P_i, k, PI_WHEAD, PI_WTAIL, R_i)
        P_i[k, PI_FREE] -= need
        R_i[r, RI_HELD_P] = need
        P_run[k, P_i[k, PI_LEN]] = r
        P_i[k, PI_LEN] += 1
        num = prompt[r] if prompt[r] < budget else budget
        R_i[r, RI_COMP] = 0
        R_i[r, RI_SCHED] = num
        budget -= num
        n_seqs += 1
        tokens += num
        attn2 += num * num
        out_t[r, OT_PF_SCHED] = t
        scratch[n_adm] = r
        n_adm += 1
    if n_seqs == 0:
        pf_end_s[k] = np.inf
        return n_adm
    pf_end_s[k] = t + step_time_s(cfg_i[CI_PF_STEP_CODE], pf_coef, n_seqs, 0, tokens, 0, attn2)
    P_f[k] = t
    return n_adm


@njit_inline
def pf_commit(k, t, requests, reqs, pf, outputs, scratch):
    """Commit the step of prefill instance ``k`` ending at ``t``; returns how many prefills ended."""
    prompt = requests.prompt_tokens
    R_i = reqs.ri
    P_i, P_f, P_run = pf.pi, pf.step_start_s, pf.run
    out_t, pf_busy_s = outputs.request_t, outputs.prefill_busy_s
    pf_busy_s[k] += t - P_f[k]
    kept = 0
    n_fin = 0
    for s in range(P_i[k, PI_LEN]):
        r = P_run[k, s]
        c = R_i[r, RI_COMP] + R_i[r, RI_SCHED]
        R_i[r, RI_COMP] = c
        R_i[r, RI_SCHED] = 0
        if c == prompt[r]:
            out_t[r, OT_PF_END] = t
            scratch[n_fin] = r
            n_fin += 1
            continue
        P_run[k, kept] = r
        kept += 1
    P_i[k, PI_LEN] = kept
    return n_fin


@njit
def prefill_alone_s(prompt, budget, code, coef, out_s):
    """Seconds to prefill each prompt alone on an idle instance (chunks of ``budget`` tokens):
    SIBYL's ESTPREFILL, a deterministic function of the prompt length."""
    for r in range(prompt.shape[0]):
        total = 0.0
        c = 0
        while c < prompt[r]:
            num = prompt[r] - c if prompt[r] - c < budget else budget
            total += step_time_s(code, coef, 1, 0, num, 0, num * (2 * c + num))
            c += num
        out_s[r] = total
