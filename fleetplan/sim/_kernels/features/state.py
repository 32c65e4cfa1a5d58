"""State of the feature kernel (``level.run_iteration_features``): layout, request rows, priority heaps.

Layout
------

Struct of arrays, grouped in the named tuples of ``fleetplan.sim._kernels.groups`` (fields and units
listed there), built once by ``level.run_iteration_features`` and passed whole; helpers read
fields by name (``req.rq``, ``outs.first_token_s``):

* ``req`` (``FeatureRequests``): a request in the system (released, not completed) owns a row
  ``x`` of ``req.rq``, four cache lines of int64 (columns below; ``rq[x, REQ]`` is its index into
  the per-request arrays).  Rows are taken at release and given back at completion (below), so
  only as many rows as requests are ever in the system at once are touched, and those stay hot.
  Running lists, waiting heaps and ranks hold rows; outputs and inputs are indexed by
  ``rq[x, REQ]``.  ``req.sess_id[r]`` is the H2Q-BR session (a request without a session is its own).
* ``ses`` (``Sessions``): H2Q-BR session state (sticky long flag z, cumulative executed prefill
  tokens H, carryover credit c) and ``ses.glob`` (``G_*`` below: enqueue counter, front counter,
  spec seed, rows ever taken, rows on the free list, 1 if H2Q-BR may form runs (its sessions are
  local, ``h2q.sessions_local``)).
* ``ins`` (``FeatureInstances``): instance k's running requests are ``run_req[run_lo[k] :
  run_lo[k] + ki[k, K_RUN]]`` in admission order (rank order for MLFQ and H2Q-BR after each
  pass); ``ki``/``kf`` int / float columns below; ``step_end_s[k]`` the end of the steps in flight
  (inf when idle), the key of the event tournament tree; ``run_acc[s, j]`` the drafts the request
  in slot s accepts in step j of a speculative run (drawn ahead, ``schedule.spec_run``);
  ``acc_count`` a scratch row.
* ``pools`` (``Pools``, as the featureless kernel's); ``fts`` (``Features``: the
  ``CompiledFeatures`` arrays).
* ``outs`` (``FeatureOutputs``), ``stats`` (``FeatureStatistics``), ``load`` (``Load``: routing
  counters), ``rel`` (``Releases``: release heap, successors), ``route`` (``FeatureRouting``) and
  the prefix cache ``pc`` (``PrefixCache``, ``prefix_cache.py``).

Waiting requests of instance k are in pairing heaps rooted at ``ki[k, K_ROOT0]`` (the only
queue, or H2Q-BR's QS) and ``ki[k, K_ROOT1]`` (H2Q-BR's QL), ordered by ``(rq[x, WK0],
rq[x, WK1])``, a key unique per request so the order is total (policy keys in
``policy.py``).

Request rows: taken at release, given back at completion
--------------------------------------------------------

A request in the system owns one row of ``rq`` (layout above).  Rows come
from a free list (``row_free[:glob[G_NFREE]]``, last freed first) or, when it is empty, the
next never-used row (``glob[G_ROWS]``), so the rows in use stay few and packed whatever the
number of requests: ``rq`` is allocated uninitialised for every request, and a row's memory is
first touched when it is first taken.  A row is reset when taken: every column a request reads
before writing it starts as it would in a table of fresh rows (0, links and prefix-cache
entries -1, the output tokens, the draw key of request r).  Per-request counters kept in the row
(drafts proposed and accepted) are copied to the outputs when the row is given back, and for
the requests still in the system at the end by ``rows_flush``.

Priority structures: per-instance pairing heaps of waiting requests, the release heap of session rounds
------------------------------------------------------------------------------------------------------

Pairing heap (Fredman, Sedgewick, Sleator & Tarjan 1986) over request rows (above)
with the links in ``rq[x, HCHILD]`` / ``rq[x, HSIB]`` (O(N) memory for any number of instances
and queues): push is one link, pop a two-pass pairing of the root's children.  The key of row x
is ``(rq[x, WK0], rq[x, WK1])``, unique per request, so every correct priority queue pops the
same sequence (the twin uses ``heapq``).

Release heap: a binary heap of ``(time_s, request)`` ordered by time, then request index.
"""

from __future__ import annotations

import math

from fleetplan.sim._kernels.features.rng import request_key
from fleetplan.sim._kernels.jit import njit_borrowed, njit_inline

# rq columns (per row): the eight read by every step first (one 64-byte line when the row is
# aligned), then the cache / queue state, then what MLFQ and speculative decoding read every
# step (MLFQ level, attained service in the level (integer ns) and rank; the draw counter and
# key (rng.request_key), the drafts proposed and accepted so far, copied to the outputs
# when the request leaves or the run ends) with the request index, then H2Q-BR's class and rank
GEN, COMP, TARGET, HELD, SCHED, MATCH, KSPEC, OUT = 0, 1, 2, 3, 4, 5, 6, 7
E0, E1, DEC, WK0, WK1, HCHILD, HSIB, ASEQ = 8, 9, 10, 11, 12, 13, 14, 15
LEVEL, ATT, DRAWS, RK0, DKEY, REQ, DRAFTED, ACCEPTED = 16, 17, 18, 19, 20, 21, 22, 23
QCLS, RK1, RK2, RK3 = 24, 25, 26, 27
N_RQ = 32  # four cache lines

# ki columns (per instance): running count, heap roots, free KV blocks, H2Q-BR short streak;
# the steps in flight: seqs, tokens per step, number of identical steps m, decode context of
# the first, graph capture size (0 = eager) and useful graph tokens; MLFQ: the running list's
# first K_SORTED slots are in rank order (admissions and demotions since the last sort may break
# it after them; ALL_SORTED >= K_RUN: all are); drafts per request of a speculative run in flight
# (0: the run's step durations follow from K_CTX); H2Q-BR: arrival order (ASEQ) and row of the oldest
# running request whose session holds a carryover credit, ASEQ of the oldest running QS request (h2q.py)
K_RUN, K_ROOT0, K_ROOT1, K_FREE, K_ETA = 0, 1, 2, 3, 4
K_SEQS, K_TOK, K_M, K_CTX, K_GSIZE, K_GT = 5, 6, 7, 8, 9, 10
K_SORTED, K_RSPEC, K_HMIN, K_HROW, K_QMIN = 11, 12, 13, 14, 15
N_KI = 16
UNKNOWN, NONE = -1, 1 << 62  # K_HMIN / K_QMIN: not known; no such request
ALL_SORTED = 1 << 62

# kf columns: start of the steps in flight, duration of the first; for a speculative run
# (K_RSPEC > 0) the duration of step j >= 1 is kf[k, F_D0 + j] (its context grows by the
# accepted drafts, so it is computed from the acceptance draws when the run is formed)
F_START, F_DT, F_D0 = 0, 1, 1
SPEC_RUN_MAX = 64  # longest speculative run (steps); ending a run early is exact
# Prefix-cache key of a request's own blocks (segment 1 of a request without a session key): above
# every system-prompt and session key (``sessions.py``, ``shared_prefix.py`` number those from 0).
OWN_KEY_BASE = 1 << 40
N_KF = F_D0 + SPEC_RUN_MAX

# glob entries
G_ENQ, G_FRONT, G_SEED, G_ROWS, G_NFREE, G_H2Q_RUNS = 0, 1, 2, 3, 4, 5
N_GLOB = 6

QS, QL = 0, 1  # H2Q-BR queue classes (rq[r, QCLS])


@njit_inline
def row_open(r, rq, row_free, glob, output_tokens):
    """A fresh row for request r (released now); returns its index."""
    n_free = glob[G_NFREE]
    if n_free > 0:
        x = row_free[n_free - 1]
        glob[G_NFREE] = n_free - 1
    else:
        x = glob[G_ROWS]
        glob[G_ROWS] = x + 1
    for c in range(N_RQ):
        rq[x, c] = 0
    rq[x, OUT] = output_tokens[r]
    rq[x, E0] = -1
    rq[x, E1] = -1
    rq[x, HCHILD] = -1
    rq[x, HSIB] = -1
    rq[x, REQ] = r
    rq[x, DKEY] = request_key(glob[G_SEED], r)
    return x


@njit_inline
def row_close(x, rq, row_free, glob, out_drafted, out_accepted):
    """Row x's request completed: its draft counts go out, the row back to the free list."""
    if rq[x, DRAFTED] > 0:  # (the outputs start at 0)
        out_drafted[rq[x, REQ]] = rq[x, DRAFTED]
        out_accepted[rq[x, REQ]] = rq[x, ACCEPTED]
    rq[x, REQ] = -1
    row_free[glob[G_NFREE]] = x
    glob[G_NFREE] += 1


@njit_borrowed
def rows_flush(rq, glob, out_drafted, out_accepted):
    """At the end of the run: the draft counts of the requests still in the system go out."""
    for x in range(glob[G_ROWS]):
        r = rq[x, REQ]
        if r >= 0:
            out_drafted[r] = rq[x, DRAFTED]
            out_accepted[r] = rq[x, ACCEPTED]


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


@njit_inline
def own_segment(i, prefix_key, prefix_tokens, block, cap_blocks):
    """``(key0, nb0, key1, nb1, cap)`` of request i for ``pc_probe`` / ``pc_match`` / ``pc_insert``.

    Segment 1 holds the request's own blocks: its session's key, else its private key
    ``OWN_KEY_BASE + i``, and it reaches the lookup cap (``nb1 = max(nb1, cap)``).  A request
    preempted with prefix caching on offers its computed full blocks under that key
    (``schedule.preempt_at``), so when it is admitted again they are a cache hit unless evicted
    meanwhile: vLLM v1 frees a preempted request's blocks into the free-block queue with their
    hashes kept, tail first, and ``get_computed_blocks`` finds them at re-admission
    (vllm-project/vllm@b4622cf924bc72504aed99e486062d6633fde39e:vllm/v1/core/sched/scheduler.py
    ``_preempt_request``; @c59cb7941357443da7c5eef75cfa8697d683d228:vllm/v1/core/block_pool.py
    ``free_blocks``).  Without a preemption the entry under a session key never reaches past the
    session's context, so the raised ``nb1`` matches what it matched before."""
    key1 = prefix_key[i, 1]
    if key1 < 0:
        key1 = OWN_KEY_BASE + i
    nb1 = prefix_tokens[i, 1] // block
    if nb1 < cap_blocks:
        nb1 = cap_blocks
    return prefix_key[i, 0], prefix_tokens[i, 0] // block, key1, nb1, cap_blocks
