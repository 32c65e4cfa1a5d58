"""Inter-token latencies of the feature kernel: a per-pool histogram, bounded in memory.

A client that streams (``vllm bench serve``, ``sglang.bench_serving``) records, for every chunk
after a request's first, the time since that request's previous chunk, pools these gaps over all
requests and reports their median and percentiles (vLLM ``calculate_metrics``: ``itls +=
outputs[i].itl``, ``np.median(itls)``; SGLang the same).  The kernel emits one chunk per request
per step (a speculative step's accepted tokens stream as one chunk), so a request's gap is
``t_emit - last_token_s[r]``: one step's duration while it decodes step after step, longer when a
step leaves it out (SGLang's prefill-only batches) or it was preempted and waited.

The gaps are counted in ``pool_itl_hist[p, b]`` (``FeatureStatistics``; shape ``(P, 0)`` = off),
``b = itl_bin(gap_s)``: a log-linear binning (as HdrHistogram) exact in floating point, so the
kernel and its twin agree bin for bin.  With ``gap = m 2^e`` (``math.frexp``: ``0.5 <= m < 1``),
octave ``o = e - 1 - ITL_OCTAVE_LO`` and sub-bin ``floor((m - 0.5) 2 ITL_SUB_BINS)``: bins of
relative width ``1 / ITL_SUB_BINS`` (1.2e-4) from ``2^ITL_OCTAVE_LO`` s (1 us; shorter gaps in bin
0) to ``2^(ITL_OCTAVE_LO + ITL_OCTAVES)`` s (4,096 s; longer in the last bin).  A bin's centre
(``itl_bin_centre_s``) is within 6.1e-5 of every gap in it: within 0.1 ms for gaps up to 1.6 s.
Memory: ``ITL_BINS`` (262,144) int64 counts per pool, whatever the run's length.

A run of ``m`` identical decode steps (cruise, ``timing``) emits at its step ends ``T_0 < ... <
T_{m-1}`` (``T_0 = start + dt``, ``T_j = T_{j-1} + run_step_s(j)``, the times the twin's steps end):
each of its ``n`` requests adds ``T_0 - last_token_s[r]``, and each later step ``T_j - T_{j-1}``
``n`` times (``itl_run``), in O(n + m).
"""

from __future__ import annotations

import math

import numpy as np

from fleetplan.sim._kernels.features.state import F_DT, F_START, REQ
from fleetplan.sim._kernels.features.timing import run_parts, run_step_s
from fleetplan.sim._kernels.jit import njit_borrowed, njit_inline

ITL_SUB_BINS = 8192  # bins per octave (relative width 1 / 8192)
ITL_OCTAVE_LO = -20  # the first octave starts at 2^-20 s (0.95 us)
ITL_OCTAVES = 32  # up to 2^12 s
ITL_BINS = ITL_SUB_BINS * ITL_OCTAVES


@njit_inline
def itl_bin(gap_s):
    """Histogram bin of a gap of ``gap_s`` seconds (module docstring)."""
    if gap_s <= 0.0:
        return 0
    m, e = math.frexp(gap_s)
    o = e - 1 - ITL_OCTAVE_LO
    if o < 0:
        return 0
    if o >= ITL_OCTAVES:
        return ITL_BINS - 1
    return o * ITL_SUB_BINS + int((m - 0.5) * (2 * ITL_SUB_BINS))


def itl_bin_centre_s(bins: np.ndarray) -> np.ndarray:
    """Centre (s) of each bin in ``bins``: ``2^(o + ITL_OCTAVE_LO) (1 + (s + 1/2) / ITL_SUB_BINS)``."""
    b = np.asarray(bins, dtype=np.int64)
    o, s = np.divmod(b, ITL_SUB_BINS)
    return np.ldexp(1.0 + (s + 0.5) / ITL_SUB_BINS, (o + ITL_OCTAVE_LO).astype(np.int32))


@njit_inline
def itl_emit(p, r, t_s, first, hist, last_token_s):
    """Request r streams a chunk at ``t_s`` (its first token when ``first``): count its gap."""
    if not first and hist.shape[1] > 0:
        hist[p, itl_bin(t_s - last_token_s[r])] += 1
    last_token_s[r] = t_s


@njit_borrowed
def itl_run(k, p, m, rq, run_req, lo, n, ki, kf, code, coef, gmode, gtime, hist, last_token_s):
    """The first ``m`` steps of the cruise in flight on instance k emit a chunk of each of its ``n``
    running requests (rows ``run_req[lo:lo + n]``, request of row x ``rq[x, REQ]``) at each step end
    (module docstring)."""
    t0 = kf[k, F_START] + kf[k, F_DT]
    on = hist.shape[1] > 0
    for s in range(lo, lo + n):
        r = rq[run_req[s], REQ]
        if on:
            hist[p, itl_bin(t0 - last_token_s[r])] += 1
    t = t0
    if m > 1:
        base_s, per_ctx_s = run_parts(k, ki, code, coef)
        for j in range(1, m):
            t_next = t + run_step_s(k, j, base_s, per_ctx_s, ki, kf, gmode, gtime)
            if on:
                hist[p, itl_bin(t_next - t)] += n
            t = t_next
    for s in range(lo, lo + n):
        last_token_s[rq[run_req[s], REQ]] = t
