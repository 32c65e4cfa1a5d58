"""The API server stage in the analytic engine (``fleetplan.queueing.api_server`` wired into
``EngineProfile.state`` and its TTFT): utilisation λ_i E[t_api] / n joins ρ, the pool is unstable past
the ceiling n / E[t_api], and the TTFT gains the mean wait (M/D/1 here: exact) and the tokenisation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.api_server import api_server_max_request_rate_per_s
from fleetplan.perf.engine_profile import load_engine_profile
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.queueing.engine import EngineLimits, EngineModel, EngineProfile

VLLM = load_engine_profile("vllm").options
LIMITS = EngineLimits(256, 8192, 20000, 16)


def _profile(options, n_api_servers: int = 1) -> EngineProfile:
    pred = StepTimePredictor(load_model("llama-3.1-8b"), load_catalog().get("H100-SXM"), Parallelism(tp=1),
                             options=options)
    return EngineProfile(EngineModel.of(pred, LIMITS, n_api_servers), np.array([16.0]), np.array([16.0]),
                         np.array([1.0]))


@pytest.mark.parametrize("n_api_servers", [1, 2])
def test_api_servers_cap_the_rate_and_set_rho(n_api_servers: int) -> None:
    prof = _profile(VLLM, n_api_servers)
    ceiling = api_server_max_request_rate_per_s(VLLM, 16, 16, n_api_servers)
    below, above = prof.state(0.98 * ceiling, [1]), prof.state(1.01 * ceiling, [1])
    assert below.stable[0] and below.rho[0] == pytest.approx(0.98)
    assert not above.stable[0] and above.rho[0] >= 1.0


def test_ttft_gains_the_md1_wait_and_the_tokenisation() -> None:
    """One process, every request 16 + 16 tokens: the stage is M/D/1, E[W] = ρ t / (2 (1 - ρ)), P(W > 0) = ρ.
    The TTFT is the bare engine's plus the tokenisation plus that wait, 0 w.p. 1 - ρ else exponential at
    the M/D/1 tail's rate θ (λ (e^{θ t} - 1) = θ): its survival is the bare one convolved with it (checked
    by quadrature) and its mean grows by exactly ρ / θ + the tokenisation (the survivals' difference)."""
    staged = _profile(VLLM)
    bare = _profile(dataclasses.replace(VLLM, api_server_s_per_request=0.0, api_server_s_per_token=0.0,
                                        api_server_s_per_output_chunk=0.0))
    t = VLLM.api_server_s_per_request + 32 * VLLM.api_server_s_per_token + 16 * VLLM.api_server_s_per_output_chunk
    lam = 40.0
    st, st0 = staged.state(lam, [1]), bare.state(lam, [1])
    rho = lam * t
    mean_wait = rho * t / (2 * (1 - rho))
    assert st.api_wait_s[0] == pytest.approx(mean_wait, rel=1e-9)
    assert st.api_wait_mass[0] == pytest.approx(rho, rel=1e-9)
    k = st.api_wait_decay_per_s[0]
    assert lam * (np.exp(k * t) - 1) == pytest.approx(k, rel=1e-9)  # the Cramér-Lundberg root
    assert rho / k < mean_wait  # M/D/1's tail decays faster than the exponential with its mean
    tok = 16 * VLLM.api_server_s_per_token
    x = np.linspace(0.0, 0.4, 401)
    u = (np.arange(4000) + 0.5) / 4000
    w = -np.log1p(-u) / k  # the exponential's quantiles: E[S(x - w)] as a mean over u
    conv = bare.ttft_survival(st0, 0, (x[:, None] - tok - w[None, :]).ravel()).reshape(x.size, w.size).mean(axis=1)
    expected = (1 - rho) * bare.ttft_survival(st0, 0, x - tok) + rho * conv
    assert staged.ttft_survival(st, 0, x) == pytest.approx(expected, abs=2e-3)
    grid = np.linspace(0.0, 2.0, 200_001)
    gain = np.trapezoid(staged.ttft_survival(st, 0, grid) - bare.ttft_survival(st0, 0, grid), grid)
    assert gain == pytest.approx(rho / k + tok, rel=2e-3)
    assert staged.ttft_quantile_s(st, 0.99)[0] > bare.ttft_quantile_s(st0, 0.99)[0] + tok + rho / k
    assert staged.zero_load_ttft_s(0.5) == pytest.approx(bare.zero_load_ttft_s(0.5) + tok)


@pytest.mark.parametrize("k", [3.0, 50.0, 50.0 * (1 + 1e-9), np.inf])
def test_two_waits_sum_to_the_hypoexponential(k: float) -> None:
    """P(W + A > y) for W ~ Exp(k), A ~ Exp(50/s): against a quadrature over A's density (k = k_a and an
    infinite k, no engine wait, included)."""
    from fleetplan.queueing.engine import _two_exponentials

    k_api = 50.0
    y = np.linspace(-0.05, 0.3, 36)
    got = _two_exponentials(y[None, :, None], np.full(36, k), k_api)  # y per level: the middle axis
    want = np.ones(y.size)  # 1 before 0; after: P(A > y) + ∫_0^y k_a e^{-k_a a} e^{-k (y - a)} da
    for j, yj in enumerate(y):
        if yj >= 0:
            a = np.linspace(0.0, yj, 20_001)
            inner = 0.0 if np.isinf(k) else np.trapezoid(k_api * np.exp(-k_api * a - k * (yj - a)), a)
            want[j] = np.exp(-k_api * yj) + inner
    assert got[0, :, 0] == pytest.approx(want, abs=1e-6)


def test_the_tail_rate_is_allen_cunneens_in_heavy_traffic_and_scales_with_the_arrivals() -> None:
    """θ → 2 (c - a) / (E[t] (Ca² + Cs²)) as ρ_api → 1 (the diffusion limit), for one and for 3 x 2 processes;
    burstier arrivals (Ca² = 4) slow it by (1 + Cs²) / (Ca² + Cs²)."""
    load = _profile(VLLM, 2).api
    t, cs2, n = load.mean_busy_s, load.busy_cs2, load.cost.n_servers
    for g in (1, 3):
        c = g * n
        lam = 0.999 * c / t
        theta = float(load.wait_decay_per_s(lam, g)[()])
        assert theta == pytest.approx(2 * (c - lam * t) / (t * (1 + cs2)), rel=2e-3)
        assert float(load.wait_decay_per_s(lam, g, 4.0)[()]) == pytest.approx(theta * (1 + cs2) / (4 + cs2),
                                                                               rel=1e-12)
    assert float(load.wait_decay_per_s(1.01 * n / t, 1)[()]) == 0.0  # past the ceiling: no tail


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 300), st.floats(1e-4, 5e-3), st.floats(0.0, 2e-6), st.integers(1, 3),
       st.lists(st.floats(0.01, 0.95), min_size=1, max_size=4), st.integers(0, 2**32 - 1))
def test_the_tail_rate_is_the_cramer_lundberg_root_to_float_precision(
        n_points: int, s_req: float, s_tok: float, n_servers: int, loads: list[float], seed: int) -> None:
    """The vectorised safeguarded Newton of ``wait_decay_per_s`` lands on the root θ > 0 of
    λ (Σ w_j e^{θ t_j / c} - 1) = θ that a scalar bracketing solver (scipy's brentq, to 1e-15) finds, to
    1e-12 relative at loads up to 0.95 (nearer 1 the root is ill-conditioned: float noise moves it)."""
    from scipy.optimize import brentq

    from fleetplan.perf.api_server import ApiServerCost
    from fleetplan.queueing.api_server import ApiServerLoad

    rng = np.random.default_rng(seed)
    prompt, output = rng.integers(1, 8000, n_points), rng.integers(1, 2000, n_points)
    load = ApiServerLoad.of(ApiServerCost(s_req, s_tok, n_servers), prompt, output, rng.random(n_points) + 0.01)
    counts = rng.integers(1, 40, len(loads))
    lam = np.array(loads) * counts * n_servers / load.mean_busy_s
    got = load.wait_decay_per_s(lam, counts)
    for lam_k, g, theta in zip(lam, counts, got, strict=True):
        c = float(g * n_servers)

        def excess(x: float, lam_k: float = float(lam_k), c: float = c) -> float:
            return lam_k * (np.exp(np.minimum(x * load.busy_points_s / c, 700.0)) @ load.busy_weight - 1.0) - x

        hi = c / load.mean_busy_s
        while excess(hi) <= 0:
            hi *= 2.0
        want = brentq(excess, 1e-9 * hi, hi, xtol=1e-300, rtol=1e-15, maxiter=500)
        assert theta == pytest.approx(want, rel=1e-12)


def test_remembered_api_figures_are_the_computed_ones() -> None:
    """``wait_probability`` and ``wait_decay_per_s`` keep their arrays by load object and arguments: a repeat
    call gives the first call's (read-only) array, equal to a fresh load's computation bit for bit, and a
    different grouping of counts or Ca² is computed, not looked up."""
    from fleetplan.perf.api_server import ApiServerCost
    from fleetplan.queueing.api_server import ApiServerLoad

    rng = np.random.default_rng(7)
    prompt, output, w = rng.integers(1, 8000, 50), rng.integers(1, 2000, 50), rng.random(50) + 0.01
    cost = ApiServerCost(9e-3, 1.2e-6)
    load, fresh = ApiServerLoad.of(cost, prompt, output, w), ApiServerLoad.of(cost, prompt, output, w)
    lam = 0.6 / load.mean_busy_s * 3
    counts = np.array([3.0, 4.0, 6.0])
    for name in ("wait_probability", "wait_decay_per_s"):
        first = getattr(load, name)(lam, counts)
        again = getattr(load, name)(lam, counts)
        assert again is first and not first.flags.writeable
        assert np.array_equal(first, getattr(fresh, name)(lam, counts))
        assert getattr(load, name)(lam, counts[:1]) is not first
    assert not np.array_equal(load.wait_decay_per_s(lam, counts, 2.0), load.wait_decay_per_s(lam, counts))


def test_profiles_of_the_same_points_share_their_api_load() -> None:
    """Two profiles of equal API server costs on the same points (two token budgets) share the load and
    the tokenisation arrays, equal to computing them afresh."""
    from fleetplan.queueing.api_server import ApiServerLoad

    pred = StepTimePredictor(load_model("llama-3.1-8b"), load_catalog().get("H100-SXM"), Parallelism(tp=1),
                             options=VLLM)
    rng = np.random.default_rng(3)
    p, o, w = rng.integers(1, 4000, 40).astype(float), rng.integers(1, 900, 40).astype(float), rng.random(40)
    a = EngineProfile(EngineModel.of(pred, LIMITS), p, o, w)
    b = EngineProfile(EngineModel.of(pred, EngineLimits(256, 2048, 20000, 16)), p, o, w)
    assert a.api is b.api and a.tokenize_binned is b.tokenize_binned
    want = ApiServerLoad.of(a.engine.api, a.prompt, a.output, a.weight)
    assert np.array_equal(a.api.busy_points_s, want.busy_points_s) and a.api.busy_cs2 == want.busy_cs2
    assert np.array_equal(a.tokenize_s, a.engine.api.tokenize_s(a.prompt))
    assert np.array_equal(a.tokenize_binned, a._binned(a.engine.api.tokenize_s(a.prompt)))
