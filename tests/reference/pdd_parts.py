"""Prefill and decode sides of the PDD twin (models in ``fleetplan.sim._kernels.pdd.prefill``,
``decode`` and ``assign``)."""

from __future__ import annotations

from fleetplan.sim._kernels.pdd import codes as pc
from tests.reference.pdd import INF, Estimator, Req, step_time_s


class PrefillSide:
    def __init__(self, ci, coef, inst) -> None:
        self.ci, self.coef, self.inst = ci, coef, inst

    def schedule(self, k: int, t: float) -> list[Req]:
        ci, p = self.ci, self.inst[k]
        budget, block = ci[pc.CI_PF_BUDGET], ci[pc.CI_PF_BLOCK]
        n_seqs = tokens = attn2 = 0
        for r in p.running:
            if budget == 0:
                r.sched = 0
                continue
            num = min(r.prompt - r.comp, budget)
            r.sched = num
            budget -= num
            n_seqs, tokens, attn2 = n_seqs + 1, tokens + num, attn2 + num * (2 * r.comp + num)
        admitted = []
        while p.waiting and len(p.running) < ci[pc.CI_PF_MAX_SEQS] and budget > 0:
            r = p.waiting[0]
            need = -(-r.prompt // block)
            if need > p.free:
                break
            p.waiting.popleft()
            p.free -= need
            r.held_p = need
            p.running.append(r)
            num = min(r.prompt, budget)
            r.comp, r.sched = 0, num
            budget -= num
            n_seqs, tokens, attn2 = n_seqs + 1, tokens + num, attn2 + num * num
            r.t[pc.OT_PF_SCHED] = t
            admitted.append(r)
        if n_seqs == 0:
            p.step_end = INF
            return admitted
        p.step_end = t + step_time_s(ci[pc.CI_PF_STEP_CODE], self.coef, n_seqs, 0, tokens, 0, attn2)
        p.step_start = t
        return admitted

    def commit(self, k: int, t: float) -> list[Req]:
        p = self.inst[k]
        p.busy += t - p.step_start
        finished, kept = [], []
        for r in p.running:
            r.comp += r.sched
            r.sched = 0
            if r.comp == r.prompt:
                r.t[pc.OT_PF_END] = t
                finished.append(r)
            else:
                kept.append(r)
        p.running = kept
        return finished


class DecodeSide:
    def __init__(self, ci, cf, coef, est: Estimator, inst) -> None:
        self.ci, self.cf, self.coef, self.est, self.inst = ci, cf, coef, est, inst
        self.ps = ci[pc.CI_DECODE_MODEL] == pc.DECODE_PS
        self.tasks = ci[pc.CI_SIBYL_PRESSURE] == pc.PRESSURE_TASKS
        self.ablate = int(ci[pc.CI_SIBYL_ABLATE])
        self.rr = 0

    # -- loads and assignment ---------------------------------------------------------------
    def rate(self, n: int) -> float:
        cf = self.cf
        return (cf[pc.CF_PS_A] * n * n + cf[pc.CF_PS_B] * n + cf[pc.CF_PS_C]) / n

    def v_now(self, d: int, t: float) -> float:
        dec = self.inst[d]
        if not dec.running:
            return dec.v
        return dec.v + self.rate(len(dec.running)) * (t - dec.t_last)

    def load(self, d: int, t: float) -> float:
        dec = self.inst[d]
        total = float(dec.load_tokens)
        if self.ps:
            v = self.v_now(d, t)
            for r in dec.running:
                total += v - r.v_join
        return total

    def type1(self, r: Req, l_now: float, t: float, tau: float, v_sys: float) -> float:
        v_k = v_sys
        if l_now > 0.0 and t > r.t[pc.OT_HANDOFF]:
            v_k = l_now / (t - r.t[pc.OT_HANDOFF])
        l_tau = l_now + v_k * (tau - t)
        s_now = self.est.survival(l_now)
        p = self.est.survival(l_tau) / s_now if s_now > 0.0 else 0.0
        if self.ablate & pc.ABLATE_PROB:  # PROB @ 1
            p = 1.0
        return p if self.tasks else (r.prompt + l_tau) * p

    def shadow(self, r: Req, gap: float) -> float:
        """Eqs. (7)-(8); with task pressure M = 1 and eq. (8) divided by the prompt."""
        if gap > 0.0:
            if self.ablate & pc.ABLATE_TYPE2:
                return 0.0
            p = 1.0 if self.ablate & pc.ABLATE_PROB else self.est.survival(gap)
            return (1.0 if self.tasks else r.prompt + gap) * p
        if self.ablate & pc.ABLATE_TYPE3:
            return 0.0
        m = max(r.prompt + gap, 0.0)
        return m / r.prompt if self.tasks else m

    def sibyl(self, d: int, t: float, tau: float) -> float:
        dec, v_sys = self.inst[d], self.est.rate()
        v = self.v_now(d, t) if self.ps else 0.0
        total = 0.0
        if not self.ablate & pc.ABLATE_TYPE1:
            for r in dec.running:
                total += self.type1(r, v - r.v_join if self.ps else float(r.gen), t, tau, v_sys)
            for r in dec.waiting:
                total += self.type1(r, 0.0 if self.ps else float(r.gen), t, tau, v_sys)
        for r in dec.pending:
            total += self.shadow(r, (tau - (r.t[pc.OT_BIND] + r.est_handoff)) * v_sys)
        return total

    def choose(self, r: Req, t: float) -> int:
        policy = self.ci[pc.CI_POLICY]
        if policy == pc.ASSIGN_ROUND_ROBIN:
            d, self.rr = self.rr, (self.rr + 1) % len(self.inst)
            return d
        tau = t + r.est_handoff
        if policy == pc.ASSIGN_ILS_REQUESTS:
            loads = [float(dec.n_in_decode) for dec in self.inst]
        elif policy == pc.ASSIGN_REQ_LEVEL:  # pending requests count too
            loads = [float(dec.n_in_decode + len(dec.pending)) for dec in self.inst]
        elif policy == pc.ASSIGN_SIBYL:
            loads = [self.sibyl(d, t, tau) for d in range(len(self.inst))]
        else:
            loads = [self.load(d, t) for d in range(len(self.inst))]
        return loads.index(min(loads))

    def grant(self, d: int, t: float) -> list[Req]:
        dec, granted = self.inst[d], []
        while dec.reservations:
            r = dec.reservations[0]
            need = 0
            if not self.ps:
                need = -(-r.prompt // self.ci[pc.CI_DEC_BLOCK])
                slots_full = len(dec.running) + dec.inflight >= self.ci[pc.CI_DEC_MAX_SEQS]
                if need > dec.free or dec.waiting or slots_full:
                    break
            dec.reservations.popleft()
            dec.free -= need
            r.held_d = need
            dec.inflight += 1
            r.t[pc.OT_GRANT] = t
            granted.append(r)
        return granted

    def finish(self, r: Req, d: int, t: float, gen_tokens: int) -> None:
        r.t[pc.OT_DONE] = t
        r.status = pc.ST_DONE
        self.inst[d].load_tokens -= r.prompt + gen_tokens
        self.inst[d].n_in_decode -= 1
        self.est.completed(r.output, t - r.t[pc.OT_HANDOFF])
