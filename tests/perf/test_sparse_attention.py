"""DeepSeek Sparse Attention (DSA, DeepSeek-V3.2) in the step model (``fleetplan.perf.attention``).

Invariants: the lightning indexer is the context-growing term (FP8, replicated on every attention GPU: its cost
does not shrink with TP); the sparse MLA costs ``index_topk`` keys per scheduled token and sequence whatever the
context, with the GPU's query heads padded to the kernels' 64-head tile; the indexer's projections are GEMMs of
every step; models without an indexer (DeepSeek-V3) are unchanged; the simulator's coefficients equal the
predictor on DSA batches.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.models import Dtype, load_model
from fleetplan.perf.attention import (
    DSA_HEAD_TILE,
    DSA_INDEXER_PREFILL_EFFICIENCY,
    attention_cost,
    dsa_head_tile,
    dsa_indexer_prefill_efficiency,
    sparse_attention,
)
from fleetplan.perf.batch import parse_batch
from fleetplan.perf.operators import step_gemms
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.perf.roofline import DeviceRates

RATES = DeviceRates(gemm_flop_per_s=100e12, attention_flop_per_s=50e12, weight_bytes_per_s=2e12,
                    kv_bytes_per_s=1e12, n_sms=0)
INDEX_FLOP_PER_S = 80e12


@pytest.fixture(scope="module")
def v32():
    return load_model("deepseek-v3.2")


@pytest.fixture(scope="module")
def v3():
    return load_model("deepseek-v3")


def test_config_fields_are_read(v32, v3) -> None:
    """config.json of deepseek-ai/DeepSeek-V3.2: index_n_heads 64, index_head_dim 128, index_topk 2048."""
    assert (v32.index_n_heads, v32.index_head_dim, v32.index_topk) == (64, 128, 2048)
    assert sparse_attention(v32) and not sparse_attention(v3)


@pytest.mark.parametrize("tp, heads", [(8, 64), (4, 64), (1, 128)])
def test_dsa_terms_by_hand(v32, tp: int, heads: int) -> None:
    """Indexer: 2 * 64 * 128 FLOPs per (query, key) pair and 128 + 4 bytes per context token, 61 layers, whatever
    the TP; sparse MLA: 2,048 keys of 2 * (2 * 512 + 64) FLOPs per padded head and (512 + 64) KV values."""
    cost = attention_cost(v32, Parallelism(tp=tp), Dtype.BF16, RATES, index_flop_per_s=INDEX_FLOP_PER_S)
    assert -(-(128 // tp) // DSA_HEAD_TILE) * DSA_HEAD_TILE == heads
    assert cost.prefill_s_per_work == pytest.approx(61 * 2 * 64 * 128 / INDEX_FLOP_PER_S)
    assert cost.decode_s_per_context_token == pytest.approx(max(61 * 132 / 1e12, 61 * 2 * 64 * 128 / INDEX_FLOP_PER_S))
    assert cost.window_s_per_token == pytest.approx(61 * 2048 * 2 * (2 * 512 + 64) * heads / 50e12)
    assert cost.window_s_per_seq == pytest.approx(61 * 2048 * 576 * 2 / 1e12)


def test_fp8_kv_reads_the_packed_record(v32) -> None:
    """FP8 KV: the sparse MLA reads sparse FlashMLA's 656-byte record per selected key (512 FP8 latent + 4 fp32
    scales + 64 BF16 rope; vLLM 0.13.0 flashmla_sparse.py), not a 576-byte FP8 row; the indexer keeps its 132."""
    cost = attention_cost(v32, Parallelism(tp=8), Dtype.FP8, RATES, index_flop_per_s=INDEX_FLOP_PER_S)
    assert cost.window_s_per_seq == pytest.approx(61 * 2048 * 656 / 1e12)
    assert cost.decode_s_per_context_token == pytest.approx(max(61 * 132 / 1e12, 61 * 2 * 64 * 128 / INDEX_FLOP_PER_S))


def test_attention_dp_rank_pads_nothing(v32) -> None:
    """SGLang dp-attention (attention TP 1): all 128 heads on the rank, a multiple of the kernels' tile."""
    dp = attention_cost(v32, Parallelism(tp=1, dp=8), Dtype.BF16, RATES, index_flop_per_s=INDEX_FLOP_PER_S)
    tp8 = attention_cost(v32, Parallelism(tp=8), Dtype.BF16, RATES, index_flop_per_s=INDEX_FLOP_PER_S)
    assert dp.window_s_per_token == pytest.approx(2 * tp8.window_s_per_token)  # 128 heads against 16 padded to 64


def test_dense_mla_unchanged(v3) -> None:
    """A model without an indexer keeps the dense MLA terms and no window terms."""
    cost = attention_cost(v3, Parallelism(tp=8), Dtype.BF16, RATES, index_flop_per_s=INDEX_FLOP_PER_S)
    assert cost == attention_cost(v3, Parallelism(tp=8), Dtype.BF16, RATES)
    assert cost.window_s_per_token == cost.window_s_per_seq == 0.0


def test_indexer_gemms_are_replicated(v32, v3) -> None:
    """vLLM Indexer: wq_b (K = q_lora_rank, N = 64 * 128) and the fused wk + weights_proj (K = h, N = 128 + 64,
    BF16) run whole on every attention GPU."""
    for tp in (1, 8):
        by_name = {g.name: g for g in step_gemms(v32, Parallelism(tp=tp), Dtype.FP8)}
        assert (by_name["index_wq_b"].k, by_name["index_wq_b"].n) == (1536, 8192)
        assert (by_name["index_wk"].k, by_name["index_wk"].n) == (7168, 192)
        assert by_name["index_wk"].weight_bytes_per_param == 2.0
        assert by_name["index_wq_b"].weight_bytes_per_param == 1.0
    assert not any(g.name.startswith("index_") for g in step_gemms(v3, Parallelism(tp=8), Dtype.FP8))


def test_long_context_decode_is_cheaper_than_dense_mla(catalog, v32, v3) -> None:
    """At 32K tokens of context a DSA decode step reads 2,048 latents and the indexer's 132-byte keys per layer
    instead of every latent: its attention is well below DeepSeek-V3's; at 128 tokens it is dearer (2,048 fixed
    slots per query)."""
    h200 = catalog.get("h200")
    sparse = StepTimePredictor(v32, h200, Parallelism(tp=8), Dtype.FP8, fp8_scaling="block")
    dense = StepTimePredictor(v3, h200, Parallelism(tp=8), Dtype.FP8, fp8_scaling="block")

    def attention_s(p: StepTimePredictor, batch: str) -> float:
        s = p.predict(parse_batch(batch)).seconds
        return s["attention_decode"] + s["attention_window"] + s["attention_prefill"]

    assert attention_s(sparse, "decode=64x32768") < 0.3 * attention_s(dense, "decode=64x32768")
    assert attention_s(sparse, "decode=64x128") > attention_s(dense, "decode=64x128")


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 256), ctx=st.integers(1, 40000), chunk=st.integers(0, 8192), offset=st.integers(0, 30000))
def test_kernel_coefficients_are_the_predictor(catalog, v32, n: int, ctx: int, chunk: int, offset: int) -> None:
    """The simulator's O(1) step (coefficients) equals the full predictor on mixed DSA batches."""
    p = StepTimePredictor(v32, catalog.get("h200"), Parallelism(tp=8), Dtype.FP8, fp8_scaling="block")
    spec = f"decode={n}x{ctx}" + (f";prefill={chunk}@{offset}" if chunk else "")
    b = parse_batch(spec)
    got = p.step_s(b.n_seqs, b.n_decode, b.n_tokens - b.n_decode, b.decode_context_sum, int(2 * b.attention_work))
    assert got == pytest.approx(p.predict(b).total_s, rel=1e-9)


def test_indexer_runs_at_the_fp8_peak(catalog, v32) -> None:
    """The predictor times the indexer at the GPU's FP8 peak (BF16 peak without FP8): in prefill at the read-back
    share on the GPUs of AIConfigurator's DSA tables, else at the attention efficiency; in decode at the attention
    efficiency everywhere."""
    for gpu_name, readback in (("h200", 0.34), ("h100", 0.34), ("b200", 0.27), ("a100", None), ("mi300x", None)):
        gpu = catalog.get(gpu_name)
        p = StepTimePredictor(v32, gpu, Parallelism(tp=8), Dtype.BF16)
        peak = (gpu.fp8_tflops if gpu.fp8_tflops is not None else gpu.bf16_tflops) * 1e12
        eff = p.options.attention_efficiency
        prefill_eff = eff if readback is None else readback
        assert DSA_INDEXER_PREFILL_EFFICIENCY.get(str(gpu.name)) == readback
        assert p.attention.prefill_s_per_work == pytest.approx(61 * 2 * 64 * 128 / (peak * prefill_eff))
        assert dsa_indexer_prefill_efficiency(str(gpu.name), eff) == prefill_eff
        decode = attention_cost(v32, Parallelism(tp=8), Dtype.BF16, p.rates, index_flop_per_s=peak * eff)
        assert p.attention.decode_s_per_context_token == pytest.approx(decode.decode_s_per_context_token)


def test_throttled_h20_keeps_its_derived_efficiency(catalog, v32) -> None:
    """The H20-3e (vLLM profile: attention_efficiency 0.66 by the tensor-throttle derivation) is not a read-back
    GPU: its indexer keeps 0.66 of its FP8 peak, which the throttle derivation would also give from 0.34."""
    from fleetplan.perf.engine_profile import load_engine_profile
    from fleetplan.perf.roofline import tensor_throttle, tensor_throttle_efficiency

    gpu = catalog.get("H20-3e")
    opts = load_engine_profile("vllm").options_for(gpu, Dtype.FP8)
    p = StepTimePredictor(v32, gpu, Parallelism(tp=8), Dtype.FP8, options=opts, fp8_scaling="block")
    assert p.attention.prefill_s_per_work == pytest.approx(61 * 2 * 64 * 128 / (gpu.fp8_tflops * 1e12 * 0.66))
    throttle = tensor_throttle(gpu, catalog.get("H100-SXM"), fp8=True)
    assert tensor_throttle_efficiency(DSA_INDEXER_PREFILL_EFFICIENCY["H100-SXM"], throttle, opts.gemm_efficiency) == \
        pytest.approx(opts.attention_efficiency)


#: AIConfigurator 0.12.0 measured DeepSeek-V3.2 attention module of one layer in prefill (ms), H200, vLLM 0.24.0
#: FlashMLA-sparse, FP8 block weights, BF16 KV, one prompt, no prefix (aiconfigurator-core 0.12.0
#: systems/data/h200_sxm/sparse_attention/vllm/0.24.0/dsa_context_module_perf.parquet): (heads, prompt tokens, ms)
AIC_H200_VLLM_DSA_MODULE_MS = ((16, 8192, 6.7496), (16, 16384, 14.9106), (16, 32768, 35.3559),
                               (128, 8192, 13.4932), (128, 16384, 28.7155), (128, 32768, 63.2986))


@pytest.mark.parametrize(("heads", "prompt", "aic_ms"), AIC_H200_VLLM_DSA_MODULE_MS)
def test_module_replicates_the_measured_long_prompts(catalog, v32, heads: int, prompt: int, aic_ms: float) -> None:
    """One layer's attention module (its GEMMs, the indexer and the sparse MLA) at 8-32K-token prompts is within
    -17 % / +5 % of the measured module with the read-back indexer, at least 2 points closer than at the attention
    efficiency, which is 12-24 % fast (the indexer's logits write and top-k; attention module docstring)."""
    from fleetplan.perf.engine_profile import load_engine_profile
    from fleetplan.perf.operators import gemm_block, gemm_block_s

    gpu = catalog.get("H200")
    par = Parallelism(tp=128 // heads)
    opts = load_engine_profile("vllm").options_for(gpu, Dtype.FP8)
    p = StepTimePredictor(v32, gpu, par, Dtype.FP8, options=opts, fp8_scaling="block")
    names = ("q_a_proj", "q_b_proj", "kv_a_proj", "kv_b_proj", "o_proj", "index_wq_b", "index_wk")
    block = gemm_block(tuple(g for g in step_gemms(v32, par, Dtype.FP8, p.weight_stream_bytes_per_param)
                             if g.name in names), p.rates)
    batch = parse_batch(f"prefill={prompt}@0")
    gemm_s = max(gemm_block_s(block, prompt, 1, opts.tile_m_tokens))
    mla_s = p.attention.window_s_per_token * prompt + p.attention.window_s_per_seq

    def module_ms(index_s_per_work: float) -> float:
        return (gemm_s + mla_s + index_s_per_work * batch.attention_work) / v32.n_layers * 1e3

    now = module_ms(p.attention.prefill_s_per_work) / aic_ms - 1
    before = module_ms(61 * 2 * 64 * 128 / (gpu.fp8_tflops * 1e12 * opts.attention_efficiency)) / aic_ms - 1
    assert -0.17 <= now <= 0.05
    assert before < -0.10 and abs(now) <= abs(before) - 0.02


def test_no_indexer_fields_no_sparse_terms(v32) -> None:
    """Dropping the indexer from V3.2's config gives DeepSeek-V3's dense MLA terms (same attention shape)."""
    dense = dataclasses.replace(v32, index_n_heads=0, index_head_dim=0, index_topk=0)
    cost = attention_cost(dense, Parallelism(tp=8), Dtype.BF16, RATES)
    assert cost.window_s_per_token == 0.0 and cost.prefill_s_per_work > 0
    assert np.isfinite(cost.decode_s_per_context_token)


@pytest.mark.parametrize(("gpu_name", "tile"), [("H200", 64), ("H100-SXM", 64), ("H20-3e", 64), ("B200", 128)])
def test_sparse_mla_pads_heads_to_the_gpus_tile(catalog, v32, gpu_name: str, tile: int) -> None:
    """vLLM's sparse FlashMLA kernels need a multiple of 64 query heads per GPU on Hopper and of 128 on Blackwell:
    at TP 8 (16 heads) the sparse MLA per scheduled token costs ``tile`` heads, and on the B200 as much as at
    TP 1 (128 heads), as AIConfigurator's B200 modules measure (attention module docstring)."""
    assert dsa_head_tile(gpu_name) == tile
    gpu = catalog.get(gpu_name)
    tp8 = StepTimePredictor(v32, gpu, Parallelism(tp=8), Dtype.FP8, fp8_scaling="block")
    tp1 = StepTimePredictor(v32, gpu, Parallelism(tp=1), Dtype.FP8, fp8_scaling="block")
    flop_per_token = 61 * 2048 * 2 * (2 * 512 + 64)
    assert tp8.attention.window_s_per_token == pytest.approx(flop_per_token * tile / tp8.rates.attention_flop_per_s)
    ratio = tp8.attention.window_s_per_token / tp1.attention.window_s_per_token
    assert ratio == pytest.approx(tile / 128)
