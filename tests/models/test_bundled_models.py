"""Bundled config.json files of 2026's models: published sizes, KV bytes by formula, checkpoint dtypes."""

from __future__ import annotations

import math

import pytest

from fleetplan.models import AttentionKind, Dtype, WeightScaling, list_models, load_model

# (catalog name, published total, published active, active convention) from the model cards / reports.
# "all": active counts embedding and LM head (Llama, Qwen, DeepSeek, Mixtral, Kimi);
# "no-embed": the card counts neither (GLM-4.5 report, MiniMax-M2 card, gpt-oss card, Llama-4 card's 17B).
PUBLISHED = [
    ("deepseek-v3", 671e9, 37e9, "all"),  # DeepSeek-V3 report: 671B total, 37B activated (MTP excluded)
    ("deepseek-r1", 671e9, 37e9, "all"),  # DeepSeek-R1 card: same architecture as V3
    ("deepseek-v3.2", 671e9, None, "all"),  # V3.2 card: V3's 671B (685B with MTP) plus the indexer; no active count
    ("kimi-k2", 1.0e12, 32e9, "all"),  # Kimi-K2 card: 1T total, 32B activated
    ("glm-4.5", 355e9, 32e9, "no-embed"),  # GLM-4.5 report (arXiv:2508.06471): 355B / 32B
    ("glm-4.6", 355e9, 32e9, "no-embed"),  # GLM-4.6 card: same architecture, 200K context
    ("glm-4.5-air", 106e9, 12e9, "no-embed"),  # GLM-4.5 report: 106B / 12B
    ("minimax-m2.5", 230e9, 10e9, "no-embed"),  # MiniMax-M2 card: 230B total, 10B active
    ("gpt-oss-120b", 116.8e9, 5.13e9, "no-input-embed"),  # gpt-oss model card table 1 (active excl. embedding)
    ("gpt-oss-20b", 20.9e9, 3.61e9, "no-input-embed"),
    ("llama-4-scout", 109e9, 17e9, "all"),  # Llama-4 card: 17B active / 109B total (vision encoder included)
    ("llama-4-maverick", 400e9, 17e9, "all"),  # Llama-4 card: 17B active / 400B total
    ("qwen3-235b-a22b", 235e9, 22e9, "all"),  # Qwen3 technical report table 2
    ("qwen3-235b-a22b-fp8", 235e9, 22e9, "all"),
    ("qwen3-coder-480b-a35b", 480e9, 35e9, "all"),  # Qwen3-Coder card: 480B total, 35B activated
    ("qwen3-32b-fp8", 32.8e9, 32.8e9, "all"),
    ("mixtral-8x7b", 46.7e9, 12.9e9, "all"),  # Mistral's Mixtral announcement
    ("mixtral-8x22b", 141e9, 39e9, "all"),  # Mistral's Mixtral 8x22B announcement
]


def _active(m, convention: str) -> int:
    if convention == "all":
        return m.n_active_params()
    if convention == "no-input-embed":
        return m.n_active_params() - m.vocab_size * m.hidden_size
    return m.n_active_params() - m.embedding_params()


@pytest.mark.parametrize(("name", "total", "active", "convention"), PUBLISHED)
def test_parameter_counts_within_3_percent_of_published(name, total, active, convention):
    m = load_model(name)
    assert m.n_params() == pytest.approx(total, rel=0.03)
    if active is not None:
        assert _active(m, convention) == pytest.approx(active, rel=0.03)


def test_every_bundled_model_has_a_published_size_check():
    checked = {row[0] for row in PUBLISHED} | {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "qwen3-32b",
                                               "qwen3-30b-a3b"}  # tests/models/test_model_config.py
    assert set(list_models()) == checked


def test_deepseek_mtp_module_brings_the_checkpoint_to_its_685b():
    # DeepSeek-V3 card: "685B ... 671B of the main model weights and 14B of the MTP module" (14B counts its own
    # copies of the embedding and head, shared here: 2 x 129280 x 7168 = 1.85B)
    m = load_model("deepseek-v3")
    assert m.n_mtp_layers == 1
    assert m.n_params() + m.mtp_params() + m.embedding_params() == pytest.approx(685e9, rel=0.01)


def _kv_by_formula(m, kv_dtype: Dtype) -> float:
    b = kv_dtype.bytes_per_param
    if m.attention is AttentionKind.MLA:
        indexer = m.index_head_dim + 4 * math.ceil(m.index_head_dim / 128) if m.index_head_dim else 0
        if m.index_head_dim and kv_dtype is Dtype.FP8:  # sparse FlashMLA's packed record: FP8 latent, scales, BF16 rope
            return m.n_layers * (m.kv_lora_rank + 4 * m.kv_lora_rank / 128 + 2 * m.qk_rope_head_dim + indexer)
        return m.n_layers * ((m.kv_lora_rank + m.qk_rope_head_dim) * b + indexer)
    return 2 * m.n_kv_layers * m.n_kv_heads * m.head_dim * b


@pytest.mark.parametrize("name", list_models())
@pytest.mark.parametrize("kv_dtype", [Dtype.BF16, Dtype.FP8])
def test_kv_bytes_per_token_by_formula(name, kv_dtype):
    m = load_model(name)
    assert m.kv_bytes_per_token(kv_dtype) == math.ceil(_kv_by_formula(m, kv_dtype))
    # per-layer x layers sizes a pipeline stage: it adds back up to the total
    assert m.n_layers * m.kv_bytes_per_token_per_layer(kv_dtype) == pytest.approx(m.kv_bytes_per_token(kv_dtype),
                                                                                    abs=1)


@pytest.mark.parametrize(("name", "expected"), [
    ("deepseek-v3", 61 * (512 + 64) * 2),  # MLA latent + rope key, bf16
    ("kimi-k2", 61 * (512 + 64) * 2),
    ("deepseek-v3.2", 61 * ((512 + 64) * 2 + 128 + 4)),  # plus the DSA indexer's FP8 key and its fp32 scale
    ("gpt-oss-120b", 18 * 2 * 8 * 64 * 2),  # only the 18 full layers; 18 sliding layers hold <= 128 tokens
    ("llama-4-scout", 48 * 2 * 8 * 128 * 2),  # 8,192-token chunks are sized as full attention
    ("glm-4.5", 92 * 2 * 8 * 128 * 2),
    ("minimax-m2.5", 62 * 2 * 8 * 128 * 2),
])
def test_kv_bytes_per_token_by_hand(name, expected):
    assert load_model(name).kv_bytes_per_token() == expected


def test_deepseek_v32_fp8_kv_is_sparse_flashmla_packed_record():
    # vLLM 0.13.0 flashmla_sparse.py: 512 FP8 latent + 4 fp32 scales + 64 BF16 rope = 656 bytes per token
    # per layer (fp8_ds_mla), against (512 + 64) x 2 = 1,152 in BF16; the indexer's 128 + 4 stay
    m = load_model("deepseek-v3.2")
    assert m.sparse_mla_fp8_latent_bytes_per_token_per_layer() == 656
    assert m.full_layer_kv_bytes_per_token(Dtype.FP8) == 656 + 132
    assert m.kv_bytes_per_token(Dtype.FP8) == 61 * 788 == 48_068
    assert m.kv_bytes_per_token(Dtype.BF16) == 61 * (1152 + 132)
    # dense MLA (no indexer) stays a plain FP8 latent + rope row
    assert load_model("deepseek-v3").kv_bytes_per_token(Dtype.FP8) == 61 * 576


def test_gpt_oss_sliding_layers_hold_a_bounded_cache_per_sequence():
    m = load_model("gpt-oss-120b")
    assert (m.layers.n_window_layers, m.layers.attention_window_tokens, m.n_kv_layers) == (18, 128, 18)
    assert m.window_kv_bytes_per_seq() == 18 * 128 * 2 * 8 * 64 * 2


@pytest.mark.parametrize(("name", "dtype", "scaling", "block", "group"), [
    ("deepseek-v3", Dtype.FP8, WeightScaling.BLOCK, (128, 128), 0),
    ("deepseek-r1", Dtype.FP8, WeightScaling.BLOCK, (128, 128), 0),
    ("kimi-k2", Dtype.FP8, WeightScaling.BLOCK, (128, 128), 0),
    ("minimax-m2.5", Dtype.FP8, WeightScaling.BLOCK, (128, 128), 0),
    ("qwen3-235b-a22b-fp8", Dtype.FP8, WeightScaling.BLOCK, (128, 128), 0),
    ("gpt-oss-120b", Dtype.MXFP4, WeightScaling.GROUP, None, 32),
    ("qwen3-235b-a22b", Dtype.BF16, WeightScaling.NONE, None, 0),
    ("glm-4.6", Dtype.BF16, WeightScaling.NONE, None, 0),
])
def test_checkpoint_dtype_comes_from_quantization_config(name, dtype, scaling, block, group):
    m = load_model(name)
    assert (m.default_weight_dtype, m.weight_scaling, m.weight_block_size, m.weight_group_size) == (
        dtype, scaling, block, group)
    assert m.weight_bytes() == m.weight_bytes(dtype)


def test_llama4_interleaves_moe_layers_with_a_shared_expert():
    scout, maverick = load_model("llama-4-scout"), load_model("llama-4-maverick")
    assert (scout.n_dense_layers, scout.n_shared_experts, scout.moe_layer_step) == (0, 1, 1)
    assert (maverick.n_dense_layers, maverick.intermediate_size, maverick.moe_layer_step) == (24, 16384, 2)
    assert maverick.moe_layer_indices() == tuple(range(1, 48, 2))
    # rope layers use 8,192-token chunked attention: all but every 4th (NoPE) layer
    assert (maverick.layers.n_window_layers, maverick.layers.attention_window_tokens) == (36, 8192)


def test_glm_and_minimax_mtp_heads():
    assert load_model("glm-4.5").n_mtp_layers == 1
    assert load_model("minimax-m2.5").n_mtp_layers == 3  # use_mtp with num_mtp_modules 3
    assert load_model("qwen3-235b-a22b").n_mtp_layers == 0


@pytest.mark.parametrize(("name", "gib"), [("gpt-oss-120b", 60.8), ("gpt-oss-20b", 12.8)])
def test_gpt_oss_checkpoint_size_quantizes_only_the_experts(name, gib):
    # gpt-oss model card table 1: checkpoint sizes 60.8 GiB and 12.8 GiB (MXFP4 experts, BF16 elsewhere)
    m = load_model(name)
    assert m.quantized_experts_only
    assert m.weight_bytes() / 2**30 == pytest.approx(gib, rel=0.01)
    assert m.weight_bytes(Dtype.BF16) == 2 * m.n_params()  # an explicit dtype applies to every weight


#: The bundled chat template counts (each derived in the file's ``_chat_template_source``; models left out are
#: unknown: their template was not read, or the bundled config is a base model's).
CHAT_TEMPLATE_TOKENS = {"gpt-oss-20b": 65, "gpt-oss-120b": 65, "qwen3-32b": 8, "qwen3-32b-fp8": 8,
                        "qwen3-235b-a22b": 8, "qwen3-235b-a22b-fp8": 8, "qwen3-30b-a3b": 8, "deepseek-v3": 3,
                        "deepseek-r1": 3, "deepseek-v3.2": 4, "glm-4.5": 5, "glm-4.5-air": 5, "glm-4.6": 5}


@pytest.mark.parametrize("name", list_models())
def test_chat_template_tokens_carry_their_derivation(name):
    """Every bundled count has a derivation that starts with the count itself; the others are unknown (None),
    never a silent 0."""
    import json

    from fleetplan.models import model_path

    raw = json.loads(model_path(name).read_text(encoding="utf-8"))
    assert load_model(name).chat_template_tokens == CHAT_TEMPLATE_TOKENS.get(name)
    if name in CHAT_TEMPLATE_TOKENS:
        assert raw["_chat_template_source"].startswith(f"{CHAT_TEMPLATE_TOKENS[name]}: ")
    else:
        assert "_chat_template_source" not in raw and "_chat_template_tokens" not in raw
