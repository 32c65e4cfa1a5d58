"""State layout of the feature kernel (``features_level.run_iteration_features``).

Struct of arrays, grouped in tuples that the inlined helpers unpack (numba passes them as
typed tuples):

* ``req = (prompt_tokens, output_tokens, rq, attained_ns, new_tokens, prefix_key, prefix_tokens,
  sess_id)``: ``rq[r, :]`` is one row of int64 per request (columns below; a row is three cache
  lines, the rows of the running requests stay hot); ``attained_ns[r]`` the MLFQ service (integer ns) in the
  current level; ``sess_id[r]`` the H2Q-BR session (a request without a session is its own).
* ``ses = (sess_z, sess_h, sess_c, glob)``: H2Q-BR session state (sticky long flag z,
  cumulative executed prefill tokens H, carryover credit c); ``glob = (enqueue counter,
  front counter, spec seed, -)``.
* ``ins = (run_lo, run_req, ki, kf, step_end_s)``: instance k's running requests are
  ``run_req[run_lo[k] : run_lo[k] + ki[k, K_RUN]]`` in admission order (rank order for MLFQ
  and H2Q-BR after each pass); ``ki``/``kf`` int / float columns below; ``step_end_s[k]``
  the end of the steps in flight (inf when idle), the key of the event tournament tree.
* ``pools``: the featureless kernel's pool tuple; ``fts``: the ``CompiledFeatures`` arrays.
* ``outs``, ``stats``, ``load`` (routing counters), ``rel`` (release heap, successors) and the
  prefix cache ``pc`` (``prefix_cache.py``).

Waiting requests of instance k are in pairing heaps rooted at ``ki[k, K_ROOT0]`` (the only
queue, or H2Q-BR's QS) and ``ki[k, K_ROOT1]`` (H2Q-BR's QL), ordered by ``(rq[r, WK0],
rq[r, WK1])``, a key unique per request so the order is total (policy keys in
``features_policy.py``).
"""

from __future__ import annotations

# rq columns (per request): the eight read by every step first (one 64-byte line when the
# row is aligned), then the policy / cache / speculative state
GEN, COMP, TARGET, HELD, SCHED, MATCH, KSPEC, OUT = 0, 1, 2, 3, 4, 5, 6, 7
E0, E1, DEC, WK0, WK1, HCHILD, HSIB, ASEQ, LEVEL, QCLS, DRAWS = 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18
RK0, RK1, RK2, RK3 = 19, 20, 21, 22
DKEY = 23  # the request's draw key (features_rng.request_key), set when any pool speculates
N_RQ = 24  # three cache lines

# ki columns (per instance): running count, heap roots, free KV blocks, H2Q-BR short streak;
# the steps in flight: seqs, tokens per step, number of identical steps m, decode context of
# the first, graph capture size (0 = eager) and useful graph tokens; MLFQ: 1 when the running
# list may be out of rank order (an admission or a demotion since the last sort); drafts per
# request of a speculative run in flight (0: the run's step durations follow from K_CTX)
K_RUN, K_ROOT0, K_ROOT1, K_FREE, K_ETA = 0, 1, 2, 3, 4
K_SEQS, K_TOK, K_M, K_CTX, K_GSIZE, K_GT = 5, 6, 7, 8, 9, 10
K_UNSORTED, K_RSPEC = 11, 12
N_KI = 13

# kf columns: start of the steps in flight, duration of the first; for a speculative run
# (K_RSPEC > 0) the duration of step j >= 1 is kf[k, F_D0 + j] (its context grows by the
# accepted drafts, so it is computed from the acceptance draws when the run is formed)
F_START, F_DT, F_D0 = 0, 1, 1
SPEC_RUN_MAX = 64  # longest speculative run (steps); ending a run early is exact
N_KF = F_D0 + SPEC_RUN_MAX

# glob entries
G_ENQ, G_FRONT, G_SEED = 0, 1, 2
N_GLOB = 4

QS, QL = 0, 1  # H2Q-BR queue classes (rq[r, QCLS])
