"""``plan.model_fleet.fleet_for_serving``: a fleet file built for the simulator keeps every setting
the file gives, on the GPUs' calibrated constants and serving a model alike."""

from __future__ import annotations

import pytest

from fleetplan.errors import FleetplanError
from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.plan.model_fleet import ModelServing, fleet_for_serving
from fleetplan.sim.features import RuntimeFeatures
from fleetplan.sim.fleet_toml import parse_fleet_file

EXPLICIT = {"name": "p", "gpu": "h100", "instances": 2, "max_context_tokens": 8192, "max_num_seqs": 4,
            "max_num_batched_tokens": 1024, "kv_blocks": 5000, "block_size": 32, "price_usd_per_h": 9.5,
            "router": "round_robin", "model_tag": "m", "features": {"enable_prefix_caching": True}}
BARE = {"name": "q", "gpu": "h100", "instances": 1, "max_context_tokens": 8192}


def _file(*pools: dict):
    tags = {p.get("model_tag", "default"): 1.0 for p in pools}
    return parse_fleet_file({"pool_router": "model_tag", "tag_shares": tags, "pool": list(pools)},
                            "fleet.toml", load_catalog())


@pytest.mark.parametrize("serving", [None, ModelServing.vllm(load_model("llama-3.1-8b"))], ids=["calibrated", "model"])
def test_every_explicit_setting_of_the_file_is_kept(serving):
    served = fleet_for_serving(_file(EXPLICIT), serving, max_model_len_tokens=16384)
    pool = served.spec.pools[0]
    lim = pool.limits
    assert (lim.max_num_seqs, lim.max_num_batched_tokens, lim.kv_blocks, lim.block_size_tokens) == (4, 1024, 5000, 32)
    assert pool.price_usd_per_h == 9.5 and pool.router.value == "round_robin" and pool.model_tag == "m"
    assert pool.n_instances == 2 and pool.max_context_tokens == 8192
    assert isinstance(pool.features, RuntimeFeatures) and pool.features.prefix_cache.enabled
    assert served.spec.pool_router.value == "model_tag" and served.spec.max_model_len_tokens == 16384
    assert len(served.pools) == (0 if serving is None else 1)


def test_a_served_model_fills_in_what_the_file_leaves_out():
    calibrated = fleet_for_serving(_file(BARE), None).spec.pools[0]
    served = fleet_for_serving(_file(BARE), ModelServing.vllm(load_model("llama-3.1-8b"))).spec.pools[0]
    assert served.gpu == "H100-SXM tp1" and calibrated.gpu == "H100-SXM"
    assert served.limits.kv_blocks != calibrated.limits.kv_blocks  # from the model's KV bytes per token
    assert served.step_model is not calibrated.step_model


def test_vllm_serving_shards_experts_over_the_tp_group():
    moe = ModelServing.vllm(load_model("qwen3-30b-a3b"), tensor_parallel_size=2, weight_dtype=Dtype.FP8)
    dense = ModelServing.vllm(load_model("llama-3.1-8b"), tensor_parallel_size=2)
    assert moe.parallelism.ep == 2 and dense.parallelism.ep == 1
    assert ModelServing.vllm(load_model("llama-3.1-8b")).parallelism is None


def test_a_profile_of_another_model_is_refused():
    from fleetplan.perf.calibrate import CalibratedStepModel

    other = CalibratedStepModel.__new__(CalibratedStepModel)
    object.__setattr__(other, "model", "Llama-3.1-70B")
    with pytest.raises(FleetplanError) as err:
        ModelServing.vllm(load_model("llama-3.1-8b"), perf_profile=other)
    assert err.value.param == "perf_profile" and "calibrated for Llama-3.1-70B, not Llama-3.1-8B" in str(err.value)


def test_a_dp_placement_of_a_fleet_file_simulates_the_placements_step(tmp_path):
    """A fleet file (read by ``sim.fleet_toml``) serving DeepSeek-V3 (block-FP8 checkpoint) at vLLM ``-tp 1 -dp 8
    --enable-expert-parallel``: the simulated pool steps as the placement's step model (the instance's batch split
    over its 8 ranks), not as the bare predictor (one rank given the whole batch)."""
    from fleetplan.perf.parallelism import Parallelism
    from fleetplan.sim.fleet_toml import read_fleet_toml

    path = tmp_path / "fleet.toml"
    path.write_text('[[pool]]\nname = "dsv3"\ngpu = "h200"\ninstances = 2\nmax_context_tokens = 8192\n')
    par = Parallelism.vllm(tensor_parallel_size=1, data_parallel_size=8, enable_expert_parallel=True)
    served = fleet_for_serving(read_fleet_toml(path), ModelServing(load_model("deepseek-v3"), parallelism=par))
    place, pool = served.pools[0].placement, served.spec.pools[0]
    assert place.predictor.block_fp8 and place.parallelism.attn_dp == 8 and pool.gpu == "H200 tp1 dp8"
    code, coef = pool.step_model.kernel_coefficients()
    want_code, want_coef = place.step_model.kernel_coefficients()
    assert code == want_code and list(coef) == list(want_coef)
    for n, ctx in ((8, 1024), (256, 4096)):
        assert pool.step_model.t_iter_s(n, ctx) == place.step_model.t_iter_s(n, ctx)
        assert pool.step_model.t_iter_s(n, ctx) == place.predictor.t_iter_s(n / 8, ctx)  # a rank's share
    assert pool.step_model.t_iter_s(256, 4096) < place.predictor.t_iter_s(256, 4096)
