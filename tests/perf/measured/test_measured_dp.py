"""The measured source on data-parallel-attention pools: AIConfigurator's ``attention_dp_size`` times one rank's
batch (the experts seeing every rank's tokens), as the roofline predictor of the pool does, so the measured model is
a rank's step and the placement splits the instance's batch over the ranks (``perf.dp_instance``), in both phases.

A synthetic table (the rank predictor's own coefficient form, GEMMs 30 % slower, 2 ms fixed) stands in for the
package, as in ``test_measured_mtp.py``; with aiconfigurator-core installed its real DP8 tables are timed too.
"""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.calibrate import CalibratedStepModel
from fleetplan.perf.dp_instance import DataParallelInstance
from fleetplan.perf.linear import STEP_MODEL_ROOFLINE, step_time_array_s
from fleetplan.perf.measured import aic, source, timing_source
from fleetplan.perf.measured.coverage import MeasuredKey
from fleetplan.perf.parallelism import Parallelism
from fleetplan.plan.optimize import OptimizeRequest
from fleetplan.plan.placement import _eq3_constants, place_model
from fleetplan.queueing.engine import EngineLimits, EngineModel
from fleetplan.workload import load_workload
from tests.perf.measured.synthetic import install, slowed_truth, synthetic_table

CATALOG = load_catalog()
LABEL = "aiconfigurator-core 9.9.9 vllm 0.0.1 h200_sxm (deepseek-ai/DeepSeek-V3, fp8_block weights, bfloat16 KV)"
DP8 = Parallelism.vllm(data_parallel_size=8, enable_expert_parallel=True)
AIC_VERSION = aic.package_version()
needs_aic = pytest.mark.skipif(AIC_VERSION is None, reason="aiconfigurator-core is not installed (pip install "
                               "'fleetplan[aiconfigurator]'): the measured source is not available here")


def _dp8_roofline():
    return place_model(load_model("deepseek-v3"), CATALOG.get("H200"), parallelism=DP8, timing_source="roofline")[0]


@pytest.fixture()
def faked_dp8(monkeypatch, tmp_path):
    """The measured source covering DeepSeek-V3 on H200 at ``-dp 8 --enable-expert-parallel`` only, from a synthetic
    table of one rank's steps (GEMMs 30 % slower, 2 ms fixed); returns those rank coefficients."""
    key = MeasuredKey("deepseek-ai/DeepSeek-V3", "h200_sxm", "vllm", 1, 1, 8, "fp8_block", "bfloat16", attention_dp=8)
    truth = slowed_truth(_dp8_roofline().predictor, 1.3, 2e-3)
    table = synthetic_table(LABEL, "deepseek-ai/DeepSeek-V3", truth)
    install(monkeypatch, tmp_path, lambda model, gpu, engine, par, *a: key if par.attn_dp == 8
            else "not covered in this test", lambda k, v: table)
    return truth


def test_a_dp_placement_splits_the_measured_rank_step_over_its_ranks(faked_dp8) -> None:
    """The placement's step model is the measured rank model under the split: a batch of 8 n sequences (8 P prompt
    tokens) over the instance takes the rank's step of n (P); its label says both."""
    (placed,) = place_model(load_model("deepseek-v3"), CATALOG.get("H200"), parallelism=DP8)
    rank = placed.calibrated
    assert isinstance(rank, CalibratedStepModel) and rank.source.startswith(LABEL)
    step = placed.step_model
    assert isinstance(step, DataParallelInstance) and step.base is rank and step.ranks == 8
    label = timing_source(step)
    assert label.startswith(LABEL) and label.endswith("the batch split over 8 attention ranks")
    code, coef = step.kernel_coefficients()
    assert code == STEP_MODEL_ROOFLINE
    for n, p, ctx in ((8, 0, 2048), (64, 0, 4096), (8, 4096, 1024)):
        rank_s = rank.step_s(n, n, p, n * ctx, p * p)
        inst = step_time_array_s(code, coef, 8 * n, 8 * n, 8 * p, 8 * n * ctx, 8 * p * p)
        assert float(inst) == pytest.approx(rank_s, rel=1e-9)
    # the rank step is the synthetic table's (the fit recovers the coefficient form), plus the engine's overhead
    from fleetplan.perf.measured.overhead import engine_overhead

    kernels = rank.step_s(64, 64, 0, 64 * 2048, 0) - engine_overhead("vllm").step_s - 64 * engine_overhead(
        "vllm").per_seq_s
    truth_s = float(step_time_array_s(STEP_MODEL_ROOFLINE, faked_dp8, 64, 64, 0, 64 * 2048, 0))
    assert kernels == pytest.approx(truth_s, rel=0.02)


def test_eq3_constants_and_both_phases_read_the_instance(faked_dp8) -> None:
    """W, H of the pool come from the instance's steps (the split measured model), and the analytic engine model
    evaluates the same steps as the step model the simulator compiles."""
    (placed,) = place_model(load_model("deepseek-v3"), CATALOG.get("H200"), parallelism=DP8)
    serving = placed.gpu.require_serving()
    assert (serving.iter_base_s, serving.iter_per_seq_s) == pytest.approx(_eq3_constants(serving, placed.step_model),
                                                                        rel=1e-12)
    (roof,) = place_model(load_model("deepseek-v3"), CATALOG.get("H200"), parallelism=DP8, timing_source="roofline")
    # the synthetic rank steps are slower than the roofline's: so are the instance's constants
    assert serving.iter_base_s > roof.gpu.require_serving().iter_base_s
    step = placed.step_model
    engine = EngineModel.of(step, EngineLimits(512, 8192 + 512, 64, 16))
    agg = [(64, 64, 0, 64 * 2048, 0), (16, 8, 4096, 8 * 1024, 4096 ** 2), (512, 512, 0, 512 * 4096, 0)]
    code, coef = step.kernel_coefficients()
    np.testing.assert_allclose(engine.step_s(*np.array(agg, dtype=np.float64).T),
                               [float(step_time_array_s(code, coef, *a)) for a in agg], rtol=1e-12)


def test_the_plan_lists_the_measured_rank_profile(faked_dp8) -> None:
    """The plan's perf-profile list (``OptimizeRequest.calibrated_profiles``: the note and the JSON) names a DP pool's
    measured profile through its split."""
    (placed,) = place_model(load_model("deepseek-v3"), CATALOG.get("H200"), parallelism=DP8)
    request = OptimizeRequest(load_workload("lmsys"), (placed.gpu,), 1.0, 10.0,
                              step_models=((placed.gpu.name, placed.step_model),))
    assert request.calibrated_profiles() == ((placed.gpu.name, placed.calibrated),)


@needs_aic
def test_real_dp8_tables_time_the_rank_batch(monkeypatch, tmp_path) -> None:
    """With aiconfigurator-core: DeepSeek-V3 block FP8 on H200 at ``-dp 8 --enable-expert-parallel`` is covered
    (``attention_dp_size`` 8), its measured rank step within 10 % of AIConfigurator's on the held-out shapes."""
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(source.TIMING_SOURCE_ENV, "auto")
    source._table.cache_clear()
    (placed,) = place_model(load_model("deepseek-v3"), CATALOG.get("H200"), parallelism=DP8)
    assert isinstance(placed.step_model, DataParallelInstance)
    key = source.measured_coverage(placed.predictor, "vllm", "fp8_block")
    assert (key.tp, key.attention_dp, key.moe_tp, key.moe_ep) == (1, 8, 1, 8)
    assert placed.calibrated.holdout_mape < 0.10
    engine = aic.AicEngine(key, aic.database_version(key.system, key.backend))
    from fleetplan.perf.measured.overhead import engine_overhead

    over = engine_overhead("vllm")
    for n, ctx in ((8, 2048), (64, 2048)):
        kernels = placed.calibrated.step_s(n, n, 0, n * ctx, 0) - over.step_s - over.per_seq_s * n
        assert kernels == pytest.approx(engine.decode_ms(n, ctx) * 1e-3, rel=0.10)
    source._table.cache_clear()
