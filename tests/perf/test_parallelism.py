"""Parallelism: vLLM flags, Frontier eq. 1 and 2, and the rules a model imposes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetplan.errors import ConfigError
from fleetplan.models import load_model
from fleetplan.perf.parallelism import Parallelism, pp_stage_layers, valid_tensor_parallel_sizes


def test_vllm_flags_resolve_to_domains():
    par = Parallelism.vllm(tensor_parallel_size=4, pipeline_parallel_size=2, data_parallel_size=2,
                           enable_expert_parallel=True)
    assert (par.tp, par.pp, par.dp, par.ep) == (4, 2, 2, 8)
    assert (par.attn_tp, par.attn_dp, par.ffn_tp, par.ffn_ep) == (4, 2, 1, 8)
    assert par.gpus_per_replica == 16
    assert par.flags() == "--tensor-parallel-size 4 --pipeline-parallel-size 2 --data-parallel-size 2 " \
                          "--enable-expert-parallel"


def test_without_expert_parallel_each_expert_is_split_over_tp_times_dp():
    par = Parallelism.vllm(tensor_parallel_size=2, data_parallel_size=4)
    assert (par.ffn_tp, par.ffn_ep) == (8, 1)


def test_explicit_domains_satisfy_frontier_eq_1():
    # SGLang DP-attention layout: 8 GPUs, attention replicated 8 ways, experts spread 8 ways
    par = Parallelism(tp=8, tp_attn=1, dp_attn=8, tp_ffn=1, ep_ffn=8)
    assert par.attn_tp * par.attn_dp == par.ffn_tp * par.ffn_ep == 8
    assert par.gpus_per_replica == 8
    with pytest.raises(ConfigError, match=r"tp_attn\*dp_attn=1\*8=8 must equal tp_ffn\*ep_ffn=2\*8=16.*eq\. 1"):
        Parallelism(tp=8, tp_attn=1, dp_attn=8, tp_ffn=2, ep_ffn=8)


@pytest.mark.parametrize(("kwargs", "fragment"), [
    (dict(tp=0), "tp=0 must be an integer >= 1"),
    (dict(tp=2, pp=True), "pp=True"),
    (dict(tp=4, ep=3), "ep=3 must divide tp\\*dp=4"),
    (dict(tp=8, tp_attn=8), "gives tp_attn but not dp_attn, tp_ffn, ep_ffn"),
    (dict(tp=4, tp_attn=2, dp_attn=4, tp_ffn=1, ep_ffn=8), "must equal tp\\*dp=4"),
    (dict(tp=8, ep=4, tp_attn=1, dp_attn=8, tp_ffn=1, ep_ffn=8), "ep=4 conflicts with ep_ffn=8"),
])
def test_invalid_sharding_is_rejected_on_construction(kwargs, fragment):
    with pytest.raises(ConfigError, match=fragment):
        Parallelism(**kwargs)


@pytest.mark.parametrize(("model", "par", "fragment"), [
    ("llama-3.1-70b", Parallelism(3), "64 attention heads are not divisible by tensor parallel size 3; use one of "
                                      "1, 2, 4, 8, 16, 32, 64"),
    ("llama-3.1-70b", Parallelism(8, ep=8), "needs an MoE model"),
    ("llama-3.1-8b", Parallelism(1, pp=33), "exceeds the 32 layers"),
    ("qwen3-30b-a3b", Parallelism(2, dp=3, ep=6), "128 routed experts are not divisible by expert parallel size 6"),
    ("qwen3-30b-a3b", Parallelism(1, dp=5), "expert width 768 is not divisible by the expert tensor split 5"),
])
def test_model_rules(model, par, fragment):
    with pytest.raises(ConfigError, match=fragment):
        par.check_model(load_model(model))


def test_kv_heads_shard_or_replicate():
    qwen = load_model("qwen3-30b-a3b")  # 32 query heads, 4 KV heads
    assert valid_tensor_parallel_sizes(qwen) == (1, 2, 4, 8, 16, 32)
    assert [Parallelism(t).kv_heads_per_gpu(qwen) for t in (1, 2, 4, 8, 16)] == [4, 2, 1, 1, 1]
    Parallelism(8).check_model(qwen)  # TP 8 > 4 KV heads: each KV head replicated twice
    assert Parallelism(16).kv_heads_per_gpu(load_model("llama-3.1-8b")) == 1  # 8 KV heads over 16 GPUs
    mla = load_model("deepseek-v3")
    assert Parallelism(8).kv_heads_per_gpu(mla) == 1  # the latent is replicated, not split


@pytest.mark.parametrize(("layers", "pp", "expected"), [
    (80, 4, (20, 20, 20, 20)),
    (61, 4, (15, 15, 16, 15)),  # vLLM get_pp_indices: remainder to the second-to-last stage
    (10, 4, (2, 3, 3, 2)),
    (3, 3, (1, 1, 1)),
])
def test_pp_stage_layers_follow_vllm(layers, pp, expected):
    assert pp_stage_layers(layers, pp) == expected


@given(tp=st.integers(1, 16), pp=st.integers(1, 8), dp=st.integers(1, 8), expert_parallel=st.booleans())
def test_domains_always_satisfy_eq_1_and_eq_2(tp, pp, dp, expert_parallel):
    par = Parallelism.vllm(tp, pp, dp, expert_parallel)
    assert par.attn_tp * par.attn_dp == par.ffn_tp * par.ffn_ep == tp * dp  # eq. 1
    assert par.gpus_per_replica == pp * tp * dp  # eq. 2


@given(layers=st.integers(1, 200), pp=st.integers(1, 64))
def test_pp_stages_cover_all_layers_and_differ_by_at_most_one(layers, pp):
    if pp > layers:
        with pytest.raises(ConfigError):
            pp_stage_layers(layers, pp)
        return
    stages = pp_stage_layers(layers, pp)
    assert sum(stages) == layers and len(stages) == pp and max(stages) - min(stages) <= 1
