"""The source choice and its label, the fallback without aiconfigurator-core, and one physics: the measured
step model's coefficients give the same step in the analytic engine model and the simulator's kernel.

Tests marked ``needs_aic`` run only where ``aiconfigurator-core`` is installed (the extra
``fleetplan[aiconfigurator]``); they are skipped, with the reason, elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.calibrate import CalibratedStepModel
from fleetplan.perf.linear import STEP_MODEL_ROOFLINE, LinearStepModel
from fleetplan.perf.measured import ROOFLINE_SOURCE, aic, measured_step_model, source, timing_source
from fleetplan.perf.measured.coverage import MeasuredKey
from fleetplan.perf.measured.overhead import engine_overhead
from fleetplan.perf.measured.table import MeasuredTable
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.perf.scaled import slowed
from fleetplan.plan.placement import place_model
from fleetplan.queueing.engine import EngineLimits, EngineModel
from tests.perf import test_step_kernel as step_kernel_tests
from tests.perf.measured.synthetic import install, slowed_truth, synthetic_table

CATALOG = load_catalog()
AIC_VERSION = aic.package_version()
needs_aic = pytest.mark.skipif(AIC_VERSION is None, reason="aiconfigurator-core is not installed (pip install "
                               "'fleetplan[aiconfigurator]'): the measured source is not available here")
LABEL = "aiconfigurator-core 9.9.9 vllm 0.0.1 h100_sxm (meta-llama/Llama-3.1-8B, bfloat16 weights, bfloat16 KV)"


def predictor_8b(gpu: str = "H100-SXM") -> StepTimePredictor:
    return StepTimePredictor(load_model("llama-3.1-8b"), CATALOG.get(gpu), Parallelism(tp=1))


def fake_table(predictor: StepTimePredictor) -> MeasuredTable:
    """A table of steps the coefficient form can express (the roofline with GEMMs 20 % slower, 1 ms fixed)."""
    return synthetic_table(LABEL, "meta-llama/Llama-3.1-8B", slowed_truth(predictor, 1.2, 1e-3))


@pytest.fixture()
def faked(monkeypatch, tmp_path):
    """The measured source with a synthetic table in place of aiconfigurator-core (cache in tmp_path)."""
    key = MeasuredKey("meta-llama/Llama-3.1-8B", "h100_sxm", "vllm", 1, None, None, "bfloat16", "bfloat16")
    install(monkeypatch, tmp_path, lambda *args: key, lambda k, v: fake_table(predictor_8b()))
    return key


def test_without_the_package_the_roofline_times_the_pool(monkeypatch) -> None:
    monkeypatch.setenv(source.TIMING_SOURCE_ENV, "auto")
    monkeypatch.setattr(aic, "package_version", lambda: None)
    p = predictor_8b()
    assert measured_step_model(p) is None
    assert "not installed" in source.measured_coverage(p)
    assert timing_source(p) == ROOFLINE_SOURCE
    (place,) = place_model(p.model, CATALOG.get("H100-SXM"), parallelism=Parallelism(tp=1))
    assert place.step_model is place.predictor and timing_source(place.step_model) == ROOFLINE_SOURCE


def test_measured_model_carries_its_label_and_overhead(faked) -> None:
    step = measured_step_model(predictor_8b())
    assert isinstance(step, CalibratedStepModel)
    assert step.source.startswith(LABEL) and engine_overhead("vllm").label() in step.source
    assert timing_source(step) == step.source
    assert timing_source(slowed(step, 1.1)) == f"{step.source} x 1.1"
    assert step.holdout_mape < 0.01  # the synthetic table is of the fitted form
    # the engine's non-kernel overhead is added to the fixed term, on top of the measured 1 ms
    assert step.coefficients[0] == pytest.approx(1e-3 + engine_overhead("vllm").step_s, rel=0.02)


def test_placement_runs_the_measured_model_in_both_phases(faked) -> None:
    (place,) = place_model(load_model("llama-3.1-8b"), CATALOG.get("H100-SXM"), parallelism=Parallelism(tp=1))
    assert isinstance(place.step_model, CalibratedStepModel) and timing_source(place.step_model).startswith(LABEL)
    assert "W, H from the calibrated profile of aiconfigurator-core" in place.gpu.sources["serving"]


def test_the_roofline_switch_turns_the_measured_source_off(faked, monkeypatch) -> None:
    monkeypatch.setenv(source.TIMING_SOURCE_ENV, "roofline")
    assert measured_step_model(predictor_8b()) is None
    assert source.TIMING_SOURCE_ENV in source.measured_coverage(predictor_8b())
    monkeypatch.setenv(source.TIMING_SOURCE_ENV, "measured-only")
    with pytest.raises(UnknownNameError, match="auto"):
        measured_step_model(predictor_8b())


def test_label_of_other_step_models() -> None:
    assert timing_source(LinearStepModel(0.01, 0.001)).startswith("linear")
    with pytest.raises(ConfigError, match="not a known step model"):
        timing_source(object())


def test_analytic_and_simulator_steps_agree(faked) -> None:
    """One request (prompt 300, output 4, budget 128 tokens; ``tests/perf/test_step_kernel.py``'s case): the
    kernel's TTFT and completion equal the sums of the measured model's steps (``step_s``, the kernel's own
    expression), and the analytic engine model (``EngineModel.step_s``, vectorised) gives the same steps."""
    step = measured_step_model(predictor_8b())
    assert step.kernel_coefficients()[0] == STEP_MODEL_ROOFLINE
    step_kernel_tests.test_single_request_steps_are_predictor_steps(step)  # the kernel runs step.step_s's steps
    prefill = [(1, 0, c, 0, c * (2 * o + c)) for c, o in ((128, 0), (128, 128), (44, 256))]
    decode = [(1, 1, 0, ctx, 0) for ctx in (300, 301, 302)]
    engine = EngineModel.of(step, EngineLimits(8, 128, 64, 16))
    agg = np.array(prefill + decode, dtype=np.float64).T
    np.testing.assert_allclose(engine.step_s(*agg), [step.step_s(*a) for a in prefill + decode], rtol=1e-12)


@needs_aic
def test_real_tables_cover_h100_and_not_mi300x(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(source.TIMING_SOURCE_ENV, "auto")
    source._table.cache_clear()
    p = predictor_8b()
    step = measured_step_model(p)
    assert step is not None and step.source.startswith(f"aiconfigurator-core {AIC_VERSION} vllm ")
    assert "h100_sxm (meta-llama/" in step.source
    assert measured_step_model(predictor_8b("MI300X")) is None
    # the cached table holds AIConfigurator's engine steps exactly at the grid points
    table = source.measured_table(p)
    key = source.measured_coverage(p)
    engine = aic.AicEngine(key, aic.database_version(key.system, key.backend))
    for i in (0, 5, 20, 40):
        phase, b, t = table.phase[i], int(table.batch[i]), int(table.tokens[i])
        direct = engine.prefill_ms(b, t) if phase == "prefill" else engine.decode_ms(b, t)
        assert table.step_s[i] == pytest.approx(direct * 1e-3, rel=1e-12)
    # the fitted kernels stay within 10 % of the measured steps on the held-out shapes
    held = table.calibration_data(held_out=True)
    over = engine_overhead("vllm")
    kernels = np.array([step.step_s(*a) for a in zip(held.n_seqs, held.n_decode, held.prefill_tokens,
                                                        held.decode_context_tokens, held.attn2, strict=True)])
    kernels -= over.step_s + over.per_seq_s * held.n_seqs
    assert np.all(np.abs(kernels / held.step_s - 1.0) <= 0.10)
    source._table.cache_clear()


def test_perf_explain_names_the_timing_source(monkeypatch) -> None:
    """``fleetplan perf explain`` says which source times the pool and, for the roofline, why (exit 0); with the
    measured source, its label and this batch's measured step."""
    from click.testing import CliRunner

    from fleetplan.cli.main import cli

    args = ["perf", "explain", "--model", "llama-3.1-8b", "--gpu", "h100", "--batch", "decode=32x2048"]
    monkeypatch.setattr(aic, "package_version", lambda: None)
    out = CliRunner().invoke(cli, args, env={"COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    assert "timing source: roofline+engine profile (aiconfigurator-core not installed (pip install " \
           "'fleetplan[aiconfigurator]'))" in out.output


def test_perf_explain_prints_the_measured_label(faked) -> None:
    from click.testing import CliRunner

    from fleetplan.cli.main import cli

    args = ["perf", "explain", "--model", "llama-3.1-8b", "--gpu", "h100", "--batch", "decode=32x2048"]
    out = CliRunner().invoke(cli, args, env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    step = measured_step_model(predictor_8b())
    assert f"timing source: {step.source}: this step {step.step_s(32, 32, 0, 32 * 2048, 0) * 1e3:.3f} ms" \
        in " ".join(out.output.split())
