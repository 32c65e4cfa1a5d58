"""HuggingFace config.json reader: families, key aliases, nesting, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetplan.errors import DataFormatError
from fleetplan.models import AttentionKind, load_model, model_config_from_dict, read_hf_config

# Published config.json values (HF model repos), trimmed to the keys the reader uses.
MIXTRAL_8X7B = {  # mistralai/Mixtral-8x7B-v0.1: 46.7B total, 12.9B active (Mistral's announcement)
    "architectures": ["MixtralForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "num_local_experts": 8, "tie_word_embeddings": False, "vocab_size": 32000,
}
GPT_OSS_120B = {  # openai/gpt-oss-120b: 116.8B total, 5.13B active excluding the embedding (model card)
    "architectures": ["GptOssForCausalLM"], "experts_per_token": 4, "head_dim": 64, "hidden_size": 2880,
    "intermediate_size": 2880, "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 36,
    "num_key_value_heads": 8, "num_local_experts": 128, "tie_word_embeddings": False, "vocab_size": 201088,
    "sliding_window": 128,
}
QWEN15_MOE = {  # Qwen/Qwen1.5-MoE-A2.7B: 14.3B total, 2.7B active (model card)
    "architectures": ["Qwen2MoeForCausalLM"], "decoder_sparse_step": 1, "hidden_size": 2048,
    "intermediate_size": 5632, "moe_intermediate_size": 1408, "mlp_only_layers": [], "num_attention_heads": 16,
    "num_experts": 60, "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_key_value_heads": 16,
    "shared_expert_intermediate_size": 5632, "tie_word_embeddings": False, "vocab_size": 151936,
}
DEEPSEEK_V2_LITE = {  # deepseek-ai/DeepSeek-V2-Lite: 15.7B total (model card); q_lora_rank null
    "first_k_dense_replace": 1, "hidden_size": 2048, "intermediate_size": 10944, "kv_lora_rank": 512,
    "moe_intermediate_size": 1408, "moe_layer_freq": 1, "n_routed_experts": 64, "n_shared_experts": 2,
    "num_attention_heads": 16, "num_experts_per_tok": 6, "num_hidden_layers": 27, "num_key_value_heads": 16,
    "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "tie_word_embeddings": False,
    "v_head_dim": 128, "vocab_size": 102400,
}


def _read(data: dict, name: str = "m"):
    return model_config_from_dict(data, source="config.json", name=name)


def test_mixtral_uses_intermediate_size_as_expert_width():
    m = _read(MIXTRAL_8X7B)
    assert (m.n_experts, m.n_experts_per_token, m.moe_intermediate_size, m.n_dense_layers) == (8, 2, 14336, 0)
    assert m.n_params() == pytest.approx(46.7e9, rel=0.02)
    assert m.n_active_params() == pytest.approx(12.9e9, rel=0.02)


def test_gpt_oss_aliases_and_published_counts():
    m = _read(GPT_OSS_120B)
    assert (m.n_experts, m.n_experts_per_token, m.head_dim) == (128, 4, 64)
    assert m.n_params() == pytest.approx(116.8e9, rel=0.02)
    # the card's 5.13B active excludes the input embedding, i.e. our matmul parameters
    assert m.flops_per_token_dense() / 2 == pytest.approx(5.13e9, rel=0.02)


def test_qwen2_moe_shared_expert_width_becomes_whole_experts():
    m = _read(QWEN15_MOE)
    assert m.n_shared_experts == 5632 // 1408 == 4
    assert m.n_params() == pytest.approx(14.3e9, rel=0.02)
    assert m.n_active_params() == pytest.approx(2.7e9, rel=0.02)


def test_deepseek_v2_lite_mla_without_query_lora():
    m = _read(DEEPSEEK_V2_LITE)
    assert m.attention is AttentionKind.MLA and m.q_lora_rank == 0 and m.n_dense_layers == 1
    assert m.n_params() == pytest.approx(15.7e9, rel=0.02)
    assert m.kv_bytes_per_token() == 27 * (512 + 64) * 2


def test_qwen_moe_mlp_only_layers_and_sparse_step_count_dense_layers():
    data = dict(QWEN15_MOE, mlp_only_layers=[0, 5], decoder_sparse_step=2)
    # MoE layers: (i + 1) % 2 == 0 and i not in {0, 5} -> 1, 3, 7, 9, ..., 23 = 12 - 1 (i=5) = 11
    assert _read(data).n_dense_layers == 24 - 11


def test_topk_given_per_layer_as_one_value():
    data = {k: v for k, v in MIXTRAL_8X7B.items() if k != "num_experts_per_tok"}
    assert _read(dict(data, moe_topk=[2] * 32)).n_experts_per_token == 2


def test_head_dim_absent_is_hidden_over_heads():
    m = load_model("llama-3.1-8b")  # the bundled 8B config has no head_dim key
    assert m.head_dim == 4096 // 32


def test_nested_text_config_reads_the_language_model(tmp_path: Path):
    llama = json.loads(Path(_bundled("llama-3.1-8b")).read_text())
    wrapper = {"architectures": ["LlavaForConditionalGeneration"], "text_config": llama,
               "vision_config": {"hidden_size": 1024, "num_hidden_layers": 24}}
    path = tmp_path / "llava" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(wrapper))
    m = read_hf_config(path.parent)
    assert m.n_params() == load_model("llama-3.1-8b").n_params()
    assert m.name == "llava"


def _bundled(name: str) -> str:
    from fleetplan.models import model_path
    return str(model_path(name))


@pytest.mark.parametrize(("drop", "field"), [
    ("num_attention_heads", "field num_attention_heads"),
    ("num_hidden_layers", "field num_hidden_layers"),
    ("vocab_size", "field vocab_size"),
    ("num_experts_per_tok", "field num_experts_per_tok"),
])
def test_missing_required_field_names_file_and_field(tmp_path: Path, drop: str, field: str):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in MIXTRAL_8X7B.items() if k != drop}))
    with pytest.raises(DataFormatError) as info:
        read_hf_config(path)
    message = str(info.value)
    assert str(path) in message and field in message and "missing" in message and "\n" not in message


def test_nested_missing_field_names_the_nested_key(tmp_path: Path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"text_config": {"hidden_size": 64}}))
    with pytest.raises(DataFormatError, match=r"field text_config\.num_hidden_layers"):
        read_hf_config(path)


@pytest.mark.parametrize(("data", "fragment"), [
    (dict(MIXTRAL_8X7B, hidden_size="4096"), "field hidden_size.*is '4096'"),
    (dict(MIXTRAL_8X7B, tie_word_embeddings="no"), "true or false"),
    (dict(QWEN15_MOE, shared_expert_intermediate_size=1000), "not a multiple of the expert width"),
    (dict(MIXTRAL_8X7B, num_experts_per_tok=9), "num_experts_per_tok.*is 9, above the 8 routed experts"),
    (dict(MIXTRAL_8X7B, _chat_template_tokens=-3), "field _chat_template_tokens.*is -3"),
    (dict(MIXTRAL_8X7B, _chat_template_tokens="8"), "field _chat_template_tokens.*is '8'"),
])
def test_malformed_values_raise_data_format_errors(tmp_path: Path, data: dict, fragment: str):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DataFormatError, match=fragment):
        read_hf_config(path)


def test_not_json_and_missing_file(tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(DataFormatError, match="not a JSON file"):
        read_hf_config(bad)
    with pytest.raises(DataFormatError, match="file not found"):
        read_hf_config(tmp_path / "absent.json")


# ---- the current architectures -------------------------------------------------------------------------
# Qwen3-Next-80B-A3B's widths (HF Qwen/Qwen3-Next-80B-A3B-Instruct config.json keys; 80B total per its card)
QWEN3_NEXT = {
    "architectures": ["Qwen3NextForCausalLM"], "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 16,
    "num_key_value_heads": 2, "head_dim": 256, "intermediate_size": 5120, "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512, "num_experts": 512, "num_experts_per_tok": 10, "vocab_size": 151936,
    "full_attention_interval": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "decoder_sparse_step": 1,
    "mlp_only_layers": [], "tie_word_embeddings": False, "max_position_embeddings": 262144,
}


def test_qwen3_next_hybrid_linear_attention():
    m = _read(QWEN3_NEXT)
    mix = m.layers
    assert (mix.n_linear_layers, m.n_kv_layers, mix.output_gate) == (36, 12, True)
    h, conv = 2048, 2 * 16 * 128 + 32 * 128
    linear = h * (2 * 16 * 128 + 2 * 32 * 128) + 2 * h * 32 + 4 * conv + 2 * 32 + 128 + 32 * 128 * h
    assert mix.linear_params_per_layer(h) == linear
    full = 2 * h * 16 * 256 + 2 * h * 2 * 256 + h * 16 * 256  # q, o, k, v and the output gate
    assert m.attention_params() == 12 * full + 36 * linear
    assert m.n_params() == pytest.approx(80e9, rel=0.03)
    # only the 12 full-attention layers cache per token; each linear layer keeps a fixed state per sequence
    assert m.kv_bytes_per_token() == 12 * 2 * 2 * 256 * 2
    assert m.linear_state_bytes_per_seq() == 36 * (32 * 128 * 128 + 3 * conv) * 2


def test_layer_types_list_counts_linear_and_sliding_layers():
    kinds = ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 12
    m = _read({k: v for k, v in QWEN3_NEXT.items() if k != "full_attention_interval"} | {"layer_types": kinds})
    assert (m.layers.n_linear_layers, m.n_kv_layers) == (36, 12)
    bad = dict(QWEN3_NEXT, layer_types=["full_attention"] * 47 + ["mamba"])
    with pytest.raises(DataFormatError, match="field layer_types.*not a list of 48"):
        _read(bad)


@pytest.mark.parametrize(("quant", "dtype", "scaling", "block", "group"), [
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8", "block", (128, 128), 0),
    ({"quant_method": "fp8", "activation_scheme": "static"}, "fp8", "per-tensor", None, 0),
    ({"quant_method": "mxfp4"}, "mxfp4", "group", None, 32),
    ({"quant_algo": "FP8", "producer": {"name": "modelopt"}}, "fp8", "per-tensor", None, 0),  # Qwen3-32B-FP8-Static
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {
        "num_bits": 8, "type": "float", "strategy": "channel"}}}}, "fp8", "per-channel", None, 0),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {
        "num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}}}}, "fp8", "block",
     (128, 128), 0),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {  # Kimi-K2-Thinking's INT4
        "num_bits": 4, "type": "int", "strategy": "group", "group_size": 32}}}}, "int4", "group", None, 32),
    ({"quant_method": "awq", "bits": 4, "group_size": 128}, "int4", "group", None, 128),
])
def test_quantization_config_sets_the_default_weight_dtype(quant, dtype, scaling, block, group):
    m = _read(dict(MIXTRAL_8X7B, quantization_config=quant))
    assert (m.default_weight_dtype.value, m.weight_scaling.value, m.weight_block_size, m.weight_group_size) == (
        dtype, scaling, block, group)


@pytest.mark.parametrize(("quant", "fragment"), [
    ({"quant_method": "bitsandbytes"}, "quant_method 'bitsandbytes' is not a weight format"),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "modelopt quant_algo 'NVFP4'"),
    ({"quant_method": "fp8", "weight_block_size": [128]}, "weight_block_size.*two integers"),
    ({"quant_method": "gptq", "bits": 8}, "gptq with 8-bit weights"),
])
def test_unmodelled_quantization_is_one_line_naming_it(quant, fragment):
    with pytest.raises(DataFormatError, match=fragment) as info:
        _read(dict(MIXTRAL_8X7B, quantization_config=quant))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("data", "fragment"), [
    (dict(MIXTRAL_8X7B, num_key_value_heads=5), "num_key_value_heads.*is 5, which does not divide "
                                                "num_attention_heads=32"),
    (dict(MIXTRAL_8X7B, num_experts_per_tok=16), "num_experts_per_tok.*is 16, above the 8 routed experts"),
    (dict(MIXTRAL_8X7B, architectures=["MambaForCausalLM"]), "names 'MambaForCausalLM', an architecture fleetplan "
                                                             "does not model.*GptOssForCausalLM"),
    ({k: v for k, v in MIXTRAL_8X7B.items() if k != "architectures"} | {"model_type": "rwkv"},
     "model_type.*'rwkv'"),
    ({k: v for k, v in MIXTRAL_8X7B.items() if k != "hidden_size"}, "field hidden_size.*missing"),
])
def test_inconsistent_configs_are_one_line_errors(data, fragment):
    with pytest.raises(DataFormatError, match=fragment) as info:
        _read(data)
    assert "\n" not in str(info.value)


def test_bad_config_through_the_cli_is_exit_2_and_one_line(tmp_path: Path):
    from click.testing import CliRunner

    from fleetplan.cli.main import cli

    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(MIXTRAL_8X7B, num_experts_per_tok=16)))
    for args in (["models", "show", str(path)],
                 ["optimize", "--workload", "lmsys", "--slo-ttft", "500", "--model", str(path), "--no-verify"]):
        res = CliRunner().invoke(cli, args)
        lines = res.stderr.strip().splitlines()
        assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error:")
        assert "num_experts_per_tok" in lines[0] and "above the 8 routed experts" in lines[0]


# Gemma: published configs leave out keys whose transformers config-class defaults apply.
GEMMA3_27B_IT = {  # google/gemma-3-27b-it config.json (vision_config trimmed); text only: ~27.0B
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "mm_tokens_per_image": 256,
    "text_config": {
        "head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504, "model_type": "gemma3_text",
        "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16, "query_pre_attn_scalar": 168,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
    "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model", "num_hidden_layers": 27},
}
GEMMA3_1B_IT = {  # google/gemma-3-1b-it config.json: 999,885,952 parameters (keras-hub gemma3_1b preset)
    "architectures": ["Gemma3ForCausalLM"], "head_dim": 256, "hidden_size": 1152, "intermediate_size": 6912,
    "max_position_embeddings": 32768, "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 26,
    "num_key_value_heads": 1, "query_pre_attn_scalar": 256, "sliding_window": 512, "sliding_window_pattern": 6,
    "vocab_size": 262144,
}
GEMMA2_9B = {  # google/gemma-2-9b config.json: 9.24B parameters (model card)
    "architectures": ["Gemma2ForCausalLM"], "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
    "head_dim": 256, "hidden_size": 3584, "intermediate_size": 14336, "max_position_embeddings": 8192,
    "model_type": "gemma2", "num_attention_heads": 16, "num_hidden_layers": 42, "num_key_value_heads": 8,
    "query_pre_attn_scalar": 256, "sliding_window": 4096, "vocab_size": 256000,
}


def test_gemma3_wrapper_reads_text_config_with_class_defaults_and_windows():
    m = _read(GEMMA3_27B_IT)
    assert (m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim) == (62, 32, 16, 128)
    # absent keys take Gemma3TextConfig's defaults: vocab 262,208, 131,072 positions, tied embeddings
    assert (m.vocab_size, m.context_window_tokens, m.tie_word_embeddings) == (262208, 131072, True)
    # one full layer in sliding_window_pattern=6 (layers 5, 11, ..., 59): 10 full, 52 over 1,024 tokens
    assert (m.layers.n_window_layers, m.layers.attention_window_tokens) == (52, 1024)
    assert m.n_params() == pytest.approx(27.0e9, rel=0.01)


def test_gemma3_wrapper_top_level_tie_wins_over_the_class_default():
    m = _read(dict(GEMMA3_27B_IT, tie_word_embeddings=False))
    assert not m.tie_word_embeddings and m.vocab_size == 262208


def test_gemma3_1b_published_count_and_pattern():
    m = _read(GEMMA3_1B_IT)
    assert (m.n_kv_heads, m.head_dim, m.context_window_tokens) == (1, 256, 32768)
    assert (m.layers.n_window_layers, m.layers.attention_window_tokens) == (22, 512)
    assert m.n_params() == pytest.approx(999_885_952, rel=1e-3)  # norms (~73k) are left out


def test_gemma3_layer_types_list_wins_over_the_pattern():
    kinds = ["sliding_attention"] * 5 + ["full_attention"]
    data = dict(GEMMA3_1B_IT, num_hidden_layers=12, layer_types=kinds * 2, sliding_window_pattern=3)
    assert _read(data).layers.n_window_layers == 10


def test_gemma2_alternates_sliding_and_full_layers():
    m = _read(GEMMA2_9B)
    assert (m.layers.n_window_layers, m.layers.attention_window_tokens) == (21, 4096)
    assert m.tie_word_embeddings  # Gemma2Config default
    assert m.n_params() == pytest.approx(9.24e9, rel=0.01)


PHI4 = {  # microsoft/phi-4 config.json: 14.7B parameters (model card)
    "architectures": ["Phi3ForCausalLM"], "hidden_size": 5120, "intermediate_size": 17920,
    "max_position_embeddings": 16384, "model_type": "phi3", "num_attention_heads": 40, "num_hidden_layers": 40,
    "num_key_value_heads": 10, "original_max_position_embeddings": 16384, "rope_scaling": None, "rope_theta": 250000,
    "sliding_window": None, "tie_word_embeddings": False, "vocab_size": 100352,
}
PHI3_MINI_4K = {  # microsoft/Phi-3-mini-4k-instruct config.json: 3.8B parameters (model card)
    "architectures": ["Phi3ForCausalLM"], "hidden_size": 3072, "intermediate_size": 8192,
    "max_position_embeddings": 4096, "model_type": "phi3", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "sliding_window": 2047, "tie_word_embeddings": False, "vocab_size": 32064,
}


def test_phi4_dense_gqa_fused_qkv_is_only_a_layout():
    m = _read(PHI4)
    assert (m.attention, m.n_kv_heads, m.head_dim, m.context_window_tokens) == (AttentionKind.GQA, 10, 128, 16384)
    assert m.n_params() == pytest.approx(14.7e9, rel=0.01)
    mini = _read(PHI3_MINI_4K)
    assert mini.n_params() == pytest.approx(3.82e9, rel=0.01)
    assert mini.layers.n_window_layers == 0  # a bare sliding_window (2,047) is not read (module docstring)


QWEN3_VL_8B = {  # Qwen/Qwen3-VL-8B-Instruct config.json (vision_config trimmed); text = Qwen3-8B's 8.2B (card)
    "architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl", "tie_word_embeddings": False,
    "text_config": {
        "head_dim": 128, "hidden_size": 4096, "intermediate_size": 12288, "max_position_embeddings": 262144,
        "model_type": "qwen3_vl_text", "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
        "rope_scaling": {"mrope_interleaved": True, "mrope_section": [24, 20, 20], "rope_type": "default"},
        "vocab_size": 151936},
    "vision_config": {"deepstack_visual_indexes": [8, 16, 24], "depth": 27, "hidden_size": 1152},
}
QWEN3_VL_30B_A3B = {  # Qwen/Qwen3-VL-30B-A3B-Instruct config.json; text = Qwen3-30B-A3B: 30.5B, 3.3B active (card)
    "architectures": ["Qwen3VLMoeForConditionalGeneration"], "model_type": "qwen3_vl_moe", "tie_word_embeddings": False,
    "text_config": {
        "decoder_sparse_step": 1, "head_dim": 128, "hidden_size": 2048, "intermediate_size": 6144,
        "max_position_embeddings": 262144, "mlp_only_layers": [], "model_type": "qwen3_vl_moe_text",
        "moe_intermediate_size": 768, "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
        "num_hidden_layers": 48, "num_key_value_heads": 4, "vocab_size": 151936},
    "vision_config": {"deepstack_visual_indexes": [8, 16, 24], "depth": 27, "hidden_size": 1152},
}


def test_qwen3_vl_wrappers_read_the_language_model():
    dense = _read(QWEN3_VL_8B)
    assert (dense.n_kv_heads, dense.head_dim, dense.context_window_tokens) == (8, 128, 262144)
    assert not dense.tie_word_embeddings
    assert dense.n_params() == pytest.approx(8.2e9, rel=0.01)
    moe = _read(QWEN3_VL_30B_A3B)
    assert (moe.n_experts, moe.n_experts_per_token, moe.moe_intermediate_size, moe.n_dense_layers) == (128, 8, 768, 0)
    assert moe.n_params() == pytest.approx(30.5e9, rel=0.01)
    assert moe.n_active_params() == pytest.approx(3.3e9, rel=0.03)


GLM4_9B_0414 = {  # zai-org/GLM-4-9B-0414 config.json: 9.4B parameters (model page); fused gate_up, qkv bias
    "architectures": ["Glm4ForCausalLM"], "attention_bias": True, "head_dim": 128, "hidden_size": 4096,
    "intermediate_size": 13696, "max_position_embeddings": 32768, "model_type": "glm4", "num_attention_heads": 32,
    "num_hidden_layers": 40, "num_key_value_heads": 2, "partial_rotary_factor": 0.5, "tie_word_embeddings": False,
    "vocab_size": 151552,
}
GLM45V = {  # zai-org/GLM-4.5V config.json (transformers Glm4vMoeConfig dump); text = GLM-4.5-Air's 106B / 12B active
    "architectures": ["Glm4vMoeForConditionalGeneration"], "model_type": "glm4v_moe", "tie_word_embeddings": False,
    "text_config": {
        "attention_bias": True, "first_k_dense_replace": 1, "head_dim": 128, "hidden_size": 4096,
        "intermediate_size": 10944, "max_position_embeddings": 65536, "model_type": "glm4v_moe_text",
        "moe_intermediate_size": 1408, "n_group": 1, "n_routed_experts": 128, "n_shared_experts": 1,
        "num_attention_heads": 96, "num_experts_per_tok": 8, "num_hidden_layers": 46, "num_key_value_heads": 8,
        "partial_rotary_factor": 0.5, "routed_scaling_factor": 1.0, "topk_group": 1, "use_qk_norm": False,
        "vocab_size": 151552},
    "vision_config": {"depth": 24, "hidden_size": 1536, "model_type": "glm4v_moe", "num_heads": 12},
}


def test_glm4_dense_gqa_published_count():
    m = _read(GLM4_9B_0414)
    assert (m.n_kv_heads, m.head_dim, m.context_window_tokens, m.n_experts) == (2, 128, 32768, 0)
    assert m.n_params() == pytest.approx(9.4e9, rel=0.01)


def test_glm45v_reads_its_text_config_as_glm4_moe():
    m = _read(GLM45V)
    assert (m.n_experts, m.n_experts_per_token, m.n_shared_experts, m.n_dense_layers) == (128, 8, 1, 1)
    assert (m.n_heads, m.n_kv_heads, m.context_window_tokens) == (96, 8, 65536)
    air = load_model("glm-4.5-air")  # the bundled GLM-4.5-Air config: the same language model
    assert m.n_params() == air.n_params() == pytest.approx(106e9, rel=0.03)
    assert m.flops_per_token_dense() == air.flops_per_token_dense()
    assert m.n_mtp_layers == 0  # the V text_config lists no num_nextn_predict_layers


def test_chat_template_tokens_read_from_the_bundled_key_else_unknown():
    """``_chat_template_tokens`` (the bundled files' annotation, not a HuggingFace key) becomes
    ``ModelConfig.chat_template_tokens``; a plain config.json leaves it unknown."""
    assert _read(MIXTRAL_8X7B).chat_template_tokens is None
    assert _read(dict(MIXTRAL_8X7B, _chat_template_tokens=0)).chat_template_tokens == 0
    assert _read(dict(GPT_OSS_120B, _chat_template_tokens=65)).chat_template_tokens == 65
