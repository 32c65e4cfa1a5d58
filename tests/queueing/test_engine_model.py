"""The analytic engine model (``fleetplan.queueing.engine``): exact limits, invariants, sizing.

Closed forms checked: with a step of W + c_p · prefill tokens (no context term) the decode step is
W at any batch, Φ = c_p E[p], so t̄ = W / (1 - λ_i c_p E[p]) and n* = λ_i E[d] t̄ (Little);
an engine with no load has TTFT = its own prefill and TPOT = a lone decode step.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fleetplan.perf.linear import N_STEP_COEFS, STEP_MODEL_LINEAR, LinearStepModel, step_time_array_s
from fleetplan.queueing import InfeasibleReason
from fleetplan.queueing.engine import (
    EngineLimits,
    EngineModel,
    EngineProfile,
    mixture_quantile_s,
    size_engine_pool,
    tpot_table,
    ttft_table,
)

LIMITS = EngineLimits(max_num_seqs=256, max_num_batched_tokens=256 + 1024, kv_blocks=131072, block_size_tokens=16)
H100_PAPER = LinearStepModel.from_serving(type("S", (), {"iter_base_s": 0.004, "iter_per_seq_s": 0.00032,
                                                          "ref_context_tokens": 8192})())


def _points(seed: int = 0, n: int = 3000):
    rng = np.random.default_rng(seed)
    prompt = np.ceil(rng.lognormal(6.0, 1.0, n)).clip(1, 6000)
    output = np.ceil(rng.lognormal(5.0, 0.8, n)).clip(1, 2000)
    return prompt, output, np.full(n, 1.0 / n)


def _profile(step=H100_PAPER, limits=LIMITS, seed=0) -> EngineProfile:
    return EngineProfile(EngineModel.of(step, limits), *_points(seed))


def test_constant_decode_step_has_the_closed_form_operating_point():
    coef = np.zeros(N_STEP_COEFS)
    coef[0], coef[2] = 0.010, 2e-6  # W = 10 ms, 2 µs per prefill token
    prof = EngineProfile(EngineModel(STEP_MODEL_LINEAR, coef, LIMITS), *_points())
    p, o, w = _points()
    lam_i = 20.0
    st_ = prof.state(lam_i, [1.0])
    t_bar = 0.010 / (1.0 - lam_i * 2e-6 * float(w @ p))
    assert st_.mean_step_s[0] == pytest.approx(t_bar, rel=1e-9)
    assert st_.decode_batch[0] == pytest.approx(lam_i * float(w @ (o - 1)) * t_bar, rel=1e-9)


def test_operating_point_satisfies_littles_law_and_the_fixed_point():
    prof = _profile()
    p, o, w = _points()
    for lam, g in ((50.0, 1), (120.0, 2), (400.0, 5)):
        s = prof.state(lam, [g])
        assert s.stable[0]
        lam_i = lam / g
        # n* = λ_i E[d] t̄ (decode batch by Little's law) within the grid interpolation
        assert s.decode_batch[0] == pytest.approx(lam_i * float(w @ (o - 1)) * s.mean_step_s[0], rel=0.02)
        # t̄ is the decode step stretched by the prefill chunks: t_d / (1 - λ_i Φ)
        n = s.decode_batch[0]
        t_d = float(step_time_array_s(*H100_PAPER.kernel_coefficients(), n, n, 0.0, n * prof.mean_ctx, 0.0))
        assert s.t_d[0] == pytest.approx(t_d, rel=0.02)


def test_no_load_gives_the_lone_request_floors():
    prof = _profile()
    s = prof.state(1e-6, [1])
    ttft = prof.ttft_quantile_s(s, 0.99)[0]
    assert ttft == pytest.approx(prof.zero_load_ttft_s(0.99), rel=0.02)
    # a lone decode step of one sequence at the mean context
    assert prof.tpot_quantile_s(s, 0.5)[0] == pytest.approx(prof.zero_load_tpot_s(), rel=0.05)


def test_an_overloaded_instance_is_unstable_with_infinite_latency():
    prof = _profile()
    s = prof.state(1e5, [1])
    assert not s.stable[0] and s.rho[0] >= 1.0
    assert math.isinf(prof.ttft_quantile_s(s, 0.99)[0]) and math.isinf(prof.tpot_quantile_s(s, 0.99)[0])


@settings(max_examples=25, deadline=None)
@given(lam=st.floats(5.0, 400.0), seed=st.integers(0, 5))
@example(lam=67.0, seed=4)  # P99 TTFT 16.2 -> 16.9 ms from 10 to 11 instances: a table-reading step
def test_more_instances_never_worsen_the_percentiles(lam, seed):
    prof = _profile(seed=seed)
    counts = np.arange(1, 13, dtype=np.float64)
    s = prof.state(lam, counts)
    ttft = prof.ttft_quantile_s(s, 0.99)
    tpot = prof.tpot_quantile_s(s, 0.99)
    assert np.all(np.diff(s.rho) <= 1e-9)
    stable = np.isfinite(ttft)
    assert np.all(np.diff(stable.astype(int)) >= 0)  # once stable, stays stable
    fin = np.nonzero(stable)[0]
    # non-increasing up to the survival tables' interpolation (percentiles are read off 80-point
    # tables of a discrete prompt distribution: a few % or under a millisecond of jitter once the
    # wait has vanished)
    assert np.all(np.diff(ttft[fin]) <= 0.04 * ttft[fin][:-1] + 1e-3)
    assert np.all(np.diff(tpot[fin]) <= 0.04 * tpot[fin][:-1])


def test_survival_tables_are_distributions_and_mix_consistently():
    prof = _profile()
    s = prof.state(150.0, [2])
    for table in (ttft_table(prof, s), tpot_table(prof, s)):
        assert table.survival[0] == 1.0 and np.all(np.diff(table.survival) <= 0)
        assert np.all((table.survival >= 0) & (table.survival <= 1))
    t = ttft_table(prof, s)
    q = mixture_quantile_s([t], [1.0], 0.99)
    assert mixture_quantile_s([t, t], [0.3, 0.7], 0.99) == pytest.approx(q)
    assert q == pytest.approx(prof.ttft_quantile_s(s, 0.99)[0])
    # the table's quantile agrees with the exact survival function
    assert prof.ttft_survival(s, 0, np.array([q]))[0] == pytest.approx(0.01, rel=0.05)
    fast = ttft_table(prof, prof.state(150.0, [6]))
    mixed = mixture_quantile_s([t, fast], [0.5, 0.5], 0.99)
    assert mixture_quantile_s([fast], [1.0], 0.99) <= mixed <= q


def test_sizing_returns_the_smallest_count_meeting_the_slos():
    prof = _profile()
    lam, slo = 300.0, 0.08
    sized, st_ = size_engine_pool(prof, lam, slo, 0.99, slo_tpot_s=0.012, rho_max=0.85)
    assert sized.feasible and sized.n_instances >= 1
    assert sized.ttft_p_s <= slo and sized.tpot_p_s <= 0.012 and sized.rho <= 0.85
    below = prof.state(lam, [sized.n_instances - 1]) if sized.n_instances > 1 else None
    if below is not None:
        fails = (not below.stable[0] or below.rho[0] > 0.85 or prof.ttft_quantile_s(below, 0.99)[0] > slo
                 or prof.tpot_quantile_s(below, 0.99)[0] > 0.012)
        assert fails


def test_sizing_names_the_floor_no_count_can_beat():
    prof = _profile()
    sized, _ = size_engine_pool(prof, 50.0, prof.zero_load_ttft_s(0.99) * 0.9, 0.99)
    assert not sized.feasible and sized.reason is InfeasibleReason.PREFILL_EXCEEDS_SLO
    sized, _ = size_engine_pool(prof, 50.0, 5.0, 0.99, slo_tpot_s=prof.zero_load_tpot_s() * 0.5)
    assert not sized.feasible and sized.reason is InfeasibleReason.DECODE_EXCEEDS_TPOT_SLO
    assert sized.tpot_p_s == pytest.approx(prof.zero_load_tpot_s())


def test_zero_rate_needs_no_instance():
    sized, st_ = size_engine_pool(_profile(), 0.0, 0.5, 0.99)
    assert sized.feasible and sized.n_instances == 0 and st_ is None


def test_ttft_table_reaches_past_the_queued_prompts_full_budget_step():
    """Short prompts behind a large token budget: a queued prompt ends in a full-budget step far longer
    than its own prefill, and the survival table must reach that far (it once stopped short: a feasible
    pool with an infinite P99)."""
    rng = np.random.default_rng(3)
    prompt = np.ceil(rng.uniform(10, 400, 2000))
    output = np.ceil(rng.uniform(2, 100, 2000))
    limits = EngineLimits(max_num_seqs=256, max_num_batched_tokens=16384, kv_blocks=131072, block_size_tokens=16)
    coef = np.array(H100_PAPER.kernel_coefficients()[1], dtype=float)
    coef[2] = 2e-5  # 20 µs per prefill token: a full 16k budget step is ~0.33 s
    prof = EngineProfile(EngineModel(STEP_MODEL_LINEAR, coef, limits), prompt, output,
                         np.full(prompt.size, 1.0 / prompt.size))
    st_ = prof.state(5.0, [1])
    assert st_.stable[0] and float(st_.t_full_levels[0].max()) > 10 * float(st_.prefill_levels[0][:, 0].max())
    q = prof.ttft_quantile_s(st_, 0.99)[0]
    assert math.isfinite(q)
    assert float(prof.ttft_survival(st_, 0, np.array([q]))[0]) == pytest.approx(0.01, rel=0.15)  # table reading
