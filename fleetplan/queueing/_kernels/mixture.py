"""The p-quantile of fleet latency mixtures, many fleets in one call.

A fleet's latency survival is Σ_t w_t S_t(x) over its pools' survival tables t (traffic shares w_t,
renormalised to 1), each table S_t a piecewise-linear function on its own points (1 left of them,
0 right of them: ``SurvivalTable.at``).  The p-quantile is the smallest x where the mixture falls to
q = 1 - p, found on the union of the tables' points and interpolated in log-survival between the two
points around the crossing (the tails are near-exponential).  Every arithmetic operation is the one
``fleetplan.queueing.engine.mixture_quantile_s`` (the twin) performs, in the same order, so the
results agree bit for bit: numpy's ``interp`` (exact at a table point, its slope form and non-finite
fallbacks; the cell found by walking each table's points along the ascending union instead of
numpy's binary search, the same cell: the last point <= x) and numpy's sum of the shares
(``_numpy_sum``) are spelled out below.  The union is merged from the tables' points (each
ascending: the wrapper sends a fleet with any other table to the twin), which gives the values
``np.sort`` gives, and the mixture is evaluated only up to its first point at or below q (the
twin's ``argmax``).  A fleet has at most 128 pools (``_numpy_sum``'s exact range; the wrapper checks).

Legend: T tables, concatenated (``x_s``, ``survival``; table t spans ``table_start[t]`` to
``table_start[t + 1]``); F fleets, fleet f's members ``member_start[f]`` to ``member_start[f + 1]``
of ``member_table`` (table index) and ``member_share`` (share > 0).
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from fleetplan.jit import njit, njit_inline

#: Survival tables, concatenated (seconds, ascending within a table; survival in [0, 1]).
MixtureTables = namedtuple("MixtureTables", ["x_s", "survival", "table_start"])
#: Fleets as members of ``MixtureTables``: table index and traffic share (> 0) of each member.
MixtureFleets = namedtuple("MixtureFleets", ["member_start", "member_table", "member_share",
                                             "single_increasing"])


@njit_inline
def _numpy_sum(a):
    """numpy's ``a.sum()`` of a contiguous float64 vector of up to 128 elements, bit for bit: in order
    below 8 elements, else eight interleaved partial sums combined pairwise, then the remainder
    (``pairwise_sum`` in numpy/_core/src/umath/loops_utils.h.src)."""
    n = a.size
    if n < 8:
        res = -0.0
        for i in range(n):
            res += a[i]
        return res
    r0, r1, r2, r3, r4, r5, r6, r7 = a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]
    i = 8
    while i < n - (n % 8):
        r0 += a[i]
        r1 += a[i + 1]
        r2 += a[i + 2]
        r3 += a[i + 3]
        r4 += a[i + 4]
        r5 += a[i + 5]
        r6 += a[i + 6]
        r7 += a[i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[i]
        i += 1
    return res


@njit
def mixture_quantiles(tables, fleets, q, out):
    """``out[f]``: the smallest x where fleet f's mixture survival falls to ``q`` (module docstring);
    inf where it never does or a point is not finite."""
    x_s, survival, table_start = tables
    member_start, member_table, member_share, single_increasing = fleets
    n_members = member_table.size
    longest = 0
    for f in range(member_start.size - 1):
        total = 0
        for m in range(member_start[f], member_start[f + 1]):
            total += table_start[member_table[m] + 1] - table_start[member_table[m]]
        longest = max(longest, total)
    xs = np.empty(longest)  # the union of a fleet's points, ascending
    head = np.empty(n_members, dtype=np.int64)  # per member: next point to merge, then its cell
    weight = np.empty(n_members)
    for f in range(member_start.size - 1):
        m0, m1 = member_start[f], member_start[f + 1]
        if m1 == m0:
            out[f] = 0.0
            continue
        if m1 - m0 == 1 and single_increasing[f]:  # one strictly increasing table: its own points
            t = member_table[m0]
            out[f] = _single_quantile(x_s[table_start[t]:table_start[t + 1]],
                                      survival[table_start[t]:table_start[t + 1]], q)
            continue
        # the members' points merged (each table ascending: the values np.sort gives)
        n = 0
        for m in range(m0, m1):
            head[m] = table_start[member_table[m]]
        while True:
            best, pick = math.inf, -1
            for m in range(m0, m1):
                if head[m] < table_start[member_table[m] + 1] and (pick < 0 or x_s[head[m]] < best):
                    best, pick = x_s[head[m]], m
            if pick < 0:
                break
            xs[n] = best
            n += 1
            head[pick] += 1
        finite = True
        for i in range(n):
            if not math.isfinite(xs[i]):
                finite = False
                break
        if not finite:
            out[f] = math.inf
            continue
        norm = _numpy_sum(member_share[m0:m1])
        for m in range(m0, m1):
            weight[m] = member_share[m] / norm
            head[m] = table_start[member_table[m]]  # numpy's interp cell: last point <= x
        # the mixture point by point (Σ w_t S_t(x) in member order, from 0) up to its first value <= q
        s_prev, j = 0.0, -1
        s_first = 0.0
        for i in range(n):
            x = xs[i]
            s = 0.0
            for m in range(m0, m1):
                lo, end = table_start[member_table[m]], table_start[member_table[m] + 1]
                while head[m] + 1 < end and x_s[head[m] + 1] <= x:
                    head[m] += 1
                s = s + weight[m] * _interp_at(x, x_s, survival, lo, end, head[m])
            if i == 0:
                s_first = s
            if s <= q:
                j = i
                break
            s_prev = s
        if j < 0:  # none at or below q: numpy's argmax gives 0, whose survival decides
            out[f] = math.inf if s_first > q else xs[0]
            continue
        if j == 0:
            out[f] = xs[0]
            continue
        out[f] = _crossing(xs[j - 1], xs[j], s_prev, s, q)


@njit_inline
def _interp_at(x, xp, fp, lo, end, j):
    """numpy's ``interp(x, xp[lo:end], fp[lo:end], left=1, right=0)`` given j = the last index with
    xp[j] <= x (``arr_interp`` in numpy/_core/src/multiarray/compiled_base.c)."""
    if end - lo == 1:
        return 1.0 if x < xp[lo] else (0.0 if x > xp[lo] else fp[lo])
    if x > xp[end - 1]:
        return 0.0
    if x < xp[lo]:
        return 1.0
    if j == end - 1 or xp[j] == x:
        return fp[j]
    slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j])
    res = slope * (x - xp[j]) + fp[j]
    if math.isnan(res):
        res = slope * (x - xp[j + 1]) + fp[j + 1]
        if math.isnan(res) and fp[j] == fp[j + 1]:
            res = fp[j]
    return res


@njit_inline
def _single_quantile(xs, surv, q):
    """The quantile of one strictly increasing table on its own points (``mixture_quantile_s``'s
    first branch)."""
    if not math.isfinite(xs[xs.size - 1]):
        return math.inf
    j = 0
    while j < surv.size and not surv[j] <= q:
        j += 1
    if j == surv.size:
        j = 0
    if surv[j] > q:
        return math.inf
    if j == 0:
        return xs[0]
    return _crossing(xs[j - 1], xs[j], surv[j - 1], surv[j], q)


@njit_inline
def _crossing(x0, x1, s0, s1, q):
    """Where the survival crosses q between (x0, s0) and (x1, s1): log-linear (the tails are
    near-exponential), linear to a zero, x1 where it does not fall."""
    if s0 <= s1:
        return x1
    if s1 > 0:
        return x0 + (x1 - x0) * math.log(s0 / q) / math.log(s0 / s1)
    return x0 + (x1 - x0) * (s0 - q) / (s0 - s1)
