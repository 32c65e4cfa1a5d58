"""Operator predictor: physical floors, hand computations, the kernel form equals predict().

Floors (no prediction may beat them): a decode step reads every weight byte of a GPU's
shard and every KV byte of its batch, so ``step >= (weight + KV bytes) / HBM peak``; a
prefill step does ``2 * params * tokens`` FLOPs, so ``step >= FLOPs / (TP * peak)``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.errors import ConfigError
from fleetplan.models import Dtype
from fleetplan.perf.attention import kv_bytes_per_token_per_gpu
from fleetplan.perf.batch import BatchComposition, parse_batch
from fleetplan.perf.kv_budget import weight_bytes_per_gpu
from fleetplan.perf.linear import N_STEP_COEFS, STEP_MODEL_ROOFLINE
from fleetplan.perf.overheads import ExecutionMode, PredictorOptions
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor

GPUS = ("A100-80GB", "H100-SXM", "L40S", "B200")


def _predictor(catalog, model, gpu, tp, **kw):
    return StepTimePredictor(model, catalog.get(gpu), Parallelism(tp=tp), **kw)


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("n_decode, context", [(1, 1), (8, 4096), (128, 8192), (256, 1000)])
def test_decode_never_beats_the_bandwidth_floor(catalog, llama70b, gpu, n_decode, context) -> None:
    p = _predictor(catalog, llama70b, gpu, 8)
    step_s = p.predict(BatchComposition.uniform(n_decode, context)).total_s
    embedding = llama70b.vocab_size * llama70b.hidden_size / 8 * 2  # a gather: not streamed per step
    weights = sum(weight_bytes_per_gpu(llama70b, p.parallelism, Dtype.BF16)) - embedding
    kv = n_decode * context * kv_bytes_per_token_per_gpu(llama70b, p.parallelism, Dtype.BF16)
    floor_s = (weights + kv) / (catalog.get(gpu).hbm_tb_per_s * 1e12)
    assert step_s >= floor_s


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("chunk", [512, 2048, 8192])
def test_prefill_never_beats_the_compute_floor(catalog, llama8b, gpu, chunk) -> None:
    p = _predictor(catalog, llama8b, gpu, 1)
    step_s = p.predict(BatchComposition.uniform(n_prefill=1, chunk_tokens=chunk)).total_s
    flops = llama8b.flops_per_token_dense() * chunk
    assert step_s >= flops / (catalog.get(gpu).bf16_tflops * 1e12)


def test_batch1_decode_is_weight_streaming_by_hand(catalog, llama8b) -> None:
    """Llama-3.1-8B, one H100, one decode at context 1: weights / (3.35 TB/s x streaming efficiency) + host."""
    p = _predictor(catalog, llama8b, "H100-SXM", 1)
    b = p.predict(BatchComposition.uniform(1, 1))
    assert b.gemm_bound == "memory"
    weights = 2.0 * (llama8b.n_params() - llama8b.vocab_size * llama8b.hidden_size)  # embedding is a gather
    o = PredictorOptions()
    assert b.seconds["gemm"] == pytest.approx(weights / (3.35e12 * o.weight_bandwidth_efficiency), rel=0.01)
    assert b.seconds["cpu_overhead"] == o.cpu_overhead_s and b.seconds["tp_all_reduce"] == 0.0


def test_prefill_attention_by_hand(catalog, llama8b) -> None:
    """A 1000-token chunk at offset 3000: 4 d H c (o + c/2) per layer at 0.6 x BF16 peak."""
    p = _predictor(catalog, llama8b, "A100-80GB", 1)
    b = p.predict(parse_batch("prefill=1000@3000"))
    flops = 4 * 128 * 32 * 1000 * (3000 + 500) * 32
    assert b.seconds["attention_prefill"] == pytest.approx(flops / (312e12 * 0.6), rel=1e-12)


def test_skewed_decode_batch_costs_its_total_kv(catalog, llama70b) -> None:
    """One 32K context among 1K ones costs its own KV read: attention is linear in the context sum."""
    p = _predictor(catalog, llama70b, "H100-SXM", 4)
    skewed = BatchComposition([], [], [32768] + [1024] * 63)
    uniform = BatchComposition.uniform(64, (32768 + 63 * 1024) // 64)
    assert p.predict(skewed).seconds["attention_decode"] == pytest.approx(
        p.predict(uniform).seconds["attention_decode"], rel=1e-3)
    assert p.predict(skewed).total_s > p.predict(BatchComposition.uniform(64, 1024)).total_s


def test_tensor_parallel_all_reduce_by_hand(catalog, llama70b) -> None:
    """TP=4 on H100: 160 ring all-reduces of T x 8192 x 2 bytes, alpha 10 us, 450 GB/s x 0.8."""
    p = _predictor(catalog, llama70b, "H100-SXM", 4)
    t = p.predict(parse_batch("prefill=1000@0")).seconds["tp_all_reduce"]
    per = 10e-6 + 2 * 3 / 4 * 1000 * 8192 * 2 / (450e9 * 0.8)
    assert t == pytest.approx(160 * per, rel=1e-9)


def test_eager_pays_launch_overhead_graph_does_not(catalog, llama8b) -> None:
    eager = _predictor(catalog, llama8b, "H100-SXM", 1, options=PredictorOptions(execution="eager"))
    graph = _predictor(catalog, llama8b, "H100-SXM", 1)
    assert graph.options.execution is ExecutionMode.CUDA_GRAPH
    batch = BatchComposition.uniform(4, 512)
    assert eager.predict(batch).seconds["kernel_launch"] == pytest.approx(5e-6 * (14 * 32 + 6))
    assert graph.predict(batch).seconds["kernel_launch"] == 0.0


def test_tile_and_wave_quantisation_by_hand(catalog, llama8b) -> None:
    """Compute-bound GEMMs: 1025 tokens cost 9 whole 128-token tiles, and the layer's
    9 x 336 N-tiles over 108 A100 SMs run in ceil(28.0) waves; 1153 tokens need 10 tiles,
    ceil(31.1) = 32 waves, 2.9 % more than the fractional work."""
    on = _predictor(catalog, llama8b, "A100-80GB", 1)
    off = _predictor(catalog, llama8b, "A100-80GB", 1, options=PredictorOptions(wave_quantisation=False))
    assert on.gemms.wave_ratio == pytest.approx((48 + 32 + 224 + 32) / 108)
    gemm = {(p is on, n): p.predict(BatchComposition.uniform(n_prefill=1, chunk_tokens=n)).seconds["gemm"]
            for p in (on, off) for n in (1025, 1152, 1153)}
    assert gemm[False, 1025] == pytest.approx(gemm[False, 1152], rel=0.01)  # tile padding
    assert gemm[True, 1025] == pytest.approx(gemm[False, 1025], rel=1e-12)  # 28 tiles x r is whole
    work = 10 * 336 / 108
    assert gemm[True, 1153] / gemm[False, 1153] == pytest.approx(math.ceil(work) / work, rel=0.01)


def _aggregates(b: BatchComposition) -> tuple[int, int, int, int, int]:
    return b.n_seqs, b.n_decode, b.n_prefill_tokens, b.decode_context_sum, b.attn2


GRID = [
    "decode=1x1", "decode=1x8192", "decode=64x2048", "decode=255x900", "decode=256x8192",
    "prefill=127@0", "prefill=128@0", "prefill=129@0", "prefill=2048@0", "prefill=512@30000",
    "prefill=2048@0,512@4096;decode=128x1024", "prefill=8000@0;decode=1x100", "prefill=7@0,9@3;decode=3x5",
]


@pytest.mark.parametrize("model_name", ["llama70b", "llama8b", "deepseek"])
@pytest.mark.parametrize("text", GRID)
def test_kernel_form_equals_predict_on_dense_terms(request, catalog, model_name, text) -> None:
    """Every dense term is linear in the kernel aggregates: the O(1) form reproduces predict()."""
    model = request.getfixturevalue(model_name)
    tp = 8 if model_name == "deepseek" else 4
    p = StepTimePredictor(model, catalog.get("H100-SXM"), Parallelism(tp=tp))
    batch = parse_batch(text)
    full = p.predict(batch).total_s  # MoE without rng: the expected-load form
    assert p.step_s(*_aggregates(batch)) == pytest.approx(full, rel=1e-12)


@pytest.mark.parametrize("zipf_s, tolerance", [(0.0, 0.02), (1.0, 0.08)])
@pytest.mark.parametrize("text", ["decode=1x512", "decode=8x1024", "decode=64x1024", "prefill=2048@0",
                                  "prefill=512@0;decode=200x500"])
def test_moe_expected_load_matches_sampled_routing(catalog, qwen_moe, zipf_s, tolerance, text) -> None:
    """The kernel's expected slowest-rank load is within 2 % (uniform) / 8 % (Zipf 1) of the
    mean of 40 sampled routings, over whole steps (Qwen3-30B-A3B, EP=4 on H100)."""
    par = Parallelism(tp=4, ep=4)
    p = StepTimePredictor(qwen_moe, catalog.get("H100-SXM"), par, options=PredictorOptions(moe_zipf_s=zipf_s))
    batch = parse_batch(text)
    rng = np.random.default_rng(7)
    sampled = np.mean([p.predict(batch, rng).total_s for _ in range(40)])
    assert p.step_s(*_aggregates(batch)) == pytest.approx(sampled, rel=tolerance)


def test_moe_slowest_rank_sets_the_layer(catalog, qwen_moe) -> None:
    """Skewed routing (Zipf 1.2) makes the hottest EP rank slower than uniform routing does."""
    par = Parallelism(tp=4, ep=4)
    batch = parse_batch("prefill=4096@0")
    times = []
    for s in (0.0, 1.2):
        p = StepTimePredictor(qwen_moe, catalog.get("H100-SXM"), par, options=PredictorOptions(moe_zipf_s=s))
        times.append(p.predict(batch, np.random.default_rng(1)).seconds["moe_experts"])
    assert times[1] > 1.5 * times[0]


def test_kernel_coefficients_layout(catalog, llama70b) -> None:
    code, coef = StepTimePredictor(llama70b, catalog.get("A100-80GB"), Parallelism(tp=8)).kernel_coefficients()
    assert code == STEP_MODEL_ROOFLINE and coef.shape == (N_STEP_COEFS,) and coef.dtype == np.float64
    assert np.all(np.isfinite(coef)) and np.all(coef[:12] >= 0) and coef[5] == 128.0


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 512), ctx=st.integers(1, 32768), extra=st.integers(1, 64))
def test_more_work_never_takes_less_time(catalog, llama70b, n, ctx, extra) -> None:
    """Monotone: more decodes, longer contexts, an added prefill chunk never shorten a step."""
    p = StepTimePredictor(llama70b, catalog.get("H100-SXM"), Parallelism(tp=4))
    base = p.step_s(n, n, 0, n * ctx, 0)
    assert p.step_s(n + extra, n + extra, 0, (n + extra) * ctx, 0) >= base
    assert p.step_s(n, n, 0, n * (ctx + extra), 0) >= base
    assert p.step_s(n + 1, n, extra, n * ctx, extra * extra) >= base


def test_t_iter_matches_linear_signature(catalog, llama70b) -> None:
    p = StepTimePredictor(llama70b, catalog.get("H100-SXM"), Parallelism(tp=4))
    t = p.t_iter_s(np.array([1, 64]), 2048.0)
    assert t.shape == (2,) and t[1] > t[0]
    assert p.t_iter_s(64, 2048.0) == pytest.approx(p.predict(BatchComposition.uniform(64, 2048)).total_s)


@pytest.mark.parametrize("text, fix", [
    ("prefill=2048", "N@M"), ("decode=12", "NxM"), ("mixed=1x2", "prefill=... or decode"), ("", "empty"),
    ("decode=1x1;decode=2x2", "each once"),
])
def test_bad_batch_text_names_the_rule(text, fix) -> None:
    with pytest.raises(ConfigError, match=fix.replace(".", r"\.")):
        parse_batch(text)


def test_parse_batch_example() -> None:
    b = parse_batch("prefill=2048@0,512@4096;decode=128x1024,2x32000")
    assert (b.n_seqs, b.n_decode, b.n_prefill_tokens) == (132, 130, 2560)
    assert b.decode_context_sum == 128 * 1024 + 64000
    assert b.attention_work == 2048 * 1024 + 512 * (4096 + 256)


def test_bad_parallelism_and_options_are_config_errors(catalog, llama70b) -> None:
    with pytest.raises(ConfigError, match="not divisible"):
        StepTimePredictor(llama70b, catalog.get("H100-SXM"), Parallelism(tp=3))
    with pytest.raises(ConfigError, match="gemm_efficiency"):
        PredictorOptions(gemm_efficiency=1.5)
    assert math.isfinite(PredictorOptions().cpu_overhead_s)
