"""Latency figures built on first read (``queueing.engine.Deferred`` / ``Lazy`` / ``LatencyTail``): the
sizing keeps its TTFT/TPOT tables and quantiles, and a state its API-server wait, unbuilt until read, and
what is read is bit for bit what the eager computation gives (``ttft_table``, ``tpot_table`` and their
quantiles; the API server's wait for all of a ``state`` call's counts at once); the lazy objects pickle,
compare, hash and ``dataclasses.replace`` as plain values."""

from __future__ import annotations

import dataclasses
import math
import pickle

import numpy as np
import pytest

from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.engine_profile import load_engine_profile
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.queueing import engine as engine_mod
from fleetplan.queueing.engine import (
    Deferred,
    EngineLimits,
    EngineModel,
    EngineProfile,
    Lazy,
    mixture_quantile_s,
    peek,
    size_engine_pool,
    tpot_table,
    ttft_table,
)

LIMITS = EngineLimits(256, 8192, 20000, 16)


def _profile(n_api_servers: int = 1) -> EngineProfile:
    pred = StepTimePredictor(load_model("llama-3.1-8b"), load_catalog().get("H100-SXM"), Parallelism(tp=1),
                             options=load_engine_profile("vllm").options)
    rng = np.random.default_rng(3)
    p = np.round(rng.lognormal(6.5, 1.0, 60)) + 1
    o = np.round(rng.lognormal(5.0, 0.8, 60)) + 1
    return EngineProfile(EngineModel.of(pred, LIMITS, n_api_servers), p, o, rng.uniform(0.5, 1.5, 60))


def _same_table(a, b) -> bool:
    return np.array_equal(a.x_s, b.x_s) and np.array_equal(a.survival, b.survival)


@dataclasses.dataclass(frozen=True)
class _Toy:
    a: int
    b: float = Deferred(math.nan)


_CALLS: list[int] = []


def _seven(x: float) -> float:
    _CALLS.append(1)
    return 7.0 * x


def test_deferred_field_is_computed_once_and_behaves_as_its_value() -> None:
    _CALLS.clear()
    toy = _Toy(1, Lazy(_seven, 2.0))
    assert isinstance(peek(toy, "b"), Lazy) and not _CALLS
    again = pickle.loads(pickle.dumps(toy))  # the Lazy travels (a forked child's result)
    assert toy.b == 14.0 and toy.b == 14.0 and len(_CALLS) == 1 and peek(toy, "b") == 14.0
    assert again.b == 14.0 and again == toy and hash(again) == hash(toy)
    assert dataclasses.replace(toy, a=2).b == 14.0 and _Toy(3).b != _Toy(3).b  # default nan
    with pytest.raises(dataclasses.FrozenInstanceError):
        toy.b = 1.0  # type: ignore[misc]


@pytest.mark.parametrize("slo_tpot_s", [None, 0.05])
def test_sizing_latencies_are_the_eager_figures(slo_tpot_s) -> None:
    prof = _profile()
    sized, st = size_engine_pool(prof, 40.0, 0.8, 0.99, slo_tpot_s=slo_tpot_s)
    assert isinstance(peek(sized, "tpot_table"), Lazy) and isinstance(peek(sized, "ttft_table"), Lazy)
    assert isinstance(peek(sized, "tpot_p_s"), Lazy) == (slo_tpot_s is None or sized.binding == "rho")
    want_ttft, want_tpot = ttft_table(prof, st), tpot_table(prof, st)
    assert _same_table(sized.ttft_table, want_ttft) and _same_table(sized.tpot_table, want_tpot)
    assert sized.ttft_p_s == mixture_quantile_s([want_ttft], [1.0], 0.99)
    assert sized.tpot_p_s == mixture_quantile_s([want_tpot], [1.0], 0.99)
    assert math.isfinite(sized.tpot_p_s) and sized.tpot_p_s > prof.zero_load_tpot_s()


def test_state_rows_compute_the_api_wait_of_all_counts_on_first_read() -> None:
    prof = _profile()
    lam, counts = 60.0, np.array([1.0, 2.0, 5.0])
    st = prof.state(lam, counts)
    rows = [engine_mod._state_row(st, i) for i in range(counts.size)]
    wait = peek(rows[0], "api_wait_decay_per_s").args[0]
    assert "api_wait_decay_per_s" not in wait.__dict__  # nothing computed yet
    theta = prof.api.wait_decay_per_s(lam, counts)  # the eager figures, all counts at once
    mass = prof.api.wait_probability(lam, counts)
    assert rows[1].api_wait_decay_per_s[0] == theta[1] and rows[2].api_wait_mass[0] == mass[2]
    assert "api_wait_s" not in wait.__dict__  # the mean wait is not read by sizing
    assert np.array_equal(st.api_wait_s, prof.api.mean_wait_s(lam, counts))
    assert prof.api_wait_tail(rows[0], 0) == (float(mass[0]), float(theta[0]))


def test_api_tail_rate_is_not_computed_without_a_wait() -> None:
    prof = _profile()
    st = engine_mod._state_row(prof.state(1e-6, [200]), 0)  # an idle pool: P(wait > 0) underflows to 0
    assert float(st.api_wait_mass[0]) == 0.0
    assert prof.api_wait_tail(st, 0) == (0.0, math.inf)
    assert "api_wait_decay_per_s" not in peek(st, "api_wait_decay_per_s").args[0].__dict__


@pytest.mark.parametrize("lam", [30.0, 60.0, 150.0])
def test_few_point_ttft_survival_is_the_level_by_level_sum(monkeypatch, lam) -> None:
    """With an API server wait, up to ``_SORTED_STEP_POINTS`` points take all levels at once
    (``_queued_with_api``): the level-by-level loop's values, bit for bit."""
    prof = _profile()
    st = prof.state(lam, [1, 2, 4])
    xs = [np.array([0.3]), np.linspace(0.0, 1.5, 8)]
    rows = [(i, x) for i in range(3) if prof.api_wait_tail(st, i)[0] > 0 for x in xs]
    assert rows
    fast = [prof.ttft_survival(st, i, x) for i, x in rows]
    monkeypatch.setattr(engine_mod, "_SORTED_STEP_POINTS", 0)
    slow = [prof.ttft_survival(st, i, x) for i, x in rows]
    assert all(np.array_equal(a, b) for a, b in zip(fast, slow, strict=True))


def test_attention_work_is_shared_by_a_pools_token_budgets() -> None:
    """The two token budgets of a pool (one step model, grid and points) share one attention table, equal to
    computing it afresh."""
    pred = StepTimePredictor(load_model("llama-3.1-8b"), load_catalog().get("H100-SXM"), Parallelism(tp=1),
                             options=load_engine_profile("vllm").options)
    p, o, w = np.array([100.0, 3000.0, 9000.0]), np.array([50.0, 200.0, 20.0]), np.array([0.5, 0.3, 0.2])
    a = EngineProfile(EngineModel.of(pred, EngineLimits(128, 2048, 20000, 16)), p, o, w)
    b = EngineProfile(EngineModel.of(pred, EngineLimits(128, 8192, 20000, 16)), p, o, w)
    assert np.array_equal(a.grid, b.grid)
    n, e = a.grid[:, None], a.engine
    ctx = n * a.mean_ctx
    want = e.step_s(n + 1.0, n, 0.0, ctx, a.points.prompt_sq) - e.step_s(n + 1.0, n, 0.0, ctx, 0.0)
    got = engine_mod._attention_work(b.engine, b.grid, b.mean_ctx, b.points, b._binned)
    assert np.array_equal(got[0], want)
    assert got is engine_mod._attention_work(a.engine, a.grid, a.mean_ctx, a.points, a._binned)
    assert np.array_equal(got[1], a._binned(want)) and np.array_equal(got[2], want @ a.weight)
    assert np.array_equal(a.attn_mean, want @ a.weight) and not np.array_equal(a.t_full, b.t_full)


def _states_equal(a, b) -> bool:
    names = [f.name for f in dataclasses.fields(a)]
    return all(np.array_equal(getattr(a, n), getattr(b, n), equal_nan=True) for n in names)


@pytest.mark.parametrize("cv2", [0.0, 1.0, 4.0])
def test_load_leaves_the_slot_chain_to_the_latency_part(monkeypatch, cv2) -> None:
    """``load`` decides the slot chain's test (k₁ > 0 or A₁ <= 0) from k₁ alone where it can, without the
    chain: ρ and stability, and the state its ``state()`` completes, are ``state``'s bit for bit, from idle
    pools to slot-bound and unstable ones; where k₁ cannot decide, the chain is computed."""
    prof = _profile()
    counts = np.array([1.0, 2.0, 3.0, 5.0, 8.0, 40.0])
    chained: list[int] = []
    real = EngineProfile._slot_queue

    def counted(self, *args):
        chained.append(1)
        return real(self, *args)

    monkeypatch.setattr(EngineProfile, "_slot_queue", counted)
    seen_stable = seen_unstable = False
    for lam in (0.0, 0.5, 20.0, 60.0, 150.0, 400.0, 5000.0):
        want = prof.state(lam, counts, arrival_cv2=cv2)
        chained.clear()
        load = prof.load(lam, counts, arrival_cv2=cv2)
        assert not chained  # no row needed A₁ here
        assert np.array_equal(load.rho, want.rho) and np.array_equal(load.stable, want.stable)
        assert _states_equal(load.state(), want)
        seen_stable |= bool(want.stable.any())
        seen_unstable |= bool((~want.stable).any())
    assert seen_stable and seen_unstable
    # a row whose k₁ cannot decide (r < 1, k₁ <= 0) takes the chain
    monkeypatch.setattr(EngineProfile, "_slot_chain_passes", lambda self, *a: None)
    chained.clear()
    load = prof.load(60.0, counts, arrival_cv2=cv2)
    assert chained and np.array_equal(load.rho, prof.state(60.0, counts, arrival_cv2=cv2).rho)


def test_slot_chain_test_from_k1_is_the_chains() -> None:
    """``_slot_chain_passes`` gives ``_slot_queue``'s (k₁ / burst > 0) | (A₁ <= 0) wherever it decides."""
    prof = _profile()
    rng = np.random.default_rng(11)
    decided = 0
    for _ in range(300):
        counts = rng.integers(1, 30, rng.integers(1, 4)).astype(np.float64)
        lam = float(rng.choice([0.0, rng.uniform(0.1, 3000.0)]))
        h_full = rng.uniform(0.05, 40.0, counts.size)
        hold_tab = np.sort(rng.uniform(0.01, 1.0, (counts.size, prof.grid.size)), axis=1) * h_full[:, None]
        hold_tab[:, -1] = h_full
        burst = float(rng.choice([0.5, 1.0, 2.5]))
        got = prof._slot_chain_passes(lam, counts, h_full, burst)
        a1, k1 = prof._slot_queue(lam, counts, hold_tab, h_full, np.ones(counts.size))
        want = (k1 / burst > 0) | (a1 <= 0)
        if got is not None:
            decided += 1
            assert np.array_equal(got, want)
    assert decided > 250
