"""Priority structures of the feature kernel: per-instance pairing heaps of waiting requests and
the release heap of session rounds.

Pairing heap (Fredman, Sedgewick, Sleator & Tarjan 1986) over request rows (``features_rows``)
with the links in ``rq[x, HCHILD]`` / ``rq[x, HSIB]`` (O(N) memory for any number of instances
and queues): push is one link, pop a two-pass pairing of the root's children.  The key of row x
is ``(rq[x, WK0], rq[x, WK1])``, unique per request, so every correct priority queue pops the
same sequence (the twin uses ``heapq``).

Release heap: a binary heap of ``(time_s, request)`` ordered by time, then request index.
"""

from __future__ import annotations

import math

from fleetplan.sim._kernels.features_layout import ASEQ, HCHILD, HSIB, WK0, WK1
from fleetplan.sim._kernels.jit import njit_borrowed, njit_inline


@njit_inline
def wkey_less(rq, a, b):
    """Waiting key of ``a`` below that of ``b``."""
    return rq[a, WK0] < rq[b, WK0] or (rq[a, WK0] == rq[b, WK0] and rq[a, WK1] < rq[b, WK1])


@njit_inline
def ph_meld(rq, a, b):
    """Meld two heaps (roots ``a``, ``b``; -1 = empty); returns the root."""
    if a < 0:
        return b
    if b < 0:
        return a
    if wkey_less(rq, b, a):
        a, b = b, a
    rq[b, HSIB] = rq[a, HCHILD]
    rq[a, HCHILD] = b
    return a


@njit_inline
def ph_push(rq, root, r):
    rq[r, HCHILD] = -1
    rq[r, HSIB] = -1
    return ph_meld(rq, root, r)


@njit_inline
def ph_pop(rq, root):
    """Remove the root; returns the new root (two-pass pairing)."""
    acc = -1
    x = rq[root, HCHILD]
    while x >= 0:  # pass 1: meld pairs left to right, stack the results (linked by HSIB)
        y = rq[x, HSIB]
        if y < 0:
            nxt = -1
            m = x
        else:
            nxt = rq[y, HSIB]
            rq[x, HSIB] = -1
            rq[y, HSIB] = -1
            m = ph_meld(rq, x, y)
        rq[m, HSIB] = acc
        acc = m
        x = nxt
    res = -1
    while acc >= 0:  # pass 2: meld the stack right to left
        nxt = rq[acc, HSIB]
        rq[acc, HSIB] = -1
        res = ph_meld(rq, res, acc)
        acc = nxt
    rq[root, HCHILD] = -1
    rq[root, HSIB] = -1
    return res


@njit_borrowed
def ph_min_aseq(rq, root, stack):
    """Smallest ``rq[x, ASEQ]`` over the pairing heap at ``root`` (a traversal; ``stack``: scratch)."""
    best = math.inf
    if root < 0:
        return best
    n = 1
    stack[0] = root
    while n > 0:
        n -= 1
        x = stack[n]
        while x >= 0:
            if rq[x, ASEQ] < best:
                best = rq[x, ASEQ]
            if rq[x, HCHILD] >= 0:
                stack[n] = rq[x, HCHILD]
                n += 1
            x = rq[x, HSIB]
    return best


@njit_inline
def rel_less(rel_t, rel_i, a, b):
    return rel_t[a] < rel_t[b] or (rel_t[a] == rel_t[b] and rel_i[a] < rel_i[b])


@njit_inline
def rel_push(rel_t, rel_i, size, t_s, r):
    """Push ``(t_s, r)``; returns the new size."""
    pos = size
    while pos > 0:
        parent = (pos - 1) >> 1
        if rel_t[parent] < t_s or (rel_t[parent] == t_s and rel_i[parent] < r):
            break
        rel_t[pos] = rel_t[parent]
        rel_i[pos] = rel_i[parent]
        pos = parent
    rel_t[pos] = t_s
    rel_i[pos] = r
    return size + 1


@njit_inline
def rel_pop(rel_t, rel_i, size):
    """Remove the minimum (read ``rel_t[0], rel_i[0]`` first); returns the new size."""
    size -= 1
    if size == 0:
        return 0
    t_s = rel_t[size]
    r = rel_i[size]
    pos = 0
    while True:
        child = 2 * pos + 1
        if child >= size:
            break
        if child + 1 < size and rel_less(rel_t, rel_i, child + 1, child):
            child += 1
        if rel_t[child] < t_s or (rel_t[child] == t_s and rel_i[child] < r):
            rel_t[pos] = rel_t[child]
            rel_i[pos] = rel_i[child]
            pos = child
        else:
            break
    rel_t[pos] = t_s
    rel_i[pos] = r
    return size
