"""Routing decisions made inside the kernels at each arrival.

Within a pool (instances ``pool_inst_start[p] .. pool_inst_start[p+1]-1``, ``n`` of them),
with the request's two pre-drawn uniforms ``u0, u1`` in [0, 1):

* least outstanding: scan the instances cyclically from offset ``floor(u0 * n)`` and take
  the first with the fewest outstanding requests (routed and not yet done); done in
  O(log n) with a per-pool min segment tree over the counts (``add_outstanding`` keeps it);
* round robin: per-pool counter;
* random: ``floor(u0 * n)``;
* power of two: ``a = floor(u0 * n)``, ``b = (a + 1 + floor(u1 * (n - 1))) % n``; the one
  with fewer outstanding requests, ties to ``a`` (``n == 1``: instance 0).

Between pools, ``least_loaded_pool`` picks the pool with the smallest load per instance
among pools whose max context fits the request (ties to the lowest index; loads are
compared exactly by cross-multiplying integers); if none fits, the pool with the largest
max context.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.codes import (
    ROUTE_LEAST_OUTSTANDING,
    ROUTE_POWER_OF_TWO,
    ROUTE_RANDOM,
    ROUTE_ROUND_ROBIN,
)
from fleetplan.sim._kernels.jit import njit_helper, njit_inline

_PAD = 1 << 62  # key of padding leaves: never the minimum


@njit_inline
def _scaled_index(u, n):
    """``floor(u * n)`` clamped to ``[0, n-1]`` (guards ``u`` rounding up to 1)."""
    j = int(u * n)
    if j >= n:
        j = n - 1
    if j < 0:
        j = 0
    return j


@njit_helper
def build_outstanding_trees(pool_inst_start):
    """Per-pool min segment trees over the instances' outstanding counts (all zero).

    Pool ``p`` owns ``tree[tree_lo[p] : tree_lo[p] + 2 * tree_leaves[p]]``; node 1 is the
    root, leaf ``L + j`` is the pool's ``j``-th instance, padding leaves are huge."""
    n_pools = pool_inst_start.shape[0] - 1
    tree_lo = np.zeros(n_pools + 1, dtype=np.int64)
    tree_leaves = np.zeros(n_pools, dtype=np.int64)
    for p in range(n_pools):
        n_leaves = 1
        while n_leaves < pool_inst_start[p + 1] - pool_inst_start[p]:
            n_leaves *= 2
        tree_leaves[p] = n_leaves
        tree_lo[p + 1] = tree_lo[p] + 2 * n_leaves
    tree = np.full(tree_lo[n_pools], _PAD, dtype=np.int64)
    for p in range(n_pools):
        n = pool_inst_start[p + 1] - pool_inst_start[p]
        base = tree_lo[p]
        n_leaves = tree_leaves[p]
        for j in range(n):
            tree[base + n_leaves + j] = 0
        for node in range(n_leaves - 1, 0, -1):
            tree[base + node] = min(tree[base + 2 * node], tree[base + 2 * node + 1])
    return tree, tree_lo, tree_leaves


@njit_inline
def add_outstanding(k, p, delta, inst_outstanding, pool_inst_start, tree, tree_lo, tree_leaves):
    """``inst_outstanding[k] += delta`` and refresh pool ``p``'s min tree (O(log n))."""
    value = inst_outstanding[k] + delta
    inst_outstanding[k] = value
    set_route_key(k, p, value, pool_inst_start, tree, tree_lo, tree_leaves)


@njit_inline
def set_route_key(k, p, key, pool_inst_start, tree, tree_lo, tree_leaves):
    """Set instance ``k``'s key in pool ``p``'s least-outstanding min tree to ``key`` (the outstanding
    count, or ``codes.ROUTE_KEY_DOWN`` for a down instance; counts untouched)."""
    base = tree_lo[p]
    node = tree_leaves[p] + k - pool_inst_start[p]
    tree[base + node] = key
    node >>= 1
    while node >= 1:
        a = tree[base + 2 * node]
        b = tree[base + 2 * node + 1]
        tree[base + node] = a if a < b else b
        node >>= 1


@njit_inline
def _first_at_most(tree, base, n_leaves, start, value):
    """Smallest leaf index >= ``start`` whose key is <= ``value``, or -1."""
    node = n_leaves + start
    if tree[base + node] <= value:
        return start
    while True:
        if node & 1 == 0 and tree[base + node + 1] <= value:
            node += 1
            break
        node >>= 1
        if node <= 1:
            return -1
    while node < n_leaves:
        node = 2 * node if tree[base + 2 * node] <= value else 2 * node + 1
    return node - n_leaves


@njit_inline
def pick_instance(router, p, pool_inst_start, inst_outstanding, tree, tree_lo, tree_leaves,
                  rr_next, u0, u1):
    """Global index of the instance of pool ``p`` that receives the request."""
    first = pool_inst_start[p]
    n = pool_inst_start[p + 1] - first
    if n == 1:
        return first
    if router == ROUTE_LEAST_OUTSTANDING:
        # first minimum in the cyclic order start, start+1, ..., via the min tree
        start = _scaled_index(u0, n)
        base = tree_lo[p]
        n_leaves = tree_leaves[p]
        lowest = tree[base + 1]
        j = _first_at_most(tree, base, n_leaves, start, lowest)
        if j < 0:
            j = _first_at_most(tree, base, n_leaves, 0, lowest)
        return first + j
    if router == ROUTE_ROUND_ROBIN:
        j = rr_next[p]
        rr_next[p] = j + 1 if j + 1 < n else 0
        return first + j
    if router == ROUTE_RANDOM:
        return first + _scaled_index(u0, n)
    if router == ROUTE_POWER_OF_TWO:
        a = _scaled_index(u0, n)
        b = (a + 1 + _scaled_index(u1, n - 1)) % n
        if inst_outstanding[first + b] < inst_outstanding[first + a]:
            return first + b
        return first + a
    return -1


@njit_helper
def least_loaded_pool(total_tokens, pool_load, pool_inst_start, pool_max_context):
    """Pool with the least ``pool_load`` per instance among pools fitting ``total_tokens``."""
    n_pools = pool_max_context.shape[0]
    best = -1
    for q in range(n_pools):
        if pool_max_context[q] < total_tokens:
            continue
        if best < 0:
            best = q
            continue
        n_q = pool_inst_start[q + 1] - pool_inst_start[q]
        n_b = pool_inst_start[best + 1] - pool_inst_start[best]
        if pool_load[q] * n_b < pool_load[best] * n_q:
            best = q
    if best >= 0:
        return best
    best = 0
    for q in range(1, n_pools):
        if pool_max_context[q] > pool_max_context[best]:
            best = q
    return best
