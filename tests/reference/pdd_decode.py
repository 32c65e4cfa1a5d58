"""Decode steps and processor sharing of the PDD twin (model in ``fleetplan.sim._kernels.pdd.decode``)."""

from __future__ import annotations

from fleetplan.sim._kernels.pdd import codes as pc
from tests.reference.pdd import INF, step_time_s
from tests.reference.pdd_parts import DecodeSide


class DecodeEngine(DecodeSide):
    def schedule(self, d: int, t: float) -> None:
        ci, dec = self.ci, self.inst[d]
        budget, block = ci[pc.CI_DEC_BUDGET], ci[pc.CI_DEC_BLOCK]
        agg = {"n": 0, "dec": 0, "tokens": 0, "ctx": 0, "attn2": 0}

        def add(r, num, c, target):
            r.sched = num
            agg["n"] += 1
            if num == 1 and c == target - 1:
                agg["dec"] += 1
                agg["ctx"] += c
            else:
                agg["tokens"] += num
                agg["attn2"] += num * (2 * c + num)

        preempted = False
        s = 0
        while s < len(dec.running):
            r = dec.running[s]
            if budget == 0:
                r.sched = 0
                s += 1
                continue
            c, target = r.comp, r.target
            num = min(target - c, budget)
            new_blocks = max(-(-(c + num) // block) - r.held_d, 0)
            while new_blocks > dec.free:
                victim = dec.running.pop()
                dec.free += victim.held_d
                victim.held_d = victim.comp = victim.sched = 0
                victim.target = victim.prompt + victim.gen
                victim.preemptions += 1
                dec.waiting.appendleft(victim)
                preempted = True
                if victim is r:
                    break
            if s >= len(dec.running):
                break
            dec.free -= new_blocks
            r.held_d += new_blocks
            budget -= num
            add(r, num, c, target)
            s += 1
        while (not preempted and dec.waiting and budget > 0
               and len(dec.running) + dec.inflight < ci[pc.CI_DEC_MAX_SEQS]):
            r = dec.waiting[0]
            c, target = r.comp, r.target
            num = min(target - c, budget)
            new_blocks = max(-(-(c + num) // block) - r.held_d, 0)
            if new_blocks > dec.free:
                break
            dec.waiting.popleft()
            dec.free -= new_blocks
            r.held_d += new_blocks
            dec.running.append(r)
            budget -= num
            add(r, num, c, target)
        if agg["n"] == 0:
            dec.step_end = INF
            return
        dt = step_time_s(ci[pc.CI_DEC_STEP_CODE], self.coef, agg["n"], agg["dec"], agg["tokens"], agg["ctx"],
                         agg["attn2"])
        dec.step_end = t + dt
        dec.step_start = t

    def commit(self, d: int, t: float) -> None:
        dec = self.inst[d]
        dec.busy += t - dec.step_start
        kept = []
        for r in dec.running:
            if r.sched > 0:
                r.comp += r.sched
                r.sched = 0
                if r.comp == r.target:
                    if r.gen == 0:
                        r.t[pc.OT_FIRST_TOKEN] = t
                    r.gen += 1
                    r.target += 1
                    dec.load_tokens += 1
                    if r.gen == r.output:
                        dec.free += r.held_d
                        r.held_d = 0
                        self.finish(r, d, t, r.output)
                        continue
            kept.append(r)
        dec.running = kept

    # -- processor sharing ------------------------------------------------------------------
    def ps_advance(self, d: int, t: float) -> None:
        dec = self.inst[d]
        if dec.running:
            dec.v += self.rate(len(dec.running)) * (t - dec.t_last)
            dec.busy += t - dec.t_last
        dec.t_last = t

    def ps_target(self, d: int) -> float:
        best = INF
        for r in self.inst[d].running:
            best = min(best, r.v_join + 1.0 if r.t[pc.OT_FIRST_TOKEN] == INF else r.v_join + r.output)
        return best

    def ps_admit_and_plan(self, d: int) -> None:
        dec = self.inst[d]
        while dec.waiting and len(dec.running) < self.ci[pc.CI_DEC_MAX_SEQS]:
            r = dec.waiting.popleft()
            r.v_join = dec.v
            dec.running.append(r)
        if not dec.running:
            dec.step_end = INF
            return
        gap = self.ps_target(d) - dec.v
        dec.step_end = dec.t_last + max(gap, 0.0) / self.rate(len(dec.running))

    def ps_event(self, d: int, t: float) -> None:
        dec = self.inst[d]
        dec.busy += t - dec.t_last
        v = self.ps_target(d)
        dec.v, dec.t_last = v, t
        kept = []
        for r in dec.running:
            if r.t[pc.OT_FIRST_TOKEN] == INF and r.v_join + 1.0 <= v:
                r.t[pc.OT_FIRST_TOKEN] = t
            if r.v_join + r.output <= v:
                self.finish(r, d, t, 0)
                continue
            kept.append(r)
        dec.running = kept
        self.ps_admit_and_plan(d)
