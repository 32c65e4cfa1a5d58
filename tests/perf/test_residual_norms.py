"""The residual-norm term of the step model (``fleetplan.perf.predictor``, "Residual norms"): its value
against the hand computation of its equation, zero for dense models, the same seconds in ``predict`` and in
the simulator kernel's coefficients, and linear in the step's tokens."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.perf.batch import parse_batch
from fleetplan.perf.linear import roofline_step_s
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import NORM_BANDWIDTH_EFFICIENCY, NORM_VALUES_PER_TOKEN, StepTimePredictor


@pytest.fixture(scope="module")
def v3_h200() -> StepTimePredictor:
    return StepTimePredictor(load_model("deepseek-v3"), load_catalog().get("H200"), Parallelism(tp=8), Dtype.FP8)


def test_norm_term_is_its_equation(v3_h200: StepTimePredictor) -> None:
    """(2 L + 1) fused add-RMSNorms of 4 h BF16 values per token at 0.8 of the HBM peak: DeepSeek-V3 (61
    layers, h 7168) on an H200 (4.8 TB/s) pays 123 * 4 * 7168 * 2 B / 3.84 TB/s = 1.836 us a token, 3.76 ms
    for a 2,048-token prefill (AIConfigurator 0.12.0's estimate of the same ops: 4.10 ms)."""
    m, gpu = v3_h200.model, v3_h200.gpu
    assert (m.n_layers, m.hidden_size, gpu.hbm_tb_per_s) == (61, 7168, 4.8)
    expected = 123 * NORM_VALUES_PER_TOKEN * 7168 * 2 / (4.8e12 * NORM_BANDWIDTH_EFFICIENCY)
    assert v3_h200.norm_s_per_token == pytest.approx(expected, rel=1e-12)
    assert v3_h200.predict(parse_batch("prefill=2048@0")).seconds["norms"] == pytest.approx(3.761e-3, rel=1e-3)


def test_dense_models_carry_no_norm_term() -> None:
    """A dense model's fitted GEMM efficiency holds its norms: no separate term."""
    p = StepTimePredictor(load_model("llama-3.1-8b"), load_catalog().get("H100-SXM"), Parallelism(tp=1))
    assert p.norm_s_per_token == 0.0
    assert p.predict(parse_batch("prefill=2048@0")).seconds["norms"] == 0.0


def test_kernel_coefficients_carry_the_norms(v3_h200: StepTimePredictor) -> None:
    """The kernel's per-token slope ``coef[10]`` is the collectives' slopes plus the norms, so the simulator
    and the analytic model charge the same seconds as ``predict``."""
    c = v3_h200.comm_terms
    coef = v3_h200.kernel_coefficients()[1]
    assert coef[10] == pytest.approx(c.tp_all_reduce[1] + c.ep_all_to_all[1] + c.pp_send_recv[1]
                                     + v3_h200.norm_s_per_token, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(tokens=st.integers(1, 16384))
def test_norms_add_linearly_to_the_step(tokens: int) -> None:
    """Removing the norm slope from the kernel's coefficients lowers a prefill step by exactly
    ``norm_s_per_token * tokens``, the breakdown's ``norms`` entry."""
    p = StepTimePredictor(load_model("qwen3-235b-a22b"), load_catalog().get("H100-SXM"), Parallelism(tp=8))
    coef = p.kernel_coefficients()[1]
    without = coef.copy()
    without[10] -= p.norm_s_per_token
    args = (1, 0, tokens, 0, tokens * tokens)
    assert roofline_step_s(coef, *args) - roofline_step_s(without, *args) == pytest.approx(
        p.norm_s_per_token * tokens, rel=1e-9, abs=1e-15)
    assert p.predict(parse_batch(f"prefill={tokens}@0")).seconds["norms"] == pytest.approx(
        p.norm_s_per_token * tokens, rel=1e-12)
    assert dataclasses.replace(p, model=dataclasses.replace(p.model, hidden_size=2 * p.model.hidden_size)
                               ).norm_s_per_token == pytest.approx(2 * p.norm_s_per_token, rel=1e-12)
