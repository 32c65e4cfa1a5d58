"""A uniform slowdown scales every step by exactly its factor: the analytic twin
(``step_time_array_s``), the kernel's ``step_time_s`` and ``t_iter_s``, for both step codes;
the shape coefficients of the roofline stay; and a lone request's simulated TTFT scales too."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.perf.calibrate import CalibratedStepModel
from fleetplan.perf.linear import ROOFLINE_SHAPE_COEFS, LinearStepModel, roofline_step_s, step_time_array_s
from fleetplan.perf.overheads import PredictorOptions
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.perf.scaled import ScaledStepModel, scale_step_coefficients, slowed
from fleetplan.sim._kernels.step_model import step_time_s

CATALOG = load_catalog()
MODELS = {
    "linear-paper": LinearStepModel.from_serving(CATALOG.get("H100-SXM").serving),
    "linear-per-seq": LinearStepModel(0.012, 0.0004, 1e-5, None),
    "roofline-dense": StepTimePredictor(load_model("llama-3.1-70b"), CATALOG.get("H100-SXM"), Parallelism(tp=4),
                                        Dtype.FP8),
    "roofline-moe": StepTimePredictor(load_model("qwen3-30b-a3b"), CATALOG.get("H100-SXM"), Parallelism(tp=4, ep=4),
                                      options=PredictorOptions(moe_zipf_s=0.8)),
}
MODELS["calibrated"] = CalibratedStepModel(
    coefficients=tuple(MODELS["roofline-dense"].kernel_coefficients()[1] * 1.1), scales={}, model="m", gpu="g",
    parallelism="tp", weight_dtype="fp8", kv_dtype="bf16", holdout_mape=0.0, n_rows=0, source="test")
FACTORS = (1.15, 1.5, 3.0, 0.8)
RTOL = 1e-12


def _batches(seed: int, n: int = 400):
    rng = np.random.default_rng(seed)
    n_seqs = rng.integers(1, 512, n)
    n_decode = np.minimum(rng.integers(0, 512, n), n_seqs)
    prefill = np.where(n_decode < n_seqs, rng.integers(1, 8192, n), 0)
    ctx = n_decode * rng.integers(1, 32768, n)
    attn2 = np.where(prefill > 0, prefill * (2 * rng.integers(0, 16384, n) + prefill), 0)
    return n_seqs, n_decode, prefill, ctx, attn2


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("factor", FACTORS)
def test_every_step_is_factor_times_longer(name, factor):
    base = MODELS[name]
    code, coef = base.kernel_coefficients()
    s_code, s_coef = slowed(base, factor).kernel_coefficients()
    assert s_code == code
    cols = _batches(int(factor * 100))
    np.testing.assert_allclose(step_time_array_s(s_code, s_coef, *cols), factor * step_time_array_s(code, coef, *cols),
                               rtol=RTOL)
    for row in list(zip(*(c.tolist() for c in cols), strict=True))[:60]:  # the kernel itself and its Python twin
        assert step_time_s(s_code, s_coef, *row) == pytest.approx(factor * step_time_s(code, coef, *row), rel=RTOL)
        if code == 1:
            assert roofline_step_s(s_coef, *row) == pytest.approx(factor * roofline_step_s(coef, *row), rel=RTOL)
    n = np.array([1, 8, 64, 256])
    np.testing.assert_allclose(slowed(base, factor).t_iter_s(n, 4096.0), factor * base.t_iter_s(n, 4096.0), rtol=RTOL)


def test_roofline_shape_coefficients_are_not_scaled():
    code, coef = MODELS["roofline-moe"].kernel_coefficients()
    scaled = scale_step_coefficients(code, coef, 2.0)
    for i in range(coef.size):
        assert scaled[i] == (coef[i] if i in ROOFLINE_SHAPE_COEFS else 2.0 * coef[i])


def test_slowed_keeps_linear_models_linear_and_composes():
    lin = MODELS["linear-paper"]
    assert slowed(lin, 1.0) is lin
    twice = slowed(lin, 1.2)
    assert isinstance(twice, LinearStepModel) and twice.iter_base_s == pytest.approx(1.2 * lin.iter_base_s)
    pred = MODELS["roofline-dense"]
    nested = slowed(slowed(pred, 1.2), 1.5)
    assert isinstance(nested, ScaledStepModel) and nested.base is pred and nested.factor == pytest.approx(1.8)


@pytest.mark.parametrize("factor", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_factors_are_refused(factor):
    with pytest.raises(ConfigError, match="factor"):
        slowed(MODELS["roofline-dense"], factor)


def test_a_lone_requests_ttft_is_factor_times_longer_in_the_simulator():
    """One request on an idle instance: its TTFT is the sum of its prefill steps, so it scales exactly."""
    from dataclasses import replace

    from fleetplan.sim import FleetSpec, Level, build_pool, simulate
    from fleetplan.workload import load_workload

    pool = build_pool(CATALOG.get("H100-SXM"), "p", 1, 65536)
    wl = load_workload("lmsys")
    ttft = {}
    for f in (1.0, 1.4):
        spec = FleetSpec((replace(pool, step_model=slowed(MODELS["roofline-dense"], f)),))
        ttft[f] = simulate(spec, wl, 0.001, 1, Level.ITERATION, 3).requests["ttft_s"].to_numpy()[0]
    assert ttft[1.4] == pytest.approx(1.4 * ttft[1.0], rel=1e-9)
