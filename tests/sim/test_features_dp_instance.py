"""A data-parallel-attention instance (``perf.dp_instance.DataParallelInstance`` around one rank's
predictor) keeps its runtime features in the simulator: ``sim.features.compile`` reads the launch
overhead, the kernel-only execution, the capture memory and the MTP draft through the wrapper, and
times a draft pass of the instance's batch as a rank's draft of its share (the step's own split)."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.perf.dp_instance import DataParallelInstance, split_step_coefficients
from fleetplan.perf.linear import step_time_array_s
from fleetplan.perf.overheads import KERNELS_PER_LAYER, KERNELS_PER_STEP
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.sim.features import CudaGraphConfig, RuntimeFeatures
from fleetplan.sim.features.compile import (
    compile_features,
    eager_step_coefficients,
    graph_kv_blocks_lost,
    graph_times_s,
    pool_model,
    pool_predictor,
)
from fleetplan.sim.features.speculative import SpeculativeConfig
from fleetplan.sim.spec import FleetSpec, PoolSpec, SchedulerLimits

RANKS = 8


@pytest.fixture(scope="module")
def rank() -> StepTimePredictor:
    """DeepSeek-V3 (block-FP8 checkpoint) on H200 at vLLM ``-tp 1 -dp 8 --enable-expert-parallel``."""
    par = Parallelism.vllm(tensor_parallel_size=1, data_parallel_size=RANKS, enable_expert_parallel=True)
    return StepTimePredictor(load_model("deepseek-v3"), load_catalog().get("h200"), par, Dtype.FP8)


def _pool(step, features: RuntimeFeatures) -> PoolSpec:
    limits = SchedulerLimits(max_num_seqs=512, max_num_batched_tokens=8192, kv_blocks=20000)
    return PoolSpec(name="p", gpu="H200", n_instances=1, max_context_tokens=8192, step_model=step, limits=limits,
                    features=features)


def test_the_wrapper_is_read_through(rank):
    dp = _pool(DataParallelInstance(rank, RANKS), RuntimeFeatures())
    assert pool_predictor(dp) is rank and pool_model(dp) is rank.model


@pytest.mark.parametrize("mode", ["none", "full_decode_only", "piecewise"])
def test_a_dp_instance_keeps_launch_overhead_and_graphs(rank, mode):
    feats = RuntimeFeatures(cudagraph=CudaGraphConfig(mode))
    dp, alone = _pool(DataParallelInstance(rank, RANKS), feats), _pool(rank, feats)
    launch_s = graph_times_s(alone)[0]
    assert launch_s == (KERNELS_PER_LAYER * rank.model.n_layers + KERNELS_PER_STEP) * rank.options.launch_overhead_s
    assert graph_times_s(dp) == graph_times_s(alone)
    code, coef = eager_step_coefficients(dp)
    kernel = DataParallelInstance(rank, RANKS).kernel_coefficients()[1]
    # every rank launches its own kernels in parallel: the constant term gains one rank's launches
    assert coef[0] == pytest.approx(kernel[0] + launch_s, rel=1e-12) and np.array_equal(coef[1:], kernel[1:])
    cf_dp, cf_alone = compile_features(FleetSpec(pools=(dp,)), 0), compile_features(FleetSpec(pools=(alone,)), 0)
    assert np.array_equal(cf_dp.graph_time_s, cf_alone.graph_time_s)
    assert cf_dp.graph_mode[0] == cf_alone.graph_mode[0]
    # capture memory: each rank's GPU gives up the same blocks, counted over the ranks
    assert graph_kv_blocks_lost(dp) == graph_kv_blocks_lost(alone)
    if mode != "none":
        assert graph_kv_blocks_lost(dp) > 0 and graph_kv_blocks_lost(dp) % RANKS == 0


@pytest.mark.parametrize("mode", [None, "none"])
def test_a_dp_instance_keeps_its_mtp_draft_split_over_the_ranks(rank, mode):
    mtp = SpeculativeConfig.from_json('{"method": "mtp", "num_speculative_tokens": 2, "acceptance_rate": 0.85}')
    feats = RuntimeFeatures(cudagraph=CudaGraphConfig(mode), speculative=mtp)
    cf = compile_features(FleetSpec(pools=(_pool(DataParallelInstance(rank, RANKS), feats),)), 0)
    cf_rank = compile_features(FleetSpec(pools=(_pool(rank, feats),)), 0)
    code, coef = rank.mtp_draft_coefficients()
    assert cf.draft_code[0] == code == cf_rank.draft_code[0]
    expected = split_step_coefficients(code, cf_rank.draft_coef[0], RANKS)
    assert np.array_equal(cf.draft_coef[0], expected)
    if mode == "none":  # eager: one layer's launches on the draft, as for a single rank
        assert cf_rank.draft_coef[0][0] > coef[0]
    # a draft over the instance's batch of 8n sequences costs what one rank's draft of n does
    for n, ctx in ((4, 1000), (32, 4096)):
        inst = step_time_array_s(code, cf.draft_coef[0], RANKS * n, RANKS * n, 0.0, RANKS * n * ctx, 0.0)
        one = step_time_array_s(code, cf_rank.draft_coef[0], n, n, 0.0, n * ctx, 0.0)
        assert float(inst) == pytest.approx(float(one), rel=1e-9)


def test_a_slowed_dp_instance_slows_its_draft_and_keeps_its_launches(rank):
    """``perf.scaled.slowed`` (step-time margin, headroom) over a DP instance: the draft is the instance's
    draft times the factor; the eager launches are still added."""
    from fleetplan.perf.scaled import scale_step_coefficients, slowed

    mtp = SpeculativeConfig.from_json('{"method": "mtp", "num_speculative_tokens": 1, "acceptance_rate": 0.85}')
    feats = RuntimeFeatures(cudagraph=CudaGraphConfig("full_decode_only"), speculative=mtp)
    dp = DataParallelInstance(rank, RANKS)
    cf = compile_features(FleetSpec(pools=(_pool(slowed(dp, 1.25), feats),)), 0)
    cf_dp = compile_features(FleetSpec(pools=(_pool(dp, feats),)), 0)
    code = int(cf_dp.draft_code[0])
    assert np.array_equal(cf.draft_coef[0], scale_step_coefficients(code, cf_dp.draft_coef[0], 1.25))
    assert np.array_equal(cf.graph_time_s, cf_dp.graph_time_s) and cf.graph_time_s[0, 0] > 0
