"""Prefill-decode disaggregation (PDD) kernel: prefill pool -> KV transfer -> decode pool.

Request path (FrontierSim's PDD event graph; SIBYL §3.1 for early binding):

1. Arrival: REJECTED if the prompt exceeds the prefill pool (``PF_MAX_CONTEXT`` or its
   blocks), or prompt + output exceeds the decode pool (``DEC_MAX_CONTEXT``; in step mode
   also its blocks).  Else routed to a prefill instance (round-robin or fewest outstanding
   requests: queued, prefilling or holding KV) and queued there (``pdd_prefill``).
2. Binding: the assignment policy (``pdd_assign``) picks the decode instance at prefill
   start (``BIND_EARLY``: the step that admits the request) or at prefill end
   (``BIND_LATE``; the oracle always binds late).  The request joins ``d``'s pending list
   (SIBYL's shadow tasks) and ``d``'s FIFO reservation queue.
3. Pull-based backpressure (``pdd_flow``): ``d`` grants reservations FCFS when the prompt's
   blocks and a running slot are free and no preempted request waits on ``d`` (checked at
   binding and after each decode step is formed, so running requests come first); until
   then the prefill instance keeps the KV.  Processor-sharing decode grants at once.
4. Transfer: once granted AND prefilled, it ends at ``max(pf_end, grant + overlap) +
   latency + tail``: ``overlap = (L-1)/L * bytes/bw`` and ``tail = bytes/(L bw)`` with
   layer-wise streaming (L layers), else ``overlap = 0`` and ``tail = bytes/bw``
   (``bytes = prompt * KV bytes per token``, computed by the wrapper).
5. Handoff (transfer end): the prefill instance frees the request's blocks; the request
   leaves ``d``'s pending list; it is counted OPTIMAL if ``d``'s load then is the minimum
   over decode instances (SIBYL Table 1; load in ``pdd_assign``); it joins ``d``'s running
   batch (steps) or queue (processor sharing) (``pdd_decode``).
6. TTFT = queue + prefill + transfer (incl. backpressure wait) + first decode step.

Events are ordered by ``(time, kind, seq)``: prefill step ends (ties to the lower
instance), decode events, transfer ends (ties to the lower request), arrivals (sorted
input).  The run stops when no event is left or the next is later than ``CF_HORIZON_S``.
At one prefill step end, its finished prefills are handled first (in running order), then
the next step is formed and its admissions bound (in admission order).
Returns the number of events processed.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.heaps import tree_build, tree_leaves, tree_update
from fleetplan.sim._kernels.jit import njit
from fleetplan.sim._kernels.pdd_assign import choose_decode, heap_pop_tr
from fleetplan.sim._kernels.pdd_codes import (
    BIND_EARLY,
    CF_HORIZON_S,
    CI_BINDING,
    CI_DEC_BLOCK,
    CI_DEC_KV_BLOCKS,
    CI_DEC_MAX_CONTEXT,
    CI_DEC_MAX_SEQS,
    CI_DECODE_MODEL,
    CI_N_BUCKETS,
    CI_N_DECODE,
    CI_N_PREFILL,
    CI_PF_BLOCK,
    CI_PF_KV_BLOCKS,
    CI_PF_MAX_CONTEXT,
    CI_PF_MAX_SEQS,
    CI_PF_ROUTER,
    CI_POLICY,
    DECODE_PS,
    DI_FREE,
    DI_PHEAD,
    DI_PTAIL,
    DI_RHEAD,
    DI_RTAIL,
    DI_WHEAD,
    DI_WTAIL,
    GI_HEAP,
    GI_RR_P,
    N_DF,
    N_DI,
    N_PI,
    N_RI,
    OI_DEC_INST,
    OI_PF_INST,
    OI_STATUS,
    PF_ROUTE_ROUND_ROBIN,
    PI_FREE,
    PI_NOUT,
    PI_WHEAD,
    PI_WTAIL,
    RI_HELD_P,
    RI_NXT,
    RI_PNEXT,
    RI_PPREV,
    ST_REJECTED,
    ST_UNFINISHED,
)
from fleetplan.sim._kernels.pdd_decode import dec_commit, dec_schedule, ps_event
from fleetplan.sim._kernels.pdd_flow import bind, grant, handoff, try_transfer
from fleetplan.sim._kernels.pdd_prefill import pf_commit, pf_schedule


@njit
def run_pdd(
    arrival_s, prompt, output, est_handoff_s, xfer_overlap_s, xfer_tail_s, cfg_i, cfg_f, pf_coef, dec_coef,
    out_t, out_i, pf_busy_s, dec_busy_s,
):
    n = arrival_s.shape[0]
    n_pf = cfg_i[CI_N_PREFILL]
    n_dec = cfg_i[CI_N_DECODE]
    policy = cfg_i[CI_POLICY]
    early = cfg_i[CI_BINDING] == BIND_EARLY
    ps = cfg_i[CI_DECODE_MODEL] == DECODE_PS
    for i in range(n):
        if prompt[i] < 1 or output[i] < 1:
            raise ValueError("prompt and output must be >= 1")
        if i > 0 and arrival_s[i] < arrival_s[i - 1]:
            raise ValueError("arrival_s must be sorted")
    out_t[:, :] = np.inf
    out_i[:, :] = -1
    out_i[:, 2] = 0
    out_i[:, OI_STATUS] = ST_UNFINISHED
    pf_busy_s[:] = 0.0
    dec_busy_s[:] = 0.0
    R_i = np.zeros((n, N_RI), dtype=np.int64)
    R_i[:, RI_NXT] = -1
    R_i[:, RI_PPREV] = -1
    R_i[:, RI_PNEXT] = -1
    R_f = np.zeros(n)
    P_i = np.zeros((n_pf, N_PI), dtype=np.int64)
    P_i[:, PI_WHEAD] = -1
    P_i[:, PI_WTAIL] = -1
    P_i[:, PI_FREE] = cfg_i[CI_PF_KV_BLOCKS]
    P_f = np.zeros(n_pf)
    P_run = np.zeros((n_pf, cfg_i[CI_PF_MAX_SEQS]), dtype=np.int64)
    D_i = np.zeros((n_dec, N_DI), dtype=np.int64)
    for col in (DI_WHEAD, DI_WTAIL, DI_RHEAD, DI_RTAIL, DI_PHEAD, DI_PTAIL):
        D_i[:, col] = -1
    D_i[:, DI_FREE] = cfg_i[CI_DEC_KV_BLOCKS]
    D_f = np.zeros((n_dec, N_DF))
    D_run = np.zeros((n_dec, cfg_i[CI_DEC_MAX_SEQS]), dtype=np.int64)
    S = np.ones(cfg_i[CI_N_BUCKETS])
    G_i = np.zeros(3, dtype=np.int64)
    G_f = np.zeros(2)
    heap_t = np.empty(max(n, 1))
    heap_r = np.empty(max(n, 1), dtype=np.int64)
    scratch = np.empty(2 * cfg_i[CI_PF_MAX_SEQS] + 1, dtype=np.int64)
    lp = tree_leaves(n_pf)
    pf_end_s = np.full(lp, np.inf)
    tree_p = np.empty(2 * lp, dtype=np.int64)
    tree_build(pf_end_s, tree_p, lp)
    ld = tree_leaves(n_dec)
    dec_end_s = np.full(ld, np.inf)
    tree_d = np.empty(2 * ld, dtype=np.int64)
    tree_build(dec_end_s, tree_d, ld)
    pf_blk = cfg_i[CI_PF_BLOCK]
    dec_blk = cfg_i[CI_DEC_BLOCK]

    n_events = 0
    i = 0
    while True:
        kp = tree_p[1]
        kd = tree_d[1]
        tp = pf_end_s[kp]
        td = dec_end_s[kd]
        tx = heap_t[0] if G_i[GI_HEAP] > 0 else np.inf
        ta = arrival_s[i] if i < n else np.inf
        t = min(min(tp, td), min(tx, ta))
        if t == np.inf or t > cfg_f[CF_HORIZON_S]:
            break
        n_events += 1
        bind_list = 0  # requests to bind in scratch[:bind_list]
        if tp == t:  # prefill step end
            n_fin = pf_commit(kp, t, prompt, R_i, P_i, P_f, P_run, out_t, pf_busy_s, scratch)
            for j in range(n_fin):
                r = scratch[j]
                if early:
                    try_transfer(r, cfg_f, xfer_overlap_s, xfer_tail_s, out_t, heap_t, heap_r, G_i)
                else:
                    scratch[bind_list] = r
                    bind_list += 1
            kbind = kp
        elif td == t:  # decode step end / processor-sharing event
            if ps:
                ps_event(kd, t, cfg_i, cfg_f, prompt, output, R_i, R_f, D_i, D_f, D_run, dec_end_s, out_t, out_i,
                         S, G_f, dec_busy_s)
            else:
                dec_commit(kd, t, cfg_f, prompt, output, R_i, D_i, D_f, D_run, out_t, out_i, S, G_f, dec_busy_s)
                dec_schedule(kd, t, cfg_i, dec_coef, prompt, R_i, D_i, D_f, D_run, dec_end_s, out_i)
                grant(kd, t, cfg_i, cfg_f, prompt, xfer_overlap_s, xfer_tail_s, R_i, D_i, out_t, heap_t, heap_r,
                       G_i)
            tree_update(dec_end_s, tree_d, ld, kd)
            continue
        elif tx == t:  # transfer end: handoff
            r = heap_r[0]
            G_i[GI_HEAP] = heap_pop_tr(heap_t, heap_r, G_i[GI_HEAP])
            k = out_i[r, OI_PF_INST]
            P_i[k, PI_FREE] += R_i[r, RI_HELD_P]
            R_i[r, RI_HELD_P] = 0
            P_i[k, PI_NOUT] -= 1
            d = out_i[r, OI_DEC_INST]
            handoff(r, d, t, cfg_i, cfg_f, prompt, output, dec_coef, xfer_overlap_s, xfer_tail_s, R_i, R_f, D_i,
                    D_f, D_run, dec_end_s, out_t, out_i, heap_t, heap_r, G_i, dec_busy_s)
            tree_update(dec_end_s, tree_d, ld, d)
            kbind = k
            if pf_end_s[k] != np.inf:
                continue
        else:  # arrival
            r = i
            i += 1
            too_long = (prompt[r] > cfg_i[CI_PF_MAX_CONTEXT]
                        or (prompt[r] + pf_blk - 1) // pf_blk > cfg_i[CI_PF_KV_BLOCKS]
                        or prompt[r] + output[r] > cfg_i[CI_DEC_MAX_CONTEXT])
            if not ps and (prompt[r] + output[r] + dec_blk - 1) // dec_blk > cfg_i[CI_DEC_KV_BLOCKS]:
                too_long = True
            if too_long:
                out_i[r, OI_STATUS] = ST_REJECTED
                continue
            if cfg_i[CI_PF_ROUTER] == PF_ROUTE_ROUND_ROBIN:
                k = G_i[GI_RR_P]
                G_i[GI_RR_P] = (k + 1) % n_pf
            else:
                k = 0
                for e in range(1, n_pf):
                    if P_i[e, PI_NOUT] < P_i[k, PI_NOUT]:
                        k = e
            out_i[r, OI_PF_INST] = k
            P_i[k, PI_NOUT] += 1
            if P_i[k, PI_WTAIL] < 0:
                P_i[k, PI_WHEAD] = r
            else:
                R_i[P_i[k, PI_WTAIL], RI_NXT] = r
            P_i[k, PI_WTAIL] = r
            kbind = k
            if pf_end_s[k] != np.inf:
                continue
        # (re)form the step of prefill instance kbind if it is idle, then bind
        if pf_end_s[kbind] == np.inf or tp == t:
            n_adm = pf_schedule(kbind, t, cfg_i, pf_coef, prompt, R_i, P_i, P_f, P_run, pf_end_s, out_t,
                                scratch[bind_list:])
            if early:
                bind_list += n_adm
            tree_update(pf_end_s, tree_p, lp, kbind)
        for j in range(bind_list):
            r = scratch[j]
            d = choose_decode(policy, r, t, est_handoff_s, cfg_i, cfg_f, prompt, R_i, R_f, D_i, D_f, D_run, out_t,
                              S, G_f, G_i)
            bind(r, d, t, cfg_i, cfg_f, prompt, xfer_overlap_s, xfer_tail_s, R_i, D_i, out_t, out_i, heap_t, heap_r,
                 G_i)
    return n_events
