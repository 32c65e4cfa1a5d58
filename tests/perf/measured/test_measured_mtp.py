"""MTP on measured placements (issue #26 item 4 with item 1's measured tables): a placement timed by
``aiconfigurator-core`` gets its "MTP on" twin, whose verify step is the measured step model at the verify width
and whose draft pass is the measured step's share of one MTP layer and the LM head
(``perf.speculative``, "Measured pools"); both phases time the same draft, and the timing source says so.

Without the package the measured source is a synthetic table of DeepSeek-V3 on H200 TP8 (``faked_deepseek``, the
pattern of ``test_measured_source``); ``needs_aic`` tests read the real tables.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.batch import BatchComposition
from fleetplan.perf.calibrate import CalibratedStepModel
from fleetplan.perf.dp_instance import DataParallelInstance, split_step_coefficients
from fleetplan.perf.linear import ROOFLINE_SHAPE_COEFS, STEP_MODEL_ROOFLINE
from fleetplan.perf.measured import aic, source, timing_source
from fleetplan.perf.measured.coverage import MeasuredKey
from fleetplan.perf.measured.table import MeasuredTable
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.perf.quant import checkpoint_fp8_scaling
from fleetplan.perf.speculative import (
    DEEPSEEK_V3_MTP_ACCEPTANCE,
    MtpStepModel,
    mtp_draft_fraction,
    mtp_step,
    speculative_step,
    verify_batch,
)
from fleetplan.plan.placement import calibrate_placements, place_model, with_mtp_features
from fleetplan.queueing.engine import EngineLimits, EngineModel, EngineProfile
from fleetplan.queueing.speculative import with_speculation
from fleetplan.sim import build_pool
from fleetplan.sim.engine import simulate
from fleetplan.sim.features.compile import _draft, draft_cost_fraction
from fleetplan.sim.spec import FleetSpec
from fleetplan.workload import load_workload
from tests.perf.measured.synthetic import install, slowed_truth, synthetic_table

CATALOG = load_catalog()
AIC_VERSION = aic.package_version()
needs_aic = pytest.mark.skipif(AIC_VERSION is None, reason="aiconfigurator-core is not installed (pip install "
                               "'fleetplan[aiconfigurator]'): the measured source is not available here")
LABEL = "aiconfigurator-core 9.9.9 vllm 0.0.1 h200_sxm (deepseek-ai/DeepSeek-V3, fp8_block weights, bfloat16 KV)"
TP8 = Parallelism.vllm(tensor_parallel_size=8, enable_expert_parallel=True)


def deepseek_tp8() -> StepTimePredictor:
    model = load_model("deepseek-v3")
    placed = place_model(model, CATALOG.get("H200"), parallelism=TP8, timing_source="roofline")
    return placed[0].predictor


def fake_table(predictor: StepTimePredictor) -> MeasuredTable:
    """Steps of the coefficient form (the roofline with GEMMs 30 % slower, 2 ms fixed): what the fit recovers."""
    return synthetic_table(LABEL, "deepseek-ai/DeepSeek-V3", slowed_truth(predictor, 1.3, 2e-3))


@pytest.fixture()
def faked_deepseek(monkeypatch, tmp_path):
    """The measured source covering DeepSeek-V3 on H200 at TP8 only, from a synthetic table."""
    key = MeasuredKey("deepseek-ai/DeepSeek-V3", "h200_sxm", "vllm", 8, None, None, "fp8_block", "bfloat16")
    table = fake_table(deepseek_tp8())
    install(monkeypatch, tmp_path, lambda model, gpu, engine, par, *a: key if par.tp == 8 and par.attn_dp == 1
            else "not covered in this test", lambda k, v: table)
    return key


def _placements(acceptance: float | None = DEEPSEEK_V3_MTP_ACCEPTANCE):
    return place_model(load_model("deepseek-v3"), CATALOG.get("H200"), parallelism=TP8, mtp_acceptance=acceptance)


def test_a_measured_placement_gets_its_mtp_twin(faked_deepseek):
    base, twin = _placements()
    assert isinstance(base.step_model, CalibratedStepModel) and base.step_model.source.startswith(LABEL)
    assert twin.gpu.name == "H200 tp8 mtp1" and twin.mtp is not None
    mtp = twin.step_model
    assert isinstance(mtp, MtpStepModel) and mtp.base is base.calibrated and mtp.measured_draft
    assert mtp.predictor() is base.predictor  # the placement's roofline: its model and MTP module
    label = timing_source(mtp)
    assert label.startswith(base.step_model.source) and "MTP 1 draft(s) at acceptance 0.85" in label
    assert f"draft pass: {mtp_draft_fraction(base.model):.3g} x this step" in label and "verify width" in label
    # the twin's KV cache gives up the MTP module's weights, as a roofline twin's does
    assert twin.gpu.require_serving().kv_blocks <= base.gpu.require_serving().kv_blocks
    (off,) = _placements(None)
    assert off.mtp is None


def test_the_draft_is_the_measured_steps_share(faked_deepseek):
    _, twin = _placements()
    mtp = twin.mtp
    frac = mtp.draft_fraction()
    model = twin.model
    # the formula the simulator applies to a pool without a predictor (sim.features.compile)
    assert frac == pytest.approx(draft_cost_fraction(model), rel=1e-12)
    assert 0.02 < frac < 0.06  # DeepSeek-V3: one of 61 layers' active weights plus the 0.93B LM head over 37B
    code, coef = mtp.draft_coefficients()
    base_code, base_coef = twin.calibrated.kernel_coefficients()
    assert code == base_code == STEP_MODEL_ROOFLINE
    for i, c in enumerate(base_coef):
        assert coef[i] == pytest.approx(c if i in ROOFLINE_SHAPE_COEFS else c * frac, rel=1e-12)
    assert f'"draft_cost_fraction": {frac!r}' in mtp.speculative_json()


def test_the_verify_step_is_the_measured_step_at_the_verify_width(faked_deepseek):
    _, twin = _placements()
    mtp, measured = twin.mtp, twin.calibrated
    batch = BatchComposition(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.full(32, 2048))
    step = speculative_step(mtp, batch)
    v = verify_batch(batch, 1)
    assert step.verify_s == pytest.approx(measured.step_s(v.n_seqs, v.n_decode, v.n_prefill_tokens,
                                                          v.decode_context_sum, v.attn2), rel=1e-9)
    assert step.plain_step_s == pytest.approx(measured.step_s(32, 32, 0, 32 * 2048, 0), rel=1e-9)
    assert step.draft_s == pytest.approx(mtp.draft_fraction() * step.plain_step_s, rel=0.05)  # decode step's share
    assert step.plain_step_s < step.verify_s < 2 * step.plain_step_s and step.tokens_per_step == pytest.approx(1.85)


def test_speculative_step_of_a_roofline_twin_is_mtp_step():
    """The same algebra: for a roofline base ``speculative_step`` gives ``mtp_step``'s figures."""
    p = deepseek_tp8()
    mtp = MtpStepModel(p, 0.8, 2)
    batch = BatchComposition(np.array([512]), np.array([0]), np.full(16, 4096))
    a, b = speculative_step(mtp, batch), mtp_step(p, batch, (0.8, 0.8))
    for x, y in ((a.verify_s, b.verify_s), (a.draft_s, b.draft_s), (a.plain_step_s, b.plain_step_s)):
        assert x == pytest.approx(y, rel=1e-6)


def test_both_phases_time_the_same_draft(faked_deepseek):
    """The analytic engine model's draft (``with_speculation``) and the simulator's (``sim.features.compile``,
    from the pool's ``speculative_config`` with ``draft_cost_fraction``) are the same coefficients."""
    _, twin = _placements()
    pool = with_mtp_features(dataclasses.replace(build_pool(twin.gpu, "mtp", 1, 16384), step_model=twin.step_model))
    assert pool.features.speculative.draft_cost_fraction == twin.mtp.draft_fraction()
    code, coef = pool.step_model.kernel_coefficients()
    sim_code, sim_coef = _draft(pool, code, np.asarray(coef, dtype=np.float64))
    lim = pool.limits
    engine = with_speculation(EngineModel.of(twin.calibrated, EngineLimits(lim.max_num_seqs, lim.max_num_batched_tokens,
                                                                           lim.kv_blocks, lim.block_size_tokens)),
                              twin.step_model)
    assert engine.draft_code == sim_code
    np.testing.assert_allclose(engine.draft_coef, sim_coef, rtol=1e-12)


def test_measured_mtp_p99_tpot_agrees_between_the_phases(faked_deepseek):
    """DeepSeek-V3 H200 TP8, measured, MTP on at 0.85, azure_conv up to 16K tokens at 4 req/s: the analytic P99
    TPOT within the agreement grid's ±25 % of the simulated (mean of 3 seeds, widened by 3 standard errors)."""
    _, twin = _placements()
    pool = with_mtp_features(dataclasses.replace(build_pool(twin.gpu, "mtp", 1, 16384), step_model=twin.step_model))
    wl = load_workload("azure_conv")
    prompt, output = wl.sample(np.random.default_rng(0), 20000)
    keep = prompt + output <= 16384
    lim = pool.limits
    engine = with_speculation(EngineModel.of(twin.calibrated, EngineLimits(
        lim.max_num_seqs, lim.max_num_batched_tokens, lim.kv_blocks, lim.block_size_tokens), pool.n_api_servers),
        twin.step_model)
    prof = EngineProfile(engine, prompt[keep].astype(float), output[keep].astype(float), np.ones(int(keep.sum())))
    analytic_s = float(prof.tpot_quantile_s(prof.state(4.0, [1]), 0.99)[0])
    sims = np.array([simulate(FleetSpec(pools=(pool,)), wl, 4.0, n_requests=4000, seed=seed).summary.pool("mtp")
                     .tpot.p99_s for seed in range(3)])
    sim_s = float(sims.mean())
    slack = 3.0 * float(sims.std(ddof=1)) / np.sqrt(3) / sim_s
    assert abs(analytic_s / sim_s - 1.0) <= 0.25 + slack, (analytic_s, sim_s, slack)


def test_a_calibrated_profile_keeps_a_twins_mtp(faked_deepseek):
    base, twin = _placements()
    profile = dataclasses.replace(base.calibrated, source="a user's steps")
    _, twin2 = calibrate_placements((base, twin), profile)
    assert twin2.mtp is not None and twin2.step_model.base is profile and twin2.mtp.roofline is base.predictor
    assert "calibrated profile (a user's steps), MTP 1 draft(s)" in timing_source(twin2.step_model)


@needs_aic
def test_real_tables_time_deepseek_v3_mtp(monkeypatch, tmp_path):
    """With aiconfigurator-core: DeepSeek-V3 FP8 on H200 at TP8 and at DP8 (AIConfigurator's attention data
    parallelism: one rank's batch) is measured and gets its twin; the DP8 instance splits its batch over the ranks,
    its draft pass too (one rank's measured step's share, through the split)."""
    monkeypatch.setenv(source.TIMING_SOURCE_ENV, "auto")
    placed = place_model(load_model("deepseek-v3"), CATALOG.get("H200"), timing_source="auto",
                         mtp_acceptance=DEEPSEEK_V3_MTP_ACCEPTANCE)
    names = {p.gpu.name: p for p in placed}
    assert {"H200 tp8", "H200 tp8 mtp1", "H200 tp1 dp8", "H200 tp1 dp8 mtp1"} <= set(names)
    tp8 = timing_source(names["H200 tp8 mtp1"].step_model)
    assert tp8.startswith(f"aiconfigurator-core {AIC_VERSION}") and "draft pass" in tp8
    dp8 = names["H200 tp1 dp8 mtp1"]
    label = timing_source(dp8.step_model)
    assert label.startswith(f"aiconfigurator-core {AIC_VERSION}") and "the batch split over 8 attention ranks" in label
    assert "draft pass" in label
    code, rank_coef = dp8.calibrated.kernel_coefficients()
    draft_code, draft = dp8.mtp.draft_coefficients()  # one rank's pass: the measured step's share
    frac = dp8.mtp.draft_fraction()
    shape = list(ROOFLINE_SHAPE_COEFS)
    cost = [i for i in range(len(draft)) if i not in shape]
    np.testing.assert_allclose(draft[cost], rank_coef[cost] * frac, rtol=1e-12)
    _, instance = DataParallelInstance(dp8.calibrated, 8).instance_coefficients(draft_code, draft)
    split = split_step_coefficients(code, rank_coef, 8)
    np.testing.assert_allclose(instance[cost], split[cost] * frac, rtol=1e-12)
    assert checkpoint_fp8_scaling(names["H200 tp8"].model, names["H200 tp8"].predictor.weight_dtype) is not None


def test_perf_explain_prints_the_measured_mtp_step(faked_deepseek):
    from click.testing import CliRunner

    from fleetplan.cli.main import cli

    args = ["perf", "explain", "--model", "deepseek-v3", "--gpu", "h200", "-tp", "8", "--enable-expert-parallel",
            "--engine", "vllm", "--mtp-tokens", "1",  # the placement's profile: the verify width scales by its roofline
            "--batch", "decode=32x2048"]
    out = CliRunner().invoke(cli, args, env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    _, twin = _placements()
    step = speculative_step(MtpStepModel(twin.calibrated, DEEPSEEK_V3_MTP_ACCEPTANCE, 1, roofline=twin.predictor),
                            BatchComposition(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
                                             np.full(32, 2048)))
    assert f"timing source: {LABEL}" in text and "MTP 1 draft(s) at acceptance 0.85" in text
    found = re.search(r"this step's verify ([0-9.]+) ms \+ drafts ([0-9.]+) ms -> ([0-9.]+) ms per output token", text)
    assert found, text
    verify_ms, draft_ms, per_token_ms = (float(x) for x in found.groups())
    assert verify_ms == pytest.approx(step.verify_s * 1e3, rel=1e-3)  # the explain's fit of the same table
    assert draft_ms == pytest.approx(step.draft_s * 1e3, rel=1e-3)
    assert per_token_ms == pytest.approx(step.s_per_token * 1e3, rel=1e-3)
