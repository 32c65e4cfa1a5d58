"""The disaggregated screen's formulas against exact Erlang-C and hand calculations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.hardware import load_catalog
from fleetplan.perf.afd import AfdLink, afd_step
from fleetplan.plan.disagg.screen import AfdUnit, ModelShape, afd_step_s, decode_load, linear_fit

H100 = load_catalog().get("h100").require_serving()
A100 = load_catalog().get("a100").require_serving()
SHAPE = ModelShape("toy", 327_680.0, 80, 8192, 0.18)


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
    fused = H100.iter_base_s + H100.iter_per_seq_s * n * 900.0 / H100.ref_context_tokens
    assert unit.step_s(n, 900.0, SHAPE) == pytest.approx(fused, rel=1e-9)


def test_linear_fit_is_exact_at_its_two_points():
    base, slope = linear_fit(0.01, 0.04, 100, 500.0)
    assert base + slope * 500.0 == pytest.approx(0.01) and base + slope * 100 * 500.0 == pytest.approx(0.04)
