"""H2Q-BR runs of decode steps (``_kernels/features/h2q.py``): the kernel replays the passes of a run
(short streak, carryover credits, the last pass's order) bit for bit as the twin's single steps.

The cases put every pool on H2Q-BR with small thresholds (QL rounds, spilled chunks and their
carryover credits are common), short streaks B in 0..3 (liveness slices; B = 0 is below the
spec's range but valid for the kernel), long outputs and few arrivals (long runs of pure decode
steps), with and without speculative decoding and prefix caching."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.sim._kernels.features import state as lay
from fleetplan.sim._kernels.features.h2q import h2q_prepare, h2q_replay, rank_of, sessions_local
from fleetplan.sim._kernels.features.state import ph_push
from fleetplan.sim.features.arrays import RequestExtras
from tests.reference.features_parts import Engine, Req, prepare_pass
from tests.sim.test_features_cases import assert_twin, make_feature_case


def h2q_case(seed: int, spec: bool, prefix: bool, sessions: bool = True, streak: int | None = None):
    case, feats, extras = make_feature_case(seed, "all", sessions)
    rng = np.random.default_rng(40_000 + seed)
    n = case["arrival_s"].size
    case["output_tokens"] = rng.integers(1, 400, n).astype(np.int64)
    case["arrival_s"] = case["arrival_s"] * rng.choice([1.0, 5.0, 20.0])  # fewer arrivals per step
    case["pool_max_context"] = np.maximum(case["pool_max_context"], 2048)
    case["pool_kv_blocks"] = case["pool_kv_blocks"] * rng.choice([1, 8], case["pool_kv_blocks"].size)
    p = case["pool_router"].size
    feats["policy"][:] = 4
    for q in range(p):
        b = rng.integers(0, 4) if streak is None else streak
        feats["policy_param"][q] = (rng.choice([16, 64, 150]), rng.choice([50, 100, 400]), b, 0)
    if not spec:
        feats["spec_k"][:] = 0
    else:
        feats["spec_k"][:] = rng.integers(1, 4, p)
    if not prefix:
        feats["prefix_on"][:] = 0
    return case, feats, extras


@pytest.mark.parametrize("prefix", [False, True])
@pytest.mark.parametrize("spec", [False, True])
@pytest.mark.parametrize("seed", range(30))
def test_h2q_runs_match_twin(seed: int, spec: bool, prefix: bool) -> None:
    assert_twin(*h2q_case(seed, spec, prefix))


@pytest.mark.parametrize("streak", [0, 1])
@pytest.mark.parametrize("seed", range(20))
def test_h2q_runs_after_a_liveness_pass_match_twin(seed: int, streak: int) -> None:
    """B = 0: a liveness slice in every pass (so in the first pass of most runs, whose later passes
    have their own order); B = 1: every other short pass.  Speculative, so a run's last order is
    replayed after its tokens are."""
    assert_twin(*h2q_case(seed, True, seed % 2 == 1, streak=streak))


@pytest.mark.parametrize("seed", range(10))
def test_h2q_with_shared_sessions_matches_twin(seed: int) -> None:
    """Session ids shared by independent first rounds (on different instances): no runs, still exact."""
    case, feats, extras = h2q_case(seed, seed % 2 == 0, seed % 3 == 0, sessions=False)
    n = case["arrival_s"].size
    rng = np.random.default_rng(50_000 + seed)
    n_sessions = max(1, n // 4)
    shared = RequestExtras(prev_req=extras.prev_req, delay_s=extras.delay_s,
                           session=rng.integers(-1, n_sessions, n).astype(np.int64), n_sessions=n_sessions,
                           new_tokens=extras.new_tokens, prefix_key=extras.prefix_key,
                           prefix_tokens=extras.prefix_tokens)
    assert not sessions_local(shared.prev_req, shared.session, n_sessions) or n < 3
    assert_twin(case, feats, shared)


def test_sessions_local() -> None:
    prev = np.array([-1, 0, -1, 1, 2, -1])
    assert sessions_local(prev, np.array([0, 0, 1, 0, 1, -1]), 2)
    assert not sessions_local(prev, np.array([0, 0, 0, 0, 1, -1]), 2)  # rows 0 and 2 start one session twice
    assert not sessions_local(prev, np.array([0, 0, 1, 0, 1, 5]), 2)  # an id beyond n_sessions
    assert sessions_local(np.array([-1, 0, 0]), np.array([3, 3, 3]), 4)  # two successors of one round


def _replay_state(rng: np.random.Generator):
    """A random instance in a run of decode steps: running requests (all decoding) with classes, arrival
    order, round lengths and session credits (sessions shared at random), waiting QS and QL heaps."""
    n_run, n_wait = int(rng.integers(1, 9)), int(rng.integers(0, 5))
    rows = n_run + n_wait
    rq = np.zeros((rows, lay.N_RQ), np.int64)
    rq[:, lay.HCHILD] = rq[:, lay.HSIB] = -1
    rq[:, lay.REQ] = np.arange(rows)
    rq[:, lay.ASEQ] = rng.permutation(3 * rows)[:rows]
    rq[:, lay.QCLS] = rng.integers(0, 2, rows)
    rq[:, lay.GEN] = rng.integers(1, 50, rows)
    rq[:, lay.TARGET] = rng.integers(60, 90, rows)
    rq[:, lay.COMP] = rq[:, lay.TARGET] - 1
    new_tokens = rng.integers(1, 4, rows)  # few values: ties broken by arrival
    sess_id = rng.integers(0, rows, rows)
    sess_c = (rng.random(rows) < 0.5).astype(np.int64)
    ki = np.zeros((1, lay.N_KI), np.int64)
    ki[0, lay.K_RUN] = n_run
    ki[0, lay.K_ROOT0] = ki[0, lay.K_ROOT1] = -1
    ki[0, lay.K_HMIN] = ki[0, lay.K_QMIN] = lay.UNKNOWN
    ki[0, lay.K_ETA] = rng.integers(0, 4)
    eng = Engine(0, 0)
    reqs = [Req(x, 1, 100, gen=int(rq[x, lay.GEN]), comp=int(rq[x, lay.COMP]), target=int(rq[x, lay.TARGET]),
                aseq=int(rq[x, lay.ASEQ]), qcls=int(rq[x, lay.QCLS])) for x in range(rows)]
    for x in range(n_run, rows):
        q = int(rq[x, lay.QCLS])
        rq[x, lay.WK0], rq[x, lay.WK1] = (new_tokens[x], rq[x, lay.ASEQ]) if q == lay.QS else (rq[x, lay.ASEQ], 0)
        ki[0, lay.K_ROOT0 + q] = ph_push(rq, ki[0, lay.K_ROOT0 + q], x)
        reqs[x].key = (int(rq[x, lay.WK0]), int(rq[x, lay.WK1]))
        eng.push(q, reqs[x])
    eng.running = reqs[:n_run]
    eng.eta = int(ki[0, lay.K_ETA])
    return rq, new_tokens, sess_id, sess_c, ki, eng


def _twin_pass(eng: Engine, streak: int, sess_c, sess_id, new_tokens) -> None:
    rel, _ = prepare_pass(eng, 4, (0, 0, streak), sess_c, sess_id, new_tokens)
    if rel is not None:  # every running request is scheduled in a run
        sess_c[sess_id[rel.idx]] = 0
    eng.eta = 0 if any(r.qcls == lay.QL for r in eng.running) else eng.eta + 1


@pytest.mark.parametrize("seed", range(300))
def test_h2q_replay_of_a_run_is_the_twins_passes(seed: int) -> None:
    """``h2q_prepare`` orders a pass as the twin's ``prepare_pass``; ``h2q_replay`` after a run's first
    pass leaves the short streak, the credits and the order of pass m as the twin's m single passes,
    with the state a speculative run commits before it (COMP == TARGET: decoding all the same)."""
    rng = np.random.default_rng(seed)
    rq, new_tokens, sess_id, sess_c, ki, eng = _replay_state(rng)
    streak, m = int(rng.integers(0, 4)), int(rng.integers(2, 7))
    run_req = np.arange(ki[0, lay.K_RUN], dtype=np.int64)
    rng.shuffle(run_req)  # the twin sorts whatever the order; the kernel keeps the list sorted
    eng.running = [eng.running[x] for x in run_req]
    twin_c = sess_c.copy()
    stack = np.empty(rq.shape[0] + 1, np.int64)
    for x in range(ki[0, lay.K_RUN]):
        rank_of(rq, run_req[x], new_tokens, 0, -1)
    run_req[:] = sorted(run_req, key=lambda x: tuple(rq[x, lay.RK0:lay.RK0 + 1]) + tuple(rq[x, lay.RK1:lay.RK3 + 1]))
    rel, _ = h2q_prepare(0, float(streak), False, rq, new_tokens, sess_id, sess_c, 0, run_req, ki, stack)
    _twin_pass(eng, streak, twin_c, sess_id, new_tokens)
    assert [r.idx for r in eng.running] == run_req.tolist()
    if rel >= 0:  # spent at the end of the pass (_kernels/features/schedule.py)
        sess_c[sess_id[rel]] = 0
        ki[0, lay.K_HMIN] = lay.UNKNOWN
    ki[0, lay.K_ETA] = 0 if (rq[run_req, lay.QCLS] == lay.QL).any() else ki[0, lay.K_ETA] + 1
    if rng.random() < 0.5:
        rq[:, lay.COMP] = rq[:, lay.TARGET]
    h2q_replay(0, m, float(streak), rq, new_tokens, sess_id, sess_c, 0, run_req, ki, stack)
    for _ in range(m - 1):
        _twin_pass(eng, streak, twin_c, sess_id, new_tokens)
    assert [r.idx for r in eng.running] == run_req.tolist()
    assert ki[0, lay.K_ETA] == eng.eta
    np.testing.assert_array_equal(sess_c, twin_c)
