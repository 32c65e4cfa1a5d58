"""The served model's context limit: config.json window and the max_model_len rules (vLLM's)."""

from __future__ import annotations

import pytest

from fleetplan.models import (
    ContextLimitError,
    ContextLimitRule,
    load_model,
    model_config_from_dict,
    served_context_limit,
)

BASE = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100,
        "intermediate_size": 128}


@pytest.mark.parametrize("name, window", [("llama-3.1-8b", 131072), ("qwen3-32b", 40960), ("deepseek-v3", 163840)])
def test_bundled_models_carry_their_max_position_embeddings(name, window):
    assert load_model(name).context_window_tokens == window


def test_window_is_the_smallest_length_key_present_and_none_without_one():
    both = model_config_from_dict({**BASE, "max_position_embeddings": 8192, "seq_length": 4096}, source="x", name="m")
    assert both.context_window_tokens == 4096
    assert model_config_from_dict(BASE, source="x", name="m").context_window_tokens is None


def test_limit_defaults_to_the_window_and_is_none_without_model_or_value():
    llama = load_model("llama-3.1-8b")
    assert served_context_limit(llama, None) == 131072
    assert served_context_limit(llama, 32768) == 32768
    assert served_context_limit(None, None) is None
    assert served_context_limit(None, 4096) == 4096


def test_limit_above_the_window_needs_the_explicit_override():
    llama = load_model("llama-3.1-8b")
    with pytest.raises(ContextLimitError) as err:
        served_context_limit(llama, 200_000)
    e = err.value
    assert (e.rule, e.max_model_len_tokens, e.context_window_tokens) == (ContextLimitRule.EXCEEDS_WINDOW, 200_000,
                                                                         131072)
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in str(e)
    assert served_context_limit(llama, 200_000, allow_long=True) == 200_000


@pytest.mark.parametrize("model, value, rule", [
    ("llama-3.1-8b", 4096, ContextLimitRule.ALLOW_LONG_UNUSED),  # override with nothing to override
    ("llama-3.1-8b", None, ContextLimitRule.ALLOW_LONG_UNUSED),
    (None, 4096, ContextLimitRule.ALLOW_LONG_UNUSED),
])
def test_override_without_a_longer_limit_is_refused(model, value, rule):
    with pytest.raises(ContextLimitError) as err:
        served_context_limit(None if model is None else load_model(model), value, allow_long=True)
    assert err.value.rule is rule


def test_model_without_window_needs_an_explicit_limit():
    bare = model_config_from_dict(BASE, source="x", name="bare")
    with pytest.raises(ContextLimitError) as err:
        served_context_limit(bare, None)
    assert err.value.rule is ContextLimitRule.WINDOW_UNKNOWN
    assert served_context_limit(bare, 2048) == 2048
