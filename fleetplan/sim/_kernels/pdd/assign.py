"""Decode-instance assignment for the PDD kernel: loads, SIBYL's projection, survival estimator.

Load of a decode instance ``d`` at time ``t`` (the metric of ILS, the oracle and the
optimal-assignment ratio) = token occupancy of the requests handed off to ``d`` and not
finished (running or waiting there): sum of prompt + generated tokens (SIBYL eq. 2).  In
step mode ``DI_LOAD_TOKENS`` keeps it exactly (integers); in processor-sharing mode it keeps
the prompts and each running task adds ``V(t) - v_join`` (tokens served so far).

SIBYL (§4.1-4.3, Algorithm 1), with handoff moment ``tau = t + est_handoff`` of the request
being bound (estimated prefill alone, when bound early, plus transfer):

* Type 1 (active: handed off to ``d``): ``l_tau = l_now + v_k (tau - t)`` with ``v_k`` the
  task's observed rate ``l_now / (t - handoff)`` (the system rate before its first token);
  ``L_I = (l_in + l_tau) * S(l_tau) / S(l_now)`` (eq. 6; 0 when ``S(l_now) = 0``).
* Type 2 (pending, bound to ``d`` but not handed off, ``tau_k <= tau``; ``tau_k`` = its bind
  time + its own estimate): ``gap = (tau - tau_k) v_sys``, ``L_II = (l_in + gap) S(gap)`` (eq. 7).
* Type 3 (pending, ``tau_k > tau``): ``L_III = max(0, l_in + gap)`` = ReLU(l_in - v_sys (tau_k -
  tau)) (eq. 8; Algorithm 1 line 17 prints ``l_in - gap``, a sign slip against eq. 8 and
  appendix D's continuity at ``tau_k = tau``; we follow eq. 8).
* ``v_sys`` = tokens of completed decodes / their decode seconds (handoff to done); a prior
  before the first completion.
* Physical pressure (``CI_SIBYL_PRESSURE``): with ``PRESSURE_TOKENS`` the terms above (eq. 2's
  token occupancy ``M = l_in + l``); with ``PRESSURE_TASKS`` every task weighs ``M = 1``:
  ``L_I = P_k``, ``L_II = S(gap)``, ``L_III = max(0, 1 + gap / l_in)`` (eq. 8 divided by
  ``l_in``: the same linear decay, reaching zero at the same distance ``l_in / v_sys``).
* Ablations (``CI_SIBYL_ABLATE``, the paper's §5.3 and appendix J): each of Type 1, 2, 3 can be
  dropped (its terms 0; Type 2 = pending with ``gap > 0``, Type 3 the rest), and PROB @ 1 sets
  the survival weights of eqs. (6)-(7) to 1 (``L_I = M(l_tau)``, ``L_II = M(gap)``).
* Survival estimator (eq. 4): buckets ``b = 0..B-1`` of ``Delta`` tokens, ``S(x) = S[floor(x /
  Delta)]`` (last bucket beyond), ``S[0] = 1``, all start at 1; on each completion with output
  ``L``, EVERY bucket ``b >= 1`` becomes ``alpha S[b] + (1 - alpha) [L >= b Delta]``.  (Eq. 4
  restricts the update to ``l <= L``, where the indicator is always 1 and S could never fall;
  updating every bucket is the EMA of the indicator, which converges to P(L >= l).)

Baselines as SIBYL's Algorithm 2: round-robin cycles over the decode instances in binding
order; the paper's ILS ("least outstanding requests", §2.3; it does not count requests still
in prefill, appendix J) is ``ASSIGN_ILS_REQUESTS`` (requests handed off and not finished);
``ASSIGN_ILS_TOKENS`` is its token-occupancy variant.  ``ASSIGN_REQ_LEVEL`` (appendix J's REQ LEVEL)
counts every request bound to the instance and not finished, pending ones (in prefill or
transfer) included.  Known property of eqs. 6-8: a pending
or new task weighs about its prompt while a finishing task removes its whole occupancy at
once, so after a long completion SIBYL binds runs of requests to that instance; where speed
depends on the number of tasks (processor sharing) this raises P99 TPOT far above
round-robin's (figures in ``tests/pdd/test_sibyl_qualitative.py``).

Ties go to the lowest instance index.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.jit import njit_inline
from fleetplan.sim._kernels.pdd.codes import (
    ABLATE_PROB,
    ABLATE_TYPE1,
    ABLATE_TYPE2,
    ABLATE_TYPE3,
    ASSIGN_ILS_REQUESTS,
    ASSIGN_REQ_LEVEL,
    ASSIGN_ROUND_ROBIN,
    ASSIGN_SIBYL,
    CF_BUCKET_TOKENS,
    CF_EMA_ALPHA,
    CF_PRIOR_RATE_TOKENS_PER_S,
    CF_PS_A,
    CF_PS_B,
    CF_PS_C,
    CI_DECODE_MODEL,
    CI_N_DECODE,
    CI_SIBYL_ABLATE,
    CI_SIBYL_PRESSURE,
    DECODE_PS,
    DF_T_LAST,
    DF_V,
    DI_LEN,
    DI_LOAD_TOKENS,
    DI_N_IN_DECODE,
    DI_PHEAD,
    DI_WHEAD,
    GF_SECONDS,
    GF_TOKENS,
    GI_RR_D,
    OT_BIND,
    OT_HANDOFF,
    PRESSURE_TASKS,
    RI_GEN,
    RI_NXT,
    RI_PNEXT,
)


@njit_inline
def survival(S, x, bucket_tokens):
    """``S_hat(x)`` for ``x >= 0`` tokens."""
    b = int(x // bucket_tokens)
    if b >= S.shape[0]:
        b = S.shape[0] - 1
    return S[b]


@njit_inline
def survival_update(S, out_tokens, bucket_tokens, alpha):
    """EMA update of every bucket after a completion of ``out_tokens`` tokens."""
    for b in range(1, S.shape[0]):
        ind = 1.0 if out_tokens >= b * bucket_tokens else 0.0
        S[b] = alpha * S[b] + (1.0 - alpha) * ind


@njit_inline
def ps_rate(n, cfg_f):
    """Per-task decode speed (tokens/s) with ``n`` running: TPS(n) / n (SIBYL eq. 15)."""
    return (cfg_f[CF_PS_A] * n * n + cfg_f[CF_PS_B] * n + cfg_f[CF_PS_C]) / n


@njit_inline
def ps_v_now(d, t, config, dec):
    """Processor-sharing virtual time (tokens served per task) of instance ``d`` at ``t``."""
    cfg_f = config.cfg_f
    D_i, D_f = dec.di, dec.df
    n = D_i[d, DI_LEN]
    if n == 0:
        return D_f[d, DF_V]
    return D_f[d, DF_V] + ps_rate(n, cfg_f) * (t - D_f[d, DF_T_LAST])


@njit_inline
def system_rate(config, stats):
    """``v_sys`` (tokens/s): completed decode tokens / decode seconds, or the prior."""
    cfg_f = config.cfg_f
    G_f = stats.completed
    if G_f[GF_SECONDS] > 0.0:
        return G_f[GF_TOKENS] / G_f[GF_SECONDS]
    return cfg_f[CF_PRIOR_RATE_TOKENS_PER_S]


@njit_inline
def decode_load(d, t, config, reqs, dec):
    """Token occupancy of decode instance ``d`` at ``t`` (module docstring)."""
    cfg_i = config.cfg_i
    R_f = reqs.v_join_tokens
    D_i, D_run = dec.di, dec.run
    load = float(D_i[d, DI_LOAD_TOKENS])
    if cfg_i[CI_DECODE_MODEL] == DECODE_PS:
        v_now = ps_v_now(d, t, config, dec)
        for s in range(D_i[d, DI_LEN]):
            load += v_now - R_f[D_run[d, s]]
    return load


@njit_inline
def _type1(r, l_now, t, tau, v_sys, prompt, out_t, S, bucket, tasks, prob1):
    """SIBYL eq. (6) for an active task with ``l_now`` generated tokens (``M = 1`` with ``tasks``;
    ``prob1``: PROB @ 1)."""
    v_k = v_sys
    if l_now > 0.0 and t > out_t[r, OT_HANDOFF]:
        v_k = l_now / (t - out_t[r, OT_HANDOFF])
    l_tau = l_now + v_k * (tau - t)
    p = 1.0
    if not prob1:
        s_now = survival(S, l_now, bucket)
        p = survival(S, l_tau, bucket) / s_now if s_now > 0.0 else 0.0
    if tasks:
        return p
    return (prompt[r] + l_tau) * p


@njit_inline
def _shadow(l_in, gap, S, bucket, tasks, ablate):
    """SIBYL eqs. (7)-(8) for a pending task: ``gap = (tau - tau_k) v_sys`` tokens (``ablate``:
    ``ABLATE_*`` bits)."""
    if gap > 0.0:
        if ablate & ABLATE_TYPE2:
            return 0.0
        m = 1.0 if tasks else l_in + gap
        return m if ablate & ABLATE_PROB else m * survival(S, gap, bucket)
    if ablate & ABLATE_TYPE3:
        return 0.0
    m = l_in + gap
    if m <= 0.0:
        return 0.0
    return m / l_in if tasks else m


@njit_inline
def sibyl_load(d, t, tau, config, requests, reqs, dec, stats, outputs):
    """Projected load of decode instance ``d`` at ``tau`` (SIBYL eq. 1)."""
    cfg_i, cfg_f = config.cfg_i, config.cfg_f
    prompt, est_handoff_s = requests.prompt_tokens, requests.est_handoff_s
    R_i, R_f = reqs.ri, reqs.v_join_tokens
    D_i, D_run = dec.di, dec.run
    S = stats.survival
    out_t = outputs.request_t
    bucket = cfg_f[CF_BUCKET_TOKENS]
    v_sys = system_rate(config, stats)
    ps = cfg_i[CI_DECODE_MODEL] == DECODE_PS
    tasks = cfg_i[CI_SIBYL_PRESSURE] == PRESSURE_TASKS
    ablate = cfg_i[CI_SIBYL_ABLATE]
    prob1 = (ablate & ABLATE_PROB) != 0
    total = 0.0
    if not ablate & ABLATE_TYPE1:
        v_now = ps_v_now(d, t, config, dec) if ps else 0.0
        for s in range(D_i[d, DI_LEN]):
            r = D_run[d, s]
            l_now = v_now - R_f[r] if ps else float(R_i[r, RI_GEN])
            total += _type1(r, l_now, t, tau, v_sys, prompt, out_t, S, bucket, tasks, prob1)
        r = D_i[d, DI_WHEAD]
        while r >= 0:
            l_now = 0.0 if ps else float(R_i[r, RI_GEN])
            total += _type1(r, l_now, t, tau, v_sys, prompt, out_t, S, bucket, tasks, prob1)
            r = R_i[r, RI_NXT]
    r = D_i[d, DI_PHEAD]
    while r >= 0:
        tau_k = out_t[r, OT_BIND] + est_handoff_s[r]
        total += _shadow(float(prompt[r]), (tau - tau_k) * v_sys, S, bucket, tasks, ablate)
        r = R_i[r, RI_PNEXT]
    return total


@njit_inline
def bound_requests(d, reqs, dec):
    """REQ LEVEL's load: requests in decode on ``d`` plus those bound to it and still pending."""
    R_i = reqs.ri
    D_i = dec.di
    n = D_i[d, DI_N_IN_DECODE]
    r = D_i[d, DI_PHEAD]
    while r >= 0:
        n += 1
        r = R_i[r, RI_PNEXT]
    return n


@njit_inline
def choose_decode(policy, r, t, config, requests, reqs, dec, stats, xfers, outputs):
    """The decode instance the policy binds request ``r`` to at time ``t``."""
    cfg_i = config.cfg_i
    est_handoff_s = requests.est_handoff_s
    D_i = dec.di
    G_i = xfers.counters
    n_dec = cfg_i[CI_N_DECODE]
    if policy == ASSIGN_ROUND_ROBIN:
        d = G_i[GI_RR_D]
        G_i[GI_RR_D] = (d + 1) % n_dec
        return d
    tau = t + est_handoff_s[r]
    best = 0
    best_load = np.inf
    for d in range(n_dec):
        if policy == ASSIGN_ILS_REQUESTS:
            load = float(D_i[d, DI_N_IN_DECODE])
        elif policy == ASSIGN_REQ_LEVEL:
            load = float(bound_requests(d, reqs, dec))
        elif policy == ASSIGN_SIBYL:
            load = sibyl_load(d, t, tau, config, requests, reqs, dec, stats, outputs)
        else:  # ILS on tokens, oracle
            load = decode_load(d, t, config, reqs, dec)
        if load < best_load:
            best_load = load
            best = d
    return best


@njit_inline
def completion_stats(out_tokens, decode_s, config, stats):
    """Feed a finished decode to ``v_sys`` and the survival estimator."""
    cfg_f = config.cfg_f
    S, G_f = stats.survival, stats.completed
    G_f[GF_TOKENS] += out_tokens
    G_f[GF_SECONDS] += decode_s
    survival_update(S, out_tokens, cfg_f[CF_BUCKET_TOKENS], cfg_f[CF_EMA_ALPHA])
