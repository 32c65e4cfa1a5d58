"""The engine profile's tables from the sums they are linear in (``EngineProfile._tabulate``) equal the plain
per-point forms binned and averaged afterwards: the own prefill alone, k_j t_d + ΣΔ_j; in full-budget steps,
k_j t_full + attention; behind a queue, p_j t_full / (B - n) + attention; ΣΔ_j = full chunks' Δ(B - n) + the
partial chunk's Δ + attention (the linear model's c₁ k_j + c₂ p_j).  Also the TTFT table's queued tail by
sorted log-sums and the slot chain left unsummed where its bound says A₁ is negligible."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.engine_profile import load_engine_profile
from fleetplan.perf.linear import LinearStepModel
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.queueing import engine as engine_mod
from fleetplan.queueing.engine import EngineLimits, EngineModel, EngineProfile, _delayed_exp_survival


def _roofline() -> StepTimePredictor:
    return StepTimePredictor(load_model("llama-3.1-8b"), load_catalog().get("H100-SXM"), Parallelism(tp=1),
                             options=load_engine_profile("vllm").options)


STEPS = {"linear": lambda: LinearStepModel(0.012, 0.0004, 2e-5, 2048.0), "roofline": _roofline}


def _plain(prof: EngineProfile) -> dict[str, np.ndarray]:
    """The tables the way the profile computed them before: every (grid, J) table, then binned."""
    e, n, p = prof.engine, prof.grid[:, None], prof.prompt[None, :]
    ctx = n * prof.mean_ctx
    t_d = e.step_s(n[:, 0], n[:, 0], 0.0, ctx[:, 0], 0.0)
    chunk = np.maximum(float(e.limits.max_num_batched_tokens) - n, 1.0)
    full = np.floor(p / chunk)
    rem = p - full * chunk
    base = t_d[:, None]
    full_step = e.step_s(n + 1.0, n, chunk, ctx, 0.0)
    d_rem = np.where(rem > 0, e.step_s(n + 1.0, n, rem, ctx, 0.0) - base, 0.0)
    attn = e.step_s(n + 1.0, n, 0.0, ctx, p * p) - e.step_s(n + 1.0, n, 0.0, ctx, 0.0)
    sum_delta = full * (full_step - base) + d_rem + attn
    k = full + (rem > 0)
    t_full = full_step[:, 0]
    prefill_s = k * base + sum_delta
    prefill_full_s = k * t_full[:, None] + attn
    fluid = p * (t_full / chunk[:, 0])[:, None] + attn
    w = prof.weight
    return {"prefill_binned": prof._binned(prefill_s), "k_binned": prof._binned(k),
            "prefill_full_binned": prof._binned(prefill_full_s), "prefill_fluid_binned": prof._binned(fluid),
            "phi": sum_delta @ w, "attn_mean": attn @ w, "_prefill_alone_mean": prefill_s @ w,
            "_prefill_full_mean": prefill_full_s @ w, "prefill_s": prefill_s, "prefill_full_s": prefill_full_s,
            "work_table": sum_delta, "k_chunks": k, "_prefill0": prefill_s[0], "t_full": t_full}


@pytest.mark.parametrize("step", sorted(STEPS))
@pytest.mark.parametrize("budget", [64, 512, 8192, 65536])  # many chunks per prompt .. one chunk each
@pytest.mark.parametrize("seed", [0, 1])
def test_tables_from_their_sums_are_the_binned_point_tables(step: str, budget: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = 300
    p = np.round(np.exp(rng.uniform(0.0, math.log(6000.0), size)))
    o = np.round(np.exp(rng.uniform(0.0, math.log(800.0), size)))
    w = rng.random(size)
    prof = EngineProfile(EngineModel.of(STEPS[step](), EngineLimits(128, budget, 40000, 16)), p, o, w)
    for name, want in _plain(prof).items():
        np.testing.assert_allclose(getattr(prof, name), want, rtol=1e-12, atol=1e-15, err_msg=name)


def test_the_linear_models_attention_work_is_zero_and_not_tabulated() -> None:
    prof = EngineProfile(EngineModel.of(STEPS["linear"](), EngineLimits(64, 512, 4000, 16)),
                         np.array([10.0, 900.0, 3000.0]), np.array([5.0, 50.0, 9.0]), np.ones(3))
    attn = engine_mod._attention_work(prof.engine, prof.grid, prof.mean_ctx, prof.points, prof._binned)
    assert attn[0] is None and attn[1] is None and not attn[2].any()
    assert prof._work is None  # ΣΔ built only when read
    assert np.array_equal(prof.work_table, prof._lin[0] * prof.k_chunks + prof._lin[1] * prof.prompt[None, :])


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 6), st.integers(1, 150), st.integers(9, 120), st.floats(0.0, 5e4), st.integers(0, 2**32 - 1))
def test_queued_tail_by_sorted_log_sums_is_the_plain_sum(levels: int, m: int, n_x: int, k_top: float,
                                                         seed: int) -> None:
    """Σ_m w_m (1 before t_lm, exp(-k_l (x - t_lm)) after) by suffix sums and a running log-sum-exp equals the
    direct sum, with k t up to 10^4 (exp(k t) alone would overflow), ties and x on a point included."""
    rng = np.random.default_rng(seed)
    t = np.round(rng.random((levels, m)) * 40.0) / 200.0
    w = rng.random(m) + 1e-3
    k = rng.random(levels) * k_top
    x = np.sort(np.concatenate([rng.random(n_x) * 0.3, t.ravel()[:3], [-1.0, 0.0, 5.0]]))
    y = x[:, None, None] - t[None, :, :]
    want = np.exp(-k[None, :, None] * np.maximum(y, 0.0)) @ w
    np.testing.assert_allclose(_delayed_exp_survival(x, t, w, k), want, rtol=1e-11, atol=1e-14 * w.sum())


@pytest.mark.parametrize("lam", [5.0, 60.0, 400.0])
def test_a_slot_chain_left_unsummed_has_a_negligible_wait(monkeypatch, lam: float) -> None:
    """Where the bound on A₁ puts it below ``NEGLIGIBLE_SLOT_WAIT`` the summed chain agrees to that much, and
    k₁ is the same."""
    rng = np.random.default_rng(3)
    p, o = np.round(np.exp(rng.uniform(0, 8, 200))), np.round(np.exp(rng.uniform(0, 6, 200)))
    prof = EngineProfile(EngineModel.of(STEPS["linear"](), EngineLimits(64, 2048, 3000, 16)), p, o, np.ones(200))
    counts = np.arange(1.0, 40.0)
    st_ = prof.state(lam, counts)
    hold = prof._hold_table(st_.lam_i, prof._phi(st_.lam_i), prof._shared(st_.lam_i))
    phi = np.full(counts.size, 1.3)
    fast = prof._slot_queue(lam, counts, hold, hold[:, -1], phi)
    monkeypatch.setattr(engine_mod, "_LOG_NEGLIGIBLE_SLOT_WAIT", -math.inf)
    full = prof._slot_queue(lam, counts, hold, hold[:, -1], phi)
    skipped = (fast[0] == 0.0) & (full[0] > 0.0)
    assert np.all(np.abs(fast[0] - full[0]) <= engine_mod.NEGLIGIBLE_SLOT_WAIT)
    assert np.array_equal(fast[1], full[1])
    assert skipped.any() or lam > 100.0  # the light loads leave chains unsummed
