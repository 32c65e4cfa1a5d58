"""Read a HuggingFace ``config.json`` into a ``ModelConfig``.

Families handled (by key, not by ``model_type``): Llama/Mistral, Qwen2/Qwen3 dense,
Qwen2-MoE/Qwen3-MoE, Mixtral, DeepSeek-V2/V3 (MLA) and gpt-oss.  Multimodal wrappers
(Llava, Mistral3, Qwen2.5-VL, Llama-4, InternVL) keep the language model under
``text_config`` or ``llm_config``; that table is read instead, with
``tie_word_embeddings`` falling back to the top level.

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

Not modelled: sliding-window layers (gpt-oss, Mistral-7B-v0.1) are sized as full
attention, so the KV estimate is an upper bound for them; MTP / next-n prediction
layers (DeepSeek ``num_nextn_predict_layers``) are excluded, as in the published
parameter counts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fleetplan.errors import ConfigError, DataFormatError
from fleetplan.models.config import AttentionKind, ModelConfig

__all__ = ["model_config_from_dict", "read_hf_config"]

NESTED_TEXT_KEYS = ("text_config", "llm_config")
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


def model_config_from_dict(data: Mapping[str, Any], *, source: str, name: str) -> ModelConfig:
    """Build a ``ModelConfig`` from a parsed ``config.json`` (see the module docstring for keys).

    ``source`` names the file in error messages; ``name`` becomes ``ModelConfig.name``.
    """
    nested = next((k for k in NESTED_TEXT_KEYS if isinstance(data.get(k), Mapping)), None)
    table = data[nested] if nested else data
    f = _Fields(table, data, source, f"{nested}." if nested else "")
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
        fields.update(
            attention=AttentionKind.GQA, n_kv_heads=f.int_or("num_key_value_heads", n_heads, low=1),
            head_dim=f.int_or("head_dim", hidden // n_heads, low=1),
        )
    expert_key = f.first(EXPERT_KEYS)
    n_experts = f.int(expert_key) if expert_key else 0
    if n_experts:
        fields.update(_moe_fields(f, n_layers, n_experts))
    else:
        fields["intermediate_size"] = f.int("intermediate_size", low=1)
    windows = [f.int(k, low=1) for k in CONTEXT_WINDOW_KEYS if f.has(k)]
    fields["context_window_tokens"] = min(windows) if windows else None
    try:
        return ModelConfig(
            name=name, n_layers=n_layers, hidden_size=hidden, n_heads=n_heads, vocab_size=vocab,
            tie_word_embeddings=f.bool("tie_word_embeddings", False), **fields,
        )
    except ConfigError as exc:
        raise DataFormatError(source, None, str(exc), "fix the config.json values") from None


def _moe_fields(f: _Fields, n_layers: int, n_experts: int) -> dict[str, int]:
    topk_key = f.first(TOPK_KEYS)
    if topk_key is None:
        raise f._fail(TOPK_KEYS[0], f"missing (MoE with {n_experts} experts)",
                      f"add one of {', '.join(TOPK_KEYS)} (experts per token)")
    top_k = f.int(topk_key, low=1)
    if f.has("moe_intermediate_size"):
        expert_width = f.int("moe_intermediate_size", low=1)
    else:
        expert_width = f.int("intermediate_size", low=1)
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
