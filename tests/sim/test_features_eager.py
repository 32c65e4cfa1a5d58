"""CUDA-graph mode ``none`` against mode not set, for a ``--model`` predictor
(docs/runtime_features_contract.md, "CUDA graphs"): the step model is the eager time whenever a mode
is set, so a kernel-only (``cuda_graph`` execution) predictor gets the launch overhead added, which
is the predictor's own eager execution; with no mode set it runs unchanged (kernel-only steps)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.overheads import DEFAULT_LAUNCH_OVERHEAD_S, KERNELS_PER_LAYER, KERNELS_PER_STEP, ExecutionMode
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.sim.compile import compile_fleet
from fleetplan.sim.engine import simulate
from fleetplan.sim.features import CudaGraphConfig, GraphMode, RuntimeFeatures
from fleetplan.sim.features.toml import features_table, parse_features_table
from fleetplan.sim.spec import FleetSpec, PoolSpec, SchedulerLimits
from tests.sim.test_features_spec_compile import linear_pool
from tests.sim.test_features_validation import FixedLengths

LAUNCH_8B_S = (KERNELS_PER_LAYER * 32 + KERNELS_PER_STEP) * DEFAULT_LAUNCH_OVERHEAD_S


def predictor(execution: ExecutionMode = ExecutionMode.CUDA_GRAPH) -> StepTimePredictor:
    pred = StepTimePredictor(load_model("llama-3.1-8b"), load_catalog().get("H100-SXM"), Parallelism(tp=1))
    return dataclasses.replace(pred, options=dataclasses.replace(pred.options, execution=execution))


def pool(features: RuntimeFeatures, step=None) -> PoolSpec:
    limits = SchedulerLimits(max_num_seqs=64, max_num_batched_tokens=8192, kv_blocks=20000)
    return PoolSpec(name="p", gpu="H100-SXM", n_instances=1, max_context_tokens=8192, step_model=step or predictor(),
                    limits=limits, features=features)


def coef(features: RuntimeFeatures, step=None) -> np.ndarray:
    return compile_fleet(FleetSpec(pools=(pool(features, step),))).pool_step_coef[0]


def mode(name: str | None, **kw) -> RuntimeFeatures:
    return RuntimeFeatures(cudagraph=CudaGraphConfig(name), **kw)


def test_mode_none_is_the_predictors_eager_execution_and_unset_is_unchanged():
    kernel_only = predictor().kernel_coefficients()[1]
    eager = predictor(ExecutionMode.EAGER).kernel_coefficients()[1]
    assert np.array_equal(coef(RuntimeFeatures()), kernel_only)  # no mode: bit for bit as before
    none = coef(mode("none"))
    assert none[0] == pytest.approx(eager[0], rel=1e-12) and np.array_equal(none[1:], eager[1:])
    assert none[0] == pytest.approx(kernel_only[0] + LAUNCH_8B_S, rel=1e-12)
    # graphed modes read the same eager time (graphed batches take launch_s off again)
    assert np.array_equal(coef(mode("full_decode_only")), none)
    # an eager predictor is eager time already: nothing is added, whatever the mode
    assert np.array_equal(coef(mode("none"), predictor(ExecutionMode.EAGER)), eager)
    # an explicit launch overhead replaces the predictor's estimate
    assert coef(mode("none", launch_overhead_s=3e-3))[0] == pytest.approx(kernel_only[0] + 3e-3, rel=1e-12)
    # the request level's t_iter (eqs. 4-5) pays the same launch per iteration
    t_unset, t_none = (compile_fleet(FleetSpec(pools=(pool(f),))).pool_t_full_base_s[0]
                       for f in (RuntimeFeatures(), mode("none")))
    assert t_unset == predictor().t_iter_s(64, 0.0) and t_none == pytest.approx(t_unset + LAUNCH_8B_S, rel=1e-12)


def test_eager_tpot_above_graphs_above_kernel_only_on_a_decode_heavy_workload():
    def mean_tpot_s(features: RuntimeFeatures) -> float:
        res = simulate(FleetSpec(pools=(pool(features),)), FixedLengths(256, 1024), 8.0, 48, seed=1,
                       warmup_fraction=0.0)
        assert res.summary.overall.n_done == 48
        return res.summary.overall.tpot.mean_s

    eager, graphs, unset = mean_tpot_s(mode("none")), mean_tpot_s(mode("full_decode_only")), \
        mean_tpot_s(RuntimeFeatures())
    assert eager > graphs + 0.5 * LAUNCH_8B_S  # graphed decode steps skip ~2.3 ms of launches
    assert graphs >= unset  # padding and replay cost only ever add to the kernel-only time


def test_launch_overhead_that_nothing_reads_is_refused():
    for features, step in ((RuntimeFeatures(launch_overhead_s=2e-3), None),
                           (mode("none", launch_overhead_s=2e-3), predictor(ExecutionMode.EAGER))):
        with pytest.raises(ConfigError, match="launch overhead 2 ms is given but no step reads it") as info:
            coef(features, step)
        assert "\n" not in str(info.value)
    linear = FleetSpec(pools=(linear_pool("a", mode("none", launch_overhead_s=2e-3)),))
    with pytest.raises(ConfigError, match="no step reads it"):
        compile_fleet(linear)
    # the linear constants are eager time already: mode none changes nothing
    assert np.array_equal(compile_fleet(FleetSpec(pools=(linear_pool("a", mode("none")),))).pool_step_coef,
                          compile_fleet(FleetSpec(pools=(linear_pool("a"),))).pool_step_coef)


def test_mode_none_is_kept_apart_from_unset_in_the_toml():
    assert CudaGraphConfig().mode is None and not CudaGraphConfig().on
    assert CudaGraphConfig("none").mode is GraphMode.NONE and not CudaGraphConfig("none").on
    assert features_table(mode("none")) == {"cudagraph_mode": "none"} and features_table(RuntimeFeatures()) == {}
    assert parse_features_table("<x>", "pool 'p'", {"cudagraph_mode": "none"}) == mode("none")
    assert parse_features_table("<x>", "pool 'p'", {}) == RuntimeFeatures()
    with pytest.raises(ConfigError, match="the mode is not set"):
        CudaGraphConfig(None, (1, 2, 4))
    with pytest.raises(ConfigError, match="the mode is none"):
        CudaGraphConfig("none", (1, 2, 4))
