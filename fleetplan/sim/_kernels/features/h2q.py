"""H2Q-BR (Frontier appendix B.3) in the feature kernel: pass ranks kept up to date incrementally,
the released carryover and the liveness slice, and the replay of the passes of a run.

Ranks (eq. 4, ``h2q_rank``): ``(0, l, d, a)`` in QS, ``(1, d, a, 0)`` in QL, ``(-2, d, a, 0)`` for
the released carryover and ``(-1, d, a, 0)`` for the liveness slice (``d`` = 0 decoding, 1
prefill).  The twin ranks every running request and sorts them before each pass; a rank from
state changes only when a request gets a prefill chunk (it finishes its prompt: ``d`` = 0; or
spills: QL), so the kernel keeps the running list sorted by ranks from state between passes:
requests that got a prefill chunk (the admitted ones included) are re-ranked and re-inserted at
their commit (``rank_of``, ``insert_ranked``); a pass's released carryover and liveness slice go
to the front with their special ranks (``specials_to_front``) and back to their places before the
next pass (``restore_front``).  What a pass looks for:

* released carryover (``h2q_release``): the oldest running request whose session holds the
  carryover credit, if it arrived no later than every QS request, running or waiting.  The
  oldest running credit holder and QS request are cached per instance and updated as requests
  are admitted (``h2q_joined``); they are looked for again (a pass over the running requests)
  only after the cached one left or lost its credit or class (``h2q_left``, spilled chunks,
  spent credits, preemptions), or in every pass when sessions are shared by instances (not
  ``sessions_local``: their credits change elsewhere);
* liveness slice, once the short streak reaches B (``live_slot``): the QL waiting top if it is
  older than every running QL request (then it is ranked -1 as a candidate), else the oldest
  running QL request (QL requests are the tail of the sorted list).

A run (``timing``) is formed by a decode-only pass that scheduled every running request
and after which nothing can be admitted, so its later passes schedule the same requests with
the same tokens; only their order and the H2Q-BR state change from pass to pass, and nothing
outside the instance reads them until the run's last step is committed (runs only with
``sessions_local``).  ``h2q_replay`` gives them their values:

* short streak: every pass of the run scheduled a QL request (then 0) or none (+1 per pass);
* carryover credits: pass j releases (and spends the credit of) the oldest credit holder that
  arrived no later than every QS request: the credit holders in arrival order, one per pass,
  while they qualify (the QS set is fixed during the run: requests that join it later arrived
  later than every running request);
* the last pass's order: its released carryover, then its liveness slice (a running QL request
  resets the streak in every pass, so there is none after the first pass unless B <= 0), then
  the rest by rank.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.features.policy import insert_ranked, set_rank
from fleetplan.sim._kernels.features.state import (
    ASEQ,
    COMP,
    G_H2Q_RUNS,
    GEN,
    K_ETA,
    K_HMIN,
    K_HROW,
    K_QMIN,
    K_ROOT0,
    K_ROOT1,
    K_RUN,
    NONE,
    QCLS,
    QL,
    QS,
    REQ,
    RK0,
    TARGET,
    UNKNOWN,
    ph_min_aseq,
)
from fleetplan.sim._kernels.jit import njit_borrowed, njit_helper, njit_inline


@njit_helper
def sessions_local(prev_req, session, n_sessions):
    """True when the rows of every session descend from one first round (``prev_req`` chains), so
    that one instance serves all of them (a round goes to the instance that served its
    predecessor) and no other instance reads or writes the session's state."""
    n = prev_req.shape[0]
    root = np.empty(n, dtype=np.int64)
    sess_root = np.full(max(n_sessions, 0), -1, dtype=np.int64)
    for i in range(n):
        root[i] = i if prev_req[i] < 0 else root[prev_req[i]]
        s = session[i]
        if s >= n_sessions:  # aliases a standalone request's session id
            return False
        if s >= 0:
            if sess_root[s] < 0:
                sess_root[s] = root[i]
            elif sess_root[s] != root[i]:
                return False
    return True


@njit_helper
def h2q_setup(any_h2q, prev_req, session, n_sessions, glob, ki):
    """Allow H2Q-BR runs when sessions are local (``glob[G_H2Q_RUNS]``); nothing cached yet."""
    glob[G_H2Q_RUNS] = 1 if any_h2q and sessions_local(prev_req, session, n_sessions) else 0
    for k in range(ki.shape[0]):
        ki[k, K_HMIN] = UNKNOWN
        ki[k, K_QMIN] = UNKNOWN


@njit_inline
def h2q_rank(rq, r, ell, d, special):
    """H2Q-BR rank of r (``special`` = -2 release, -1 liveness, 0 none)."""
    if special != 0:
        set_rank(rq, r, special, d, rq[r, ASEQ], 0)
    elif rq[r, QCLS] == QS:
        set_rank(rq, r, 0, ell, d, rq[r, ASEQ])
    else:
        set_rank(rq, r, 1, d, rq[r, ASEQ], 0)


@njit_inline
def rank_of(rq, r, new_tokens, special, d):
    """Set r's rank from its state (``d`` = 0 decoding, 1 prefill; -1: from COMP, GEN, TARGET)."""
    if d < 0:
        d = 0 if (rq[r, GEN] > 0 and rq[r, COMP] == rq[r, TARGET] - 1) else 1
    h2q_rank(rq, r, new_tokens[rq[r, REQ]], d, special)


@njit_inline
def restore_front(rq, new_tokens, run_req, lo, n, d):
    """The last pass's released carryover and liveness slice (ranked below 0, so at the front) back
    to their ranks from state (``d`` as in ``rank_of``) and places: the list is then sorted by those
    alone."""
    while n > 0 and rq[run_req[lo], RK0] < 0:
        r = run_req[lo]
        for s in range(lo, lo + n - 1):
            run_req[s] = run_req[s + 1]
        rank_of(rq, r, new_tokens, 0, d)
        insert_ranked(rq, run_req, lo, lo + n - 1, r)


@njit_inline
def to_front(rq, new_tokens, run_req, lo, slot, special, d):
    """Give the request at ``slot`` its special rank and move it to the front (slots before shift up)."""
    r = run_req[slot]
    rank_of(rq, r, new_tokens, special, d)
    for s in range(slot, lo, -1):
        run_req[s] = run_req[s - 1]
    run_req[lo] = r
    return r


@njit_inline
def h2q_joined(ki, k, rq, x, holder):
    """Row x was admitted on instance k (``holder``: its session holds a credit): the cached oldest
    running QS request and credit holder (``K_QMIN``, ``K_HMIN``; UNKNOWN stays unknown)."""
    a = rq[x, ASEQ]
    if rq[x, QCLS] == QS and a < ki[k, K_QMIN]:
        ki[k, K_QMIN] = a
    if holder and a < ki[k, K_HMIN]:
        ki[k, K_HMIN] = a
        ki[k, K_HROW] = x


@njit_inline
def h2q_left(ki, k, rq, x):
    """Row x leaves instance k's running requests (or QS): a cached oldest that was x is unknown."""
    if rq[x, ASEQ] == ki[k, K_QMIN]:
        ki[k, K_QMIN] = UNKNOWN
    if rq[x, ASEQ] == ki[k, K_HMIN]:
        ki[k, K_HMIN] = UNKNOWN


@njit_inline
def h2q_chunk(k, r, num, spilled, rq, ki, sess_id, sess_z, sess_h, sess_c):
    """Commit of a prefill chunk of ``num`` tokens of row r on instance k: the session's H grows; a
    chunk that left the prompt unfinished (``spilled``) marks the session long (z), grants the
    carryover credit (c) and moves r to QL."""
    sid = sess_id[rq[r, REQ]]
    sess_h[sid] += num
    if spilled:
        if sess_c[sid] == 0:
            ki[k, K_HMIN] = UNKNOWN  # new credit holders
        h2q_left(ki, k, rq, r)  # (leaves QS)
        sess_z[sid] = 1
        sess_c[sid] = 1
        rq[r, QCLS] = QL


@njit_inline
def h2q_reinsert(rq, new_tokens, run_req, lo, end, moved, n_moved):
    """The rows ``moved[:n_moved]`` (taken out of the running list at their commit: a prefill chunk
    may have changed their rank) re-ranked from state and inserted into ``run_req[lo:end]``;
    returns the new end."""
    for i in range(n_moved):
        rank_of(rq, moved[i], new_tokens, 0, -1)
        insert_ranked(rq, run_req, lo, end, moved[i])
        end += 1
    return end


@njit_borrowed
def h2q_release(k, scan, rq, sess_id, sess_c, lo, n, run_req, ki, stack):
    """Slot of the carryover a pass over instance k's running requests ``run_req[lo:lo + n]``
    releases, or -1.  The oldest running credit holder and QS request are cached (``K_HMIN``,
    ``K_HROW``, ``K_QMIN``) and looked up again only when unknown or when ``scan`` (sessions shared
    by instances: their credits change elsewhere)."""
    if scan or ki[k, K_HMIN] < 0 or ki[k, K_QMIN] < 0:
        h = -1
        qmin = NONE
        for s in range(lo, lo + n):
            r = run_req[s]
            a = rq[r, ASEQ]
            if rq[r, QCLS] == QS and a < qmin:
                qmin = a
            if sess_c[sess_id[rq[r, REQ]]] != 0 and (h < 0 or a < rq[h, ASEQ]):
                h = r
        ki[k, K_HMIN] = NONE if h < 0 else rq[h, ASEQ]
        ki[k, K_HROW] = h
        ki[k, K_QMIN] = qmin
    a = ki[k, K_HMIN]
    if a == NONE or a > ki[k, K_QMIN] or ph_min_aseq(rq, ki[k, K_ROOT0], stack) < a:
        return -1  # no credit holder, or a QS request (running or waiting) arrived earlier
    h = ki[k, K_HROW]
    for s in range(lo, lo + n):
        if run_req[s] == h:
            return s
    return -1


@njit_inline
def live_slot(rq, ki, k, run_req, lo, n):
    """``(slot of the liveness slice among the running or -1, True if it is the QL waiting top)``
    once the short streak reached B; QL requests are the tail of the list (ranks from state)."""
    old = -1
    s = lo + n - 1
    while s >= lo and rq[run_req[s], RK0] == 1:
        if old < 0 or rq[run_req[s], ASEQ] < rq[run_req[old], ASEQ]:
            old = s
        s -= 1
    top = ki[k, K_ROOT1]
    if top >= 0 and (old < 0 or rq[top, ASEQ] < rq[run_req[old], ASEQ]):
        return -1, True
    return old, False


@njit_inline
def specials_to_front(rq, new_tokens, run_req, lo, rel, live, d):
    """Released carryover (slot ``rel``) first, liveness slice (``live``) next; returns rel's row or -1."""
    if live >= 0 and live != rel:
        to_front(rq, new_tokens, run_req, lo, live, -1, d)
        if rel >= 0 and rel < live:
            rel += 1
    if rel >= 0:
        return to_front(rq, new_tokens, run_req, lo, rel, -2, d)
    return -1


@njit_borrowed
def h2q_prepare(k, streak_b, scan, rq, new_tokens, sess_id, sess_c, lo, run_req, ki, stack):
    """Instance k's running requests in rank order for a pass (see the module doc); ``scan``: look
    for the oldest credit holder in every pass (sessions shared by instances).  Returns ``(released
    carryover or -1, True if the QL waiting top is the liveness slice)``."""
    n = ki[k, K_RUN]
    restore_front(rq, new_tokens, run_req, lo, n, -1)
    rel = h2q_release(k, scan, rq, sess_id, sess_c, lo, n, run_req, ki, stack)
    live = -1
    live_wait = False
    if ki[k, K_ETA] >= streak_b:
        live, live_wait = live_slot(rq, ki, k, run_req, lo, n)
    return specials_to_front(rq, new_tokens, run_req, lo, rel, live, -1), live_wait


@njit_borrowed
def h2q_replay(k, m, streak_b, rq, new_tokens, sess_id, sess_c, lo, run_req, ki, stack):
    """Passes 2..m of the H2Q-BR run in flight on instance k (see the module doc): the short streak,
    the carryover credits they spend, and the running requests in the last pass's order."""
    n = ki[k, K_RUN]
    eta = ki[k, K_ETA]  # after the first pass: 0 iff it scheduled a QL request (it scheduled all)
    eta_last = 0 if eta == 0 else eta + m - 2  # at the start of pass m
    ki[k, K_ETA] = 0 if eta == 0 else eta + m - 1
    # every running request decodes in the run (d = 0 given: a speculative run's tokens are already
    # committed by spec_replay, up to the last one)
    restore_front(rq, new_tokens, run_req, lo, n, 0)
    rel = -1
    for _ in range(m - 1):  # a pass without a release is followed by none
        rel = h2q_release(k, False, rq, sess_id, sess_c, lo, n, run_req, ki, stack)
        if rel < 0:
            break
        sess_c[sess_id[rq[run_req[rel], REQ]]] = 0
        ki[k, K_HMIN] = UNKNOWN
    live = -1
    if eta_last >= streak_b:
        live, _ = live_slot(rq, ki, k, run_req, lo, n)
    specials_to_front(rq, new_tokens, run_req, lo, rel, live, 0)
