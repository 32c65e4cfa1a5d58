"""KV-cache budget: vLLM's accounting by hand, the fix message, monotonicity properties."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.cli.errors import render_error
from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.hardware import load_catalog
from fleetplan.models import AttentionKind, Dtype, ModelConfig, load_model
from fleetplan.perf.kv_budget import (
    DEFAULT_COMM_WORKSPACE_BYTES,
    DEFAULT_CUDAGRAPH_POOL_BYTES,
    kv_budget,
    weight_bytes_per_gpu,
)
from fleetplan.perf.parallelism import Parallelism

GIB = 1024**3
CATALOG = load_catalog()
BF16 = dict(weight_dtype=Dtype.BF16, kv_dtype=Dtype.BF16)


def test_llama_8b_on_h100_by_hand():
    b = kv_budget(load_model("llama-3.1-8b"), CATALOG.get("H100-SXM"), Parallelism(1), **BF16)
    hbm = 80 * GIB
    usable = int(0.9 * hbm)  # 77,309,411,328
    weights = 2 * 8_030_261_248  # every parameter on the one GPU, 2 bytes each
    # 8192 tokens x 2 B x (2 x 4096 residual + 3 x 14336 FFN) + 256 seqs x 128256 vocab x 4 B logits
    activations = 8192 * 2 * (2 * 4096 + 3 * 14336) + 256 * 128256 * 4  # 970,194,944
    available = usable - weights - activations - DEFAULT_CUDAGRAPH_POOL_BYTES - 0  # no comm on one GPU
    per_token = 2 * 32 * 8 * 128 * 2  # 131,072
    blocks = available // (per_token * 16)
    assert (b.hbm_bytes, b.usable_bytes, b.weight_bytes, b.activation_peak_bytes) == \
        (hbm, usable, weights, activations)
    assert (b.comm_workspace_bytes, b.kv_available_bytes, b.kv_bytes_per_token) == (0, available, per_token)
    assert available == 59_204_952_064 and blocks == 28_231
    assert (b.kv_blocks_per_gpu, b.kv_blocks_per_replica, b.max_tokens) == (blocks, blocks, blocks * 16)


def test_tensor_parallel_shards_weights_and_kv_heads():
    m = load_model("llama-3.1-8b")
    b = kv_budget(m, CATALOG.get("H100-SXM"), Parallelism(2), **BF16)
    attn = 2 * 4096 * 32 * 128 // 2 + 2 * 4096 * 4 * 128  # q, o halved; 4 of 8 KV heads
    per_layer = attn + 3 * 4096 * 14336 // 2 + 2 * 4096  # FFN halved, norms replicated
    params = 2 * 128256 * 4096 // 2 + 32 * per_layer + 4096
    assert b.weight_bytes == 2 * params
    assert b.kv_bytes_per_token == 2 * 32 * 4 * 128 * 2
    assert b.comm_workspace_bytes == DEFAULT_COMM_WORKSPACE_BYTES


def test_data_parallel_ranks_each_hold_a_cache():
    m = load_model("qwen3-30b-a3b")
    b = kv_budget(m, CATALOG.get("H100-SXM"), Parallelism(1, dp=4, ep=4), **BF16)
    assert b.kv_blocks_per_replica == 4 * b.kv_blocks_per_gpu
    assert b.max_tokens == 4 * b.max_tokens_per_rank


def test_sharded_attention_sums_to_the_model_at_tp_1():
    for name in ("deepseek-v3", "qwen3-235b-a22b", "llama-3.1-70b"):
        m = load_model(name)
        assert weight_bytes_per_gpu(m, Parallelism(1), Dtype.FP8) == (m.weight_bytes(Dtype.FP8),)


def test_expert_parallel_spreads_experts_and_replicates_attention():
    m = load_model("deepseek-v3")
    tp8 = weight_bytes_per_gpu(m, Parallelism(8), Dtype.FP8)[0]
    dp8 = weight_bytes_per_gpu(m, Parallelism(1, dp=8, ep=8), Dtype.FP8)[0]
    assert dp8 > tp8  # DP attention keeps a full attention copy on every GPU
    assert tp8 == pytest.approx(m.weight_bytes(Dtype.FP8) / 8, rel=0.02)


def test_pipeline_budget_reports_the_binding_stage():
    m = load_model("deepseek-v3")  # 61 layers over 2 stages: 30 + 31
    b = kv_budget(m, CATALOG.get("H200"), Parallelism(8, pp=2), weight_dtype=Dtype.FP8, kv_dtype=Dtype.BF16)
    assert b.stage_layers == 31
    assert b.kv_bytes_per_token == 31 * 576 * 2


def test_weights_too_large_names_numbers_and_smallest_tp():
    with pytest.raises(ConfigError) as info:
        kv_budget(load_model("llama-3.1-70b"), CATALOG.get("A100-80GB"), Parallelism(1), **BF16)
    assert render_error(info.value) == (
        "Llama-3.1-70B in bf16 needs 131.4 GiB of weights per GPU at --tensor-parallel-size 1, has 72.0 GiB "
        "usable of 80 GiB (A100-80GB x 0.9): use --tensor-parallel-size >= 2"
    )


def test_smallest_tp_skips_sizes_that_still_do_not_fit():
    with pytest.raises(ConfigError) as info:
        kv_budget(load_model("llama-3.1-405b"), CATALOG.get("H100-SXM"), Parallelism(1), **BF16)
    assert re.search(r"needs 756\.0 GiB .* use --tensor-parallel-size >= 16$", render_error(info.value))
    # 756 GiB / 8 = 94.5 GiB > 72 GiB usable, so TP 8 is not enough; TP 16 leaves room for KV


def test_overheads_leaving_no_block_are_itemised():
    with pytest.raises(ConfigError) as info:
        kv_budget(load_model("llama-3.1-70b"), CATALOG.get("H100-SXM"), Parallelism(1),
                  weight_dtype=Dtype.FP8, kv_dtype=Dtype.FP8, gpu_memory_utilization=0.84)
    message = render_error(info.value)
    assert "leaves no KV-cache block per GPU: 67.2 GiB usable of 80 GiB (H100-SXM x 0.84) - 65.7 GiB weights" \
        in message
    assert message.endswith("use --tensor-parallel-size >= 2")


def test_explicit_domains_suggest_pipeline_stages():
    par = Parallelism(tp=1, tp_attn=1, dp_attn=1, tp_ffn=1, ep_ffn=1)
    with pytest.raises(ConfigError) as info:
        kv_budget(load_model("llama-3.1-70b"), CATALOG.get("A100-80GB"), par, **BF16)
    assert render_error(info.value).endswith("use --pipeline-parallel-size >= 2")


def test_no_sharding_fits_asks_for_quantisation_or_memory():
    with pytest.raises(ConfigError, match="quantize the weights"):
        kv_budget(load_model("llama-3.1-8b"), CATALOG.get("L4"), Parallelism(1), **BF16,
                  gpu_memory_utilization=0.02)


@pytest.mark.parametrize(("kwargs", "fragment"), [
    (dict(gpu_memory_utilization=1.5), "must be in \\(0, 1\\]"),
    (dict(block_size_tokens=0), "block_size_tokens=0"),
    (dict(cudagraph_pool_bytes=-1), "cudagraph_pool_bytes=-1"),
])
def test_knobs_are_validated(kwargs, fragment):
    with pytest.raises(ConfigError, match=fragment):
        kv_budget(load_model("llama-3.1-8b"), CATALOG.get("H100-SXM"), Parallelism(1), **BF16, **kwargs)


@st.composite
def gqa_models(draw) -> ModelConfig:
    n_kv = draw(st.sampled_from([2, 4, 8, 16]))
    n_heads = n_kv * draw(st.sampled_from([1, 2, 4, 8]))
    head_dim = draw(st.sampled_from([64, 128]))
    return ModelConfig(
        name="h", n_layers=draw(st.integers(1, 96)), hidden_size=128 * draw(st.integers(4, 64)), n_heads=n_heads,
        n_kv_heads=n_kv, head_dim=head_dim, intermediate_size=256 * draw(st.integers(1, 112)),
        vocab_size=draw(st.integers(1000, 200_000)), attention=AttentionKind.GQA,
        tie_word_embeddings=draw(st.booleans()),
    )


GPUS = ("A100-80GB", "H100-SXM", "L40S", "L4", "H200")


def _blocks(model: ModelConfig, gpu: str, par: Parallelism, weight_dtype: Dtype) -> int:
    try:
        return kv_budget(model, CATALOG.get(gpu), par, weight_dtype=weight_dtype, kv_dtype=Dtype.BF16).kv_blocks_per_gpu
    except ConfigError:
        return 0


@settings(max_examples=80, deadline=None)
@given(model=gqa_models(), gpu=st.sampled_from(GPUS), tp=st.sampled_from([1, 2, 4]))
def test_kv_blocks_non_increasing_in_weight_bytes(model, gpu, tp):
    par = Parallelism(tp)
    by_dtype = [_blocks(model, gpu, par, d) for d in (Dtype.INT4, Dtype.FP8, Dtype.BF16)]  # bytes ascending
    assert by_dtype[0] >= by_dtype[1] >= by_dtype[2]
    wider = ModelConfig(**{**model.__dict__, "intermediate_size": 2 * model.intermediate_size})
    assert _blocks(wider, gpu, par, Dtype.BF16) <= by_dtype[2]


@settings(max_examples=80, deadline=None)
@given(model=gqa_models(), gpu=st.sampled_from(GPUS), weight_dtype=st.sampled_from(list(Dtype)))
def test_kv_blocks_non_decreasing_in_tp_while_kv_heads_shard(model, gpu, weight_dtype):
    sizes = [t for t in (1, 2, 4, 8, 16) if t <= model.n_kv_heads]
    blocks = [_blocks(model, gpu, Parallelism(t), weight_dtype) for t in sizes]
    assert blocks == sorted(blocks), (sizes, blocks)


def test_dtypes_by_name_and_unknown_dtype():
    m, gpu = load_model("llama-3.1-8b"), CATALOG.get("H100-SXM")
    by_name = kv_budget(m, gpu, Parallelism(1), weight_dtype="fp8", kv_dtype="bf16")
    assert by_name == kv_budget(m, gpu, Parallelism(1), weight_dtype=Dtype.FP8, kv_dtype=Dtype.BF16)
    with pytest.raises(UnknownNameError, match="valid dtype names are bf16, fp8, int4"):
        kv_budget(m, gpu, Parallelism(1), weight_dtype="fp16", kv_dtype="bf16")
