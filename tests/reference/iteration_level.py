"""Slow, readable twin of ``fleetplan.sim._kernels.iteration_level.run_iteration_level`` and
``run_iteration_level_failures``.

Same calling convention (the named groups of ``fleetplan.sim._kernels.groups``) and semantics
(read the kernel module docstrings, ``iteration_level.py`` for the engine and ``failures.py`` for
instance failures; this twin steps one engine step at a time and has no decode runs to cut); one
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

import numpy as np

from fleetplan.sim._kernels.codes import (
    POOL_LEAST_LOADED,
    STATUS_DONE,
    STATUS_REJECTED,
    STATUS_UNFINISHED,
    STEP_MODEL_LINEAR,
    STEP_MODEL_ROOFLINE,
)
from fleetplan.sim._kernels.groups import FailureInputs
from tests.reference.iteration_parts import Engine, Request, ceil_div, parse_fail_events, pick_healthy, step_time_s
from tests.reference.request_level import least_loaded_pool


def run_iteration_level(requests, fleet, out, horizon_s, max_in_flight: int = 0, *, checks: dict | None = None,
                        step_log: list | None = None) -> int:
    """The kernel's calling convention: ``RequestInputs``, ``FleetInputs``, ``IterationOutputs``
    (``fleetplan.sim._kernels.groups``)."""
    n_inst = int(fleet.pool_inst_start[-1])
    no_failures = FailureInputs(np.empty(0), np.zeros(n_inst + 1, dtype=np.int64))
    return run_iteration_level_failures(requests, fleet, no_failures, out,
                                        np.zeros(len(requests.arrival_s), dtype=np.int32), horizon_s, max_in_flight,
                                        checks=checks, step_log=step_log)


def run_iteration_level_failures(requests, fleet, failures, out, out_failures, horizon_s, max_in_flight: int = 0, *,
                                 checks: dict | None = None, step_log: list | None = None) -> int:
    """The kernel's calling convention, plus ``FailureInputs`` and ``out_failures``."""
    return _run(**requests._asdict(), **fleet._asdict(), horizon_s=horizon_s, inst_fail_event_s=failures.fail_event_s,
                inst_fail_lo=failures.fail_lo, out_failures=out_failures,
                **{("out_" if f in _REQUEST_OUTPUTS else "inst_") + f: a for f, a in out._asdict().items()},
                max_in_flight=max_in_flight, checks=checks, step_log=step_log)


_REQUEST_OUTPUTS = ("inst", "first_sched_s", "first_token_s", "done_s", "preemptions", "status")


def _run(
    arrival_s, prompt_tokens, output_tokens, req_pool, route_u,
    pool_inst_start, pool_router, pool_max_context, pool_max_num_seqs, pool_max_batched_tokens,
    pool_kv_blocks, pool_block_tokens, pool_step_code, pool_step_coef, horizon_s,
    inst_fail_event_s, inst_fail_lo,
    out_inst, out_first_sched_s, out_first_token_s, out_done_s, out_preemptions, out_failures, out_status,
    inst_busy_s, inst_seq_s, inst_steps, inst_tokens, max_in_flight, *, checks: dict | None,
    step_log: list | None,
) -> int:
    """``step_log``: when a list, every committed step emitting tokens past a request's first appends
    ``(duration_s, tokens)`` (the kernel's ``run_iteration_level_logged``)."""
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
    fail_events = parse_fail_events(inst_fail_event_s, inst_fail_lo, n_inst)
    fail_pos = [0] * n_inst  # next event of each instance; even positions are failures
    hold = [deque() for _ in range(n_pools)]  # requests of pools with no healthy instance
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
    out_failures[:] = 0
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
        n_emit = 0
        for r in eng.running:
            r.computed += r.scheduled
            r.scheduled = 0
            if r.computed == r.prompt + r.generated:  # all tokens in: emit the next one
                r.generated += 1
                if out_first_token_s[r.idx] == math.inf:
                    out_first_token_s[r.idx] = t
                else:
                    n_emit += 1
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
        if step_log is not None and n_emit > 0:
            step_log.append((eng.step_dt_s, n_emit))
        if eng.running or eng.waiting:
            schedule(k, t)
        else:
            eng.step_end_s = math.inf

    def dispatch(r: Request, p: int, t: float) -> None:
        if not any(engines[k].up for k in range(pool_inst_start[p], pool_inst_start[p + 1])):
            hold[p].append(r)
            return
        k = pick_healthy(pool_router[p], p, pool_inst_start, engines, outstanding, rr_next,
                         route_u[r.idx, 0], route_u[r.idx, 1])
        out_inst[r.idx] = k
        outstanding[k] += 1
        engines[k].waiting.append(r)
        if engines[k].step_end_s == math.inf:
            schedule(k, t)

    def fail(k: int, t: float) -> None:
        eng = engines[k]
        for r in eng.running:  # lose the KV cache, keep the generated tokens (recompute)
            r.computed = r.blocks = r.scheduled = 0
            out_failures[r.idx] += 1
        moved = sorted(eng.running + list(eng.waiting), key=lambda r: r.idx)
        eng.running, eng.waiting = [], deque()
        eng.free_blocks = int(pool_kv_blocks[eng.pool])
        eng.step_end_s = math.inf  # the step in flight is lost
        eng.up = False
        outstanding[k] = 0
        for r in moved:
            dispatch(r, eng.pool, t)

    def repair(k: int, t: float) -> None:
        eng = engines[k]
        eng.up = True
        held, hold[eng.pool] = hold[eng.pool], deque()
        for r in held:
            dispatch(r, eng.pool, t)

    def next_fail_s(m: int) -> float:
        return fail_events[m][fail_pos[m]] if fail_pos[m] < len(fail_events[m]) else math.inf

    n_steps = 0
    i = 0
    t_now = 0.0
    n_routed = 0  # closed loop: requests dispatched so far (completed ones counted by out_status)
    while True:
        # Next event in the order (time, kind, seq): step ends (lowest instance first), then
        # instance down/up events (lowest instance first), then arrivals.
        k = min(range(n_inst), key=lambda m: (engines[m].step_end_s, m))
        t_step = engines[k].step_end_s
        kf = min(range(n_inst), key=lambda m: (next_fail_s(m), m))
        t_fail = next_fail_s(kf)
        t_arr = arrival_s[i] if i < n_req else math.inf
        if max_in_flight > 0 and i < n_req:
            # closed loop: the next request waits until fewer than max_in_flight are outstanding
            n_out = n_routed - sum(1 for s in out_status if s == STATUS_DONE)
            t_arr = math.inf if n_out >= max_in_flight else max(t_arr, t_now)
        if t_step <= t_fail and t_step <= t_arr:
            if t_step > horizon_s or t_step == math.inf:
                break
            t_now = t_step
            commit(k, t_step)
            n_steps += 1
            continue
        if t_fail <= t_arr:
            if t_fail > horizon_s:
                break
            t_now = t_fail
            is_down = fail_pos[kf] % 2 == 0
            fail_pos[kf] += 1
            if is_down:
                fail(kf, t_fail)
            else:
                repair(kf, t_fail)
            continue
        if t_arr > horizon_s:
            break
        if max_in_flight > 0:
            arrival_s[i] = t_arr  # the release time
            t_now = t_arr
        r = reqs[i]
        total = r.prompt + r.output
        p = int(req_pool[i])
        if p == POOL_LEAST_LOADED:
            p = least_loaded_pool(total, pool_tokens, pool_inst_start, pool_max_context)
        if total > pool_max_context[p] or ceil_div(total, int(pool_block_tokens[p])) > pool_kv_blocks[p]:
            out_status[i] = STATUS_REJECTED
            i += 1
            continue
        pool_tokens[p] += total
        dispatch(r, p, t_arr)
        n_routed += 1
        i += 1
    if checks is not None:
        checks["peak_blocks"] = peak_blocks
        checks["decode_tokens"] = decode_tokens
        checks["prefill_tokens"] = prefill_tokens_sched
    return n_steps
