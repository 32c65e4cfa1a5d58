"""Parts of the iteration-level twin (``tests.reference.iteration_level``), written plainly:
request and engine state, the step-time models (twin of ``fleetplan.sim._kernels.step_model``,
same order of floating-point operations) and the failure helpers (twin of
``fleetplan.sim._kernels.failures``: schedule preconditions, routing among healthy instances).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from fleetplan.sim._kernels.codes import (
    ROUTE_LEAST_OUTSTANDING,
    ROUTE_POWER_OF_TWO,
    ROUTE_RANDOM,
    ROUTE_ROUND_ROBIN,
    STEP_MODEL_LINEAR,
    STEP_MODEL_ROOFLINE,
)
from tests.reference.request_level import pick_instance, scaled_index


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
    up: bool = True


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
        q = 1.0 - math.exp(coef[15] * n_tokens)  # hit experts' share; coef[21] q their compute offset
        moe = max(coef[12] * n_tokens + coef[13] * math.sqrt(n_tokens) + coef[21] * q,
                  coef[14] * q + coef[16] * math.sqrt(q * (1.0 - q)) + coef[17] * n_tokens)
    window = coef[18] * (n_decode + prefill_tokens)  # queries at the full window of coef[19] keys ...
    if coef[19] > 0.0:  # ... a prefill query charged the keys it has (aggregate form, perf.step_terms)
        window = coef[18] * (n_decode + min(prefill_tokens, (attn2 * 0.5 + prefill_tokens * 0.5) / coef[19]))
    if coef[20] > 0.0:  # a sparse-attention prefill query's cost outside its keys (perf.attention)
        window = window + coef[20] * prefill_tokens
    return (coef[0] + gemm + coef[3] * (attn2 * 0.5) + coef[10] * n_tokens + coef[11] * n_seqs + moe + window
            + coef[4] * decode_context)


def step_time_s(code, coef, n_seqs, n_decode, prefill_tokens, decode_context, attn2) -> float:
    if code == STEP_MODEL_ROOFLINE:
        return roofline_s(coef, n_seqs, n_decode, prefill_tokens, decode_context, attn2)
    assert code == STEP_MODEL_LINEAR, "unknown step-model code"
    return (coef[0] + coef[1] * n_seqs + coef[2] * prefill_tokens
            + coef[3] * decode_context + coef[4] * (attn2 * 0.5))


def parse_fail_events(inst_fail_event_s, inst_fail_lo, n_inst: int) -> list[list[float]]:
    """Each instance's down/up times (``failures.check_fail_events`` preconditions, ValueError)."""
    lo = [int(x) for x in inst_fail_lo]
    if len(lo) != n_inst + 1 or lo[0] != 0 or lo[-1] != len(inst_fail_event_s) or \
            any(lo[k + 1] < lo[k] for k in range(n_inst)):
        raise ValueError("inst_fail_lo must have n_instances + 1 offsets from 0 to the number of events")
    fail_events = [[float(t) for t in inst_fail_event_s[lo[k]:lo[k + 1]]] for k in range(n_inst)]
    if any(not t >= 0.0 for ev in fail_events for t in ev) or any(ev != sorted(ev) for ev in fail_events):
        raise ValueError("each instance's failure event times must be >= 0 and non-decreasing")
    return fail_events


def pick_healthy(router, p, pool_inst_start, engines, outstanding, rr_next, u0, u1) -> int:
    """Within-pool routing among healthy instances (``failures.pick_healthy``), written plainly."""
    first, n = int(pool_inst_start[p]), int(pool_inst_start[p + 1] - pool_inst_start[p])
    if all(engines[first + j].up for j in range(n)):
        return pick_instance(router, p, pool_inst_start, outstanding, rr_next, u0, u1)

    def next_up(j: int) -> int:  # first healthy at or after position j, cyclically
        return next(first + (j + d) % n for d in range(n) if engines[first + (j + d) % n].up)

    if router == ROUTE_LEAST_OUTSTANDING:
        start = scaled_index(u0, n)
        order = [first + (start + j) % n for j in range(n) if engines[first + (start + j) % n].up]
        return min(order, key=lambda k: outstanding[k])
    if router == ROUTE_ROUND_ROBIN:
        while True:
            j = rr_next[p]
            rr_next[p] = (j + 1) % n
            if engines[first + j].up:
                return first + j
    if router == ROUTE_RANDOM:
        return next_up(scaled_index(u0, n))
    assert router == ROUTE_POWER_OF_TWO
    a = scaled_index(u0, n)
    ka, kb = next_up(a), next_up((a + 1 + scaled_index(u1, n - 1)) % n)
    return kb if outstanding[kb] < outstanding[ka] else ka
