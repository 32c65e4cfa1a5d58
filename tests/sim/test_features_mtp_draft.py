"""MTP in the simulator is the step model's MTP: with ``method = "mtp"`` on an operator-level pool the
feature kernel's speculative step is the predictor's verify step (each decode plus a k-token chunk at
its context) plus k draft passes of ``mtp_draft_coefficients`` (one decoder layer, ``eh_proj``, the LM
head), the time ``fleetplan.perf.speculative.mtp_step`` reports.

The one difference is the sampled rows of the verify step: the kernel runs the LM head on the n
sequences, the predictor's verify batch on 2n (each draft chunk counts as a sequence), vLLM on n (k + 1);
the verify steps differ by at most those n LM-head rows (~3e-7 of a step each here), the drafts not at all."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.perf.batch import parse_batch
from fleetplan.perf.linear import roofline_step_s
from fleetplan.perf.overheads import DEFAULT_LAUNCH_OVERHEAD_S, KERNELS_PER_LAYER, KERNELS_PER_STEP
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.perf.speculative import mtp_draft_pass_s, mtp_step, verify_batch
from fleetplan.sim._kernels.features.timing import batch_time_s
from fleetplan.sim._kernels.jit import njit
from fleetplan.sim._kernels.step_model import step_time_s
from fleetplan.sim.compile import compile_fleet
from fleetplan.sim.features import CudaGraphConfig, RuntimeFeatures
from fleetplan.sim.features.compile import compile_features
from fleetplan.sim.features.speculative import SpeculativeConfig
from fleetplan.sim.spec import FleetSpec, PoolSpec, SchedulerLimits


@njit
def _spec_step_s(n, k, ctx_each, code, coef, gmode, gtime, dcode, dcoef):
    """The feature kernel's step of ``n`` decodes at ``ctx_each`` each, every one drafting ``k`` (eager)."""
    total = batch_time_s(n, n, 0, n * k, n * ctx_each, n * k * (2 * ctx_each + k), k, n, n * ctx_each, 0, 0,
                         code, coef, gmode, gtime, dcode, dcoef)
    return total, step_time_s(dcode, dcoef, n, n, 0, n * ctx_each, 0)


def _pool(predictor: StepTimePredictor, k: int) -> PoolSpec:
    mtp = SpeculativeConfig.from_json(f'{{"method": "mtp", "num_speculative_tokens": {k}, "acceptance_rate": 0.85}}')
    limits = SchedulerLimits(max_num_seqs=256, max_num_batched_tokens=8192, kv_blocks=20000)
    return PoolSpec(name="p", gpu=predictor.gpu.name, n_instances=1, max_context_tokens=8192, step_model=predictor,
                    limits=limits, features=RuntimeFeatures(speculative=mtp))


@pytest.fixture(scope="module")
def predictors() -> list[StepTimePredictor]:
    catalog = load_catalog()
    return [StepTimePredictor(load_model("deepseek-v3"), catalog.get("h200"), Parallelism(tp=8, ep=8), Dtype.FP8),
            StepTimePredictor(load_model("llama-3.1-8b"), catalog.get("H100-SXM"), Parallelism(tp=1))]


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("which", [0, 1])
def test_kernel_mtp_step_is_verify_plus_draft_passes(predictors, which: int, k: int) -> None:
    p = predictors[which]
    pool = _pool(p, k)
    cf = compile_features(FleetSpec(pools=(pool,)), 0)
    code, coef = p.mtp_draft_coefficients()
    assert cf.draft_code[0] == code and np.array_equal(cf.draft_coef[0], coef)
    fleet = compile_fleet(FleetSpec(pools=(pool,)))
    for n, ctx in ((1, 100), (16, 2048), (64, 6000)):
        batch = parse_batch(f"decode={n}x{ctx}")
        draft_s = mtp_draft_pass_s(p, n, n * ctx)
        got, got_draft = _spec_step_s(n, k, ctx, fleet.pool_step_code[0], fleet.pool_step_coef[0],
                                      cf.graph_mode[0], cf.graph_time_s[0], cf.draft_code[0], cf.draft_coef[0])
        assert got_draft == pytest.approx(draft_s, rel=1e-12)
        verify_kernel_s = roofline_step_s(p.kernel_coefficients()[1], n, n, n * k, n * ctx, n * k * (2 * ctx + k))
        assert got == pytest.approx(verify_kernel_s + k * draft_s, rel=1e-12)
        verify_s = p.predict(verify_batch(batch, k)).total_s
        kc = p.kernel_coefficients()[1]
        lm_head_rows_s = n * (kc[8] + kc[9])  # the n extra sampled rows of the predictor's verify batch
        assert 0.0 <= verify_s + k * draft_s - got <= lm_head_rows_s * (1 + 1e-9)
        step = mtp_step(p, batch, (0.85,) * k)
        assert step.draft_s == pytest.approx(k * got_draft, rel=1e-12) and step.verify_s == verify_s


def test_draft_pass_is_the_draft_predictor_plus_eh_proj(predictors) -> None:
    """``mtp_draft_pass_s`` exceeds the bare one-layer predictor by the ``eh_proj`` GEMM only, and is a
    small part of the full step (one layer of 61 for DeepSeek-V3)."""
    p = predictors[0]
    batch = parse_batch("decode=32x4096")
    bare = p.mtp_draft_predictor().predict(batch).total_s
    one = mtp_draft_pass_s(p, 32, 32 * 4096)
    assert bare < one < bare * 1.2
    assert one < p.predict(batch).total_s / 10


@pytest.mark.parametrize("mode", ["none", "full_decode_only", "piecewise"])
def test_draft_launches_only_when_the_pool_runs_eager(predictors, mode: str) -> None:
    """``cudagraph_mode`` none on a kernel-only predictor: the draft pass pays one layer's eager launches,
    (14 + 6) x 5 us = 0.1 ms; under graphs it replays (vLLM's proposer captures its own)."""
    p = predictors[1]
    pool = dataclasses.replace(_pool(p, 1), features=RuntimeFeatures(
        cudagraph=CudaGraphConfig(mode), speculative=_pool(p, 1).features.speculative))
    coef = compile_features(FleetSpec(pools=(pool,)), 0).draft_coef[0]
    base = p.mtp_draft_coefficients()[1]
    extra = (KERNELS_PER_LAYER + KERNELS_PER_STEP) * DEFAULT_LAUNCH_OVERHEAD_S if mode == "none" else 0.0
    assert coef[0] == pytest.approx(base[0] + extra) and np.array_equal(coef[1:], base[1:])
    assert extra == 0.0 or extra == pytest.approx(1e-4)
