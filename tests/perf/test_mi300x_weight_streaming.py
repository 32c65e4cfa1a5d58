"""vLLM's weight-streaming efficiency on MI300X (``engine_profiles/vllm.toml`` ``[gpu_options.MI300X]`` and the
per-release ``[versions."<release>".gpu_options.MI300X]``).

Each value is fitted on one published batch-1 run of its release, none held out: vLLM 0.6.3 on ROCm
(dstackai/benchmarks: Llama-3.1-405B BF16, TP 8, mean TPOT 50.19 ms), vLLM 0.9.1 and 0.10.1 on ROCm (AMD's
performance results of the rocm/vllm images: ``vllm bench latency`` of Llama-3.1-70B FP8 with FP8 KV, TP 8,
batch 1, 128 prompt / 2,048 output tokens, 17.236 s and 15.254 s).  Invariants: each release's value reproduces
its run within the value's two-digit rounding; a batch-1 decode step's GEMM time scales as 1 / efficiency against
the NVIDIA-fitted default; other GPUs and the SGLang profile are unchanged.
"""

from __future__ import annotations

import dataclasses

import pytest

from fleetplan.models import Dtype, load_model
from fleetplan.perf.batch import BatchComposition
from fleetplan.perf.engine_profile import load_engine_profile
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor

DSTACK_TPOT_S = 50.19e-3  # dstackai/benchmarks@9ece943 amd/inference/vllm/data/serving_benchmarks_vllm_80.txt, 1 prompt
DSTACK_DECODE = BatchComposition.uniform(n_decode=1, context_tokens=120)  # 80 prompt + ~40 generated on average


def _step(catalog, gpu: str, dtype: Dtype, options) -> StepTimePredictor:
    return StepTimePredictor(load_model("llama-3.1-405b"), catalog.get(gpu), Parallelism.vllm(tensor_parallel_size=8),
                             dtype, options=options)


def test_value_reproduces_the_source_run(catalog) -> None:
    """vLLM 0.6.3's fitted 0.41 gives the dstack run's batch-1 step (50.19 ms) within the value's two-digit
    rounding."""
    options = load_engine_profile("vllm").options_for(catalog.get("MI300X"), Dtype.BF16, "0.6.3.dev116+g151ef4ef")
    assert options.weight_bandwidth_efficiency == pytest.approx(0.41)
    step_s = _step(catalog, "MI300X", Dtype.BF16, options).predict(DSTACK_DECODE).total_s
    assert step_s == pytest.approx(DSTACK_TPOT_S, rel=0.015)


def test_memory_bound_gemms_scale_as_one_over_efficiency(catalog) -> None:
    """Only the weight-streaming term moves: GEMM seconds x efficiency is the same at 0.78 and 0.41, the other
    operators of the step are unchanged."""
    profile = load_engine_profile("vllm")
    mi300x = profile.options_for(catalog.get("MI300X"), Dtype.FP8)
    nvidia_fitted = dataclasses.replace(mi300x, weight_bandwidth_efficiency=profile.options.weight_bandwidth_efficiency)
    new = _step(catalog, "MI300X", Dtype.FP8, mi300x).predict(DSTACK_DECODE)
    old = _step(catalog, "MI300X", Dtype.FP8, nvidia_fitted).predict(DSTACK_DECODE)
    assert new.gemm_bound == old.gemm_bound == "memory"
    assert new.seconds["gemm"] * mi300x.weight_bandwidth_efficiency == pytest.approx(
        old.seconds["gemm"] * nvidia_fitted.weight_bandwidth_efficiency, rel=1e-6)
    for name in set(new.seconds) - {"gemm"}:
        assert new.seconds[name] == pytest.approx(old.seconds[name], rel=1e-9)


@pytest.mark.parametrize(("engine", "gpu"), [("vllm", "H100-SXM"), ("vllm", "H200"), ("sglang", "MI300X")])
def test_other_gpus_and_engines_keep_theirs(catalog, engine, gpu) -> None:
    profile = load_engine_profile(engine)
    options = profile.options_for(catalog.get(gpu), Dtype.FP8)
    assert options.weight_bandwidth_efficiency == profile.options.weight_bandwidth_efficiency


#: AMD's ``vllm bench latency`` runs (engine_profiles/vllm.toml): release -> (efficiency, seconds for 128 + 2,048)
AMD_LATENCY_RUNS = {"0.9.1": (0.32, 17.236), "0.10.1": (0.40, 15.254)}


def _latency_run_s(catalog, options) -> float:
    """One 128-token prefill step, then 2,047 batch-1 decode steps at context 129-2,175 (Llama-3.1-70B FP8, FP8 KV,
    TP 8): the steps of ``vllm bench latency --batch-size 1 --input-len 128 --output-len 2048``."""
    p = StepTimePredictor(load_model("llama-3.1-70b"), catalog.get("MI300X"), Parallelism.vllm(tensor_parallel_size=8),
                          Dtype.FP8, Dtype.FP8, options=options)
    prefill = p.predict(BatchComposition.uniform(n_prefill=1, chunk_tokens=128)).total_s
    return prefill + sum(p.predict(BatchComposition.uniform(n_decode=1, context_tokens=128 + k)).total_s
                         for k in range(1, 2048))


@pytest.mark.parametrize("release", sorted(AMD_LATENCY_RUNS))
def test_rocm_2025_values_reproduce_their_runs(catalog, release) -> None:
    """vLLM 0.9.1's 0.32 and 0.10.1's 0.40 (the default version's MI300X value) give AMD's published latency within
    the two-digit rounding of the value (a 0.005 step moves the run by about 1.3 %)."""
    efficiency, measured_s = AMD_LATENCY_RUNS[release]
    profile = load_engine_profile("vllm")
    options = profile.options_for(catalog.get("MI300X"), Dtype.FP8, release)
    assert options.weight_bandwidth_efficiency == pytest.approx(efficiency)
    assert _latency_run_s(catalog, options) == pytest.approx(measured_s, rel=0.02)


def test_the_default_version_runs_the_newest_rocm_value(catalog) -> None:
    profile = load_engine_profile("vllm")
    default = profile.options_for(catalog.get("MI300X"), Dtype.FP8)
    assert default == profile.options_for(catalog.get("MI300X"), Dtype.FP8, "0.10.1")
    assert default.weight_bandwidth_efficiency == pytest.approx(AMD_LATENCY_RUNS["0.10.1"][0])
