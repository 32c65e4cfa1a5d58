"""An independent composition of a prefill pool and a decode pool, one instance at a time.

With zero network cost and unbounded decode memory (and slots), the PDD fleet decouples:
each prefill instance is a chunked-prefill server fed by its round-robin share of the
arrivals, and each decode instance is a continuous-batching decode server fed at the
prefill end times of its round-robin share (early binding, in prefill-start order).  These
single-instance simulators share no code with the kernel or its twin but the step-time
formula.  Ties: a request arriving exactly when a step ends waits for the next step.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from tests.reference.pdd import step_time_s


def prefill_instance(arrivals, prompt, budget: int, max_seqs: int, code: int, coef) -> tuple[dict, dict]:
    """``(start_s, end_s)`` by request id for one chunked-prefill instance; ``arrivals`` are
    ``(time, id)`` sorted.  A step end at an arrival's instant is handled first."""
    waiting: deque[int] = deque()
    running: list[int] = []
    comp, sched, start, end = {}, {}, {}, {}
    step_end = math.inf
    i = 0

    def form(t: float) -> float:
        left, n, tokens, attn2 = budget, 0, 0, 0
        for r in running:
            sched[r] = min(prompt[r] - comp[r], left)
            left -= sched[r]
            if sched[r]:
                n, tokens, attn2 = n + 1, tokens + sched[r], attn2 + sched[r] * (2 * comp[r] + sched[r])
        while waiting and len(running) < max_seqs and left > 0:
            r = waiting.popleft()
            start[r], comp[r], sched[r] = t, 0, min(prompt[r], left)
            running.append(r)
            left -= sched[r]
            n, tokens, attn2 = n + 1, tokens + sched[r], attn2 + sched[r] * sched[r]
        return t + step_time_s(code, coef, n, 0, tokens, 0, attn2) if n else math.inf

    while step_end < math.inf or i < len(arrivals):
        if step_end <= (arrivals[i][0] if i < len(arrivals) else math.inf):
            t = step_end
            for r in list(running):
                comp[r] += sched[r]
                if comp[r] == prompt[r]:
                    end[r] = t
                    running.remove(r)
            step_end = form(t)
        else:
            t, r = arrivals[i]
            i += 1
            waiting.append(r)
            if step_end == math.inf:
                step_end = form(t)
    return start, end


def decode_instance(arrivals, prompt, output, code: int, coef) -> tuple[dict, dict]:
    """``(first_token_s, done_s)`` by request id for one decode instance with unbounded memory
    and slots; a request arriving during a step joins the next one."""
    running: list[int] = []
    scheduled: list[int] = []
    gen, first, done = {}, {}, {}
    step_end = math.inf
    i = 0

    def form(t: float) -> float:
        scheduled[:] = running
        n = len(running)
        ctx = sum(prompt[r] - 1 + gen[r] for r in running)
        return t + step_time_s(code, coef, n, n, 0, ctx, 0) if n else math.inf

    while step_end < math.inf or i < len(arrivals):
        if step_end <= (arrivals[i][0] if i < len(arrivals) else math.inf):
            t = step_end
            for r in scheduled:
                gen[r] += 1
                if gen[r] == 1:
                    first[r] = t
                if gen[r] == output[r]:
                    done[r] = t
                    running.remove(r)
            step_end = form(t)
        else:
            t, r = arrivals[i]
            i += 1
            gen[r] = 0
            running.append(r)
            if step_end == math.inf:
                step_end = form(t)
    return first, done


def compose(arrival, prompt, output, n_prefill, n_decode, pf_budget, pf_seqs, pf_code, pf_coef, dec_code, dec_coef):
    """Per-request ``(prefill start, prefill end, first token, done)`` arrays."""
    n = len(arrival)
    out = np.full((n, 4), np.inf)
    for k in range(n_prefill):
        ids = range(k, n, n_prefill)
        start, end = prefill_instance([(float(arrival[r]), r) for r in ids], prompt, pf_budget, pf_seqs, pf_code,
                                      pf_coef)
        for r in ids:
            out[r, 0], out[r, 1] = start[r], end[r]
    bind_order = sorted(range(n), key=lambda r: (out[r, 0], r % n_prefill, r))
    for d in range(n_decode):
        ids = bind_order[d::n_decode]
        arrivals = sorted((out[r, 1], r) for r in ids)
        first, done = decode_instance(arrivals, prompt, output, dec_code, dec_coef)
        for r in ids:
            out[r, 2], out[r, 3] = first[r], done[r]
    return out
