"""Weight and KV-budget accounting of layer mixes: interleaved MoE layers under PP (Llama-4), experts-only
quantization (gpt-oss), linear-attention state and narrow-window KV per sequence (Qwen3-Next, gpt-oss)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, list_models, load_model
from fleetplan.models.hf_config import model_config_from_dict
from fleetplan.perf.kv_budget import (
    DEFAULT_COMM_WORKSPACE_BYTES,
    DEFAULT_CUDAGRAPH_POOL_BYTES,
    kv_budget,
    state_bytes_per_seq_per_gpu,
    weight_bytes_per_gpu,
    window_tokens_per_seq,
)
from fleetplan.perf.parallelism import Parallelism
from tests.models.test_hf_config import QWEN3_NEXT

CATALOG = load_catalog()
QWEN3_NEXT_MODEL = model_config_from_dict(QWEN3_NEXT, source="config.json", name="Qwen3-Next-80B-A3B")
MXFP4 = 4.25 / 8


def test_maverick_stages_hold_the_experts_of_their_own_moe_layers():
    """Llama-4 Maverick alternates dense and MoE layers (MoE at odd indices): each of two 24-layer stages holds
    12 of each, not 24 dense then 24 MoE.  TP 8 with EP 8: 16 whole experts per GPU."""
    m = load_model("llama-4-maverick")
    h, v = 5120, 202048
    attn = 2 * h * 40 * 128 / 8 + 2 * h * 1 * 128 + 2 * h  # q, o split; one KV head per GPU; two norms
    dense = 3 * h * 16384 / 8
    moe = 128 / 8 * 3 * h * 8192 + 3 * h * 8192 / 8 + h * 128  # 16 routed experts, shared expert split, router
    first = 24 * attn + 12 * dense + 12 * moe + v * h / 8  # embedding shard
    last = 24 * attn + 12 * dense + 12 * moe + h + v * h / 8  # final norm, LM head shard
    stages = weight_bytes_per_gpu(m, Parallelism(8, pp=2, ep=8), Dtype.BF16)
    assert stages == (math.ceil(2 * first), math.ceil(2 * last))
    assert stages[1] - stages[0] == 2 * h


def test_gpt_oss_keeps_all_but_the_experts_in_bf16():
    """gpt-oss-120b on 2 GPUs (TP 2, EP 2): 64 MXFP4 experts of 3 h^2 per MoE layer and half of everything
    else in BF16; an explicit FP8 stores every weight in FP8."""
    m = load_model("gpt-oss-120b")
    h, v, layers = 2880, 201088, 36
    attn = 2 * h * 64 * 64 / 2 + 2 * h * 4 * 64 + 2 * h  # q, o halved; 4 of 8 KV heads
    rest = layers * (attn + h * 128) + 2 * v * h / 2 + h  # router replicated, vocab split, final norm
    experts = layers * 64 * 3 * h * h
    par = Parallelism(2, ep=2)
    assert weight_bytes_per_gpu(m, par, Dtype.MXFP4) == (math.ceil(experts * MXFP4 + rest * 2),)
    assert weight_bytes_per_gpu(m, par, Dtype.FP8) == (math.ceil(experts + rest),)
    assert weight_bytes_per_gpu(m, Parallelism(1), Dtype.MXFP4) == (m.weight_bytes(),)  # 60.7 GiB


def test_qwen3_next_linear_layers_and_state_by_hand():
    """Qwen3-Next-80B-A3B at TP 4: 12 gated full-attention layers and 36 Gated DeltaNet layers, each split
    over 4 GPUs; 256 sequences' recurrent + conv state reserved ahead of the paged KV."""
    m, h100 = QWEN3_NEXT_MODEL, CATALOG.get("H100-SXM")
    h, conv = 2048, 2 * 16 * 128 + 32 * 128
    full = (2 * h * 16 * 256 + h * 16 * 256) / 4 + 2 * h * 1 * 256  # q, o, gate split; 2 KV heads replicated
    linear = m.layers.linear_params_per_layer(h) / 4
    moe = 512 / 4 * 3 * h * 512 + 3 * h * 512 / 4 + h * 512  # EP 4: 128 experts; shared expert split; router
    params = 12 * full + 36 * linear + 48 * (2 * h + moe) + 2 * 151936 * h / 4 + h
    par = Parallelism(4, ep=4)
    assert weight_bytes_per_gpu(m, par, Dtype.BF16) == (math.ceil(2 * params),)
    state = 36 * (32 * 128 * 128 + 3 * conv) * 2 / 4  # 9.9 MB per sequence per GPU
    assert state_bytes_per_seq_per_gpu(m, par) == state
    b = kv_budget(m, h100, par, weight_dtype="bf16", kv_dtype="bf16")
    assert (b.state_bytes_per_seq, b.state_reserved_bytes) == (math.ceil(state), 256 * math.ceil(state))
    assert b.kv_available_bytes == (b.usable_bytes - b.weight_bytes - b.activation_peak_bytes
                                    - DEFAULT_CUDAGRAPH_POOL_BYTES - DEFAULT_COMM_WORKSPACE_BYTES
                                    - b.state_reserved_bytes)
    assert b.kv_bytes_per_token == 12 * 2 * 1 * 256 * 2  # only the full layers cache per token
    fewer = kv_budget(m, h100, par, weight_dtype="bf16", kv_dtype="bf16", max_num_seqs=64)
    assert fewer.state_reserved_bytes == 64 * math.ceil(state)  # reserved for max_num_seqs sequences


def test_pipeline_stages_share_the_fixed_state():
    m = QWEN3_NEXT_MODEL
    one = kv_budget(m, CATALOG.get("H200"), Parallelism(4, ep=4), weight_dtype="bf16", kv_dtype="bf16")
    two = kv_budget(m, CATALOG.get("H200"), Parallelism(4, pp=2, ep=4), weight_dtype="bf16", kv_dtype="bf16")
    assert two.state_bytes_per_seq == pytest.approx(one.state_bytes_per_seq / 2, abs=1)


def test_gpt_oss_window_kv_is_per_running_request_not_reserved():
    """18 sliding layers of 128 tokens hold no reservation: vLLM's hybrid allocator takes their blocks from the
    shared pool per running request, ceil(128/16) + 1 = 9 blocks of the 18 sliding layers = 144 tokens of the
    18 full layers' capacity (a 32-token block: 5 blocks, 160 tokens)."""
    m = load_model("gpt-oss-120b")
    assert state_bytes_per_seq_per_gpu(m, Parallelism(1)) == 0
    b = kv_budget(m, CATALOG.get("H100-SXM"), Parallelism(1), weight_dtype="mxfp4", kv_dtype="bf16")
    assert (b.state_bytes_per_seq, b.state_reserved_bytes, b.window_tokens_per_seq) == (0, 0, 144)
    assert b.kv_bytes_per_token == 18 * 2 * 8 * 64 * 2  # the 18 full layers
    assert b.kv_available_bytes == (b.usable_bytes - b.weight_bytes - b.activation_peak_bytes
                                    - DEFAULT_CUDAGRAPH_POOL_BYTES)
    assert window_tokens_per_seq(m, 16) == 144 and window_tokens_per_seq(m, 32) == 160
    assert window_tokens_per_seq(load_model("gpt-oss-20b"), 16) == 144  # 12 sliding, 12 full layers
    assert window_tokens_per_seq(load_model("llama-3.1-8b"), 16) == 0


def test_dense_and_full_attention_models_reserve_no_state():
    b = kv_budget(load_model("llama-3.1-8b"), CATALOG.get("H100-SXM"), Parallelism(1), weight_dtype="bf16",
                  kv_dtype="bf16")
    assert (b.state_bytes_per_seq, b.state_reserved_bytes) == (0, 0)


MODELS = [load_model(n) for n in list_models()] + [QWEN3_NEXT_MODEL]


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(MODELS), pp=st.integers(1, 6))
def test_stages_at_tp_1_sum_to_the_checkpoint(model, pp: int) -> None:
    """One GPU per stage: the stages hold the whole checkpoint in its own storage type once (an untied model's
    embedding on the first stage, its head on the last; a tied one's matrix on both when split)."""
    stages = weight_bytes_per_gpu(model, Parallelism(1, pp=pp), model.default_weight_dtype)
    tied = model.vocab_size * model.hidden_size * (model.tie_word_embeddings and pp > 1)
    bytes_per = 2 if model.quantized_experts_only else model.default_weight_dtype.bytes_per_param
    assert sum(stages) == pytest.approx(model.weight_bytes() + tied * bytes_per, abs=pp)
