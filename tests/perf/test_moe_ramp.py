"""The fused MoE's ramp with rows per expert (``fleetplan.perf.moe``, 'Rows per expert';
``PredictorOptions.moe_hit_expert_weight_reads``).

Theory: each hit expert costs ``r0`` rows of compute beyond its routed rows, normalised so that the read-back
efficiency holds at ``R_ref`` rows per hit expert; with every expert hit on one GPU the routed experts' compute is
``(T k s_w + r0 E) per_row / (1 + r0 / (s_w R_ref))``, so the efficiency is ``eff (1 + r0 / R_ref) R / (R + r0)``
at ``R = T k / E`` rows per expert (``s_w = 1``).  Invariants: ``rho = 0`` and dense models are untouched (same
coefficients, bit for bit); the kernel form ``c[21] q`` is the expectation of the sampled routing; the analytic
step (``step_time_array_s``) and the simulator's (``roofline_step_s``) agree; decode stays bound by the weight
reads; the profiles carry the tables' read-back (checked against the tables when ``aiconfigurator-core`` is
installed).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.models import Dtype, load_model
from fleetplan.perf.batch import BatchComposition
from fleetplan.perf.calibrate import CalibratedStepModel
from fleetplan.perf.engine_profile import load_engine_profile
from fleetplan.perf.linear import N_STEP_COEFS, STEP_MODEL_ROOFLINE
from fleetplan.perf.moe import MOE_REFERENCE_ROWS_PER_EXPERT, sample_moe_s
from fleetplan.perf.overheads import PredictorOptions
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from tests.perf.phases import assert_phases_agree

ROOT = Path(__file__).resolve().parents[2]
RHO = 1.5  # the vLLM and SGLang profiles' value


def _pair(catalog, model: str, gpu: str, dtype: Dtype, par: Parallelism, rho: float = RHO, **options):
    """(predictor with the ramp, the same without)."""
    opts = PredictorOptions(moe_gemm_efficiency=0.38, moe_fp8_gemm_efficiency=0.23, moe_hit_expert_weight_reads=rho,
                            **options)
    m, g = load_model(model), catalog.get(gpu)
    return (StepTimePredictor(m, g, par, dtype, options=opts),
            StepTimePredictor(m, g, par, dtype, options=dataclasses.replace(opts, moe_hit_expert_weight_reads=0.0)))


def test_r0_is_rho_weight_reads_in_rows(catalog) -> None:
    """``r0 = rho * w / HBM peak * FLOP/s / flop_per_row``: BF16 experts, 0.38 of the H100's 989.5 TFLOPS and its
    3.35 TB/s -> one read is 2 bytes x 0.38 x 989.5e12 / (2 x 3.35e12) = 112.2 rows, r0 = 168.3."""
    ramp, _ = _pair(catalog, "qwen3-30b-a3b", "H100-SXM", Dtype.BF16, Parallelism(tp=1))
    gpu = catalog.get("H100-SXM")
    one_read = 2.0 * 0.38 * gpu.bf16_tflops * 1e12 / (2.0 * gpu.hbm_tb_per_s * 1e12)
    assert ramp.moe.hit_expert_rows == pytest.approx(RHO * one_read, rel=1e-12)


@pytest.mark.parametrize("tokens", [512, 1024, 2048, 4096, 16384])
def test_compute_term_follows_the_ramp(catalog, tokens: int) -> None:
    """One GPU, every expert hit (uniform routing, 128 experts top-8 at >= 512 tokens: miss < 1e-14): the experts'
    compute term over the flat model's is ``(R + r0) / (R (1 + r0 / R_ref))`` at ``R = T k / E``; the step takes
    the larger of it and the weight reads (at 16,384 tokens compute-bound in both)."""
    ramp, flat = _pair(catalog, "qwen3-30b-a3b", "H100-SXM", Dtype.BF16, Parallelism(tp=1))
    a, b, _, d, _, _, h = ramp._moe_coefficients
    a0, b0, *_, h0 = flat._moe_coefficients
    assert b == b0 == h0 == 0.0
    q = -math.expm1(d * tokens)
    r0, rows = ramp.moe.hit_expert_rows, tokens * 8 / 128
    ratio = (a * tokens + h * q) / (a0 * tokens)
    assert ratio == pytest.approx((rows + r0) / (rows * (1.0 + r0 / MOE_REFERENCE_ROWS_PER_EXPERT)), rel=1e-9)
    if tokens == 16384:
        assert ramp._moe_s(tokens, None) / flat._moe_s(tokens, None) == pytest.approx(ratio, rel=1e-12)


def test_reference_rows_keep_the_read_back_with_the_width_factor(catalog) -> None:
    """Under expert TP the width factor scales the rows, not the offset, and the normalisation keeps
    ``R = R_ref`` at the read-back times the width factor: DeepSeek-V3 at TP 8 (256 experts top-8), 9,216
    tokens = 288 rows per expert, every expert hit."""
    ramp, flat = _pair(catalog, "deepseek-v3", "H200", Dtype.FP8, Parallelism(tp=8), moe_width_exponent=0.5)
    assert ramp.moe.row_compute_scale > 1.0 and ramp.moe.hit_expert_rows > 0.0
    tokens = int(MOE_REFERENCE_ROWS_PER_EXPERT * 256 / 8)
    batch = BatchComposition.uniform(0, 1, 1, tokens)
    assert ramp.predict(batch).seconds["moe_experts"] == pytest.approx(flat.predict(batch).seconds["moe_experts"],
                                                                       rel=1e-9)


def test_decode_stays_bound_by_the_weight_reads(catalog) -> None:
    """A batch-8 decode step on one H100 (BF16, vLLM's weight-streaming efficiency 0.78): the offset of about
    rho / (1 + r0 / R_ref) = 0.95 reads at the peak is below one read at 0.78 of it; the step does not move."""
    ramp, flat = _pair(catalog, "qwen3-30b-a3b", "H100-SXM", Dtype.BF16, Parallelism(tp=1),
                       weight_bandwidth_efficiency=0.78)
    batch = BatchComposition.uniform(8, 2000, 0, 0)
    assert ramp.predict(batch).seconds["moe_experts"] == flat.predict(batch).seconds["moe_experts"]


def test_rho_zero_and_dense_models_are_untouched(catalog) -> None:
    """``rho = 0`` leaves every coefficient bit for bit (``c[21] = 0``); a dense model's coefficients are the same
    whatever ``rho``."""
    ramp, flat = _pair(catalog, "qwen3-30b-a3b", "H100-SXM", Dtype.BF16, Parallelism(tp=1))
    zero, _ = _pair(catalog, "qwen3-30b-a3b", "H100-SXM", Dtype.BF16, Parallelism(tp=1), rho=0.0)
    assert np.array_equal(zero.kernel_coefficients()[1], flat.kernel_coefficients()[1])
    assert flat.kernel_coefficients()[1][21] == 0.0 < ramp.kernel_coefficients()[1][21]
    dense, dense_flat = _pair(catalog, "llama-3.1-8b", "H100-SXM", Dtype.BF16, Parallelism(tp=1))
    assert dense.moe is None
    assert np.array_equal(dense.kernel_coefficients()[1], dense_flat.kernel_coefficients()[1])


@pytest.mark.parametrize(("model", "gpu", "dtype", "par"), [
    ("gpt-oss-120b", "A100-80GB", Dtype.MXFP4, Parallelism(tp=1)),
    ("qwen3-30b-a3b", "H100-SXM", Dtype.BF16, Parallelism(tp=2, ep=2)),
])
def test_kernel_form_is_the_sampled_routings_mean(catalog, model, gpu, dtype, par) -> None:
    """The kernel's expected form (``c[21] q`` with the rest) against the mean of sampled routings (uniform,
    200 steps each): within 2 % at 64-8,192 tokens, as the flat model (module docstring's figure)."""
    ramp, _ = _pair(catalog, model, gpu, dtype, par)
    rng = np.random.default_rng(7)
    for tokens in (64, 512, 2048, 8192):
        sampled = np.mean([sample_moe_s(ramp.moe, ramp.moe_rates, tokens, 0.0, rng) for _ in range(200)])
        assert ramp._moe_s(tokens, None) == pytest.approx(sampled, rel=0.02)


@pytest.mark.parametrize(("model", "gpu", "dtype", "par"), [
    ("gpt-oss-120b", "A100-80GB", Dtype.MXFP4, Parallelism(tp=1)),
    ("deepseek-v3", "H200", Dtype.FP8, Parallelism(tp=8, ep=8)),
])
def test_analytic_and_simulator_steps_agree(catalog, model, gpu, dtype, par) -> None:
    """The simulator's step (``roofline_step_s``, the kernel's order) and the analytic engine model's
    (``step_time_array_s``) on the same coefficients, mixed steps of 1-8,192 prefill tokens; and both equal the
    predictor's own sum of parts with expected routing (``predict``)."""
    ramp, _ = _pair(catalog, model, gpu, dtype, par)
    code, coef = ramp.kernel_coefficients()
    assert code == STEP_MODEL_ROOFLINE and coef.size == N_STEP_COEFS and coef[21] > 0.0
    assert_phases_agree(ramp, ((0, 2048), (8, 512), (64, 0), (1, 8192), (32, 4096)), 1000)


def test_a_negative_or_non_finite_rho_is_refused() -> None:
    for bad in (-0.5, math.nan, math.inf):
        with pytest.raises(ConfigError, match="moe_hit_expert_weight_reads"):
            PredictorOptions(moe_hit_expert_weight_reads=bad)


def test_a_profile_saved_before_the_offset_reads_without_it() -> None:
    """A calibrated profile of 21 coefficients (before ``c[21]``) reads as 22 with no offset."""
    old = CalibratedStepModel(coefficients=tuple([1e-3] + [0.0] * 4 + [64.0] + [0.0] * 15), scales={}, model="m",
                              gpu="g", parallelism="-tp 1", weight_dtype="bf16", kv_dtype="bf16", holdout_mape=0.0,
                              n_rows=10, source="test")
    assert len(old.coefficients) == N_STEP_COEFS and old.coefficients[21] == 0.0


@pytest.mark.parametrize(("engine", "gpu", "rho"), [("vllm", "H100-SXM", 1.5), ("vllm", "A100-80GB", 1.5),
                                                    ("sglang", "B200", 1.5), ("vllm", "MI300X", 0.0),
                                                    ("sglang", "MI300X", 0.0), ("trtllm", "H100-SXM", 0.0)])
def test_profiles_carry_the_ramp_read_back(catalog, engine: str, gpu: str, rho: float) -> None:
    """``python benchmarks/aiconfigurator_compare.py --moe-ramp``; MI300X (no table) and engines without a fit keep
    the flat read-back."""
    profile = load_engine_profile(engine)
    assert profile.options_for(catalog.get(gpu), Dtype.BF16).moe_hit_expert_weight_reads == rho
    if rho:
        assert "--moe-ramp" in profile.sources["moe_hit_expert_weight_reads"]


def test_the_tables_give_the_profiles_values() -> None:
    """Against AIConfigurator 0.12.0's fused-MoE tables (skipped without ``aiconfigurator-core``): BF16 and
    block-FP8 experts of both engines fit ``rho = 1.5`` at ``R_ref = MOE_REFERENCE_ROWS_PER_EXPERT``, the read-back's
    median stays within 1 %, and the ramp brings 1,024-3,072 tokens from >= 1.7x too fast to within 2 %."""
    pytest.importorskip("aiconfigurator_core")
    spec = importlib.util.spec_from_file_location("aiconfigurator_compare",
                                                  ROOT / "benchmarks" / "aiconfigurator_compare.py")
    aic = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(aic)
    fits = {(g["engine"], g["group"]): g for g in aic.moe_ramp_fit()}
    for engine in ("vllm", "sglang"):
        g = fits[(engine, "bf16 + fp8_block")]
        assert (g["rho"], g["ref_rows"]) == (1.5, MOE_REFERENCE_ROWS_PER_EXPERT)
        assert abs(g["fit"]["read_median"]) <= 0.01
        assert g["flat"]["ramp_median"] > math.log(1.7) and abs(g["fit"]["ramp_median"]) < 0.02
