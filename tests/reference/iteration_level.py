"""Slow, readable twin of ``fleetplan.sim._kernels.iteration_level.run_iteration_level``.

Same signature and semantics (read the kernel module docstring for the model); one
``Engine`` object per instance with a ``deque`` waiting queue and a ``list`` running in
admission order.  The twin also asserts the engine invariants after every scheduling
decision (free KV blocks never negative, blocks held == ceil(computed / block), generated
never exceeds output) and, when given a ``checks`` dict, records per instance the peak
number of KV blocks in use (``checks["peak_blocks"]``) and per request the decode tokens
scheduled (``checks["decode_tokens"]``) and the prompt/recompute tokens scheduled
(``checks["prefill_tokens"]``).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from fleetplan.sim._kernels.codes import (
    POOL_LEAST_LOADED,
    STATUS_DONE,
    STATUS_REJECTED,
    STATUS_UNFINISHED,
    STEP_MODEL_LINEAR,
    STEP_MODEL_ROOFLINE,
)
from tests.reference.request_level import least_loaded_pool, pick_instance


@dataclass(eq=False)
class Request:
    idx: int
    prompt: int
    output: int
    computed: int = 0  # tokens whose KV is held
    generated: int = 0  # output tokens emitted
    blocks: int = 0
    scheduled: int = 0  # tokens scheduled in the step in flight

    def is_decoding(self) -> bool:
        return self.generated > 0 and self.computed == self.prompt + self.generated - 1


@dataclass
class Engine:
    pool: int
    free_blocks: int
    waiting: deque = field(default_factory=deque)
    running: list = field(default_factory=list)
    step_end_s: float = math.inf  # inf when idle
    step_dt_s: float = 0.0
    step_seqs: int = 0
    step_tokens: int = 0


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def roofline_s(coef, n_seqs, n_decode, prefill_tokens, decode_context, attn2) -> float:
    """STEP_MODEL_ROOFLINE, written out in the kernel's order (see the kernel's step_model)."""
    n_tokens = prefill_tokens + n_decode
    tile = int(coef[5])
    m_tiles = ceil_div(n_tokens, tile)
    pad = m_tiles * tile if n_tokens >= tile else n_tokens
    wave = 1.0
    if coef[6] > 0.0 and n_tokens > 0:
        work = m_tiles * coef[6]
        wave = math.ceil(work) / work
    gemm = max(coef[1] * pad * wave + coef[8] * n_seqs, coef[2] + coef[7] * n_tokens + coef[9] * n_seqs)
    moe = 0.0
    if coef[12] > 0.0 or coef[14] > 0.0:
        q = 1.0 - math.exp(coef[15] * n_tokens)
        moe = max(coef[12] * n_tokens + coef[13] * math.sqrt(n_tokens),
                  coef[14] * q + coef[16] * math.sqrt(q * (1.0 - q)) + coef[17] * n_tokens)
    return (coef[0] + gemm + coef[3] * (attn2 * 0.5) + coef[10] * n_tokens + coef[11] * n_seqs + moe
            + coef[4] * decode_context)


def step_time_s(code, coef, n_seqs, n_decode, prefill_tokens, decode_context, attn2) -> float:
    if code == STEP_MODEL_ROOFLINE:
        return roofline_s(coef, n_seqs, n_decode, prefill_tokens, decode_context, attn2)
    assert code == STEP_MODEL_LINEAR, "unknown step-model code"
    return (coef[0] + coef[1] * n_seqs + coef[2] * prefill_tokens
            + coef[3] * decode_context + coef[4] * (attn2 * 0.5))


def run_iteration_level(
    arrival_s, prompt_tokens, output_tokens, req_pool, route_u,
    pool_inst_start, pool_router, pool_max_context, pool_max_num_seqs, pool_max_batched_tokens,
    pool_kv_blocks, pool_block_tokens, pool_step_code, pool_step_coef, horizon_s,
    out_inst, out_first_sched_s, out_first_token_s, out_done_s, out_preemptions, out_status,
    inst_busy_s, inst_seq_s, inst_steps, inst_tokens, *, checks: dict | None = None,
) -> int:
    n_req = len(arrival_s)
    n_pools = len(pool_router)
    if any(code not in (STEP_MODEL_LINEAR, STEP_MODEL_ROOFLINE) for code in pool_step_code):
        raise ValueError("unknown step-model code")
    if n_req and (min(prompt_tokens) < 1 or min(output_tokens) < 1):
        raise ValueError("prompt_tokens and output_tokens must be >= 1")
    if any(arrival_s[i] < arrival_s[i - 1] for i in range(1, n_req)):
        raise ValueError("arrival_s must be sorted")
    engines = [Engine(p, int(pool_kv_blocks[p]))
               for p in range(n_pools) for _ in range(pool_inst_start[p], pool_inst_start[p + 1])]
    n_inst = len(engines)
    reqs = [Request(i, int(prompt_tokens[i]), int(output_tokens[i])) for i in range(n_req)]
    outstanding = [0] * n_inst
    pool_tokens = [0] * n_pools
    rr_next = [0] * n_pools
    peak_blocks = [0] * n_inst
    decode_tokens = [0] * n_req
    prefill_tokens_sched = [0] * n_req
    out_inst[:] = -1
    out_first_sched_s[:] = math.inf
    out_first_token_s[:] = math.inf
    out_done_s[:] = math.inf
    out_preemptions[:] = 0
    out_status[:] = STATUS_UNFINISHED
    inst_busy_s[:] = 0.0
    inst_seq_s[:] = 0.0
    inst_steps[:] = 0
    inst_tokens[:] = 0

    def check(k: int) -> None:
        eng = engines[k]
        p = eng.pool
        block = int(pool_block_tokens[p])
        used = sum(r.blocks for r in eng.running)
        assert eng.free_blocks >= 0 and used + eng.free_blocks == pool_kv_blocks[p]
        for r in eng.running:
            assert r.blocks == ceil_div(r.computed + r.scheduled, block)
            assert r.generated <= r.output
        assert len(eng.running) <= pool_max_num_seqs[eng.pool]
        peak_blocks[k] = max(peak_blocks[k], used)

    def schedule(k: int, t: float) -> None:
        eng = engines[k]
        p = eng.pool
        block = int(pool_block_tokens[p])
        budget = int(pool_max_batched_tokens[p])
        n_seqs = n_decode = prefill = decode_ctx = attn2 = 0
        preempted = False
        j = 0
        while j < len(eng.running):
            r = eng.running[j]
            if budget == 0:
                r.scheduled = 0
                j += 1
                continue
            num = min(r.prompt + r.generated - r.computed, budget)
            new_blocks = ceil_div(r.computed + num, block) - r.blocks
            while new_blocks > eng.free_blocks:  # preempt the most recently admitted
                victim = eng.running.pop()
                eng.free_blocks += victim.blocks
                victim.blocks = victim.computed = victim.scheduled = 0
                out_preemptions[victim.idx] += 1
                eng.waiting.appendleft(victim)
                preempted = True
                if victim is r:
                    break
            if r not in eng.running:
                break
            eng.free_blocks -= new_blocks
            r.blocks += new_blocks
            r.scheduled = num
            budget -= num
            n_seqs += 1
            if r.is_decoding():
                n_decode += 1
                decode_ctx += r.computed
                decode_tokens[r.idx] += 1
            else:
                prefill += num
                attn2 += num * (2 * r.computed + num)
                prefill_tokens_sched[r.idx] += num
            j += 1
        if not preempted:  # vLLM v1 admits no waiting request in a step that preempted
            while eng.waiting and len(eng.running) < pool_max_num_seqs[p] and budget > 0:
                r = eng.waiting[0]
                num = min(r.prompt + r.generated, budget)
                if ceil_div(num, block) > eng.free_blocks:
                    break
                eng.waiting.popleft()
                r.blocks = ceil_div(num, block)
                eng.free_blocks -= r.blocks
                r.scheduled = num
                eng.running.append(r)
                budget -= num
                n_seqs += 1
                prefill += num
                attn2 += num * num
                prefill_tokens_sched[r.idx] += num
                if out_first_sched_s[r.idx] == math.inf:
                    out_first_sched_s[r.idx] = t
        check(k)
        if n_seqs == 0:
            eng.step_end_s = math.inf
            return
        eng.step_dt_s = step_time_s(pool_step_code[p], pool_step_coef[p], n_seqs, n_decode, prefill, decode_ctx,
                                     attn2)
        eng.step_seqs = n_seqs
        eng.step_tokens = int(pool_max_batched_tokens[p]) - budget
        eng.step_end_s = t + eng.step_dt_s

    def commit(k: int, t: float) -> None:
        eng = engines[k]
        inst_busy_s[k] += eng.step_dt_s
        inst_seq_s[k] += eng.step_seqs * eng.step_dt_s
        inst_steps[k] += 1
        inst_tokens[k] += eng.step_tokens
        still_running = []
        for r in eng.running:
            r.computed += r.scheduled
            r.scheduled = 0
            if r.computed == r.prompt + r.generated:  # all tokens in: emit the next one
                r.generated += 1
                if out_first_token_s[r.idx] == math.inf:
                    out_first_token_s[r.idx] = t
                if r.generated == r.output:
                    out_done_s[r.idx] = t
                    out_status[r.idx] = STATUS_DONE
                    eng.free_blocks += r.blocks
                    r.blocks = 0
                    outstanding[k] -= 1
                    pool_tokens[eng.pool] -= r.prompt + r.output
                    continue
            still_running.append(r)
        eng.running = still_running
        if eng.running or eng.waiting:
            schedule(k, t)
        else:
            eng.step_end_s = math.inf

    n_steps = 0
    i = 0
    while True:
        # Next event in the order (time, kind, seq): step ends (lowest instance first) before arrivals.
        k = min(range(n_inst), key=lambda m: (engines[m].step_end_s, m))
        t_step = engines[k].step_end_s
        t_arr = arrival_s[i] if i < n_req else math.inf
        if t_step <= t_arr:
            if t_step > horizon_s or t_step == math.inf:
                break
            commit(k, t_step)
            n_steps += 1
            continue
        if t_arr > horizon_s:
            break
        r = reqs[i]
        total = r.prompt + r.output
        p = int(req_pool[i])
        if p == POOL_LEAST_LOADED:
            p = least_loaded_pool(total, pool_tokens, pool_inst_start, pool_max_context)
        if total > pool_max_context[p] or ceil_div(total, int(pool_block_tokens[p])) > pool_kv_blocks[p]:
            out_status[i] = STATUS_REJECTED
            i += 1
            continue
        k = pick_instance(pool_router[p], p, pool_inst_start, outstanding, rr_next,
                          route_u[i, 0], route_u[i, 1])
        out_inst[i] = k
        outstanding[k] += 1
        pool_tokens[p] += total
        engines[k].waiting.append(r)
        if engines[k].step_end_s == math.inf:
            schedule(k, t_arr)
        i += 1
    if checks is not None:
        checks["peak_blocks"] = peak_blocks
        checks["decode_tokens"] = decode_tokens
        checks["prefill_tokens"] = prefill_tokens_sched
    return n_steps
