"""vLLM's datasets without a tokenizer: lengths as vLLM samples them, files parsed or refused in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fleetplan.bench.datasets import CHARS_PER_TOKEN, DatasetName, DatasetSpec, sample_lengths
from fleetplan.cli.errors import render_error
from fleetplan.errors import DataFormatError, UnknownNameError


def test_random_bounds_follow_vllm() -> None:
    spec = DatasetSpec(random_input_len=100, random_output_len=10, random_range_ratio=0.5, random_prefix_len=7)
    prompt, output = sample_lengths(spec, 5000, np.random.default_rng(0))
    assert prompt.min() == 7 + 50 and prompt.max() == 7 + 150  # floor(I (1-r)) .. ceil(I (1+r)), plus the prefix
    assert output.min() == 5 and output.max() == 15
    fixed = sample_lengths(DatasetSpec(random_input_len=64, random_output_len=3), 10, np.random.default_rng(0))
    assert set(fixed[0]) == {64} and set(fixed[1]) == {3}


def test_sharegpt_filters_and_fixed_output(tmp_path) -> None:
    conv = [{"conversations": [{"from": "human", "value": "x" * 400}, {"from": "gpt", "value": "y" * 800}]},
            {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "y" * 80}]},  # too short
            {"conversations": [{"from": "human", "value": "z" * 40}]}]  # one turn
    path = tmp_path / "sg.json"
    path.write_text(json.dumps(conv))
    spec = DatasetSpec(DatasetName.SHAREGPT, str(path))
    prompt, output = sample_lengths(spec, 1, np.random.default_rng(0))
    assert prompt[0] == 400 / CHARS_PER_TOKEN and output[0] == 800 / CHARS_PER_TOKEN
    with pytest.raises(DataFormatError) as err:
        sample_lengths(spec, 2, np.random.default_rng(0))
    assert "fewer than --num-prompts 2" in render_error(err.value, "bench serve")  # the CLI's wording
    fixed = DatasetSpec(DatasetName.SHAREGPT, str(path), sharegpt_output_len=32)
    assert sample_lengths(fixed, 2, np.random.default_rng(0))[1].tolist() == [32, 32]


def test_burstgpt_rows_of_gpt4(tmp_path) -> None:
    path = tmp_path / "burst.csv"
    path.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                    "1,ChatGPT,10,20,30,Conversation log\n2,GPT-4,300,150,450,Conversation log\n"
                    "3,GPT-4,200,0,200,Conversation log\n")
    prompt, output = sample_lengths(DatasetSpec(DatasetName.BURSTGPT, str(path)), 4, np.random.default_rng(0))
    assert set(prompt) == {300} and set(output) == {150}


def test_bad_names_and_files(tmp_path) -> None:
    with pytest.raises(UnknownNameError, match="valid dataset names are random, sharegpt, burstgpt, custom"):
        DatasetSpec("lmsys")
    csv_path = tmp_path / "other.csv"
    csv_path.write_text("a,b\n1,2\n")
    with pytest.raises(DataFormatError, match="lacks the BurstGPT columns"):
        sample_lengths(DatasetSpec(DatasetName.BURSTGPT, str(csv_path)), 1, np.random.default_rng(0))
