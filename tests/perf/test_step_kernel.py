"""The iteration kernel with ``STEP_MODEL_ROOFLINE`` equals its Python twin exactly, and its
steps last what ``StepTimePredictor.step_s`` says for the same batch aggregates."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.perf.overheads import PredictorOptions
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.sim._kernels import N_STEP_COEFS, run_iteration_level
from fleetplan.sim._kernels.codes import STEP_MODEL_ROOFLINE
from tests.sim.test_kernels_iteration import assert_same, make_case, run_case

CATALOG = load_catalog()
PREDICTORS = (
    StepTimePredictor(load_model("llama-3.1-8b"), CATALOG.get("A100-80GB"), Parallelism(tp=1)),
    StepTimePredictor(load_model("llama-3.1-70b"), CATALOG.get("H100-SXM"), Parallelism(tp=4), Dtype.FP8),
    StepTimePredictor(load_model("qwen3-30b-a3b"), CATALOG.get("H100-SXM"), Parallelism(tp=4, ep=4),
                      options=PredictorOptions(moe_zipf_s=0.8)),
    StepTimePredictor(load_model("llama-3.1-8b"), CATALOG.get("L4"), Parallelism(tp=1),
                      options=PredictorOptions(execution="eager", tile_m_tokens=16)),
    # issue #26 mechanisms, folded into the same coefficients: block-FP8 DeepSeek-V3 with attention DP and FP8
    # EP dispatch, a load-imbalance factor; Qwen3-235B with EP over two nodes
    StepTimePredictor(load_model("deepseek-v3"), CATALOG.get("H200"), Parallelism(tp=1, dp=8, ep=8), Dtype.FP8,
                      options=PredictorOptions(ep_dispatch_fp8=True, moe_load_imbalance=1.2), fp8_scaling="block"),
    StepTimePredictor(load_model("qwen3-235b-a22b"), CATALOG.get("H100-SXM"), Parallelism(tp=16, ep=16), Dtype.FP8),
    # window terms, a prefill query charged the keys it has: DeepSeek-V3.2's sparse MLA (2,048 keys, every prompt of
    # these cases inside it, each prefill query paying vLLM's per-query module cost c[20]) and gpt-oss's 128-token
    # sliding windows (chunks inside, straddling and past it)
    StepTimePredictor(load_model("deepseek-v3.2"), CATALOG.get("H200"), Parallelism(tp=8, ep=8), Dtype.FP8,
                      options=PredictorOptions(dsa_prefill_s_per_token=1.79e-7), fp8_scaling="block"),
    StepTimePredictor(load_model("gpt-oss-20b"), CATALOG.get("H100-SXM"), Parallelism(tp=1), Dtype.MXFP4),
    # the grouped GEMM's ramp with rows per expert (c[20]): gpt-oss-120b on one A100, Qwen3-30B-A3B under EP 2
    # with the width factor
    StepTimePredictor(load_model("gpt-oss-120b"), CATALOG.get("A100-80GB"), Parallelism(tp=1), Dtype.MXFP4,
                      options=PredictorOptions(moe_gemm_efficiency=0.21, moe_hit_expert_weight_reads=1.5)),
    StepTimePredictor(load_model("qwen3-30b-a3b"), CATALOG.get("H100-SXM"), Parallelism(tp=2, ep=2),
                      options=PredictorOptions(moe_gemm_efficiency=0.38, moe_width_exponent=0.5,
                                               moe_hit_expert_weight_reads=1.5)),
)


def roofline_case(seed: int) -> dict:
    case = make_case(seed)
    rng = np.random.default_rng(1000 + seed)
    n_pools = case["pool_router"].size
    picks = rng.integers(0, len(PREDICTORS), n_pools)
    case["pool_step_code"] = np.full(n_pools, STEP_MODEL_ROOFLINE, dtype=np.int32)
    case["pool_step_coef"] = np.stack([PREDICTORS[i].kernel_coefficients()[1] for i in picks])
    # Mix in the linear code on some pools: the two codes coexist in one fleet.
    linear = rng.random(n_pools) < 0.25
    case["pool_step_code"][linear] = 0
    case["pool_step_coef"][linear, 5:] = 0.0
    return case


@pytest.mark.parametrize("seed", range(40))
def test_roofline_kernel_matches_twin_exactly(seed: int) -> None:
    assert_same(roofline_case(seed))


@pytest.mark.parametrize("predictor", PREDICTORS, ids=lambda p: f"{p.model.name}-{p.gpu.name}")
def test_single_request_steps_are_predictor_steps(predictor: StepTimePredictor) -> None:
    """Prompt 300, output 4, budget 128: prefill chunks of 128, 128, 44 tokens (offsets 0,
    128, 256; the last emits token 1) then 3 decodes at contexts 300, 301, 302."""
    coef = predictor.kernel_coefficients()[1]
    assert coef.size == N_STEP_COEFS
    case = dict(
        arrival_s=np.array([0.5]), prompt_tokens=np.array([300]), output_tokens=np.array([4]),
        req_pool=np.array([0], dtype=np.int32), route_u=np.zeros((1, 2)),
        pool_inst_start=np.array([0, 1], dtype=np.int32), pool_router=np.zeros(1, dtype=np.int32),
        pool_max_context=np.array([4096]), pool_max_num_seqs=np.array([8], dtype=np.int32),
        pool_max_batched_tokens=np.array([128], dtype=np.int32), pool_kv_blocks=np.array([64]),
        pool_block_tokens=np.array([16], dtype=np.int32), pool_step_code=np.array([STEP_MODEL_ROOFLINE], np.int32),
        pool_step_coef=coef[None, :].copy(), horizon_s=np.inf,
    )
    _, out = run_case(run_iteration_level, case)
    steps = [predictor.step_s(1, 0, c, 0, c * (2 * o + c)) for c, o in ((128, 0), (128, 128), (44, 256))]
    ttft = 0.5 + sum(steps)
    assert out["out_first_token_s"][0] == pytest.approx(ttft, rel=1e-12)
    decodes = [predictor.step_s(1, 1, 0, ctx, 0) for ctx in (300, 301, 302)]
    assert out["out_done_s"][0] == pytest.approx(ttft + sum(decodes), rel=1e-12)
