"""vLLM's datasets without a tokenizer: lengths as vLLM samples them, files parsed or refused in one line."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.bench.datasets import (
    CHARS_PER_TOKEN,
    DatasetName,
    DatasetSpec,
    RangeRatioRule,
    random_length_bounds,
    sample_lengths,
)
from fleetplan.cli.errors import render_error
from fleetplan.errors import ConfigError, DataFormatError, UnknownNameError


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


# --- the two meanings of --random-range-ratio ---------------------------------------------------------------
# With at most 101 distinct lengths and 4,000 draws, each bound is missed with probability below
# (1 - 1/101)^4000 < 1e-17, so the observed min and max are the bounds themselves.
N_DRAWS = 4000


@settings(max_examples=40, deadline=None)
@given(length=st.integers(1, 50), out_len=st.integers(1, 50), ratio=st.floats(0.0, 0.99))
def test_vllm_rule_draws_exactly_on_l_1_minus_r_to_l_1_plus_r(length, out_len, ratio) -> None:
    """vLLM: uniform integers on [floor(L (1 - r)), ceil(L (1 + r))], never below 1."""
    spec = DatasetSpec(random_input_len=length, random_output_len=out_len, random_range_ratio=ratio)
    prompt, output = sample_lengths(spec, N_DRAWS, np.random.default_rng(1))
    for drawn, n in ((prompt, length), (output, out_len)):
        assert drawn.min() == max(math.floor(n * (1 - ratio)), 1)
        assert drawn.max() == math.ceil(n * (1 + ratio))


@settings(max_examples=40, deadline=None)
@given(length=st.integers(1, 50), out_len=st.integers(1, 50), ratio=st.floats(0.0, 1.0))
def test_sglang_rule_draws_exactly_on_r_l_to_l(length, out_len, ratio) -> None:
    """SGLang: inputs on [max(int(L r), 1), L], outputs on [int(O r), O] served as at least 1 token."""
    spec = DatasetSpec(random_input_len=length, random_output_len=out_len, random_range_ratio=ratio,
                       random_range_ratio_rule="sglang")
    prompt, output = sample_lengths(spec, N_DRAWS, np.random.default_rng(2))
    assert prompt.min() == max(int(length * ratio), 1) and prompt.max() == length
    assert output.min() == max(int(out_len * ratio), 1) and output.max() == out_len
    assert random_length_bounds(spec) == ((max(int(length * ratio), 1), length), (int(out_len * ratio), out_len))


def test_range_ratio_rules_differ_and_are_checked() -> None:
    """The same flag value means two different spreads; each rule refuses ratios outside its own range."""
    vllm = DatasetSpec(random_input_len=1000, random_output_len=10, random_range_ratio=0.5)
    sglang = DatasetSpec(random_input_len=1000, random_output_len=10, random_range_ratio=0.5,
                         random_range_ratio_rule=RangeRatioRule.SGLANG)
    assert random_length_bounds(vllm)[0] == (500, 1500) and random_length_bounds(sglang)[0] == (500, 1000)
    mean_in = sample_lengths(DatasetSpec(random_input_len=1000, random_output_len=10, random_range_ratio_rule="sglang"),
                             N_DRAWS, np.random.default_rng(3))[0].mean()
    assert mean_in == pytest.approx(500.5, rel=0.03)  # SGLang's default 0: uniform on [1, L]
    assert DatasetSpec(random_range_ratio=1.0, random_range_ratio_rule="sglang").random_range_ratio == 1.0
    with pytest.raises(ConfigError) as err:
        DatasetSpec(random_range_ratio=1.0)
    assert "[0, 1) (vLLM's rule)" in render_error(err.value, "bench serve")
    assert "--random-range-ratio" in render_error(err.value, "bench serve")
    with pytest.raises(UnknownNameError, match="vllm, sglang"):
        DatasetSpec(random_range_ratio_rule="lmdeploy")
