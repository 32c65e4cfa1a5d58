"""The lockstep pool load (``fleetplan.queueing.lockstep.load_requests``) is
``EngineProfile.load`` row by row, and pools sized in lockstep (``run_lockstep``) are sized as alone: the
same stability, counts and verdicts, every figure within 1e-12 relative (the rows' interpolation and level
sums round in another order), for linear, roofline (attention work) and API-server engines, a concurrency
cap of 1 (a grid of two points), rates from idle to overload, bursty and smooth arrivals, balanced and
random splits."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.engine_profile import load_engine_profile
from fleetplan.perf.linear import LinearStepModel
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.queueing.engine import (
    EngineLimits,
    EngineModel,
    EngineProfile,
    LoadRequest,
    size_engine_pool,
    sizing_steps,
)
from fleetplan.queueing.lockstep import load_requests, run_lockstep

REL = 1e-12


def _points(seed: int, n: int = 400, scale: float = 6.0):
    rng = np.random.default_rng(seed)
    prompt = np.ceil(rng.lognormal(scale, 1.0, n)).clip(1, 6000)
    output = np.ceil(rng.lognormal(5.0, 0.8, n)).clip(1, 2000)
    return prompt, output, np.full(n, 1.0 / n)


def _profiles() -> list[EngineProfile]:
    linear = LinearStepModel.from_serving(type("S", (), {"iter_base_s": 0.004, "iter_per_seq_s": 0.00032,
                                                         "ref_context_tokens": 8192})())
    pred = StepTimePredictor(load_model("llama-3.1-8b"), load_catalog().get("H100-SXM"), Parallelism(tp=1),
                             options=load_engine_profile("vllm").options)
    big = EngineLimits(256, 256 + 1024, 131072, 16)
    return [
        EngineProfile(EngineModel.of(linear, big), *_points(0)),
        EngineProfile(EngineModel.of(linear, EngineLimits(16, 2048, 4096, 16)), *_points(1, scale=7.0)),
        EngineProfile(EngineModel.of(linear, EngineLimits(1, 512, 4096, 16)), *_points(2)),  # n_cap = 1
        EngineProfile(EngineModel.of(pred, EngineLimits(256, 8192, 20000, 16), 1), *_points(3)),
        EngineProfile(EngineModel.of(pred, EngineLimits(64, 2048, 20000, 16), 2), *_points(4, scale=5.0)),
    ]


@pytest.fixture(scope="module")
def profiles() -> list[EngineProfile]:
    return _profiles()


def _capacity_per_s(prof: EngineProfile) -> float:
    """A rate near one instance's capacity (where ρ crosses 1), from its load at a few rates."""
    rates = np.geomspace(0.01, 1e5, 60)
    ok = [bool(prof.load(lam, [1.0]).stable[0]) for lam in rates]
    return float(rates[max(1, sum(ok)) - 1])


def _load_rows(profiles, q, lam, counts, cv2, balanced) -> tuple[np.ndarray, np.ndarray]:
    """(ρ, stable) of one count per row (profile ``profiles[q[r]]``) through ``load_requests``."""
    q, lam, counts, cv2, balanced = (np.ravel(a) for a in np.broadcast_arrays(q, lam, counts, cv2, balanced))
    loads = load_requests([LoadRequest(profiles[int(i)], float(x), np.array([float(n)]), float(c), bool(b))
                           for i, x, n, c, b in zip(q, lam, counts, cv2, balanced, strict=True)])
    return np.array([ld.rho[0] for ld in loads]), np.array([bool(ld.stable[0]) for ld in loads])


def test_profiles_have_both_grid_sizes(profiles) -> None:
    assert {p.grid.size for p in profiles} == {2, 49}


@pytest.mark.parametrize("seed", range(3))
def test_rows_are_the_profiles_own_load(profiles, seed: int) -> None:
    rng = np.random.default_rng(seed)
    caps = [_capacity_per_s(p) for p in profiles]
    n_rows = 400
    q = rng.integers(0, len(profiles), n_rows)
    counts = rng.integers(1, 40, n_rows).astype(float)
    # per-instance load from nearly idle to twice the capacity
    lam = np.array([caps[i] for i in q]) * counts * rng.uniform(0.0, 2.0, n_rows) ** 2
    lam[:5] = 0.0
    cv2 = rng.choice([0.0, 0.5, 1.0, 3.0], n_rows)
    balanced = rng.random(n_rows) < 0.7
    rho, stable = _load_rows(profiles, q, lam, counts, cv2, balanced)
    n_stable = 0
    for r in range(n_rows):
        want = profiles[q[r]].load(float(lam[r]), np.array([counts[r]]), arrival_cv2=float(cv2[r]),
                                   balanced_split=bool(balanced[r]))
        assert stable[r] == want.stable[0], r
        assert rho[r] == want.rho[0], r  # bit for bit: its level sums in the order of one count
        n_stable += bool(want.stable[0])
    assert 0.2 * n_rows < n_stable < 0.95 * n_rows  # both sides of the stability edge are exercised


def test_order_does_not_matter(profiles) -> None:
    counts = np.arange(1.0, 9.0)
    rho, stable = _load_rows(profiles, 0, 50.0, counts, 1.0, True)
    rho_rev, stable_rev = _load_rows(profiles[::-1], len(profiles) - 1, 50.0, counts[::-1], 1.0, True)
    assert np.array_equal(rho, rho_rev[::-1]) and np.array_equal(stable, stable_rev[::-1])


@pytest.mark.parametrize(("lam", "count", "cv2"), [(-1.0, 1.0, 1.0), (np.inf, 1.0, 1.0), (1.0, 0.5, 1.0),
                                                   (1.0, 1.0, -0.1), (1.0, np.nan, 1.0)])
def test_bad_rows_raise(profiles, lam: float, count: float, cv2: float) -> None:
    with pytest.raises(ConfigError):
        load_requests([LoadRequest(profiles[0], lam, np.array([count]), cv2, True)])


def _same_sizing(a, b) -> None:
    """Two sizings of one pool: the same verdict and count, every figure within ``REL``."""
    (sa, sta), (sb, stb) = a, b
    assert (sa.n_instances, sa.feasible, sa.reason, sa.binding, sa.floor_instances) == \
        (sb.n_instances, sb.feasible, sb.reason, sb.binding, sb.floor_instances)
    for name in ("rho", "ttft_p_s", "tpot_p_s", "mean_residence_s", "mean_step_s", "decode_batch"):
        assert getattr(sb, name) == pytest.approx(getattr(sa, name), rel=REL, abs=0.0, nan_ok=True), name
    assert (sta is None) == (stb is None)
    if sta is not None:
        for name in ("wait_mass", "wait_decay_per_s", "prefill_levels", "api_wait_s"):
            np.testing.assert_allclose(getattr(stb, name), getattr(sta, name), rtol=REL, atol=0.0)


def test_sizings_in_lockstep_are_the_serial_sizings(profiles) -> None:
    """``run_lockstep`` of the sizing generators: each pool's count search as ``size_engine_pool`` runs it
    alone (same counts, figures within rounding), with rates from idle to beyond one instance, a TPOT
    target on some, a rate of 0 (no request at all) and a search that ends past ``max_instances``."""
    rng = np.random.default_rng(7)
    jobs = []
    for prof in profiles:
        cap = _capacity_per_s(prof)
        for lam in (0.0, 0.3 * cap, 3.0 * cap, 40.0 * cap):
            slo = prof.zero_load_ttft_s(0.99) * float(rng.uniform(1.1, 4.0))
            tpot = prof.zero_load_tpot_s() * 3.0 if rng.random() < 0.5 else None
            jobs.append((prof, lam, slo, 0.99, {"slo_tpot_s": tpot, "max_instances": 64,
                                                "arrival_cv2": float(rng.choice([0.5, 1.0, 2.0])),
                                                "balanced_split": bool(rng.random() < 0.8)}))
    serial = [size_engine_pool(prof, lam, slo, p, **kw) for prof, lam, slo, p, kw in jobs]
    together = run_lockstep([sizing_steps(prof, lam, slo, p, **kw) for prof, lam, slo, p, kw in jobs])
    for a, b in zip(serial, together, strict=True):
        _same_sizing(a, b)
    assert {s.n_instances for s, _ in serial} > {0, 64}  # idle, past the cap, and counts between


def test_load_requests_complete_to_the_serial_states(profiles) -> None:
    """A lockstep load's ``state()`` is the state ``EngineProfile.load(...).state()`` completes."""
    reqs = [LoadRequest(prof, 0.5 * _capacity_per_s(prof) * g, np.array([g, g + 1.0, 2.0 * g]), cv2, bal)
            for prof in profiles for g, cv2, bal in ((1.0, 1.0, True), (3.0, 2.0, False))]
    for req, load in zip(reqs, load_requests(reqs), strict=True):
        want = req.serial()
        assert np.array_equal(load.stable, want.stable)
        np.testing.assert_allclose(load.rho, want.rho, rtol=REL, atol=0.0)
        got_st, want_st = load.state(), want.state()
        for name in ("decode_batch", "mean_residence_s", "wait_mass", "wait_decay_per_s", "idle", "prefill_binned",
                     "prefill_levels", "t_full_levels", "api_wait_mass"):
            np.testing.assert_allclose(getattr(got_st, name), getattr(want_st, name), rtol=REL, atol=0.0)


@pytest.mark.parametrize("window", [1, 3, 1000])
def test_the_window_changes_nothing(profiles, window: int) -> None:
    """Searches started as others end (``window``) give what all at once give."""
    jobs = [(prof, _capacity_per_s(prof) * f, prof.zero_load_ttft_s(0.99) * 2.0) for prof in profiles
            for f in (0.5, 5.0)]
    want = [size_engine_pool(prof, lam, slo, 0.99) for prof, lam, slo in jobs]
    got = run_lockstep([sizing_steps(prof, lam, slo, 0.99) for prof, lam, slo in jobs], window)
    for a, b in zip(want, got, strict=True):
        _same_sizing(a, b)
