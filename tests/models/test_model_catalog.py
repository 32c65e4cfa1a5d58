"""Bundled model catalog: names, lookups, provenance."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fleetplan.errors import DataFormatError, UnknownNameError
from fleetplan.models import list_models, load_model, model_path

SOURCES = {
    "deepseek-r1": "deepseek-ai/DeepSeek-R1", "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    "deepseek-v3.2": "deepseek-ai/DeepSeek-V3.2", "glm-4.5": "zai-org/GLM-4.5", "glm-4.5-air": "zai-org/GLM-4.5-Air",
    "glm-4.6": "zai-org/GLM-4.6", "gpt-oss-120b": "openai/gpt-oss-120b", "gpt-oss-20b": "openai/gpt-oss-20b",
    "kimi-k2": "moonshotai/Kimi-K2-Instruct", "llama-3.1-405b": "meta-llama/Llama-3.1-405B",
    "llama-3.1-70b": "meta-llama/Llama-3.1-70B", "llama-3.1-8b": "meta-llama/Llama-3.1-8B",
    "llama-4-maverick": "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
    "llama-4-scout": "meta-llama/Llama-4-Scout-17B-16E-Instruct", "minimax-m2.5": "MiniMaxAI/MiniMax-M2.5",
    "mixtral-8x22b": "mistralai/Mixtral-8x22B-v0.1", "mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B", "qwen3-235b-a22b-fp8": "Qwen/Qwen3-235B-A22B-FP8",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B", "qwen3-32b": "Qwen/Qwen3-32B", "qwen3-32b-fp8": "Qwen/Qwen3-32B-FP8",
    "qwen3-coder-480b-a35b": "Qwen/Qwen3-Coder-480B-A35B-Instruct",
}
BUNDLED = tuple(sorted(SOURCES))


def test_list_models_is_the_bundled_set():
    assert list_models() == BUNDLED


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_file_cites_its_repository_and_keeps_hf_keys(name: str):
    data = json.loads(model_path(name).read_text())
    assert data["_source"] == SOURCES[name]
    text = data.get("text_config", data)  # Llama-4 keeps the language model under text_config
    assert "architectures" in data and {"hidden_size", "num_hidden_layers", "vocab_size"} <= set(text)
    assert load_model(name).name == SOURCES[name].split("/")[1]


def test_lookup_is_case_insensitive_and_accepts_json_suffix():
    assert load_model("Llama-3.1-70B") == load_model("llama-3.1-70b.json") == load_model("llama-3.1-70b")


def test_unknown_name_lists_valid_names():
    with pytest.raises(UnknownNameError) as info:
        load_model("llama-9")
    assert "unknown model 'llama-9'" in str(info.value)
    assert all(name in str(info.value) for name in BUNDLED)


def test_path_to_a_config_json_or_its_directory(tmp_path: Path):
    target = tmp_path / "my-model"
    target.mkdir()
    shutil.copy(model_path("qwen3-32b"), target / "config.json")
    by_dir, by_file = load_model(target), load_model(str(target / "config.json"))
    assert by_dir == by_file
    assert by_dir.n_params() == load_model("qwen3-32b").n_params()


def test_missing_path_is_a_data_format_error_not_an_unknown_name(tmp_path: Path):
    with pytest.raises(DataFormatError, match="no such file .* or a bundled name: deepseek-r1, deepseek-v3"):
        load_model(str(tmp_path / "nope" / "config.json"))
