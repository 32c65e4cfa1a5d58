"""The routed experts' grouped-GEMM efficiency (``PredictorOptions.moe_gemm_efficiency`` /
``moe_fp8_gemm_efficiency``) and its read-back values in the bundled engine profiles.

Invariants: unset, the experts keep the dense GEMMs' rate (the predictor is unchanged); set, only the experts'
compute rate moves -- a compute-bound MoE step's expert time scales as 1 / efficiency against the dtype's peak
(BF16 peak for BF16 and weight-only MXFP4 experts, FP8 peak for W8A8 FP8), the dense GEMMs, attention and a
memory-bound decode step do not move; the full predictor and the simulator's coefficients agree; a value
outside (0, 1] is refused naming the option.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.errors import ConfigError
from fleetplan.models import Dtype, load_model
from fleetplan.perf.batch import BatchComposition
from fleetplan.perf.engine_profile import load_engine_profile
from fleetplan.perf.moe import expert_width_factor
from fleetplan.perf.overheads import PredictorOptions
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor

BIG_PREFILL = BatchComposition.uniform(0, 1, 2, 8192)  # 16,384 tokens: the experts are compute-bound


def _predictor(catalog, model, gpu: str, dtype: Dtype, **options) -> StepTimePredictor:
    return StepTimePredictor(model, catalog.get(gpu), Parallelism.vllm(tensor_parallel_size=1), dtype,
                             options=PredictorOptions(**options))


def test_unset_keeps_the_dense_rate(catalog, qwen_moe) -> None:
    p = _predictor(catalog, qwen_moe, "H100-SXM", Dtype.BF16)
    assert p.moe_rates is p.rates


@pytest.mark.parametrize(("gpu", "dtype", "option", "peak"), [
    ("H100-SXM", Dtype.BF16, "moe_gemm_efficiency", "bf16_tflops"),
    ("A100-80GB", Dtype.BF16, "moe_gemm_efficiency", "bf16_tflops"),
    ("H100-SXM", Dtype.FP8, "moe_fp8_gemm_efficiency", "fp8_tflops"),
    ("A100-80GB", Dtype.FP8, "moe_gemm_efficiency", "bf16_tflops"),  # no FP8 cores: weight-only at the BF16 rate
])
def test_expert_rate_is_the_efficiency_of_the_dtypes_peak(catalog, qwen_moe, gpu, dtype, option, peak) -> None:
    p = _predictor(catalog, qwen_moe, gpu, dtype, **{option: 0.25})
    assert p.moe_rates.gemm_flop_per_s == pytest.approx(getattr(catalog.get(gpu), peak) * 1e12 * 0.25)
    # everything but the experts' compute rate is the dense predictor's
    assert dataclasses.replace(p.moe_rates, gemm_flop_per_s=p.rates.gemm_flop_per_s) == p.rates


def test_compute_bound_experts_scale_as_one_over_efficiency(catalog, qwen_moe) -> None:
    base = _predictor(catalog, qwen_moe, "H100-SXM", Dtype.BF16)
    slow = _predictor(catalog, qwen_moe, "H100-SXM", Dtype.BF16, moe_gemm_efficiency=0.33)
    b, s = base.predict(BIG_PREFILL).seconds, slow.predict(BIG_PREFILL).seconds
    assert s["moe_experts"] == pytest.approx(b["moe_experts"] * 0.66 / 0.33, rel=1e-9)
    for name in ("gemm", "attention_prefill", "cpu_overhead", "moe_layer_latency"):
        assert s[name] == b[name]


def test_mxfp4_experts_use_the_bf16_peak(catalog) -> None:
    oss = load_model("gpt-oss-20b")
    base = _predictor(catalog, oss, "H100-SXM", Dtype.MXFP4)
    slow = _predictor(catalog, oss, "H100-SXM", Dtype.MXFP4, moe_gemm_efficiency=0.33,
                      moe_fp8_gemm_efficiency=0.1)
    assert slow.predict(BIG_PREFILL).seconds["moe_experts"] == pytest.approx(
        base.predict(BIG_PREFILL).seconds["moe_experts"] * 2.0, rel=1e-9)


def test_memory_bound_decode_is_unchanged(catalog, qwen_moe) -> None:
    decode = BatchComposition.uniform(4, 2048)
    base = _predictor(catalog, qwen_moe, "H100-SXM", Dtype.BF16)
    slow = _predictor(catalog, qwen_moe, "H100-SXM", Dtype.BF16, moe_gemm_efficiency=0.33)
    assert slow.predict(decode).total_s == pytest.approx(base.predict(decode).total_s, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(n_decode=st.integers(0, 256), context=st.integers(1, 8192), n_prefill=st.integers(0, 2),
       chunk=st.integers(1, 8192), eff=st.floats(0.05, 1.0))
def test_kernel_coefficients_equal_the_predictor(catalog, qwen_moe, n_decode, context, n_prefill, chunk,
                                                 eff) -> None:
    if n_decode + n_prefill == 0:
        n_decode = 1
    p = _predictor(catalog, qwen_moe, "H200", Dtype.BF16, moe_gemm_efficiency=eff)
    batch = BatchComposition.uniform(n_decode, context, n_prefill, chunk)
    args = (n_decode + n_prefill, n_decode, n_prefill * chunk, n_decode * context, int(batch.attention_work * 2))
    assert p.step_s(*args) == pytest.approx(p.predict(batch).total_s, rel=1e-9)


@pytest.mark.parametrize("option", ["moe_gemm_efficiency", "moe_fp8_gemm_efficiency"])
@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, True])
def test_out_of_range_is_refused_naming_the_option(option, bad) -> None:
    with pytest.raises(ConfigError, match=option):
        PredictorOptions(**{option: bad})


@pytest.mark.parametrize(("engine", "gpu", "bf16", "fp8"), [
    ("vllm", "H100-SXM", 0.38, 0.23), ("vllm", "H200", 0.44, 0.24), ("vllm", "B200", 0.31, 0.16),
    ("vllm", "A100-80GB", 0.28, 0.23), ("sglang", "H100-SXM", 0.21, 0.26), ("sglang", "H200", 0.23, 0.29),
    ("sglang", "B200", 0.30, 0.16), ("sglang", "A100-80GB", 0.34, 0.26),
])
def test_profiles_carry_the_aiconfigurator_read_back(catalog, engine, gpu, bf16, fp8) -> None:
    """The values of ``python benchmarks/aiconfigurator_compare.py --moe-tables`` (medians, rounded), each
    sourced to those tables."""
    profile = load_engine_profile(engine)
    options = profile.options_for(catalog.get(gpu), Dtype.BF16)
    assert (options.moe_gemm_efficiency, options.moe_fp8_gemm_efficiency) == (bf16, fp8)
    sources = profile.gpu_sources.get(gpu, profile.sources)
    assert "moe_perf.parquet" in sources.get("moe_gemm_efficiency", profile.sources["moe_gemm_efficiency"])


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_mi300x_keeps_the_dense_efficiency(catalog, engine) -> None:
    """No AIConfigurator table for MI300X: its experts keep the dense GEMMs' rate, as before the read-back."""
    profile = load_engine_profile(engine)
    o = profile.options_for(catalog.get("MI300X"), Dtype.BF16)
    assert o.moe_gemm_efficiency == o.gemm_efficiency


def test_perf_explain_times_the_experts_at_the_profiles_read_back(catalog) -> None:
    """End to end: ``fleetplan perf explain --engine vllm`` on an A100 times gpt-oss-20b's MXFP4 experts at the
    profile's A100 Marlin read-back (0.41 of the BF16 peak), the library's figure, exit 0."""
    import re

    from click.testing import CliRunner

    from fleetplan.cli.main import cli

    result = CliRunner().invoke(cli, ["perf", "explain", "--model", "gpt-oss-20b", "--gpu", "a100", "--engine", "vllm",
                                      "--batch", "prefill=2048@0"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    shown_ms = float(re.search(r"moe_experts\s*│\s*([\d.]+)", result.output).group(1))
    gpu = catalog.get("A100-80GB")
    p = StepTimePredictor(load_model("gpt-oss-20b"), gpu, Parallelism.vllm(tensor_parallel_size=1), Dtype.MXFP4,
                          options=load_engine_profile("vllm").options_for(gpu, Dtype.MXFP4))
    assert p.moe_rates.gemm_flop_per_s == pytest.approx(gpu.bf16_tflops * 1e12 * 0.41)
    expected_ms = p.predict(BatchComposition.uniform(0, 1, 1, 2048)).seconds["moe_experts"] * 1e3
    assert shown_ms == pytest.approx(expected_ms, abs=1e-3)


def test_int4_experts_use_their_own_efficiency(catalog) -> None:
    """INT4 weight-only (Marlin W4A16) experts run at ``moe_int4_gemm_efficiency`` of the BF16 peak where given,
    at ``moe_gemm_efficiency`` otherwise; other dtypes ignore it."""
    kimi = load_model("kimi-k2")
    h200 = catalog.get("H200")
    p = _predictor(catalog, kimi, "H200", Dtype.INT4, moe_gemm_efficiency=0.44, moe_int4_gemm_efficiency=0.22)
    assert p.moe_rates.gemm_flop_per_s == pytest.approx(h200.bf16_tflops * 1e12 * 0.22)
    unset = _predictor(catalog, kimi, "H200", Dtype.INT4, moe_gemm_efficiency=0.44)
    assert unset.moe_rates.gemm_flop_per_s == pytest.approx(h200.bf16_tflops * 1e12 * 0.44)
    big = BatchComposition.uniform(0, 1, 1, 8192)
    assert p.predict(big).seconds["moe_experts"] == pytest.approx(
        unset.predict(big).seconds["moe_experts"] * 2.0, rel=1e-9)
    bf16 = _predictor(catalog, kimi, "H200", Dtype.BF16, moe_gemm_efficiency=0.44, moe_int4_gemm_efficiency=0.22)
    assert bf16.moe_rates.gemm_flop_per_s == pytest.approx(h200.bf16_tflops * 1e12 * 0.44)
    with pytest.raises(ConfigError, match="moe_int4_gemm_efficiency"):
        PredictorOptions(moe_int4_gemm_efficiency=1.5)


@pytest.mark.parametrize(("gpu", "int4"), [("H100-SXM", 0.23), ("H200", 0.23), ("B200", 0.11), ("A100-80GB", 0.41),
                                         ("L40S", None)])
def test_vllm_profile_carries_the_int4_read_back(catalog, gpu, int4) -> None:
    """vLLM 0.24.0's ``int4_wo`` fused-MoE tables (Kimi-K2's expert shape); on the A100, SGLang 0.5.10's Marlin MoE
    table (vLLM has none there), each sourced; no table, no value."""
    profile = load_engine_profile("vllm")
    assert profile.options_for(catalog.get(gpu), Dtype.INT4).moe_int4_gemm_efficiency == int4
    if int4 is not None:
        assert "int4_wo" in profile.gpu_sources[gpu]["moe_int4_gemm_efficiency"]


def test_mxfp4_experts_use_their_own_efficiency(catalog) -> None:
    """MXFP4 weight-only experts (gpt-oss) run at ``moe_mxfp4_gemm_efficiency`` of the BF16 peak where given, at
    ``moe_gemm_efficiency`` otherwise; a compute-bound step's expert time scales as 1 / efficiency; INT4 and BF16
    experts ignore it; a value outside (0, 1] is refused naming the option."""
    oss = load_model("gpt-oss-120b")
    h100 = catalog.get("H100-SXM")
    p = _predictor(catalog, oss, "H100-SXM", Dtype.MXFP4, moe_gemm_efficiency=0.42, moe_mxfp4_gemm_efficiency=0.21)
    assert p.moe_rates.gemm_flop_per_s == pytest.approx(h100.bf16_tflops * 1e12 * 0.21)
    unset = _predictor(catalog, oss, "H100-SXM", Dtype.MXFP4, moe_gemm_efficiency=0.42)
    assert unset.moe_rates.gemm_flop_per_s == pytest.approx(h100.bf16_tflops * 1e12 * 0.42)
    big = BatchComposition.uniform(0, 1, 1, 16384)
    assert p.predict(big).seconds["moe_experts"] == pytest.approx(
        unset.predict(big).seconds["moe_experts"] * 2.0, rel=1e-9)
    assert p.predict(big).seconds["attention_prefill"] == unset.predict(big).seconds["attention_prefill"]
    kimi = load_model("kimi-k2")
    int4 = _predictor(catalog, kimi, "H100-SXM", Dtype.INT4, moe_gemm_efficiency=0.42, moe_mxfp4_gemm_efficiency=0.21)
    assert int4.moe_rates.gemm_flop_per_s == pytest.approx(h100.bf16_tflops * 1e12 * 0.42)
    with pytest.raises(ConfigError, match="moe_mxfp4_gemm_efficiency"):
        PredictorOptions(moe_mxfp4_gemm_efficiency=0.0)


@pytest.mark.parametrize(("gpu", "version", "mxfp4", "kernel"), [
    ("H100-SXM", None, 0.49, "oaitritonmxfp4experts"), ("H200", "0.13.0", 0.49, "oaitritonmxfp4experts"),
    ("H100-SXM", "0.11.0", 0.21, "marlin"), ("H200", "0.10.2", 0.21, "marlin"),
    ("B200", None, 0.23, "flashinfer_trtllm"),
    ("A100-80GB", None, 0.41, "sglang_marlin_moe"), ("A100-40GB", "0.10.2", 0.41, "sglang_marlin_moe"),
    ("L40S", None, None, None)])
def test_vllm_profile_carries_the_mxfp4_read_back(catalog, gpu, version, mxfp4, kernel) -> None:
    """vLLM's MXFP4 experts per GPU and release: Marlin on Ampere and on Hopper without triton_kernels (vLLM before
    0.11.1: the 0.10.2 / 0.11.0 wheels), the OpenAI Triton kernels on Hopper from 0.11.1 (the default version),
    FlashInfer's TRT-LLM MXFP4 MoE on B200; each value names its AIConfigurator table and kernel."""
    profile = load_engine_profile("vllm")
    assert profile.options_for(catalog.get(gpu), Dtype.MXFP4, version).moe_mxfp4_gemm_efficiency == mxfp4
    if mxfp4 is not None:
        source = profile.source_of("moe_mxfp4_gemm_efficiency", catalog.get(gpu), version)
        assert "moe_perf.parquet" in source and kernel in source and "get_mxfp4_backend" in source


def test_expert_width_factor_by_hand() -> None:
    """``min(1, (w / 1024) ** x)``: 256-wide experts at x = 0.5 run at half the read-back, 1,024 and wider at all
    of it; x = 0 is no factor."""
    assert expert_width_factor(256, 0.5) == pytest.approx(0.5)
    assert expert_width_factor(128, 0.5) == pytest.approx(8 ** -0.5)
    assert expert_width_factor(1024, 0.5) == 1.0 == expert_width_factor(14336, 0.5)
    assert expert_width_factor(64, 0.0) == 1.0
    with pytest.raises(ConfigError, match="moe_width_exponent"):
        PredictorOptions(moe_width_exponent=-0.1)


@settings(max_examples=30, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8, 16]), x=st.floats(0.0, 1.0))
def test_expert_tp_scales_the_expert_rate_by_the_width_factor(catalog, tp: int, x: float) -> None:
    """The routed rows' compute is divided by the factor of ``I / ffn_tp`` (a compute-bound step's experts take
    1 / factor as long), the tile floor and the rates keep the read-back; expert parallelism keeps whole experts
    (factor of ``I``); the dense GEMMs never move."""
    model = load_model("deepseek-v3")
    h200 = catalog.get("H200")
    opts = PredictorOptions(moe_fp8_gemm_efficiency=0.24, moe_width_exponent=x)
    p = StepTimePredictor(model, h200, Parallelism(tp=tp), Dtype.FP8, options=opts, fp8_scaling="block")
    flat = StepTimePredictor(model, h200, Parallelism(tp=tp), Dtype.FP8, fp8_scaling="block",
                             options=dataclasses.replace(opts, moe_width_exponent=0.0))
    factor = expert_width_factor(2048 // tp, x)
    assert p.moe.row_compute_scale == pytest.approx(1.0 / factor)
    assert p.moe_rates == flat.moe_rates and p.rates == flat.rates
    assert p.moe.hit_expert_bytes(p.moe_rates) == flat.moe.hit_expert_bytes(flat.moe_rates)
    big = BatchComposition.uniform(0, 1, 2, 8192)
    a, b = p.predict(big).seconds, flat.predict(big).seconds
    assert a["moe_experts"] == pytest.approx(b["moe_experts"] / factor, rel=1e-9)
    assert a["gemm"] == b["gemm"]
    ep = StepTimePredictor(model, h200, Parallelism(tp=tp, ep=tp), Dtype.FP8, options=opts, fp8_scaling="block")
    assert ep.moe.row_compute_scale == 1.0


@pytest.mark.parametrize(("engine", "gpu", "x", "x_fp8"), [
    ("vllm", "H200", 0.44, 0.56), ("vllm", "B200", 0.44, 0.56), ("vllm", "MI300X", 0.0, 0.0),
    ("sglang", "H100-SXM", 0.19, 0.48), ("sglang", "MI300X", 0.0, 0.0)])
def test_profiles_carry_the_width_read_back(catalog, engine, gpu, x, x_fp8) -> None:
    """``python benchmarks/aiconfigurator_compare.py --moe-width-tables``: per dtype, the mean exponent of each
    engine's H100 and H200 tables (BF16; block FP8 for ``moe_fp8_width_exponent``), its per-dtype means printed by
    the same command; MI300X (no table) keeps none for either."""
    profile = load_engine_profile(engine)
    options = profile.options_for(catalog.get(gpu), Dtype.BF16)
    assert (options.moe_width_exponent, options.moe_fp8_width_exponent) == (x, x_fp8)
    for name in ("moe_width_exponent", "moe_fp8_width_exponent"):
        assert "--moe-width-tables" in profile.sources[name]


@pytest.mark.parametrize(("weights", "fp8_scaling", "uses_fp8"), [
    (Dtype.FP8, "block", True), (Dtype.FP8, "per_tensor", True), (Dtype.BF16, None, False)])
def test_fp8_experts_take_their_own_width_exponent(catalog, weights, fp8_scaling, uses_fp8) -> None:
    """W8A8 FP8 experts (block or per-tensor scaled, the experts ``moe_fp8_gemm_efficiency`` times) fall with the
    width at ``moe_fp8_width_exponent``, BF16 ones at ``moe_width_exponent``; None keeps the one exponent for all;
    weight-only FP8 (an A100: no FP8 tensor cores) is not W8A8 and keeps ``moe_width_exponent``."""
    model = load_model("deepseek-v3")
    opts = PredictorOptions(moe_width_exponent=0.2, moe_fp8_width_exponent=0.6)
    kw = {"fp8_scaling": fp8_scaling} if fp8_scaling else {}
    p = StepTimePredictor(model, catalog.get("H200"), Parallelism(tp=8), weights, options=opts, **kw)
    assert p.moe.row_compute_scale == pytest.approx(1.0 / expert_width_factor(256, 0.6 if uses_fp8 else 0.2))
    one = StepTimePredictor(model, catalog.get("H200"), Parallelism(tp=8), weights, **kw,
                            options=dataclasses.replace(opts, moe_fp8_width_exponent=None))
    assert one.moe.row_compute_scale == pytest.approx(1.0 / expert_width_factor(256, 0.2))
    a100 = StepTimePredictor(model, catalog.get("A100-80GB"), Parallelism(tp=8), Dtype.FP8, options=opts)
    assert a100.moe.row_compute_scale == pytest.approx(1.0 / expert_width_factor(256, 0.2))
    with pytest.raises(ConfigError, match=r"moe_fp8_width_exponent=-0.1 must be a finite number >= 0 \(an exponent\)"):
        PredictorOptions(moe_fp8_width_exponent=-0.1)
