"""The MoE layers' fixed kernel-chain latency (``PredictorOptions.moe_layer_overhead_s``) and the per-GPU
overrides of engine profiles that carry it.

Invariants: the term adds exactly ``n_moe_layers * moe_layer_overhead_s`` to every step of an MoE model,
whatever the batch, in both the full predictor and the simulator's coefficients (the two must agree);
a dense model is unchanged; the bundled SGLang profile gives MI300X its own fitted value.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.errors import ConfigError
from fleetplan.models import Dtype
from fleetplan.perf.batch import BatchComposition
from fleetplan.perf.engine_profile import load_engine_profile
from fleetplan.perf.overheads import PredictorOptions
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor

LATENCY_S = 1.0e-4


def _pair(catalog, model, tp: int = 4):
    par = Parallelism.vllm(tensor_parallel_size=tp, enable_expert_parallel=model.is_moe)
    base = StepTimePredictor(model, catalog.get("H200"), par, Dtype.BF16)
    with_term = dataclasses.replace(base, options=PredictorOptions(moe_layer_overhead_s=LATENCY_S))
    return base, with_term


@settings(max_examples=25, deadline=None)
@given(n_decode=st.integers(0, 256), context=st.integers(1, 8192), n_prefill=st.integers(0, 2),
       chunk=st.integers(1, 4096))
def test_adds_n_moe_layers_times_the_latency_to_every_step(catalog, qwen_moe, n_decode, context, n_prefill,
                                                           chunk) -> None:
    if n_decode + n_prefill == 0:
        n_decode = 1
    base, with_term = _pair(catalog, qwen_moe)
    batch = BatchComposition.uniform(n_decode, context, n_prefill, chunk)
    added = with_term.predict(batch).total_s - base.predict(batch).total_s
    assert added == pytest.approx(qwen_moe.n_moe_layers * LATENCY_S, rel=1e-9)
    assert with_term.predict(batch).seconds["moe_layer_latency"] == qwen_moe.n_moe_layers * LATENCY_S
    # the simulator's coefficients carry the same constant
    args = (n_decode + n_prefill, n_decode, n_prefill * chunk, n_decode * context, 0)
    assert with_term.step_s(*args) - base.step_s(*args) == pytest.approx(qwen_moe.n_moe_layers * LATENCY_S,
                                                                         rel=1e-9)


def test_dense_model_is_unchanged(catalog, llama70b) -> None:
    base, with_term = _pair(catalog, llama70b)
    batch = BatchComposition.uniform(8, 1024)
    assert with_term.predict(batch).total_s == base.predict(batch).total_s
    assert with_term.moe_layer_latency_s == 0.0


def test_deepseek_counts_only_its_moe_layers(catalog, deepseek) -> None:
    _, with_term = _pair(catalog, deepseek)
    assert deepseek.n_moe_layers == deepseek.n_layers - deepseek.n_dense_layers == 58
    assert with_term.moe_layer_latency_s == pytest.approx(58 * LATENCY_S)


@pytest.mark.parametrize("bad", [-1e-6, float("nan"), float("inf")])
def test_negative_or_non_finite_latency_is_refused(bad) -> None:
    with pytest.raises(ConfigError, match="moe_layer_overhead_s"):
        PredictorOptions(moe_layer_overhead_s=bad)


def test_sglang_profile_gives_mi300x_its_own_value(catalog) -> None:
    profile = load_engine_profile("sglang")
    assert profile.options_for(catalog.get("MI300X"), Dtype.FP8).moe_layer_overhead_s == pytest.approx(3.0e-4)
    assert profile.options_for(catalog.get("B200"), Dtype.FP8).moe_layer_overhead_s == pytest.approx(1.0e-4)
    # the override changes only what it names
    mi300x = profile.options_for(catalog.get("MI300X"), Dtype.FP8)
    moe_gemm = {"moe_gemm_efficiency": profile.options.moe_gemm_efficiency,
                "moe_fp8_gemm_efficiency": profile.options.moe_fp8_gemm_efficiency,
                "moe_width_exponent": profile.options.moe_width_exponent,
                "moe_fp8_width_exponent": profile.options.moe_fp8_width_exponent,
                "moe_hit_expert_weight_reads": profile.options.moe_hit_expert_weight_reads,
                "moe_weight_bandwidth_efficiency": profile.options.moe_weight_bandwidth_efficiency}
    assert dataclasses.replace(mi300x, moe_layer_overhead_s=1.0e-4, **moe_gemm) == profile.options
    assert "MI300X" in profile.gpu_sources and "sgl-cookbook" in profile.gpu_sources["MI300X"]["moe_layer_overhead_s"]
