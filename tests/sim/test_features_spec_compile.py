"""Runtime features compiled to arrays, read from the fleet TOML, and dispatched by the engine."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fleetplan.cli.errors import render_error
from fleetplan.errors import ConfigError, DataFormatError
from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.kv_budget import DEFAULT_CUDAGRAPH_POOL_BYTES
from fleetplan.perf.linear import LinearStepModel
from fleetplan.perf.overheads import DEFAULT_LAUNCH_OVERHEAD_S, KERNELS_PER_LAYER, KERNELS_PER_STEP
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.sim._kernels import codes
from fleetplan.sim.compile import compile_fleet, compile_run
from fleetplan.sim.engine import simulate
from fleetplan.sim.features import CudaGraphConfig, PolicyConfig, PrefixCacheConfig, RuntimeFeatures
from fleetplan.sim.features.compile import (
    CUDAGRAPH_BYTES_PER_CAPTURE,
    compile_features,
    draft_cost_fraction,
    graph_kv_blocks_lost,
)
from fleetplan.sim.features.speculative import SpeculativeConfig
from fleetplan.sim.features.toml import features_table, parse_features_table
from fleetplan.sim.fleet_toml import parse_fleet
from fleetplan.sim.spec import FleetSpec, PoolSpec, SchedulerLimits
from fleetplan.workload import load_workload

MTP = SpeculativeConfig.from_json('{"method": "mtp", "num_speculative_tokens": 2, "acceptance_rates": [0.9, 0.5],'
                                  ' "draft_cost_fraction": 0.1}')


def linear_pool(name: str, features: RuntimeFeatures | None = None, **kw) -> PoolSpec:
    step = LinearStepModel(0.01, 2e-4, 1e-5, 8192.0)
    limits = SchedulerLimits(max_num_seqs=64, max_num_batched_tokens=2048, kv_blocks=4096)
    return PoolSpec(name=name, gpu="a100", n_instances=2, max_context_tokens=8192, step_model=step, limits=limits,
                    features=features or RuntimeFeatures(), **kw)


def predictor_pool(features: RuntimeFeatures, model: str = "llama-3.1-8b") -> PoolSpec:
    pred = StepTimePredictor(load_model(model), load_catalog().get("H100-SXM"), Parallelism(tp=1))
    limits = SchedulerLimits(max_num_seqs=256, max_num_batched_tokens=8192, kv_blocks=20000)
    return PoolSpec(name="p", gpu="H100-SXM", n_instances=1, max_context_tokens=8192, step_model=pred,
                    limits=limits, features=features)


def test_compile_features_arrays():
    on = RuntimeFeatures(cudagraph=CudaGraphConfig("piecewise", (1, 2, 4)), speculative=MTP,
                         prefix_cache=PrefixCacheConfig(True), policy=PolicyConfig("h2q_br"), launch_overhead_s=0.003)
    spec = FleetSpec(pools=(linear_pool("a"), linear_pool("b", on)))
    cf = compile_features(spec, seed=5)
    assert cf.any_on and cf.policy.tolist() == [codes.SCHED_VLLM_V1, codes.SCHED_H2Q_BR]
    assert cf.policy_param[1].tolist() == [8192.0, 16384.0, 8.0, 0.0] and not cf.policy_param[0].any()
    assert cf.graph_mode.tolist() == [codes.GRAPH_NONE, codes.GRAPH_PIECEWISE] and cf.graph_n.tolist() == [0, 3]
    assert cf.graph_sizes[1, :3].tolist() == [1, 2, 4]
    launch = 0.003
    expected = [launch, DEFAULT_LAUNCH_OVERHEAD_S, launch * 2 / KERNELS_PER_LAYER]
    assert cf.graph_time_s[1].tolist() == pytest.approx(expected)
    assert cf.spec_k.tolist() == [0, 2] and cf.spec_accept[1, :3].tolist() == [0.9, 0.5, 0.0]
    base = spec.pools[1].step_model.kernel_coefficients()[1]
    assert cf.draft_code[1] == 0 and np.allclose(cf.draft_coef[1], 0.1 * base) and not cf.draft_coef[0].any()
    assert cf.prefix_on.tolist() == [0, 1] and cf.prefix_entries.tolist() == [0, 4096]
    assert cf.affinity_slack.tolist() == [32, 32]
    assert cf.spec_seed == compile_features(spec, seed=5).spec_seed != compile_features(spec, seed=6).spec_seed
    assert not compile_features(FleetSpec(pools=(linear_pool("a"),)), 0).any_on


def test_graphs_without_a_model_need_the_launch_overhead():
    spec = FleetSpec(pools=(linear_pool("a", RuntimeFeatures(cudagraph=CudaGraphConfig("full_decode_only"))),))
    with pytest.raises(ConfigError) as info:
        compile_features(spec, 0)
    assert "\n" not in str(info.value)
    assert "give --model or --launch-overhead-ms" in render_error(info.value)  # the CLI's wording
    mtp = SpeculativeConfig.from_json('{"method": "mtp", "num_speculative_tokens": 1, "acceptance_rate": 0.5}')
    with pytest.raises(ConfigError, match="draft_cost_fraction"):
        compile_features(FleetSpec(pools=(linear_pool("a", RuntimeFeatures(speculative=mtp)),)), 0)


def test_predictor_pool_graph_timing_memory_and_drafts():
    model = load_model("llama-3.1-8b")
    mtp = SpeculativeConfig.from_json('{"method": "mtp", "num_speculative_tokens": 1, "acceptance_rate": 0.5}')
    pool = predictor_pool(RuntimeFeatures(cudagraph=CudaGraphConfig("full_decode_only"), speculative=mtp))
    cf = compile_features(FleetSpec(pools=(pool,)), 0)
    launch = (KERNELS_PER_LAYER * model.n_layers + KERNELS_PER_STEP) * DEFAULT_LAUNCH_OVERHEAD_S
    assert cf.graph_time_s[0, 0] == pytest.approx(launch)
    coef = pool.step_model.kernel_coefficients()[1]
    eager = compile_fleet(FleetSpec(pools=(pool,))).pool_step_coef[0]
    assert eager[0] == pytest.approx(coef[0] + launch) and np.array_equal(eager[1:], coef[1:])
    frac = draft_cost_fraction(model)
    assert 0.02 < frac < 0.1  # one of 32 layers plus the LM head
    # an operator-level pool drafts with the MTP module's own coefficients (tests/sim/test_features_mtp_draft.py)
    assert np.array_equal(cf.draft_coef[0], pool.step_model.mtp_draft_coefficients()[1])
    given = SpeculativeConfig.from_json('{"method": "mtp", "num_speculative_tokens": 1, "acceptance_rate": 0.5,'
                                        f' "draft_cost_fraction": {frac}}}')
    scaled = compile_features(FleetSpec(pools=(predictor_pool(RuntimeFeatures(speculative=given)),)), 0).draft_coef
    assert scaled[0, 1] == pytest.approx(frac * coef[1]) and scaled[0, 5] == coef[5]  # tile kept
    # 51 default sizes x 26 MiB exceed kv_budget's 1 GiB reserve by this many bytes
    extra = 51 * CUDAGRAPH_BYTES_PER_CAPTURE - DEFAULT_CUDAGRAPH_POOL_BYTES
    block_bytes = model.kv_bytes_per_token(pool.step_model.kv_dtype) * 16
    assert graph_kv_blocks_lost(pool) == -(-extra // block_bytes)
    assert compile_fleet(FleetSpec(pools=(pool,))).pool_kv_blocks[0] == 20000 - graph_kv_blocks_lost(pool)
    few = predictor_pool(RuntimeFeatures(cudagraph=CudaGraphConfig("full_decode_only", (1, 2, 4, 8))))
    assert graph_kv_blocks_lost(few) == 0


def test_draft_model_uses_the_draft_predictor_on_the_pools_gpu():
    draft = SpeculativeConfig.from_json('{"model": "llama-3.1-8b", "num_speculative_tokens": 3,'
                                        ' "acceptance_rate": 0.6}')
    pool = predictor_pool(RuntimeFeatures(speculative=draft), model="llama-3.1-70b")
    pool = dataclasses.replace(pool, step_model=dataclasses.replace(pool.step_model, parallelism=Parallelism(tp=4)))
    cf = compile_features(FleetSpec(pools=(pool,)), 0)
    expected = StepTimePredictor(load_model("llama-3.1-8b"), pool.step_model.gpu, Parallelism(tp=4))
    assert np.array_equal(cf.draft_coef[0], expected.kernel_coefficients()[1])
    with pytest.raises(ConfigError, match="needs the pool's GPU"):
        compile_features(FleetSpec(pools=(linear_pool("a", RuntimeFeatures(speculative=draft)),)), 0)


def test_compile_run_carries_features_and_prefix_affinity_code():
    spec = FleetSpec(pools=(linear_pool("a", RuntimeFeatures(policy="spf"), router="prefix_affinity"),))
    run = compile_run(spec, load_workload("lmsys"), 10.0, 50, seed=3)
    assert run.features is not None and run.features.policy.tolist() == [codes.SCHED_SPF]
    assert run.extras is None and run.fleet.pool_router.tolist() == [codes.ROUTE_PREFIX_AFFINITY]


TOML = """
[[pool]]
name = "short"
gpu = "a100"
instances = 2
max_context_tokens = 4096
[pool.features]
cudagraph_mode = "full_decode_only"
cudagraph_capture_sizes = [1, 2, 4, 8, 16, 32, 64]
launch_overhead_ms = 2.0
speculative_config = { method = "mtp", num_speculative_tokens = 2, acceptance_rate = 0.7, draft_cost_fraction = 0.05 }
enable_prefix_caching = true
prefix_cache_entries = 1000
scheduler_policy = "mlfq"
mlfq_quantum0_ms = 20.0
mlfq_levels = 4
"""


def test_toml_features_and_round_trip():
    import tomllib

    pool = parse_fleet(tomllib.loads(TOML)).pools[0]
    f = pool.features
    assert f.cudagraph.capture_sizes_tokens == (1, 2, 4, 8, 16, 32, 64) and f.launch_overhead_s == pytest.approx(2e-3)
    assert f.speculative.acceptance == (0.7, 0.7) and f.prefix_cache.entries_per_instance == 1000
    assert f.policy == PolicyConfig("mlfq", mlfq_quantum0_s=0.02, mlfq_levels=4)
    table = features_table(f)
    assert parse_features_table("<x>", "pool 'short'", table) == f
    json_string = tomllib.loads(TOML.replace(
        "speculative_config = { method = \"mtp\", num_speculative_tokens = 2, acceptance_rate = 0.7, "
        "draft_cost_fraction = 0.05 }",
        "speculative_config = '{\"method\": \"mtp\", \"num_speculative_tokens\": 2, \"acceptance_rate\": 0.7, "
        "\"draft_cost_fraction\": 0.05}'"))
    assert parse_fleet(json_string).pools[0].features == f
    assert features_table(RuntimeFeatures()) == {}


@pytest.mark.parametrize(("line", "fragment"), [
    ('cudagraph = "piecewise"', "unknown key 'cudagraph'"),
    ('scheduler_policy = "fifo"', "unknown scheduler policy 'fifo'"),
    ('cudagraph_capture_sizes = 8', "must be a list of integers"),
    ('speculative_config = "{bad"', "not valid JSON"),
    ('prefix_cache_entries = 10', "prefix caching is off"),
])
def test_bad_toml_features_name_file_and_pool(line, fragment):
    import tomllib

    doc = tomllib.loads(TOML.split("[pool.features]")[0] + "[pool.features]\n" + line + "\n")
    with pytest.raises(DataFormatError, match=fragment) as info:
        parse_fleet(doc, "fleet.toml")
    assert "fleet.toml (pool 'short'.features" in str(info.value) and "\n" not in str(info.value)


def test_engine_refuses_request_level_and_failures_with_features():
    from fleetplan.sim.failures import FailureSpec

    spec = FleetSpec(pools=(linear_pool("a", RuntimeFeatures(policy="sglang")),))
    wl = load_workload("lmsys")
    with pytest.raises(ConfigError, match="need level iteration"):
        simulate(spec, wl, 5.0, n_requests=20, level="request")
    with pytest.raises(ConfigError, match="failures cannot be combined"):
        simulate(spec, wl, 5.0, n_requests=20, failures=FailureSpec(mtbf_s=1e4, mttr_s=10.0))


def test_all_off_features_kernel_matches_featureless_run():
    from fleetplan.sim.engine import run_compiled
    from fleetplan.sim.features.arrays import no_extras

    spec = FleetSpec(pools=(linear_pool("a"),))
    run = compile_run(spec, load_workload("lmsys"), 20.0, 400, seed=2)
    plain = run_compiled(spec, run, "iteration", 20.0)
    forced = run_compiled(spec, dataclasses.replace(run, extras=no_extras(run.requests.prompt_tokens)),
                          "iteration", 20.0)
    for col in ("ttft_s", "e2e_s", "done_s", "instance", "preemptions"):
        assert np.array_equal(plain.requests[col].to_numpy(), forced.requests[col].to_numpy()), col
    assert np.array_equal(forced.requests["release_s"], forced.requests["arrival_s"])
    assert plain.summary.pools[0].padding_inflation is None and forced.summary.pools[0].prefix_hit_ratio is None
