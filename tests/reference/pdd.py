"""Slow, readable twin of ``fleetplan.sim._kernels.pdd.kernel.run_pdd`` (same inputs, same outputs).

Objects and lists instead of arrays; every float is computed with the kernel's operations
in the kernel's order, so small cases match exactly.  The model is documented in the
kernel modules ``pdd``, ``prefill``, ``decode`` and ``assign``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from fleetplan.perf.linear import roofline_step_s
from fleetplan.sim._kernels.pdd import codes as pc

INF = math.inf


def step_time_s(code, coef, n_seqs, n_decode, prefill_tokens, ctx, attn2) -> float:
    if code == 0:
        return coef[0] + coef[1] * n_seqs + coef[2] * prefill_tokens + coef[3] * ctx + coef[4] * (attn2 * 0.5)
    return roofline_step_s(coef, n_seqs, n_decode, prefill_tokens, ctx, attn2)


@dataclass(eq=False)
class Req:
    idx: int
    arrival: float
    prompt: int
    output: int
    est_handoff: float
    overlap: float
    tail: float
    comp: int = 0
    target: int = 0
    gen: int = 0
    sched: int = 0
    held_p: int = 0
    held_d: int = 0
    v_join: float = 0.0
    net: int = pc.NET_IDLE  # network phase (``codes.NET_*``)
    t: list = field(default_factory=lambda: [INF] * pc.N_OUT_T)
    pf_inst: int = -1
    dec_inst: int = -1
    preemptions: int = 0
    status: int = pc.ST_UNFINISHED
    optimal: int = -1
    optimal_requests: int = -1


@dataclass
class Prefill:
    free: int
    waiting: deque = field(default_factory=deque)
    running: list = field(default_factory=list)
    n_out: int = 0
    step_end: float = INF
    step_start: float = 0.0
    busy: float = 0.0


@dataclass
class Decode:
    free: int
    waiting: deque = field(default_factory=deque)
    running: list = field(default_factory=list)
    reservations: deque = field(default_factory=deque)
    pending: list = field(default_factory=list)
    load_tokens: int = 0
    n_in_decode: int = 0
    inflight: int = 0
    v: float = 0.0
    t_last: float = 0.0
    step_start: float = 0.0
    step_end: float = INF
    busy: float = 0.0


class Estimator:
    """SIBYL's bucketed survival function with EMA updates, and the system decode rate."""

    def __init__(self, n_buckets: int, bucket: float, alpha: float, prior: float) -> None:
        self.s = [1.0] * n_buckets
        self.bucket, self.alpha, self.prior = bucket, alpha, prior
        self.tokens = 0.0
        self.seconds = 0.0

    def survival(self, x: float) -> float:
        return self.s[min(int(x // self.bucket), len(self.s) - 1)]

    def completed(self, out_tokens: int, decode_s: float) -> None:
        self.tokens += out_tokens
        self.seconds += decode_s
        for b in range(1, len(self.s)):
            ind = 1.0 if out_tokens >= b * self.bucket else 0.0
            self.s[b] = self.alpha * self.s[b] + (1.0 - self.alpha) * ind

    def rate(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0.0 else self.prior
