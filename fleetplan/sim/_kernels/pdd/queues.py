"""Queues of the PDD kernel: FIFO lists threaded through the requests, and the transfer heap.

A FIFO list lives in two columns of an instance's row (head and tail: ``PI_WHEAD`` /
``PI_WTAIL`` for a prefill instance's waiting queue, ``DI_WHEAD`` / ``DI_WTAIL`` for a decode
instance's waiting queue of preempted requests, ``DI_RHEAD`` / ``DI_RTAIL`` for its reservation
queue; -1 when empty) and links its requests through ``RI_NXT``.  Transfers (handoffs, or the
last flow's start with a fabric) wait in a binary heap ordered by ``(time, request)``.
"""

from __future__ import annotations

from fleetplan.sim._kernels.jit import njit_inline
from fleetplan.sim._kernels.pdd.codes import RI_NXT


@njit_inline
def fifo_push(rows, k, head, tail, R_i, r):
    """Append request ``r`` to the list in columns ``head`` / ``tail`` of ``rows[k]``."""
    if rows[k, tail] < 0:
        rows[k, head] = r
    else:
        R_i[rows[k, tail], RI_NXT] = r
    rows[k, tail] = r


@njit_inline
def fifo_pop(rows, k, head, tail, R_i):
    """Remove and return the first request of the (non-empty) list in ``rows[k]``."""
    r = rows[k, head]
    rows[k, head] = R_i[r, RI_NXT]
    if R_i[r, RI_NXT] < 0:
        rows[k, tail] = -1
    R_i[r, RI_NXT] = -1
    return r


@njit_inline
def heap_push_tr(keys, ids, size, key, r):
    """Push ``(key, r)`` onto the transfer heap ordered by ``(key, r)``; returns the new size."""
    pos = size
    while pos > 0:
        parent = (pos - 1) >> 1
        if keys[parent] < key or (keys[parent] == key and ids[parent] < r):
            break
        keys[pos] = keys[parent]
        ids[pos] = ids[parent]
        pos = parent
    keys[pos] = key
    ids[pos] = r
    return size + 1


@njit_inline
def heap_pop_tr(keys, ids, size):
    """Remove the minimum ``(key, r)``; returns the new size (read ``keys[0], ids[0]`` first)."""
    size -= 1
    key = keys[size]
    r = ids[size]
    pos = 0
    while True:
        child = 2 * pos + 1
        if child >= size:
            break
        c2 = child + 1
        if c2 < size and (keys[c2] < keys[child] or (keys[c2] == keys[child] and ids[c2] < ids[child])):
            child = c2
        if keys[child] < key or (keys[child] == key and ids[child] < r):
            keys[pos] = keys[child]
            ids[pos] = ids[child]
            pos = child
        else:
            break
    keys[pos] = key
    ids[pos] = r
    return size
