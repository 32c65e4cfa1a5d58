"""Read a HuggingFace ``config.json`` into a ``ModelConfig``.

Families handled (by key, not by ``model_type``): Llama/Mistral, Qwen2/Qwen3 dense,
Qwen2-MoE/Qwen3-MoE, Mixtral, DeepSeek-V2/V3 (MLA), gpt-oss, Gemma 2/3, Phi-3/Phi-4 and GLM-4.
Multimodal wrappers (Llava, Mistral3, Qwen2.5-VL, Qwen3-VL, Llama-4, InternVL, Gemma 3, GLM-4.5V)
keep the language model under ``text_config`` or ``llm_config``; that table is read instead, with
``tie_word_embeddings`` falling back to the top level.  The vision tower is not sized or timed:
fleetplan plans text serving, where it holds < 2 % of the weights (Gemma 3's 0.4B SigLIP beside
27B) and runs only on image inputs.

Key mapping (first key present wins):

==========================  ====================================================================
ModelConfig field           config.json keys
==========================  ====================================================================
n_layers                    ``num_hidden_layers`` (required)
hidden_size                 ``hidden_size`` (required)
n_heads                     ``num_attention_heads`` (required)
n_kv_heads                  ``num_key_value_heads``; absent -> ``num_attention_heads`` (HF's MHA
                            default); MLA -> ``num_attention_heads``
head_dim                    ``head_dim``; absent/null -> ``hidden_size // num_attention_heads``;
                            MLA -> ``qk_nope_head_dim + qk_rope_head_dim``
vocab_size                  ``vocab_size`` (required)
n_experts                   ``num_local_experts`` | ``num_experts`` | ``n_routed_experts``
n_experts_per_token         ``num_experts_per_tok`` | ``experts_per_token`` | ``moe_topk``
                            (a per-layer list must hold one value)
moe_intermediate_size       ``moe_intermediate_size``; absent -> ``intermediate_size`` (Mixtral,
                            gpt-oss: every layer is MoE and ``intermediate_size`` is the expert)
n_shared_experts            ``n_shared_experts`` | ``num_shared_experts``, or
                            ``shared_expert_intermediate_size / moe_intermediate_size`` (Qwen2-MoE)
n_dense_layers              DeepSeek: layer i is MoE iff ``i >= first_k_dense_replace`` and
                            ``i % moe_layer_freq == 0``; Qwen-MoE: iff ``i not in mlp_only_layers``
                            and ``(i + 1) % decoder_sparse_step == 0``
tie_word_embeddings         ``tie_word_embeddings``; absent -> false (the Llama, Qwen, Mistral,
                            DeepSeek config classes' default)
context_window_tokens       the smallest of ``max_position_embeddings``, ``n_positions``,
                            ``max_seq_len``, ``seq_length``, ``max_sequence_length``,
                            ``max_seq_length``, ``seq_len`` present (vLLM's derivation of the default
                            ``max_model_len``; rope scaling is not applied on top: Llama-3.1's
                            and DeepSeek-V3's configs already give the extended window); none
                            present -> unknown (None)
==========================  ====================================================================

Architectures (``architectures[0]``, else the text table's ``model_type``) must be ones this
reader knows (``ARCHITECTURES``); a config naming another is refused with the list, since
a layout the formulas do not describe would be sized wrongly without a word.  A config with
neither key is read by its keys alone.  Per family:

* DeepseekV3 / DeepseekV32 / Kimi-K2 (``DeepseekV3ForCausalLM``): MLA, shared experts,
  ``first_k_dense_replace``; MTP heads ``num_nextn_predict_layers`` -> ``n_mtp_layers``;
  V3.2's DSA indexer ``index_n_heads``, ``index_head_dim``, ``index_topk``.  DSA attends to
  ``index_topk`` keys per query (timed by ``fleetplan.perf.attention``, 'DeepSeek Sparse Attention',
  and the indexer's projections by ``fleetplan.perf.operators``); the indexer's FP8 key is in the KV size.
* Glm4Moe and GLM-4.5V (``Glm4vMoeForConditionalGeneration``, its ``text_config``): as DeepSeek's
  MoE keys with GQA attention; GLM-4 dense (``Glm4ForCausalLM``), Phi-3 / Phi-4
  (``Phi3ForCausalLM``) and Qwen3-VL (dense and MoE, ``text_config``) are dense GQA or Qwen-MoE
  layouts read by the common keys (fused ``qkv_proj`` / ``gate_up_proj`` are weight layouts; partial
  rotary, attention biases and Qwen3-VL's deepstack visual inputs change no size modelled here).
* MiniMaxM2: every layer MoE with ``intermediate_size`` as the expert, MTP ``num_mtp_modules`` when
  ``use_mtp``.
* Llama-4 (``text_config``): layer i is MoE iff ``(i + 1) % interleave_moe_layer_step == 0``
  (or in ``moe_layers``), one shared expert of the expert width ``intermediate_size``, dense
  layers of ``intermediate_size_mlp``; rope layers (``no_rope_layers`` 1, default all but every
  4th) use chunked attention over ``attention_chunk_size`` tokens (``LayerMix``).
* gpt-oss: ``layer_types`` "sliding_attention" layers over ``sliding_window`` (128) tokens;
  attention sinks and projection biases are < 0.1 % of parameters and left out of the sizes; the sinks
  are recorded (``ModelConfig.attention_sinks``: they decide which attention kernels an engine can run).
* Qwen3-Next: ``layer_types`` or every ``full_attention_interval``-th layer is full (gated)
  attention, the rest Gated DeltaNet linear attention (``linear_*`` keys): a fixed state per
  sequence and no per-token cache (``ModelConfig.linear_state_bytes_per_seq``).
* Gemma 2 / Gemma 3 (``text_config`` for ``Gemma3ForConditionalGeneration``): without ``layer_types``,
  layer i is full attention iff ``(i + 1) % sliding_window_pattern == 0`` (Gemma 2: 2, Gemma 3: 6)
  and the others slide over ``sliding_window`` tokens (``LayerMix``); keys the published configs
  leave out take the transformers config class's defaults (``GEMMA_DEFAULTS``: gemma-3-27b-it gives
  no ``vocab_size``, 262,208).  Gemma 2's logit soft-capping costs no FLOPs worth modelling.
* A bare ``sliding_window`` without ``layer_types`` is not read (Qwen2/3 ship one with
  ``use_sliding_window`` false; Mistral-7B's 4,096 would be sized as full anyway).

``quantization_config`` gives the checkpoint's storage (``ModelConfig.default_weight_dtype``):

==========================  ========================================================================
quant_method                weights
==========================  ========================================================================
``fp8``                     FP8; ``weight_block_size`` [r, c] -> block-scaled, else per-tensor (vLLM
                            ``Fp8Config``)
``mxfp4``                   MXFP4, one scale per 32 (gpt-oss)
``compressed-tensors``      the first ``config_groups`` entry's ``weights``: 8-bit float -> FP8, 4-bit
                            int -> INT4, ``strategy`` tensor / channel / block (``block_structure``) /
                            group (``group_size``)
``modelopt`` / ``quant_algo``  ``FP8`` -> FP8 per-tensor (NVIDIA ModelOpt checkpoints)
``awq``, ``gptq``           4-bit -> INT4 with ``group_size`` (default 128) scales
==========================  ========================================================================

Any other method (or an NVFP4 / 8-bit integer format) is refused naming the method.  Every
projection is taken to be in that type, except that an MoE checkpoint whose
``modules_to_not_convert`` (or ``ignore``) names ``self_attn`` quantizes only its routed
experts (``ModelConfig.quantized_experts_only``; gpt-oss keeps attention, router, embeddings
and head in BF16: 60.7 GiB for gpt-oss-120b, not 57.8).  Other unquantized modules
(``lm_head``, routers) are < 1 % of the bundled models' weights.

``_chat_template_tokens`` (not a HuggingFace key; the bundled files carry it beside ``_source``, its
derivation in ``_chat_template_source``) is ``ModelConfig.chat_template_tokens``: the tokens the model's chat
template adds around one user message; a config without it leaves them unknown (None).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fleetplan.errors import ConfigError, DataFormatError
from fleetplan.models.config import AttentionKind, Dtype, LayerMix, ModelConfig, WeightScaling

__all__ = ["ARCHITECTURES", "model_config_from_dict", "read_hf_config"]

#: ``architectures[0]`` values this reader describes (wrappers read their ``text_config``).
ARCHITECTURES = (
    "LlamaForCausalLM", "MistralForCausalLM", "MixtralForCausalLM", "Qwen2ForCausalLM", "Qwen2MoeForCausalLM",
    "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Qwen3NextForCausalLM", "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "Glm4MoeForCausalLM", "MiniMaxM2ForCausalLM",
    "GptOssForCausalLM", "HunYuanMoEV1ForCausalLM", "Llama4ForCausalLM", "Llama4ForConditionalGeneration",
    "LlavaForConditionalGeneration", "Mistral3ForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration",
    "InternVLChatModel", "Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration",
    "Phi3ForCausalLM", "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration", "Glm4ForCausalLM",
    "Glm4vMoeForConditionalGeneration",
)
#: ``model_type`` values read when a config gives no ``architectures``.
MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next", "deepseek_v2",
               "deepseek_v3", "deepseek_v32", "kimi_k2", "glm4_moe", "minimax_m2", "gpt_oss", "hunyuan_v1_moe",
               "llama4", "llama4_text", "llava", "mistral3", "qwen2_5_vl", "internvl_chat", "gemma2", "gemma3",
               "gemma3_text", "phi3", "qwen3_vl", "qwen3_vl_text", "qwen3_vl_moe", "qwen3_vl_moe_text", "glm4",
               "glm4v_moe", "glm4v_moe_text")
#: Architectures whose attention heads carry learned sink logits (HF ``GptOssAttention.sinks``).
SINK_ATTENTION = ("GptOssForCausalLM", "gpt_oss")
LLAMA4 = ("Llama4ForCausalLM", "Llama4ForConditionalGeneration", "llama4", "llama4_text")
GEMMA2 = ("Gemma2ForCausalLM", "gemma2")
GEMMA3 = ("Gemma3ForCausalLM", "Gemma3ForConditionalGeneration", "gemma3", "gemma3_text")
#: Config-class defaults of keys Google's published Gemma configs leave out (gemma-3-27b-it's ``text_config`` has
#: no ``vocab_size``, ``max_position_embeddings``, ``sliding_window_pattern``): transformers ``Gemma2Config`` /
#: ``Gemma3TextConfig``.  Gemma 2 alternates sliding and full layers (pattern 2), Gemma 3 has one full layer in 6.
GEMMA_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma2": dict(vocab_size=256_000, head_dim=256, max_position_embeddings=8192, sliding_window=4096,
                   sliding_window_pattern=2, tie_word_embeddings=True),
    "gemma3": dict(vocab_size=262_208, head_dim=256, max_position_embeddings=131_072, sliding_window=4096,
                   sliding_window_pattern=6, tie_word_embeddings=True),
}
#: Llama-4's default: every 4th layer is a NoPE global-attention layer (HF ``Llama4TextConfig``).
LLAMA4_NO_ROPE_INTERVAL = 4
#: OCP MX block: one E8M0 scale per 32 elements.
MXFP4_GROUP = 32
#: AutoAWQ / AutoGPTQ default group size.
INT4_DEFAULT_GROUP = 128
LAYER_KINDS = ("full_attention", "sliding_attention", "chunked_attention", "linear_attention")

NESTED_TEXT_KEYS = ("text_config", "llm_config")
#: The bundled files' count of the chat template's tokens around one user message (module docstring).
CHAT_TEMPLATE_KEY = "_chat_template_tokens"
EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
TOPK_KEYS = ("num_experts_per_tok", "experts_per_token", "moe_topk")
SHARED_KEYS = ("n_shared_experts", "num_shared_experts")
#: Keys vLLM reads the default max_model_len from (``_get_and_verify_max_len``); the smallest present wins.
CONTEXT_WINDOW_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "max_sequence_length",
                       "max_seq_length", "seq_len")


def read_hf_config(path: str | Path, name: str | None = None) -> ModelConfig:
    """Parse the ``config.json`` at ``path``.

    Parameters
    ----------
    path : str or Path
        A HuggingFace ``config.json`` (or a directory holding one).
    name : str, optional
        Display name; default: the last part of ``_source`` / ``_name_or_path``,
        else the file's stem (its directory's name for ``config.json``).

    Raises
    ------
    DataFormatError
        Unreadable JSON, or a required field missing or malformed (names file and field).
    """
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataFormatError(str(path), None, "file not found", "give a HuggingFace config.json path") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataFormatError(str(path), None, f"not a JSON file ({exc})", "give a HuggingFace config.json") from None
    if not isinstance(data, Mapping):
        raise DataFormatError(str(path), None, "top level is not a JSON object", "give a HuggingFace config.json")
    default_name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return model_config_from_dict(data, source=str(path), name=name or _display_name(data, default_name))


def _display_name(data: Mapping[str, Any], fallback: str) -> str:
    for key in ("_source", "_name_or_path"):
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value.rstrip("/").split("/")[-1]
    return fallback


class _Fields:
    """Typed look-ups into one config table; errors name the file and the field."""

    def __init__(self, table: Mapping[str, Any], top: Mapping[str, Any], source: str, prefix: str) -> None:
        self.table, self.top, self.source, self.prefix = table, top, source, prefix

    def _fail(self, key: str, problem: str, fix: str) -> DataFormatError:
        return DataFormatError(self.source, f"field {self.prefix}{key}", problem, fix)

    def has(self, key: str) -> bool:
        return self.table.get(key) is not None

    def first(self, keys: tuple[str, ...]) -> str | None:
        return next((k for k in keys if self.has(k)), None)

    def int(self, key: str, *, low: int = 0) -> int:
        if not self.has(key):
            raise self._fail(key, "missing", f"add {key} (an integer >= {low}) as in the model's published config")
        value = self.table[key]
        if isinstance(value, list) and value and all(v == value[0] for v in value):
            value = value[0]  # a per-layer list with one value (Hunyuan moe_topk)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self._fail(key, f"is {value!r}", f"it must be an integer >= {low}")
        return value

    def int_or(self, key: str, default: int, *, low: int = 0) -> int:
        return self.int(key, low=low) if self.has(key) else default

    def int_list(self, key: str) -> list[int]:
        value = self.table.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise self._fail(key, f"is {value!r}", "it must be a list of layer indices")
        return value

    def bool(self, key: str, default: bool) -> bool:
        value = self.table.get(key, self.top.get(key, default))
        if not isinstance(value, bool):
            raise self._fail(key, f"is {value!r}", "it must be true or false")
        return value


def _architecture(data: Mapping[str, Any], table: Mapping[str, Any], source: str) -> str | None:
    """The known architecture the config names, or None when it names none (read by keys)."""
    archs = data.get("architectures")
    if archs is not None:
        if not (isinstance(archs, list) and archs and all(isinstance(a, str) for a in archs)):
            raise DataFormatError(source, "field architectures", f"is {archs!r}",
                                  "it must be a list of architecture names, e.g. [\"LlamaForCausalLM\"]")
        if archs[0] not in ARCHITECTURES:
            raise DataFormatError(source, "field architectures", f"names {archs[0]!r}, an architecture fleetplan "
                                  "does not model", f"use a config of one of: {', '.join(ARCHITECTURES)}")
        return archs[0]
    model_type = table.get("model_type", data.get("model_type"))
    if model_type is None:
        return None
    if model_type not in MODEL_TYPES:
        raise DataFormatError(source, "field model_type", f"is {model_type!r}, an architecture fleetplan does not "
                              "model", f"use a config of one of: {', '.join(MODEL_TYPES)}")
    return str(model_type)


def model_config_from_dict(data: Mapping[str, Any], *, source: str, name: str) -> ModelConfig:
    """Build a ``ModelConfig`` from a parsed ``config.json`` (see the module docstring for keys).

    ``source`` names the file in error messages; ``name`` becomes ``ModelConfig.name``.
    """
    nested = next((k for k in NESTED_TEXT_KEYS if isinstance(data.get(k), Mapping)), None)
    table = data[nested] if nested else data
    f = _Fields(table, data, source, f"{nested}." if nested else "")
    arch = _architecture(data, table, source)
    family = "gemma2" if arch in GEMMA2 else "gemma3" if arch in GEMMA3 else None
    if family:
        defaults = dict(GEMMA_DEFAULTS[family])
        if data.get("tie_word_embeddings") is not None:
            del defaults["tie_word_embeddings"]  # a wrapper's top-level value wins over the class default
        table = {**defaults, **{k: v for k, v in table.items() if v is not None}}
        f = _Fields(table, data, source, f.prefix)
    n_layers = f.int("num_hidden_layers", low=1)
    hidden = f.int("hidden_size", low=1)
    n_heads = f.int("num_attention_heads", low=1)
    vocab = f.int("vocab_size", low=1)
    mla = f.has("kv_lora_rank")
    fields: dict[str, Any] = {}
    if mla:
        rope = f.int("qk_rope_head_dim", low=1)
        fields.update(
            attention=AttentionKind.MLA, n_kv_heads=n_heads, head_dim=f.int("qk_nope_head_dim", low=1) + rope,
            kv_lora_rank=f.int("kv_lora_rank", low=1), qk_rope_head_dim=rope,
            q_lora_rank=f.int_or("q_lora_rank", 0), v_head_dim=f.int("v_head_dim", low=1),
        )
    else:
        if not f.has("head_dim") and hidden % n_heads:
            raise f._fail("head_dim", "missing and hidden_size is not a multiple of num_attention_heads",
                          "add head_dim from the model's published config")
        n_kv = f.int_or("num_key_value_heads", n_heads, low=1)
        if n_heads % n_kv:
            raise f._fail("num_key_value_heads", f"is {n_kv}, which does not divide num_attention_heads={n_heads}",
                          "each KV head serves a whole group of query heads: use a divisor of the query heads")
        fields.update(attention=AttentionKind.GQA, n_kv_heads=n_kv, head_dim=f.int_or("head_dim", hidden // n_heads,
                                                                                       low=1))
    expert_key = f.first(EXPERT_KEYS)
    n_experts = f.int(expert_key) if expert_key else 0
    if n_experts:
        fields.update(_moe_fields(f, n_layers, n_experts, llama4=arch in LLAMA4))
    else:
        fields["intermediate_size"] = f.int("intermediate_size", low=1)
    windows = [f.int(k, low=1) for k in CONTEXT_WINDOW_KEYS if f.has(k)]
    fields["context_window_tokens"] = min(windows) if windows else None
    fields.update(_weight_format(data, table, source))
    if n_experts and fields.get("default_weight_dtype", Dtype.BF16) is not Dtype.BF16:
        fields["quantized_experts_only"] = _experts_only(data, table)
    fields["layers"] = _layer_mix(f, n_layers, arch)
    fields["n_mtp_layers"] = _mtp_layers(f)
    fields["attention_sinks"] = arch in SINK_ATTENTION
    if data.get(CHAT_TEMPLATE_KEY) is not None:
        fields["chat_template_tokens"] = _Fields(data, data, source, "").int(CHAT_TEMPLATE_KEY)
    if f.has("index_head_dim"):
        fields.update(index_n_heads=f.int("index_n_heads", low=1), index_head_dim=f.int("index_head_dim", low=1),
                      index_topk=f.int("index_topk", low=1))
    try:
        return ModelConfig(
            name=name, n_layers=n_layers, hidden_size=hidden, n_heads=n_heads, vocab_size=vocab,
            tie_word_embeddings=f.bool("tie_word_embeddings", False), **fields,
        )
    except ConfigError as exc:
        raise DataFormatError(source, None, str(exc), "fix the config.json values") from None


def _moe_fields(f: _Fields, n_layers: int, n_experts: int, *, llama4: bool) -> dict[str, int]:
    topk_key = f.first(TOPK_KEYS)
    if topk_key is None:
        raise f._fail(TOPK_KEYS[0], f"missing (MoE with {n_experts} experts)",
                      f"add one of {', '.join(TOPK_KEYS)} (experts per token)")
    top_k = f.int(topk_key, low=1)
    if top_k > n_experts:
        raise f._fail(topk_key, f"is {top_k}, above the {n_experts} routed experts",
                      f"experts per token must be at most the expert count ({n_experts})")
    if f.has("moe_intermediate_size"):
        expert_width = f.int("moe_intermediate_size", low=1)
    else:
        expert_width = f.int("intermediate_size", low=1)
    if llama4:
        return _llama4_moe(f, n_layers, n_experts, top_k, expert_width)
    shared_key = f.first(SHARED_KEYS)
    if shared_key:
        n_shared = f.int(shared_key)
    elif f.int_or("shared_expert_intermediate_size", 0):
        shared_width = f.int("shared_expert_intermediate_size")
        if shared_width % expert_width:
            raise f._fail("shared_expert_intermediate_size", f"is {shared_width}, not a multiple of the expert "
                          f"width {expert_width}", "fleetplan models the shared expert as whole experts")
        n_shared = shared_width // expert_width
    else:
        n_shared = 0
    if f.has("first_k_dense_replace") or f.has("moe_layer_freq"):
        first_k, freq = f.int_or("first_k_dense_replace", 0), f.int_or("moe_layer_freq", 1, low=1)
        moe_layers = [i for i in range(n_layers) if i >= first_k and i % freq == 0]
    else:
        dense_only, step = set(f.int_list("mlp_only_layers")), f.int_or("decoder_sparse_step", 1, low=1)
        moe_layers = [i for i in range(n_layers) if i not in dense_only and (i + 1) % step == 0]
    n_dense = n_layers - len(moe_layers)
    dense_width = 0
    if n_dense:
        dense_width = f.int("intermediate_size", low=1)
        if not f.has("moe_intermediate_size"):
            raise f._fail("moe_intermediate_size", f"missing but {n_dense} layers are dense",
                          "add moe_intermediate_size (the expert width)")
    return dict(n_experts=n_experts, n_experts_per_token=top_k, n_shared_experts=n_shared,
                moe_intermediate_size=expert_width, n_dense_layers=n_dense, intermediate_size=dense_width)


def _llama4_moe(f: _Fields, n_layers: int, n_experts: int, top_k: int, expert_width: int) -> dict[str, int]:
    """Llama-4: interleaved MoE layers with one shared expert; dense layers of ``intermediate_size_mlp``."""
    step = f.int_or("interleave_moe_layer_step", 1, low=1)
    if f.has("moe_layers") and f.int_list("moe_layers") != list(range(step - 1, n_layers, step)):
        raise f._fail("moe_layers", "is not every interleave_moe_layer_step-th layer",
                      "fleetplan models Llama-4's interleaved MoE layers; drop moe_layers or make them interleaved")
    n_dense = n_layers - len(range(step - 1, n_layers, step))
    return dict(n_experts=n_experts, n_experts_per_token=top_k, n_shared_experts=1, moe_intermediate_size=expert_width,
                n_dense_layers=n_dense, intermediate_size=f.int("intermediate_size_mlp", low=1) if n_dense else 0,
                moe_layer_step=step)


def _layer_mix(f: _Fields, n_layers: int, arch: str | None) -> LayerMix:
    """Windowed and linear-attention layers (module docstring)."""
    linear_shape: dict[str, int] = {}
    n_window = n_linear = 0
    window = 0
    if f.has("layer_types"):
        kinds = f.table["layer_types"]
        if not isinstance(kinds, list) or len(kinds) != n_layers or any(k not in LAYER_KINDS for k in kinds):
            raise f._fail("layer_types", f"is not a list of {n_layers} of {', '.join(LAYER_KINDS)}",
                          "give one attention kind per layer as in the published config")
        n_window = sum(k in ("sliding_attention", "chunked_attention") for k in kinds)
        n_linear = kinds.count("linear_attention")
        if n_window:
            key = "sliding_window" if "sliding_attention" in kinds else "attention_chunk_size"
            window = f.int(key, low=1)
    elif arch in GEMMA2 + GEMMA3:
        # layer i is full attention iff (i + 1) % sliding_window_pattern == 0 (transformers Gemma2/Gemma3 configs)
        n_window = n_layers - n_layers // f.int("sliding_window_pattern", low=1)
        window = f.int("sliding_window", low=1)
    elif f.has("full_attention_interval"):
        n_linear = n_layers - n_layers // f.int("full_attention_interval", low=1)
    elif arch in LLAMA4 and f.has("attention_chunk_size"):
        rope = f.int_list("no_rope_layers") if f.has("no_rope_layers") else [
            int((i + 1) % LLAMA4_NO_ROPE_INTERVAL != 0) for i in range(n_layers)]
        n_window, window = sum(1 for r in rope if r), f.int("attention_chunk_size", low=1)
    if n_linear:
        linear_shape = dict(
            linear_key_heads=f.int("linear_num_key_heads", low=1), linear_value_heads=f.int("linear_num_value_heads",
                                                                                           low=1),
            linear_key_head_dim=f.int("linear_key_head_dim", low=1),
            linear_value_head_dim=f.int("linear_value_head_dim", low=1),
            linear_conv_kernel=f.int("linear_conv_kernel_dim", low=1))
    gate = f.bool("attn_output_gate", arch in ("Qwen3NextForCausalLM", "qwen3_next"))
    return LayerMix(n_window_layers=n_window if window else 0, attention_window_tokens=window if n_window else 0,
                    n_linear_layers=n_linear, output_gate=gate, **linear_shape)


def _mtp_layers(f: _Fields) -> int:
    """Multi-token-prediction layers: DeepSeek/GLM ``num_nextn_predict_layers``, MiniMax ``num_mtp_modules``."""
    if f.has("num_nextn_predict_layers"):
        return f.int("num_nextn_predict_layers")
    if f.bool("use_mtp", False):
        return f.int("num_mtp_modules", low=1)
    return 0


def _weight_format(data: Mapping[str, Any], table: Mapping[str, Any], source: str) -> dict[str, Any]:
    """``ModelConfig`` weight-storage fields from ``quantization_config`` (module docstring table)."""
    q = data.get("quantization_config", table.get("quantization_config"))
    if q is None:
        return {}
    where = "field quantization_config"
    if not isinstance(q, Mapping):
        raise DataFormatError(source, where, f"is {q!r}", "it must be a JSON object as in the published config")
    method = str(q.get("quant_method") or ("modelopt" if "quant_algo" in q else "")).lower()

    def refuse(what: str) -> DataFormatError:
        return DataFormatError(source, where, f"{what} is not a weight format fleetplan models",
                               "use a config of an fp8, mxfp4, compressed-tensors (fp8 or int4), modelopt FP8, "
                               "awq or gptq checkpoint, or drop quantization_config and choose `weight_dtype`")

    def block(value: Any, key: str) -> tuple[int, int]:
        if not (isinstance(value, list) and len(value) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)):
            raise DataFormatError(source, f"{where}.{key}", f"is {value!r}", "give two integers >= 1, e.g. [128, 128]")
        return (value[0], value[1])

    if method == "fp8":
        if q.get("weight_block_size") is not None:
            return dict(default_weight_dtype=Dtype.FP8, quant_method=method, weight_scaling=WeightScaling.BLOCK,
                        weight_block_size=block(q["weight_block_size"], "weight_block_size"))
        return dict(default_weight_dtype=Dtype.FP8, quant_method=method, weight_scaling=WeightScaling.PER_TENSOR)
    if method == "mxfp4":
        return dict(default_weight_dtype=Dtype.MXFP4, quant_method=method, weight_scaling=WeightScaling.GROUP,
                    weight_group_size=MXFP4_GROUP)
    if method == "modelopt":
        algo = str(q.get("quant_algo", "")).upper()
        if algo != "FP8":
            raise refuse(f"modelopt quant_algo {algo!r}")
        return dict(default_weight_dtype=Dtype.FP8, quant_method=method, weight_scaling=WeightScaling.PER_TENSOR)
    if method in ("awq", "gptq"):
        bits = q.get("bits", q.get("w_bit"))
        if bits != 4:
            raise refuse(f"{method} with {bits!r}-bit weights")
        group = q.get("group_size", q.get("q_group_size", INT4_DEFAULT_GROUP))
        if isinstance(group, bool) or not isinstance(group, int) or group < 1:
            group = INT4_DEFAULT_GROUP  # -1 = one group per row (per-channel)
            return dict(default_weight_dtype=Dtype.INT4, quant_method=method, weight_scaling=WeightScaling.PER_CHANNEL)
        return dict(default_weight_dtype=Dtype.INT4, quant_method=method, weight_scaling=WeightScaling.GROUP,
                    weight_group_size=group)
    if method == "compressed-tensors":
        return _compressed_tensors(q, source, refuse, block)
    raise refuse(f"quant_method {method!r}")


def _experts_only(data: Mapping[str, Any], table: Mapping[str, Any]) -> bool:
    """The checkpoint leaves attention unquantized (``modules_to_not_convert`` / ``ignore`` names
    ``self_attn``): only the experts are stored quantized (gpt-oss)."""
    q = data.get("quantization_config", table.get("quantization_config"))
    skipped = (q.get("modules_to_not_convert") or q.get("ignore") or []) if isinstance(q, Mapping) else []
    return isinstance(skipped, list) and any(isinstance(m, str) and "self_attn" in m for m in skipped)


def _compressed_tensors(q: Mapping[str, Any], source: str, refuse, block) -> dict[str, Any]:
    groups = q.get("config_groups")
    first = next(iter(groups.values()), None) if isinstance(groups, Mapping) and groups else None
    weights = first.get("weights") if isinstance(first, Mapping) else None
    if not isinstance(weights, Mapping):
        raise DataFormatError(source, "field quantization_config.config_groups", "has no weights scheme",
                              "give the published compressed-tensors config with config_groups.*.weights")
    bits, kind, strategy = weights.get("num_bits"), weights.get("type"), str(weights.get("strategy", "tensor"))
    scaling = {"tensor": WeightScaling.PER_TENSOR, "channel": WeightScaling.PER_CHANNEL,
               "block": WeightScaling.BLOCK, "group": WeightScaling.GROUP}.get(strategy)
    if (bits, kind) == (8, "float"):
        dtype = Dtype.FP8
    elif (bits, kind) == (4, "int"):
        dtype = Dtype.INT4
    else:
        raise refuse(f"compressed-tensors {bits!r}-bit {kind!r} weights")
    if scaling is None:
        raise refuse(f"compressed-tensors strategy {strategy!r}")
    out: dict[str, Any] = dict(default_weight_dtype=dtype, quant_method="compressed-tensors", weight_scaling=scaling)
    if scaling is WeightScaling.BLOCK:
        out["weight_block_size"] = block(weights.get("block_structure"), "config_groups.weights.block_structure")
    if scaling is WeightScaling.GROUP:
        group = weights.get("group_size")
        if isinstance(group, bool) or not isinstance(group, int) or group < 1:
            raise DataFormatError(source, "field quantization_config.config_groups.weights.group_size",
                                  f"is {group!r}", "give the published group size (an integer >= 1)")
        out["weight_group_size"] = group
    return out
