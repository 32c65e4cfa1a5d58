"""Event loop of the PDD twin (see ``tests/reference/pdd.py``); ``run_pdd`` mirrors the kernel."""

from __future__ import annotations

import heapq

from fleetplan.sim._kernels.pdd import codes as pc
from tests.reference.pdd import INF, Decode, Estimator, Prefill, Req
from tests.reference.pdd_decode import DecodeEngine
from tests.reference.pdd_net import NetTwin
from tests.reference.pdd_parts import PrefillSide


class PddTwin:
    def __init__(self, arrival, prompt, output, est_handoff, overlap, tail, cfg_i, cfg_f, pf_coef, dec_coef,
                 net_in=None):
        self.ci, self.cf = [int(x) for x in cfg_i], [float(x) for x in cfg_f]
        self.reqs = [Req(i, float(arrival[i]), int(prompt[i]), int(output[i]), float(est_handoff[i]),
                         float(overlap[i]), float(tail[i])) for i in range(len(arrival))]
        ci = self.ci
        self.pf = PrefillSide(ci, list(pf_coef), [Prefill(ci[pc.CI_PF_KV_BLOCKS]) for _ in range(ci[pc.CI_N_PREFILL])])
        est = Estimator(ci[pc.CI_N_BUCKETS], self.cf[pc.CF_BUCKET_TOKENS], self.cf[pc.CF_EMA_ALPHA],
                        self.cf[pc.CF_PRIOR_RATE_TOKENS_PER_S])
        self.dec = DecodeEngine(ci, self.cf, list(dec_coef), est,
                              [Decode(ci[pc.CI_DEC_KV_BLOCKS]) for _ in range(ci[pc.CI_N_DECODE])])
        self.transfers: list[tuple[float, int]] = []
        self.rr_p = 0
        self.early = ci[pc.CI_BINDING] == pc.BIND_EARLY
        self.net = NetTwin(ci, net_in) if ci[pc.CI_NETWORK] else None

    # -- transfer and binding -------------------------------------------------------------
    def try_transfer(self, r: Req, t: float) -> None:
        if self.net is None:
            if r.t[pc.OT_GRANT] < INF and r.t[pc.OT_PF_END] < INF:
                start = r.t[pc.OT_GRANT] + r.overlap
                if r.t[pc.OT_PF_END] > start:
                    start = r.t[pc.OT_PF_END]
                heapq.heappush(self.transfers, (start + self.cf[pc.CF_LATENCY_S] + r.tail, r.idx))
            return
        if r.net == pc.NET_IDLE:
            if r.t[pc.OT_GRANT] == INF:
                return
            if self.net.layer_bytes[r.idx] > 0.0:
                r.net = pc.NET_LAYERS
                self.net.start(r, pc.FLOW_LAYERS, t)
                return
            r.net = pc.NET_READY
        if r.net == pc.NET_READY and r.t[pc.OT_PF_END] < INF:
            r.net = pc.NET_LAST
            if self.cf[pc.CF_LATENCY_S] > 0.0:
                heapq.heappush(self.transfers, (t + self.cf[pc.CF_LATENCY_S], r.idx))
            else:
                self.net.start(r, pc.FLOW_LAST, t)

    def grant(self, d: int, t: float) -> None:
        for r in self.dec.grant(d, t):
            self.try_transfer(r, t)

    def bind(self, r: Req, t: float) -> None:
        d = self.dec.choose(r, t)
        r.dec_inst = d
        r.t[pc.OT_BIND] = t
        self.dec.inst[d].pending.append(r)
        self.dec.inst[d].reservations.append(r)
        self.grant(d, t)

    def schedule_prefill(self, k: int, t: float) -> list[Req]:
        admitted = self.pf.schedule(k, t)
        return admitted if self.early else []

    # -- events ---------------------------------------------------------------------------
    def next_event(self, i: int):
        cands = []
        if self.net is not None:
            cands.append((self.net.next_event_s(), -1, 0))
        kp = min(range(len(self.pf.inst)), key=lambda k: (self.pf.inst[k].step_end, k))
        cands.append((self.pf.inst[kp].step_end, 0, kp))
        kd = min(range(len(self.dec.inst)), key=lambda k: (self.dec.inst[k].step_end, k))
        cands.append((self.dec.inst[kd].step_end, 1, kd))
        if self.transfers:
            cands.append((self.transfers[0][0], 2, self.transfers[0][1]))
        if i < len(self.reqs):
            cands.append((self.reqs[i].arrival, 3, i))
        return min(cands)

    def run(self) -> int:
        n_events = 0
        i = 0
        while True:
            if self.net is not None:
                self.net.refresh()
            t, kind, who = self.next_event(i)
            if t == INF or t > self.cf[pc.CF_HORIZON_S]:
                break
            n_events += 1
            if kind == -1:
                f = self.net.pop(t)
                r = self.reqs[self.net.flows[f][0]]
                if self.net.flows[f][1] == pc.FLOW_LAYERS:
                    r.net = pc.NET_READY
                    self.try_transfer(r, t)
                else:
                    self.handoff(r, t)
            elif kind == 0:
                finished = self.pf.commit(who, t)
                to_bind = []
                for r in finished:
                    if self.early:
                        self.try_transfer(r, t)
                    else:
                        to_bind.append(r)
                to_bind += self.schedule_prefill(who, t)
                for r in to_bind:
                    self.bind(r, t)
            elif kind == 1:
                if self.dec.ps:
                    self.dec.ps_event(who, t)
                else:
                    self.dec.commit(who, t)
                    self.dec.schedule(who, t)
                    self.grant(who, t)
            elif kind == 2:
                heapq.heappop(self.transfers)
                if self.net is not None:
                    self.net.start(self.reqs[who], pc.FLOW_LAST, t)
                else:
                    self.handoff(self.reqs[who], t)
            else:
                i += 1
                self.arrive(self.reqs[who], t)
        return n_events

    def handoff(self, r: Req, t: float) -> None:
        p = self.pf.inst[r.pf_inst]
        p.free += r.held_p
        r.held_p = 0
        p.n_out -= 1
        d = r.dec_inst
        dec = self.dec.inst[d]
        dec.pending.remove(r)
        low = INF
        for e in range(len(self.dec.inst)):
            low = min(low, self.dec.load(e, t))
        r.optimal = 1 if self.dec.load(d, t) <= low else 0
        fewest = min(e.n_in_decode for e in self.dec.inst)
        r.optimal_requests = 1 if dec.n_in_decode <= fewest else 0
        r.t[pc.OT_HANDOFF] = t
        r.comp, r.target, r.gen = r.prompt - 1, r.prompt, 0
        dec.load_tokens += r.prompt
        dec.n_in_decode += 1
        dec.inflight -= 1
        if self.dec.ps:
            self.dec.ps_advance(d, t)
            dec.waiting.append(r)
            self.dec.ps_admit_and_plan(d)
        else:  # straight into the running batch (slot and blocks reserved at the grant)
            r.sched = 0
            dec.running.append(r)
            if dec.step_end == INF:
                self.dec.schedule(d, t)
                self.grant(d, t)
        if p.step_end == INF:
            for q in self.schedule_prefill(r.pf_inst, t):
                self.bind(q, t)

    def arrive(self, r: Req, t: float) -> None:
        ci = self.ci
        pb, db = ci[pc.CI_PF_BLOCK], ci[pc.CI_DEC_BLOCK]
        too_long = (r.prompt > ci[pc.CI_PF_MAX_CONTEXT] or -(-r.prompt // pb) > ci[pc.CI_PF_KV_BLOCKS]
                    or r.prompt + r.output > ci[pc.CI_DEC_MAX_CONTEXT])
        if not self.dec.ps and -(-(r.prompt + r.output) // db) > ci[pc.CI_DEC_KV_BLOCKS]:
            too_long = True
        if too_long:
            r.status = pc.ST_REJECTED
            return
        if ci[pc.CI_PF_ROUTER] == pc.PF_ROUTE_ROUND_ROBIN:
            k = self.rr_p
            self.rr_p = (k + 1) % len(self.pf.inst)
        else:
            k = min(range(len(self.pf.inst)), key=lambda e: (self.pf.inst[e].n_out, e))
        r.pf_inst = k
        self.pf.inst[k].n_out += 1
        self.pf.inst[k].waiting.append(r)
        if self.pf.inst[k].step_end == INF:
            for q in self.schedule_prefill(k, t):
                self.bind(q, t)


def run_pdd(requests, config, fabric=None, flows=None):
    """``(out_t rows, out_i rows, pf_busy, dec_busy, n_events)`` as the kernel fills them (one decode
    step per event: the kernel's cruise changes only its event count), from the kernel's argument
    groups (``fleetplan.sim._kernels.pdd.state``: ``PddRequests``, ``PddConfig``, ``FabricInputs``).
    With a network, ``flows`` (a list) receives ``[request, kind, spine, start, done]`` per flow and
    then the peak count."""
    twin = PddTwin(requests.arrival_s, requests.prompt_tokens, requests.output_tokens, requests.est_handoff_s,
                   requests.xfer_overlap_s, requests.xfer_tail_s, config.cfg_i, config.cfg_f, config.pf_coef,
                   config.dec_coef, fabric)
    n_events = twin.run()
    if flows is not None and twin.net is not None:
        flows.extend(twin.net.flows)
        flows.append(twin.net.peak)
    out_t = [list(r.t) for r in twin.reqs]
    out_i = [[r.pf_inst, r.dec_inst, r.preemptions, r.status, r.optimal, r.optimal_requests]
              for r in twin.reqs]
    return out_t, out_i, [p.busy for p in twin.pf.inst], [d.busy for d in twin.dec.inst], n_events
