"""ModelConfig: parameter counts against published sizes, KV bytes by hand, validation."""

from __future__ import annotations

import pytest

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.models import AttentionKind, Dtype, LayerMix, ModelConfig, WeightScaling, dtype, load_model

# (catalog name, published total params, published active params) from the model cards:
# Llama 3.1 (8.0B, 70.6B, 405.9B on the HF cards' safetensors counts), Qwen3 technical report
# table 1-2 (32.8B; 30.5B / 3.3B; 235B / 22B), DeepSeek-V3 report (671B / 37B, MTP excluded).
PUBLISHED = [
    ("llama-3.1-8b", 8.0e9, 8.0e9),
    ("llama-3.1-70b", 70.6e9, 70.6e9),
    ("llama-3.1-405b", 405.9e9, 405.9e9),
    ("qwen3-32b", 32.8e9, 32.8e9),
    ("qwen3-30b-a3b", 30.5e9, 3.3e9),
    ("qwen3-235b-a22b", 235e9, 22e9),
    ("deepseek-v3", 671e9, 37e9),
]


@pytest.mark.parametrize(("name", "total", "active"), PUBLISHED)
def test_parameter_counts_match_published_sizes_within_2_percent(name, total, active):
    m = load_model(name)
    assert m.n_params() == pytest.approx(total, rel=0.02)
    assert m.n_active_params() == pytest.approx(active, rel=0.02)


def test_llama_8b_parameter_count_by_hand():
    m = load_model("llama-3.1-8b")
    embed = 2 * 128256 * 4096
    attn = 2 * 4096 * 32 * 128 + 2 * 4096 * 8 * 128
    ffn = 3 * 4096 * 14336
    norms = 2 * 4096 * 32 + 4096
    assert m.n_params() == embed + 32 * (attn + ffn) + norms == 8_030_261_248


@pytest.mark.parametrize(("name", "kv_dtype", "expected_bytes"), [
    ("llama-3.1-70b", Dtype.BF16, 2 * 80 * 8 * 128 * 2),  # 327,680
    ("llama-3.1-70b", Dtype.FP8, 2 * 80 * 8 * 128 * 1),
    ("llama-3.1-8b", Dtype.BF16, 2 * 32 * 8 * 128 * 2),  # 131,072
    ("qwen3-30b-a3b", Dtype.BF16, 2 * 48 * 4 * 128 * 2),  # 98,304
    ("deepseek-v3", Dtype.BF16, 61 * (512 + 64) * 2),  # MLA latent + rope key: 70,272
])
def test_kv_bytes_per_token_by_hand(name, kv_dtype, expected_bytes):
    assert load_model(name).kv_bytes_per_token(kv_dtype) == expected_bytes


def test_llama_70b_kv_bytes_is_327680():
    assert load_model("llama-3.1-70b").kv_bytes_per_token() == 327_680


def test_weight_bytes_scale_with_dtype():
    m = load_model("llama-3.1-70b")
    n = m.n_params()
    assert m.weight_bytes(Dtype.BF16) == 2 * n
    assert m.weight_bytes(Dtype.FP8) == n
    assert m.weight_bytes(Dtype.INT4) == (n + 1) // 2


def test_matmul_flops_exclude_the_embedding_gather():
    m = load_model("llama-3.1-8b")
    assert m.flops_per_token_dense() == 2.0 * (m.n_active_params() - 128256 * 4096)
    moe = load_model("qwen3-30b-a3b")
    assert moe.flops_per_token_dense() == 2.0 * (moe.n_active_params() - 151936 * 2048)


def test_moe_shape_of_deepseek_v3():
    m = load_model("deepseek-v3")
    assert m.is_moe and m.attention is AttentionKind.MLA
    assert (m.n_dense_layers, m.n_moe_layers, m.n_experts, m.n_experts_per_token, m.n_shared_experts) == \
        (3, 58, 256, 8, 1)
    assert m.head_dim == 128 + 64 and m.v_head_dim == 128 and m.q_lora_rank == 1536


def _dense(**overrides) -> ModelConfig:
    fields = dict(name="t", n_layers=4, hidden_size=256, n_heads=8, n_kv_heads=2, head_dim=32,
                  intermediate_size=512, vocab_size=1000, attention=AttentionKind.GQA)
    fields.update(overrides)
    return ModelConfig(**fields)


def test_dense_model_n_dense_layers_defaults_to_all_layers():
    assert _dense().n_dense_layers == 4
    assert not _dense().is_moe


@pytest.mark.parametrize(("overrides", "fragment"), [
    (dict(n_layers=0), "n_layers=0"),
    (dict(n_kv_heads=3), "multiple of n_kv_heads=3"),
    (dict(n_dense_layers=2), "n_dense_layers=2"),
    (dict(intermediate_size=0), "intermediate_size >= 1"),
    (dict(n_experts=8, n_experts_per_token=9, moe_intermediate_size=64), "n_experts_per_token=9"),
    (dict(n_experts=8, n_experts_per_token=2), "moe_intermediate_size >= 1"),
    (dict(n_experts=8, n_experts_per_token=2, moe_intermediate_size=64), "give both or neither"),
    (dict(kv_lora_rank=64), "MLA-only"),
    (dict(attention="gqa"), "must be an AttentionKind"),
    (dict(attention=AttentionKind.MLA), "MLA needs"),
    (dict(hidden_size=True), "hidden_size=True"),
])
def test_invalid_shapes_raise_one_line_config_errors(overrides, fragment):
    with pytest.raises(ConfigError, match=fragment) as info:
        _dense(**overrides)
    assert "\n" not in str(info.value)


def test_moe_without_dense_layers_is_valid():
    m = _dense(n_experts=8, n_experts_per_token=2, moe_intermediate_size=64, intermediate_size=0)
    expert = 3 * 256 * 64
    assert m.n_params() - m.n_active_params() == 4 * 6 * expert


def test_dtype_lookup_fails_loudly():
    assert dtype("FP8") is Dtype.FP8
    assert dtype(Dtype.INT4) is Dtype.INT4
    assert Dtype.INT4.bytes_per_param == 0.5
    with pytest.raises(UnknownNameError, match="bf16, fp8, int4"):
        dtype("fp16")


# ---- checkpoint weight format, MTP, hybrid layers ------------------------------------------------------
_SMALL = dict(name="m", n_layers=4, hidden_size=64, n_heads=4, n_kv_heads=2, head_dim=16, intermediate_size=128,
              vocab_size=100, attention=AttentionKind.GQA)


@pytest.mark.parametrize(("fields", "fragment"), [
    (dict(default_weight_dtype=Dtype.FP8, quant_method="fp8"), "fp8 weights with none scales"),
    (dict(default_weight_dtype=Dtype.FP8, quant_method="fp8", weight_scaling=WeightScaling.BLOCK),
     "weight_block_size=None goes with block scaling"),
    (dict(default_weight_dtype=Dtype.BF16, quant_method="fp8"), "quant_method='fp8' with bf16 weights"),
    (dict(default_weight_dtype=Dtype.MXFP4, quant_method="mxfp4", weight_scaling=WeightScaling.GROUP),
     "weight_group_size=0 goes with group scaling"),
    (dict(layers=LayerMix(n_linear_layers=4, linear_key_heads=1, linear_value_heads=1, linear_key_head_dim=8,
                          linear_value_head_dim=8, linear_conv_kernel=4)), "at least one full-attention layer"),
    (dict(index_n_heads=4, index_head_dim=16), "give all three or none"),
])
def test_weight_format_and_layer_mix_are_validated(fields, fragment):
    with pytest.raises(ConfigError, match=fragment):
        ModelConfig(**{**_SMALL, **fields})


def test_layer_mix_window_rule():
    narrow = ModelConfig(**_SMALL, layers=LayerMix(n_window_layers=2, attention_window_tokens=128))
    wide = ModelConfig(**_SMALL, layers=LayerMix(n_window_layers=2, attention_window_tokens=8192))
    assert (narrow.n_kv_layers, wide.n_kv_layers) == (2, 4)  # windows >= 4,096 tokens are sized as full
    assert narrow.kv_bytes_per_token() == 2 * 2 * 2 * 16 * 2
    assert narrow.kv_bytes_per_token_per_layer() * 4 == narrow.kv_bytes_per_token()
