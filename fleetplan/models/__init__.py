"""Model architecture from HuggingFace ``config.json``: params, KV bytes per token, MoE shape.

Bundled configs live in ``models/*.json`` (``list_models``, ``load_model``).
"""

from fleetplan.models.catalog import list_models, load_model, model_path
from fleetplan.models.config import (
    AttentionKind,
    Dtype,
    LayerMix,
    ModelConfig,
    WeightScaling,
    attention_kind,
    dtype,
    weight_scaling,
)
from fleetplan.models.context import ContextLimitError, ContextLimitRule, served_context_limit
from fleetplan.models.hf_config import model_config_from_dict, read_hf_config

__all__ = [
    "AttentionKind",
    "ContextLimitError",
    "ContextLimitRule",
    "Dtype",
    "LayerMix",
    "ModelConfig",
    "WeightScaling",
    "attention_kind",
    "dtype",
    "list_models",
    "load_model",
    "model_config_from_dict",
    "model_path",
    "read_hf_config",
    "served_context_limit",
    "weight_scaling",
]
