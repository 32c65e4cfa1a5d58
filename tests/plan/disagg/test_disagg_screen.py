"""The disaggregated screen's formulas against exact Erlang-C and hand calculations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.hardware import load_catalog
from fleetplan.perf.afd import AfdLink, afd_step
from fleetplan.plan.disagg.screen import (
    AfdUnit,
    ModelShape,
    afd_step_s,
    decode_instances,
    decode_load,
    kv_batch_limit,
    linear_decode_batch,
    linear_decode_step_s,
    linear_fit,
    prefill_moments,
    prefill_service_s,
)
from fleetplan.queueing import size_pool

H100 = load_catalog().get("h100").require_serving()
A100 = load_catalog().get("a100").require_serving()
SHAPE = ModelShape("toy", 327_680.0, 80, 8192, 0.18)


def erlang_c_by_hand(c: int, a: float) -> float:
    """C(c, a) = (a^c / c!) (c / (c - a)) / (sum_{k<c} a^k / k! + (a^c / c!) (c / (c - a)))."""
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


@pytest.mark.parametrize(("prompt", "rate", "after_s"), [(2000, 6.0, 0.03), (700, 20.0, 0.0), (4096, 3.0, 0.1)])
def test_prefill_pool_matches_exact_erlang_c(prompt, rate, after_s):
    # One prompt length: S_p is deterministic (Cs² = 0), so TTFT_p = W_p + S_p + after exactly, with the
    # exponential tail W_p = ln(C / (1 - p)) / (2 (P/S - λ)) (0 when C <= 1 - p).
    s_p = math.ceil(prompt / H100.chunk_tokens) * H100.iter_base_s + H100.iter_per_seq_s / 8192 * prompt
    assert prefill_service_s(np.array([float(prompt)]), H100)[0] == pytest.approx(s_p, rel=1e-12)
    moments = prefill_moments(np.array([float(prompt)]), np.array([1.0]), H100, np.array([after_s]))
    slo, p = 0.5, 0.99
    sized = size_pool(rate, moments, slo, p, rho_max=0.85)
    n = sized.n_gpus

    def ttft(c: int) -> float:
        big_c = erlang_c_by_hand(c, rate * s_p)
        wait = math.log(big_c / (1 - p)) / (2 * (c / s_p - rate)) if big_c > 1 - p else 0.0
        return wait + s_p + after_s

    assert sized.feasible and sized.ttft_p_s == pytest.approx(ttft(n), rel=1e-9)
    assert sized.rho == pytest.approx(rate * s_p / n)
    # minimal: one instance fewer breaks the utilisation cap or the SLO
    c = n - 1
    assert c < 1 or rate * s_p / c > 0.85 or ttft(c) > slo


def test_decode_batch_and_instances_by_hand():
    c_bar = 1000.0
    n_tpot = math.floor((0.05 - 0.004) * 8192 / (0.00032 * c_bar))  # (TPOT - W) L_ref / (H c̄) = 1177
    n_kv = 131072 // math.ceil(c_bar / 16)  # 2080
    assert linear_decode_batch(H100, c_bar, 0.05) == min(n_tpot, n_kv) == 1177
    assert kv_batch_limit(H100.kv_blocks, 16, c_bar) == n_kv
    # a short TPOT target below one sequence's step: no batch
    assert linear_decode_batch(H100, c_bar, 0.004) == 0
    step = float(linear_decode_step_s(1177, H100, c_bar))
    assert step <= 0.05 < float(linear_decode_step_s(1178, H100, c_bar))
    load = decode_load(np.array([500.0]), np.array([200.0]), np.array([1.0]))
    # D = ceil(λ E[L_out] t / (n ρ_max)): 100 * 200 * step / (1177 * 0.85)
    assert decode_instances(100.0, load, step, 1177, 0.85) == math.ceil(100 * 200 * step / (1177 * 0.85))


def test_mean_decode_context_is_length_biased():
    # two requests: (L_in, L_out) = (100, 10) and (1000, 30) equally likely
    load = decode_load(np.array([100.0, 1000.0]), np.array([10.0, 30.0]), np.array([0.5, 0.5]))
    want = (0.5 * (10 * 100 + 10 * 9 / 2) + 0.5 * (30 * 1000 + 30 * 29 / 2)) / 20
    assert load.mean_context_tokens == pytest.approx(want)
    assert load.mean_output_tokens == 20 and load.output_cs2 == pytest.approx(100 / 400)


@given(st.floats(0.005, 0.3), st.floats(0.005, 0.3), st.floats(50, 20000))
@settings(max_examples=60, deadline=None)
def test_decode_capacity_is_monotone_in_the_tpot_target(t1, t2, c_bar):
    lo, hi = sorted((t1, t2))
    assert linear_decode_batch(A100, c_bar, lo) <= linear_decode_batch(A100, c_bar, hi)
    unit = AfdUnit(H100, A100, 2, 1, 2, 50e9, 1e-5)
    assert unit.batch(c_bar, lo, SHAPE)[0] <= unit.batch(c_bar, hi, SHAPE)[0]


def test_vectorised_afd_step_is_perf_afd_step():
    link = AfdLink(25e9, 3e-6)
    attn = np.array([1e-4, 3e-4, 7e-4])
    ser = np.array([2e-5, 5e-5, 1e-4])
    got = afd_step_s(attn, 2e-4, ser, link.latency_s, 6, 3)
    for i in range(3):
        want = afd_step(attn[i], 2e-4, ser[i] * link.bandwidth_bytes_per_s, link, 6, 3).step_s
        assert got[i] == pytest.approx(want, rel=1e-12)


def test_afd_unit_collapses_to_the_fused_step():
    # a = f = m = 1 with a free link: every layer's attention then FFN = W + H n c̄ / L_ref
    unit = AfdUnit(H100, H100, 1, 1, 1, 1e30, 0.0)
    n = np.array([1, 64, 500])
    assert unit.step_s(n, 900.0, SHAPE) == pytest.approx(linear_decode_step_s(n, H100, 900.0), rel=1e-9)


def test_linear_fit_is_exact_at_its_two_points():
    base, slope = linear_fit(0.01, 0.04, 100, 500.0)
    assert base + slope * 500.0 == pytest.approx(0.01) and base + slope * 100 * 500.0 == pytest.approx(0.04)
