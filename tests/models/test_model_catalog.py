"""Bundled model catalog: names, lookups, provenance."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fleetplan.errors import DataFormatError, UnknownNameError
from fleetplan.models import list_models, load_model, model_path

BUNDLED = ("deepseek-v3", "llama-3.1-405b", "llama-3.1-70b", "llama-3.1-8b", "qwen3-235b-a22b", "qwen3-30b-a3b",
           "qwen3-32b")
SOURCES = {"deepseek-v3": "deepseek-ai/DeepSeek-V3", "llama-3.1-405b": "meta-llama/Llama-3.1-405B",
           "llama-3.1-70b": "meta-llama/Llama-3.1-70B", "llama-3.1-8b": "meta-llama/Llama-3.1-8B",
           "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B", "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
           "qwen3-32b": "Qwen/Qwen3-32B"}


def test_list_models_is_the_bundled_set():
    assert list_models() == BUNDLED


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_file_cites_its_repository_and_keeps_hf_keys(name: str):
    data = json.loads(model_path(name).read_text())
    assert data["_source"] == SOURCES[name]
    assert {"architectures", "hidden_size", "num_hidden_layers", "vocab_size"} <= set(data)
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
    with pytest.raises(DataFormatError, match="no such file .* or a bundled name: deepseek-v3"):
        load_model(str(tmp_path / "nope" / "config.json"))
