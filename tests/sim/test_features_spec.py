"""Runtime-feature specs: vLLM spellings, exact acceptance conversions, one-line errors for bad input."""

from __future__ import annotations

import math

import pytest

from fleetplan.errors import ConfigError, FleetplanError, UnknownNameError
from fleetplan.sim.features import (
    FRONTIER_CAPTURE_SIZES,
    CudaGraphConfig,
    GraphMode,
    PolicyConfig,
    PrefixCacheConfig,
    RuntimeFeatures,
    SchedulerPolicy,
    vllm_default_capture_sizes,
)
from fleetplan.sim.features.speculative import SpeculativeConfig, conditional_from_table

MTP = '{"method": "mtp", "num_speculative_tokens": 3, "acceptance_rate": 0.6}'


def test_vllm_spelled_configs_parse():
    mtp = SpeculativeConfig.from_json(MTP)
    assert (mtp.method, mtp.num_speculative_tokens, mtp.acceptance) == ("mtp", 3, (0.6, 0.6, 0.6))
    assert SpeculativeConfig.from_json(MTP.replace('"mtp"', '"deepseek_mtp"')).method == "mtp"
    draft = SpeculativeConfig.from_json(
        '{"model": "llama-3.1-8b", "num_speculative_tokens": 2, "draft_tensor_parallel_size": 1,'
        ' "acceptance_rates": [0.8, 0.5]}')
    assert (draft.method, draft.draft_model, draft.draft_tensor_parallel_size) == ("draft_model", "llama-3.1-8b", 1)
    assert draft.acceptance == (0.8, 0.5)
    ngram = SpeculativeConfig.from_json(
        '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2,'
        ' "acceptance_rate": 0.3}')
    assert ngram.method == "ngram" and ngram.acceptance == (0.3,) * 4


def test_acceptance_table_becomes_exact_conditionals():
    table = [0.2, 0.3, 0.1, 0.4]  # P(A = 0..3)
    cfg = SpeculativeConfig.from_dict({"method": "mtp", "num_speculative_tokens": 3, "acceptance_table": table})
    # P(A >= j) = 1, 0.8, 0.5, 0.4 -> p_j = 0.8, 0.625, 0.8
    assert cfg.acceptance == pytest.approx((0.8, 0.625, 0.8), abs=1e-15)
    back, run = [], 1.0
    for p in cfg.acceptance:
        back.append(run * (1 - p))
        run *= p
    back.append(run)
    assert back == pytest.approx(table, abs=1e-12)
    assert cfg.mean_accepted_tokens == pytest.approx(sum(j * q for j, q in enumerate(table)), abs=1e-12)


def test_table_with_unreachable_positions_gives_zero():
    assert conditional_from_table([0.5, 0.5, 0.0, 0.0]) == (0.5, 0.0, 0.0)
    assert conditional_from_table([1.0, 0.0]) == (0.0,)


BAD_SPECULATIVE = [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('{"method": "mtp", "num_speculative_tokens": 2, "acceptance_rate": 0.5, "foo": 1}', "unknown key 'foo'"),
    ('{"num_speculative_tokens": 2, "acceptance_rate": 0.5}', "'method' is missing"),
    ('{"method": "mtp", "acceptance_rate": 0.5}', "'num_speculative_tokens' is missing"),
    ('{"method": "mtp", "num_speculative_tokens": 0, "acceptance_rate": 0.5}', "num_speculative_tokens = 0"),
    ('{"method": "mtp", "num_speculative_tokens": 17, "acceptance_rate": 0.5}', "1..16"),
    ('{"method": "mtp", "num_speculative_tokens": 2}', "exactly one of"),
    ('{"method": "mtp", "num_speculative_tokens": 2, "acceptance_rate": 0.5, "acceptance_rates": [1, 1]}',
     "exactly one of"),
    ('{"method": "mtp", "num_speculative_tokens": 2, "acceptance_rate": 1.5}', "acceptance_rate = 1.5"),
    ('{"method": "mtp", "num_speculative_tokens": 2, "acceptance_rates": [0.5]}', "has 1 entries but needs 2"),
    ('{"method": "mtp", "num_speculative_tokens": 2, "acceptance_table": [0.5, 0.5]}', "needs 3"),
    ('{"method": "mtp", "num_speculative_tokens": 1, "acceptance_table": [0.5, 0.6]}', "sums to 1.1"),
    ('{"method": "ngram", "num_speculative_tokens": 2, "acceptance_rate": 0.5, "draft_cost_fraction": 0.1}',
     "draft_cost_fraction = 0.1"),
    ('{"method": "mtp", "num_speculative_tokens": 2, "acceptance_rate": 0.5, "draft_cost_fraction": 0}',
     "draft_cost_fraction = 0"),
    ('{"method": "mtp", "model": "llama-3.1-8b", "num_speculative_tokens": 2, "acceptance_rate": 0.5}',
     "method mtp takes no 'model'"),
    ('{"method": "draft_model", "num_speculative_tokens": 2, "acceptance_rate": 0.5}',
     "method draft_model needs 'model'"),
    ('{"method": "mtp", "num_speculative_tokens": 2, "acceptance_rate": 0.5, "draft_tensor_parallel_size": 2}',
     "draft_tensor_parallel_size = 2"),
]


@pytest.mark.parametrize(("text", "fragment"), BAD_SPECULATIVE)
def test_bad_speculative_config_is_one_line(text, fragment):
    with pytest.raises(ConfigError) as info:
        SpeculativeConfig.from_json(text)
    message = str(info.value)
    assert fragment in message and "\n" not in message


def test_unknown_speculative_method_lists_valid_ones():
    with pytest.raises(UnknownNameError, match="valid speculative method names are mtp, draft_model, ngram"):
        SpeculativeConfig.from_json('{"method": "medusa", "num_speculative_tokens": 2, "acceptance_rate": 0.5}')


def test_cudagraph_sizes_and_vllm_ladder():
    cfg = CudaGraphConfig("full-decode-only", (64, 1, 8, 2, 4, 16, 32))
    assert cfg.mode is GraphMode.FULL_DECODE_ONLY and cfg.capture_sizes_tokens == FRONTIER_CAPTURE_SIZES
    assert cfg.sizes_for(256) == FRONTIER_CAPTURE_SIZES
    ladder = vllm_default_capture_sizes(256)  # max = min(2 * 256, 512)
    assert ladder[:5] == (1, 2, 4, 8, 16) and ladder[-3:] == (480, 496, 512) and len(ladder) == 51
    assert vllm_default_capture_sizes(8) == (1, 2, 4, 8, 16)
    assert CudaGraphConfig("piecewise").sizes_for(8) == (1, 2, 4, 8, 16)
    assert CudaGraphConfig().sizes_for(256) == () and not CudaGraphConfig().on


@pytest.mark.parametrize(("kwargs", "fragment"), [
    (dict(mode="none", capture_sizes_tokens=(1, 2)), "the mode is none"),
    (dict(mode="piecewise", capture_sizes_tokens=()), "are empty"),
    (dict(mode="piecewise", capture_sizes_tokens=(1, 1)), "repeat a size"),
    (dict(mode="piecewise", capture_sizes_tokens=(0, 4)), "capture size = 0"),
])
def test_bad_cudagraph_config(kwargs, fragment):
    with pytest.raises(ConfigError, match=fragment):
        CudaGraphConfig(**kwargs)


def test_unknown_names_fail_loudly():
    with pytest.raises(UnknownNameError, match="valid cudagraph mode names are none, full_decode_only, piecewise"):
        CudaGraphConfig("full")
    with pytest.raises(UnknownNameError, match="vllm_v1, sglang, spf, mlfq, h2q_br"):
        PolicyConfig("fifo")


def test_policy_parameters_rows():
    assert PolicyConfig("h2q-br").params() == (8192.0, 16384.0, 8.0, 0.0)  # Frontier B.3 defaults
    assert PolicyConfig("mlfq", mlfq_quantum0_s=0.02, mlfq_levels=4).params() == (0.02, 4.0, 0.0, 0.0)
    assert PolicyConfig("spf").params() == (0.0,) * 4
    with pytest.raises(ConfigError, match="mlfq quantum0 = -1"):
        PolicyConfig("mlfq", mlfq_quantum0_s=-1)
    with pytest.raises(ConfigError, match="short_streak = 0"):
        PolicyConfig("h2q_br", h2q_short_streak=0)


def test_prefix_and_runtime_features_rules():
    assert not RuntimeFeatures().any_on
    assert RuntimeFeatures(policy="sglang").policy.policy is SchedulerPolicy.SGLANG
    assert RuntimeFeatures(prefix_cache=PrefixCacheConfig(True)).any_on
    with pytest.raises(ConfigError, match="prefix caching is off"):
        PrefixCacheConfig(False, 100)
    with pytest.raises(ConfigError, match="launch overhead = -0.001"):
        RuntimeFeatures(launch_overhead_s=-0.001)
    with pytest.raises(ConfigError, match="SpeculativeConfig or None"):
        RuntimeFeatures(speculative={"method": "mtp"})
    assert math.isclose(RuntimeFeatures(launch_overhead_s=2e-3).launch_overhead_s, 2e-3)


def test_every_error_is_a_fleetplan_error():
    assert issubclass(ConfigError, FleetplanError) and issubclass(UnknownNameError, FleetplanError)
