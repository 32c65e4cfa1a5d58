"""Array-backed priority structures used by the simulator kernels.

* Tournament tree over a fixed set of keys (one per instance): ``tree[1]`` is the index
  of the minimum key, ties broken towards the lower index.  Leaves are ``tree[L + k]``
  with ``L`` a power of two >= the number of keys; padding keys are ``inf``.  Updating
  one key costs ``log2(L)`` comparisons.
* Binary min-heap of float keys in ``keys[lo:lo + size]`` (a per-instance segment of a
  flat array), with an optional parallel int payload.

All functions are numba kernels taking arrays only.
"""

from __future__ import annotations

from fleetplan.sim._kernels.jit import njit_helper, njit_inline


@njit_helper
def tree_leaves(n_keys):
    """Smallest power of two >= max(n_keys, 1)."""
    n_leaves = 1
    while n_leaves < n_keys:
        n_leaves *= 2
    return n_leaves


@njit_helper
def tree_build(keys, tree, n_leaves):
    """Fill ``tree`` (length ``2 * n_leaves``) for ``keys`` (length ``n_leaves``)."""
    for k in range(n_leaves):
        tree[n_leaves + k] = k
    for node in range(n_leaves - 1, 0, -1):
        a = tree[2 * node]
        b = tree[2 * node + 1]
        tree[node] = b if keys[b] < keys[a] else a


@njit_inline
def tree_update(keys, tree, n_leaves, k):
    """Restore the tree after ``keys[k]`` changed."""
    node = (n_leaves + k) >> 1
    while node >= 1:
        a = tree[2 * node]
        b = tree[2 * node + 1]
        tree[node] = b if keys[b] < keys[a] else a
        node >>= 1


@njit_inline
def heap_replace_top(keys, lo, size, value):
    """Replace the minimum of the heap ``keys[lo:lo+size]`` by ``value`` and sift down."""
    pos = 0
    while True:
        child = 2 * pos + 1
        if child >= size:
            break
        if child + 1 < size:
            child += keys[lo + child + 1] < keys[lo + child]  # branch-free choice of the smaller child
        if keys[lo + child] < value:
            keys[lo + pos] = keys[lo + child]
            pos = child
        else:
            break
    keys[lo + pos] = value


@njit_inline
def heap_push(keys, vals, size, key, val):
    """Push ``(key, val)`` onto the heap ``keys[:size]``; returns the new size."""
    pos = size
    while pos > 0:
        parent = (pos - 1) >> 1
        if keys[parent] <= key:
            break
        keys[pos] = keys[parent]
        vals[pos] = vals[parent]
        pos = parent
    keys[pos] = key
    vals[pos] = val
    return size + 1


@njit_inline
def heap_pop(keys, vals, size):
    """Remove the minimum of the heap ``keys[:size]``; returns the new size.

    Read ``keys[0], vals[0]`` before calling."""
    size -= 1
    if size == 0:
        return 0
    key = keys[size]
    val = vals[size]
    pos = 0
    while True:
        child = 2 * pos + 1
        if child >= size:
            break
        if child + 1 < size:
            child += keys[child + 1] < keys[child]  # branch-free choice of the smaller child
        if keys[child] < key:
            keys[pos] = keys[child]
            vals[pos] = vals[child]
            pos = child
        else:
            break
    keys[pos] = key
    vals[pos] = val
    return size
