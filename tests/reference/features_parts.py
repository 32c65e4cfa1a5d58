"""Parts of the feature-kernel twin (``tests.reference.features_level``): request and engine
state, the counter-based uniform (twin of ``_kernels/features/rng.py``), step times with CUDA
graphs and drafts (twin of ``_kernels/features/timing.py``, same floating-point order) and the
policies' keys and ranks (``_kernels/features/policy.py``), written plainly.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from fleetplan.sim._kernels.codes import (
    GRAPH_FULL_DECODE_ONLY,
    GRAPH_PIECEWISE,
    SCHED_H2Q_BR,
    SCHED_MLFQ,
    SCHED_SPF,
)
from tests.reference.iteration_parts import step_time_s

MASK = (1 << 64) - 1
GOLDEN, MIX1, MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
QS, QL = 0, 1


def mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * MIX1) & MASK
    z = ((z ^ (z >> 27)) * MIX2) & MASK
    return z ^ (z >> 31)


def uniform01(seed: int, r: int, counter: int) -> float:
    z = mix64((seed + (r + 1) * GOLDEN) & MASK)
    z = mix64((z + (counter + 1) * GOLDEN) & MASK)
    return float(z >> 11) * (1.0 / 9007199254740992.0)


@dataclass(eq=False)
class Req:
    idx: int
    prompt: int
    output: int
    gen: int = 0
    comp: int = 0
    target: int = 0
    held: int = 0  # own KV blocks, positions [match, match + held)
    sched: int = 0
    match: int = 0  # prefix-cache blocks (pinned)
    e0: int = -1
    e1: int = -1
    kspec: int = 0
    dec: bool = False
    key: tuple = ()
    aseq: int = 0
    level: int = 0
    qcls: int = QS
    draws: int = 0
    attained_ns: int = 0
    rank: tuple = ()

    def decoding(self) -> bool:
        return self.gen > 0 and self.comp == self.target - 1


@dataclass
class Engine:
    pool: int
    free: int
    running: list = field(default_factory=list)
    heaps: tuple = field(default_factory=lambda: ([], []))  # (QS or the only queue, QL): (key, idx, req)
    eta: int = 0
    step_end_s: float = math.inf
    step_dt_s: float = 0.0
    step_seqs: int = 0
    step_tokens: int = 0
    step_gsize: int = 0
    step_gt: int = 0

    def push(self, q: int, r: Req) -> None:
        heapq.heappush(self.heaps[q], (r.key, r.idx, r))

    def top(self, q: int):
        return self.heaps[q][0][2] if self.heaps[q] else None

    def pop(self, q: int) -> Req:
        return heapq.heappop(self.heaps[q])[2]


def graph_adjust_s(x: float, gmode: int, gtime) -> float:
    x = x - gtime[0] + gtime[1]
    if gmode == GRAPH_PIECEWISE:
        x = x + gtime[2]
    return x


def graph_size(f, p, n_seqs, n_decode, prefill, spec_tokens) -> tuple[int, int]:
    gmode = int(f["graph_mode"][p])
    t_tokens = 0
    if gmode == GRAPH_FULL_DECODE_ONLY:
        if n_seqs == n_decode and prefill == 0:
            t_tokens = n_decode + spec_tokens
    elif gmode == GRAPH_PIECEWISE:
        t_tokens = n_decode + prefill + spec_tokens
    n = int(f["graph_n"][p])
    sizes = [int(s) for s in f["graph_sizes"][p][:n]]
    if t_tokens == 0 or n == 0 or t_tokens > sizes[-1]:
        return 0, t_tokens
    return min(s for s in sizes if s >= t_tokens), t_tokens


def batch_time_s(f, code, coef, p, n_seqs, n_decode, prefill, spec_tokens, ctx, attn2, k_max, n_d, ctx_d,
                 size, t_tokens) -> float:
    if size > 0:
        pad = size - t_tokens
        x = step_time_s(code, coef, n_seqs + pad, n_decode + pad, prefill + spec_tokens, ctx, attn2)
        x = graph_adjust_s(x, int(f["graph_mode"][p]), f["graph_time_s"][p])
    else:
        x = step_time_s(code, coef, n_seqs, n_decode, prefill + spec_tokens, ctx, attn2)
    if k_max > 0:
        x = x + k_max * step_time_s(int(f["draft_code"][p]), f["draft_coef"][p], n_d, n_d, 0, ctx_d, 0)
    return x


def mlfq_entry_level(code, coef, prompt: int, q0_s: float, n_levels: int) -> int:
    est_s = step_time_s(code, coef, 1, 0, prompt, 0, prompt * prompt)
    level = 0
    while level < n_levels - 1 and est_s > q0_s * 2.0 ** level:
        level += 1
    return level


def h2q_rank(r: Req, ell: int, d: int, special: int) -> tuple:
    if special != 0:
        return (special, d, r.aseq, 0)
    if r.qcls == QS:
        return (0, ell, d, r.aseq)
    return (1, d, r.aseq, 0)


def prepare_pass(eng: Engine, pol: int, param, sess_c, sess_id, new_tokens):
    """Ranks of the running requests (sorted); returns (released request or None, live_wait)."""
    rel = live = None
    live_wait = False
    if pol == SCHED_MLFQ:
        for r in eng.running:
            r.rank = (r.level, r.aseq, 0, 0)
    else:
        ql = [r for r in eng.running if r.qcls == QL]
        oldest_ql = min(ql, key=lambda r: r.aseq) if ql else None
        carry = [r for r in eng.running if sess_c[sess_id[r.idx]] != 0]
        rel = min(carry, key=lambda r: r.aseq) if carry else None
        if rel is not None:
            qs_a = [r.aseq for r in eng.running if r.qcls == QS] + [e[2].aseq for e in eng.heaps[0]]
            if qs_a and rel.aseq > min(qs_a):
                rel = None
        if eng.eta >= param[2]:
            top = eng.top(1)
            if top is not None and (oldest_ql is None or top.aseq < oldest_ql.aseq):
                live_wait = True
            else:
                live = oldest_ql
        for r in eng.running:
            d = 0 if r.decoding() else 1
            special = -2 if r is rel else (-1 if r is live else 0)
            r.rank = h2q_rank(r, int(new_tokens[r.idx]), d, special)
    eng.running.sort(key=lambda r: r.rank)
    return rel, live_wait


def spf_victim(running: list, s: int) -> int:
    return max(range(s, len(running)), key=lambda j: running[j].key)


def policy_is_combined(pol: int) -> bool:
    return pol in (SCHED_MLFQ, SCHED_H2Q_BR)


def is_spf(pol: int) -> bool:
    return pol == SCHED_SPF
