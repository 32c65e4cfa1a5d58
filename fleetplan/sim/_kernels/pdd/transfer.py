"""Binding, pull-based reservations, KV transfers and handoffs of the PDD kernel.

Model in ``fleetplan.sim._kernels.pdd.kernel``.  Reservation (step mode): decode instance ``d``
grants the head of its FIFO reservation queue when ``ceil(prompt / block)`` blocks are free,
no preempted request waits on ``d`` (they come first), and a running slot is free counting
the transfers in flight (``DI_INFLIGHT``): a handed-off request joins the running batch
directly, as vLLM allocates a remote-KV request's blocks when it schedules it, so KV is held
only by running or in-flight requests.  Processor sharing grants at once.

With a fabric (``CI_NETWORK``) the transfer is one or two flows (``network``); without, it
ends at ``max(prefill end, grant + overlap) + latency + tail`` (a transfer-heap event).  A
grant or handoff on a decode instance in a cruise first brings it up to date and then ends
the run after the step in progress (``decode``).
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.jit import njit_helper, njit_inline
from fleetplan.sim._kernels.pdd.assign import decode_load
from fleetplan.sim._kernels.pdd.codes import (
    CF_LATENCY_S,
    CI_DEC_BLOCK,
    CI_DEC_MAX_SEQS,
    CI_DECODE_MODEL,
    CI_N_DECODE,
    CI_NETWORK,
    DECODE_PS,
    DECODE_STEPS,
    DI_FREE,
    DI_INFLIGHT,
    DI_LEN,
    DI_LOAD_TOKENS,
    DI_N_IN_DECODE,
    DI_PHEAD,
    DI_PTAIL,
    DI_RHEAD,
    DI_RTAIL,
    DI_WHEAD,
    DI_WTAIL,
    FLOW_LAST,
    FLOW_LAYERS,
    GI_HEAP,
    NET_IDLE,
    NET_LAST,
    NET_LAYERS,
    NET_READY,
    OI_DEC_INST,
    OI_OPTIMAL,
    OI_OPTIMAL_REQUESTS,
    OT_BIND,
    OT_GRANT,
    OT_HANDOFF,
    OT_PF_END,
    RI_COMP,
    RI_GEN,
    RI_HELD_D,
    RI_NET,
    RI_PNEXT,
    RI_PPREV,
    RI_SCHED,
    RI_TARGET,
)
from fleetplan.sim._kernels.pdd.decode import (
    cruise_cut,
    cruise_plan,
    cruise_sync,
    cruise_walk,
    dec_schedule,
    ps_admit_and_plan,
    ps_advance,
)
from fleetplan.sim._kernels.pdd.network import net_start
from fleetplan.sim._kernels.pdd.queues import fifo_pop, fifo_push, heap_push_tr


@njit_helper
def try_transfer(r, t, config, requests, reqs, xfers, outputs, fabric, net):
    """Advance ``r``'s transfer at ``t`` after a grant, a prefill end or its layers' flow end (not
    inlined: a few calls per request from many sites)."""
    cfg_i, cfg_f = config.cfg_i, config.cfg_f
    xfer_overlap_s, xfer_tail_s = requests.xfer_overlap_s, requests.xfer_tail_s
    R_i = reqs.ri
    heap_t, heap_r, G_i = xfers.heap_end_s, xfers.heap_req, xfers.counters
    out_t = outputs.request_t
    if cfg_i[CI_NETWORK] == 0:  # both granted and prefilled: push the handoff
        if out_t[r, OT_GRANT] < np.inf and out_t[r, OT_PF_END] < np.inf:
            start = out_t[r, OT_GRANT] + xfer_overlap_s[r]
            if out_t[r, OT_PF_END] > start:
                start = out_t[r, OT_PF_END]
            end = start + cfg_f[CF_LATENCY_S] + xfer_tail_s[r]
            G_i[GI_HEAP] = heap_push_tr(heap_t, heap_r, G_i[GI_HEAP], end, r)
        return
    phase = R_i[r, RI_NET]
    if phase == NET_IDLE:
        if out_t[r, OT_GRANT] == np.inf:
            return
        if fabric.layer_bytes[r] > 0.0:  # layer-wise: all but the last layer stream from the grant on
            R_i[r, RI_NET] = NET_LAYERS
            net_start(r, FLOW_LAYERS, t, config, outputs, fabric, net)
            return
        phase = NET_READY
        R_i[r, RI_NET] = NET_READY
    if phase == NET_READY and out_t[r, OT_PF_END] < np.inf:
        R_i[r, RI_NET] = NET_LAST
        if cfg_f[CF_LATENCY_S] > 0.0:
            G_i[GI_HEAP] = heap_push_tr(heap_t, heap_r, G_i[GI_HEAP], t + cfg_f[CF_LATENCY_S], r)
        else:
            net_start(r, FLOW_LAST, t, config, outputs, fabric, net)


@njit_inline
def grant(d, t, config, requests, reqs, dec, xfers, outputs, fabric, net):
    """Grant ``d``'s reservation queue FCFS while the prompt's blocks are free; returns how many."""
    cfg_i = config.cfg_i
    prompt = requests.prompt_tokens
    R_i = reqs.ri
    D_i = dec.di
    out_t = outputs.request_t
    block = cfg_i[CI_DEC_BLOCK]
    n_granted = 0
    while D_i[d, DI_RHEAD] >= 0:
        r = D_i[d, DI_RHEAD]
        need = 0
        if cfg_i[CI_DECODE_MODEL] == DECODE_STEPS:
            need = (prompt[r] + block - 1) // block
            if (need > D_i[d, DI_FREE] or D_i[d, DI_WHEAD] >= 0
                    or D_i[d, DI_LEN] + D_i[d, DI_INFLIGHT] >= cfg_i[CI_DEC_MAX_SEQS]):
                break
        fifo_pop(D_i, d, DI_RHEAD, DI_RTAIL, R_i)
        D_i[d, DI_FREE] -= need
        R_i[r, RI_HELD_D] = need
        D_i[d, DI_INFLIGHT] += 1
        out_t[r, OT_GRANT] = t
        n_granted += 1
        try_transfer(r, t, config, requests, reqs, xfers, outputs, fabric, net)
    return n_granted


@njit_inline
def bind(r, d, t, incl, config, requests, reqs, dec, xfers, outputs, fabric, net):
    """Bind ``r`` to decode instance ``d`` at ``t``: pending list, reservation queue, grants.

    ``incl``: decode steps ending at ``t`` count as done (``decode``); the caller updates
    the decode tree (a grant ends ``d``'s cruise)."""
    R_i = reqs.ri
    D_i = dec.di
    out_t, out_i = outputs.request_t, outputs.request_i
    out_i[r, OI_DEC_INST] = d
    out_t[r, OT_BIND] = t
    if D_i[d, DI_PTAIL] < 0:
        D_i[d, DI_PHEAD] = r
    else:
        R_i[D_i[d, DI_PTAIL], RI_PNEXT] = r
    R_i[r, RI_PPREV] = D_i[d, DI_PTAIL]
    D_i[d, DI_PTAIL] = r
    fifo_push(D_i, d, DI_RHEAD, DI_RTAIL, R_i, r)
    cruise_sync(d, t, incl, config, reqs, dec, outputs)
    if grant(d, t, config, requests, reqs, dec, xfers, outputs, fabric, net) > 0:
        cruise_cut(d, dec)


@njit_inline
def handoff(r, d, t, incl, config, requests, reqs, dec, xfers, outputs, fabric, net):
    """``r``'s KV has arrived on ``d`` at ``t``: leave the pending list, score the assignment, join."""
    cfg_i = config.cfg_i
    prompt = requests.prompt_tokens
    R_i = reqs.ri
    D_i, D_run, dec_end_s = dec.di, dec.run, dec.step_end_s
    out_t, out_i = outputs.request_t, outputs.request_i
    pv = R_i[r, RI_PPREV]
    nx = R_i[r, RI_PNEXT]
    if pv >= 0:
        R_i[pv, RI_PNEXT] = nx
    else:
        D_i[d, DI_PHEAD] = nx
    if nx >= 0:
        R_i[nx, RI_PPREV] = pv
    else:
        D_i[d, DI_PTAIL] = pv
    n_dec = cfg_i[CI_N_DECODE]
    for e in range(n_dec):
        cruise_walk(e, t, incl, dec, outputs)
    low = np.inf
    for e in range(n_dec):
        low = min(low, decode_load(e, t, config, reqs, dec))
    out_i[r, OI_OPTIMAL] = 1 if decode_load(d, t, config, reqs, dec) <= low else 0
    fewest = D_i[0, DI_N_IN_DECODE]
    for e in range(1, n_dec):
        fewest = min(fewest, D_i[e, DI_N_IN_DECODE])
    out_i[r, OI_OPTIMAL_REQUESTS] = 1 if D_i[d, DI_N_IN_DECODE] <= fewest else 0
    out_t[r, OT_HANDOFF] = t
    R_i[r, RI_COMP] = prompt[r] - 1
    R_i[r, RI_TARGET] = prompt[r]
    R_i[r, RI_GEN] = 0
    D_i[d, DI_LOAD_TOKENS] += prompt[r]
    D_i[d, DI_N_IN_DECODE] += 1
    D_i[d, DI_INFLIGHT] -= 1
    if cfg_i[CI_DECODE_MODEL] == DECODE_PS:
        ps_advance(d, t, config, dec, outputs)
        fifo_push(D_i, d, DI_WHEAD, DI_WTAIL, R_i, r)
        ps_admit_and_plan(d, config, requests, reqs, dec, outputs)
        return
    # straight into the running batch: its slot and blocks were reserved at the grant
    cruise_sync(d, t, incl, config, reqs, dec, outputs)
    cruise_cut(d, dec)
    R_i[r, RI_SCHED] = 0
    D_run[d, D_i[d, DI_LEN]] = r
    D_i[d, DI_LEN] += 1
    if dec_end_s[d] == np.inf:
        dec_schedule(d, t, config, requests, reqs, dec, outputs)
        grant(d, t, config, requests, reqs, dec, xfers, outputs, fabric, net)
        cruise_plan(d, config, requests, reqs, dec)
