"""State layout of the feature kernel (``features_level.run_iteration_features``).

Struct of arrays, grouped in tuples that the inlined helpers unpack (numba passes them as
typed tuples):

* ``req = (prompt_tokens, output_tokens, rq, row_free, new_tokens, prefix_key, prefix_tokens,
  sess_id)``: a request in the system (released, not completed) owns a row ``x`` of ``rq``, four
  cache lines of int64 (columns below; ``rq[x, REQ]`` is its index into the per-request arrays).
  Rows are taken at release and given back at completion (``features_rows``), so only as many
  rows as requests are ever in the system at once are touched, and those stay hot.  Running
  lists, waiting heaps and ranks hold rows; outputs and inputs are indexed by ``rq[x, REQ]``.
  ``sess_id[r]`` is the H2Q-BR session (a request without a session is its own).
* ``ses = (sess_z, sess_h, sess_c, glob)``: H2Q-BR session state (sticky long flag z,
  cumulative executed prefill tokens H, carryover credit c); ``glob = (enqueue counter,
  front counter, spec seed, rows ever taken, rows on the free list, 1 if H2Q-BR may form runs
  (its sessions are local, ``features_h2q.sessions_local``))``.
* ``ins = (run_lo, run_req, ki, kf, step_end_s, run_acc, acc_count)``: instance k's running
  requests are ``run_req[run_lo[k] : run_lo[k] + ki[k, K_RUN]]`` in admission order (rank
  order for MLFQ and H2Q-BR after each pass); ``ki``/``kf`` int / float columns below;
  ``step_end_s[k]`` the end of the steps in flight (inf when idle), the key of the event
  tournament tree; ``run_acc[s, j]`` the drafts the request in slot s accepts in step j of a
  speculative run (drawn ahead, ``features_runs.spec_run``); ``acc_count`` a scratch row.
* ``pools``: the featureless kernel's pool tuple; ``fts``: the ``CompiledFeatures`` arrays.
* ``outs``, ``stats``, ``load`` (routing counters), ``rel`` (release heap, successors) and the
  prefix cache ``pc`` (``prefix_cache.py``).

Waiting requests of instance k are in pairing heaps rooted at ``ki[k, K_ROOT0]`` (the only
queue, or H2Q-BR's QS) and ``ki[k, K_ROOT1]`` (H2Q-BR's QL), ordered by ``(rq[x, WK0],
rq[x, WK1])``, a key unique per request so the order is total (policy keys in
``features_policy.py``).
"""

from __future__ import annotations

# rq columns (per row): the eight read by every step first (one 64-byte line when the row is
# aligned), then the cache / queue state, then what MLFQ and speculative decoding read every
# step (MLFQ level, attained service in the level (integer ns) and rank; the draw counter and
# key (features_rng.request_key), the drafts proposed and accepted so far, copied to the outputs
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
# running request whose session holds a carryover credit, ASEQ of the oldest running QS request (features_h2q)
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
N_KF = F_D0 + SPEC_RUN_MAX

# glob entries
G_ENQ, G_FRONT, G_SEED, G_ROWS, G_NFREE, G_H2Q_RUNS = 0, 1, 2, 3, 4, 5
N_GLOB = 6

QS, QL = 0, 1  # H2Q-BR queue classes (rq[r, QCLS])
