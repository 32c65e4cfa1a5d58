"""Prefill-decode disaggregation (PDD) kernel: prefill pool -> KV transfer -> decode pool.

Request path (FrontierSim's PDD event graph; SIBYL §3.1 for early binding):

1. Arrival: REJECTED if the prompt exceeds the prefill pool (``PF_MAX_CONTEXT`` or its
   blocks), or prompt + output exceeds the decode pool (``DEC_MAX_CONTEXT``; in step mode
   also its blocks).  Else routed to a prefill instance (round-robin or fewest outstanding
   requests: queued, prefilling or holding KV) and queued there (``prefill``).
2. Binding: the assignment policy (``assign``) picks the decode instance at prefill
   start (``BIND_EARLY``: the step that admits the request) or at prefill end
   (``BIND_LATE``; the oracle always binds late).  The request joins ``d``'s pending list
   (SIBYL's shadow tasks) and ``d``'s FIFO reservation queue.
3. Pull-based backpressure (``transfer``): ``d`` grants reservations FCFS when the prompt's
   blocks and a running slot are free and no preempted request waits on ``d`` (checked at
   binding and after each decode step is formed, so running requests come first); until
   then the prefill instance keeps the KV.  Processor-sharing decode grants at once.
4. Transfer: once granted AND prefilled, it ends at ``max(pf_end, grant + overlap) +
   latency + tail``: ``overlap = (L-1)/L * bytes/bw`` and ``tail = bytes/(L bw)`` with
   layer-wise streaming (L layers), else ``overlap = 0`` and ``tail = bytes/bw``
   (``bytes = prompt * KV bytes per token``, computed by the wrapper).
5. Handoff (transfer end): the prefill instance frees the request's blocks; the request
   leaves ``d``'s pending list; it is counted OPTIMAL if ``d``'s load then is the minimum
   over decode instances (SIBYL Table 1; load in ``assign``); it joins ``d``'s running
   batch (steps) or queue (processor sharing) (``decode``).
6. TTFT = queue + prefill + transfer (incl. backpressure wait) + first decode step.

With a fabric (``CI_NETWORK``), step 4 is one or two flows sharing the links max-min fairly
(``network``) and the handoff is the last flow's end.  Runs of identical pure-decode steps
advance as one event (``CI_CRUISE``, ``decode``); results are the same bit for bit.

Events are ordered by ``(time, kind, seq)``: network flow completions (in flow order),
prefill step ends (ties to the lower instance), decode events, transfer-heap events (ties to
the lower request: handoffs, or the last flow's start with a fabric), arrivals (sorted
input).  The run stops when no event is left or the next is later than ``CF_HORIZON_S``.
At one prefill step end, its finished prefills are handled first (in running order), then
the next step is formed and its admissions bound (in admission order).
Arguments and outputs: ``state`` (``PddRequests``, ``PddConfig``, ``FabricInputs``: dummies without
a fabric, ``PddOutputs``).  Returns the number of events processed.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.heaps import tree_build, tree_leaves, tree_update
from fleetplan.sim._kernels.jit import njit
from fleetplan.sim._kernels.pdd import codes as c
from fleetplan.sim._kernels.pdd.assign import choose_decode
from fleetplan.sim._kernels.pdd.decode import cruise_plan, cruise_sync, cruise_walk, dec_commit, dec_schedule, ps_event
from fleetplan.sim._kernels.pdd.network import net_alloc, net_next_event_s, net_pop, net_refresh, net_start
from fleetplan.sim._kernels.pdd.prefill import pf_commit, pf_schedule
from fleetplan.sim._kernels.pdd.queues import fifo_push, heap_pop_tr
from fleetplan.sim._kernels.pdd.state import DecodeState, PrefillState, RequestState, Statistics, Transfers
from fleetplan.sim._kernels.pdd.transfer import bind, grant, handoff, try_transfer


@njit
def run_pdd(requests, config, fabric, outputs):
    arrival_s, prompt, output = requests.arrival_s, requests.prompt_tokens, requests.output_tokens
    cfg_i, cfg_f = config.cfg_i, config.cfg_f
    out_t, out_i, fl_t, fl_i = outputs.request_t, outputs.request_i, outputs.flow_t, outputs.flow_i
    pf_busy_s, dec_busy_s = outputs.prefill_busy_s, outputs.decode_busy_s
    n = arrival_s.shape[0]
    n_pf = cfg_i[c.CI_N_PREFILL]
    n_dec = cfg_i[c.CI_N_DECODE]
    policy = cfg_i[c.CI_POLICY]
    early = cfg_i[c.CI_BINDING] == c.BIND_EARLY
    ps = cfg_i[c.CI_DECODE_MODEL] == c.DECODE_PS
    networked = cfg_i[c.CI_NETWORK] != 0
    # request counts are exact between events; token loads and SIBYL's terms need the cruise steps
    sync_all = policy != c.ASSIGN_ROUND_ROBIN and policy != c.ASSIGN_ILS_REQUESTS and policy != c.ASSIGN_REQ_LEVEL
    for i in range(n):
        if prompt[i] < 1 or output[i] < 1:
            raise ValueError("prompt and output must be >= 1")
        if i > 0 and arrival_s[i] < arrival_s[i - 1]:
            raise ValueError("arrival_s must be sorted")
    out_t[:, :] = np.inf
    out_i[:, :] = -1
    out_i[:, c.OI_PREEMPTIONS] = 0
    out_i[:, c.OI_STATUS] = c.ST_UNFINISHED
    pf_busy_s[:] = 0.0
    dec_busy_s[:] = 0.0
    fl_t[:, :] = np.inf
    fl_i[:, :] = -1
    net = net_alloc(n if networked else 0, fabric.capacity_bytes_per_s.shape[0], fabric.path_links.shape[1])
    R_i = np.zeros((n, c.N_RI), dtype=np.int64)
    R_i[:, c.RI_NXT] = -1
    R_i[:, c.RI_PPREV] = -1
    R_i[:, c.RI_PNEXT] = -1
    R_f = np.zeros(n)
    P_i = np.zeros((n_pf, c.N_PI), dtype=np.int64)
    P_i[:, c.PI_WHEAD] = -1
    P_i[:, c.PI_WTAIL] = -1
    P_i[:, c.PI_FREE] = cfg_i[c.CI_PF_KV_BLOCKS]
    P_f = np.zeros(n_pf)
    P_run = np.zeros((n_pf, cfg_i[c.CI_PF_MAX_SEQS]), dtype=np.int64)
    D_i = np.zeros((n_dec, c.N_DI), dtype=np.int64)
    for col in (c.DI_WHEAD, c.DI_WTAIL, c.DI_RHEAD, c.DI_RTAIL, c.DI_PHEAD, c.DI_PTAIL):
        D_i[:, col] = -1
    D_i[:, c.DI_FREE] = cfg_i[c.CI_DEC_KV_BLOCKS]
    D_i[:, c.DI_CR_M] = 1
    D_f = np.zeros((n_dec, c.N_DF))
    D_run = np.zeros((n_dec, cfg_i[c.CI_DEC_MAX_SEQS]), dtype=np.int64)
    S = np.ones(cfg_i[c.CI_N_BUCKETS])
    G_i = np.zeros(c.N_GI, dtype=np.int64)
    G_f = np.zeros(c.N_GF)
    heap_t = np.empty(max(n, 1))
    heap_r = np.empty(max(n, 1), dtype=np.int64)
    scratch = np.empty(2 * cfg_i[c.CI_PF_MAX_SEQS] + 1, dtype=np.int64)
    lp = tree_leaves(n_pf)
    pf_end_s = np.full(lp, np.inf)
    tree_p = np.empty(2 * lp, dtype=np.int64)
    tree_build(pf_end_s, tree_p, lp)
    ld = tree_leaves(n_dec)
    dec_end_s = np.full(ld, np.inf)
    tree_d = np.empty(2 * ld, dtype=np.int64)
    tree_build(dec_end_s, tree_d, ld)
    reqs = RequestState(ri=R_i, v_join_tokens=R_f)
    pf = PrefillState(pi=P_i, step_start_s=P_f, run=P_run, step_end_s=pf_end_s)
    dec = DecodeState(di=D_i, df=D_f, run=D_run, step_end_s=dec_end_s)
    stats = Statistics(survival=S, completed=G_f)
    xfers = Transfers(heap_end_s=heap_t, heap_req=heap_r, counters=G_i)
    pf_blk = cfg_i[c.CI_PF_BLOCK]
    dec_blk = cfg_i[c.CI_DEC_BLOCK]

    n_events = 0
    i = 0
    while True:
        tn = np.inf
        if networked:
            net_refresh(fabric, net)
            tn = net_next_event_s(net)
        kp = tree_p[1]
        kd = tree_d[1]
        tp = pf_end_s[kp]
        td = dec_end_s[kd]
        tx = heap_t[0] if G_i[c.GI_HEAP] > 0 else np.inf
        ta = arrival_s[i] if i < n else np.inf
        t = min(min(tn, tp), min(min(td, tx), ta))
        if t == np.inf or t > cfg_f[c.CF_HORIZON_S]:
            break
        n_events += 1
        bind_list = 0  # requests to bind in scratch[:bind_list]
        incl = True  # decode steps ending at t are done (not before decode events: network, prefill)
        r = -1  # request handed off at t
        pf_event = False
        if tn == t:  # a flow completes
            f = net_pop(t, outputs, net)
            r = fl_i[f, c.FI_REQ]
            incl = False
            if fl_i[f, c.FI_KIND] == c.FLOW_LAYERS:
                R_i[r, c.RI_NET] = c.NET_READY
                try_transfer(r, t, config, requests, reqs, xfers, outputs, fabric, net)
                continue
        elif tp == t:  # prefill step end
            incl = False
            pf_event = True
            n_fin = pf_commit(kp, t, requests, reqs, pf, outputs, scratch)
            for j in range(n_fin):
                q = scratch[j]
                if early:
                    try_transfer(q, t, config, requests, reqs, xfers, outputs, fabric, net)
                else:
                    scratch[bind_list] = q
                    bind_list += 1
            kbind = kp
        elif td == t:  # decode step end (or the last step of a cruise) / processor-sharing event
            if ps:
                ps_event(kd, t, config, requests, reqs, dec, stats, outputs)
            else:
                cruise_sync(kd, t, True, config, reqs, dec, outputs)
                dec_commit(kd, t, config, requests, reqs, dec, stats, outputs)
                dec_schedule(kd, t, config, requests, reqs, dec, outputs)
                grant(kd, t, config, requests, reqs, dec, xfers, outputs, fabric, net)
                cruise_plan(kd, config, requests, reqs, dec)
            tree_update(dec_end_s, tree_d, ld, kd)
            continue
        elif tx == t:  # transfer-heap event: handoff, or (fabric) the last flow's start
            r = heap_r[0]
            G_i[c.GI_HEAP] = heap_pop_tr(heap_t, heap_r, G_i[c.GI_HEAP])
            if networked:
                net_start(r, c.FLOW_LAST, t, config, outputs, fabric, net)
                continue
        else:  # arrival
            q = i
            i += 1
            too_long = (prompt[q] > cfg_i[c.CI_PF_MAX_CONTEXT]
                        or (prompt[q] + pf_blk - 1) // pf_blk > cfg_i[c.CI_PF_KV_BLOCKS]
                        or prompt[q] + output[q] > cfg_i[c.CI_DEC_MAX_CONTEXT])
            if not ps and (prompt[q] + output[q] + dec_blk - 1) // dec_blk > cfg_i[c.CI_DEC_KV_BLOCKS]:
                too_long = True
            if too_long:
                out_i[q, c.OI_STATUS] = c.ST_REJECTED
                continue
            if cfg_i[c.CI_PF_ROUTER] == c.PF_ROUTE_ROUND_ROBIN:
                k = G_i[c.GI_RR_P]
                G_i[c.GI_RR_P] = (k + 1) % n_pf
            else:
                k = 0
                for e in range(1, n_pf):
                    if P_i[e, c.PI_NOUT] < P_i[k, c.PI_NOUT]:
                        k = e
            out_i[q, c.OI_PF_INST] = k
            P_i[k, c.PI_NOUT] += 1
            fifo_push(P_i, k, c.PI_WHEAD, c.PI_WTAIL, R_i, q)
            kbind = k
            if pf_end_s[k] != np.inf:
                continue
        if r >= 0:  # handoff: the KV leaves the prefill instance
            k = out_i[r, c.OI_PF_INST]
            P_i[k, c.PI_FREE] += R_i[r, c.RI_HELD_P]
            R_i[r, c.RI_HELD_P] = 0
            P_i[k, c.PI_NOUT] -= 1
            d = out_i[r, c.OI_DEC_INST]
            handoff(r, d, t, incl, config, requests, reqs, dec, xfers, outputs, fabric, net)
            tree_update(dec_end_s, tree_d, ld, d)
            kbind = k
            if pf_end_s[k] != np.inf:
                continue
        # (re)form the step of prefill instance kbind if it is idle, then bind
        if pf_end_s[kbind] == np.inf or pf_event:
            n_adm = pf_schedule(kbind, t, config, requests, reqs, pf, outputs, scratch[bind_list:])
            if early:
                bind_list += n_adm
            tree_update(pf_end_s, tree_p, lp, kbind)
        for j in range(bind_list):
            q = scratch[j]
            if sync_all and not ps:
                for e in range(n_dec):
                    if policy == c.ASSIGN_SIBYL:
                        cruise_sync(e, t, incl, config, reqs, dec, outputs)
                    else:
                        cruise_walk(e, t, incl, dec, outputs)
            d = choose_decode(policy, q, t, config, requests, reqs, dec, stats, xfers, outputs)
            bind(q, d, t, incl, config, requests, reqs, dec, xfers, outputs, fabric, net)
            tree_update(dec_end_s, tree_d, ld, d)
    if not ps and cfg_f[c.CF_HORIZON_S] < np.inf:  # commit the cruise steps ending by the horizon
        for e in range(n_dec):
            cruise_sync(e, cfg_f[c.CF_HORIZON_S], True, config, reqs, dec, outputs)
    outputs.net_stats[c.NS_FLOWS] = net.net_i[c.NI_FLOWS]
    outputs.net_stats[c.NS_PEAK_ACTIVE] = net.net_i[c.NI_PEAK]
    return n_events
