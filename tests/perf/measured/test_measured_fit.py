"""The measured fit recovers steps that its coefficient form can express, and refuses a non-roofline base."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.perf.linear import ROOFLINE_SHAPE_COEFS, STEP_MODEL_LINEAR
from fleetplan.perf.measured.fit import GROUPS, fit_coefficients, step_s_of
from fleetplan.perf.measured.table import MeasuredTable, grid_shapes
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor

CATALOG = load_catalog()


def scaled_truth(base: np.ndarray, scales: dict[str, float], fixed_s: float) -> np.ndarray:
    truth = base.copy()
    for name, factor in scales.items():
        truth[list(GROUPS[name])] *= factor
    truth[0] = fixed_s
    return truth


@pytest.mark.parametrize(("model", "gpu", "par", "dtype"), [
    ("llama-3.1-8b", "H100-SXM", Parallelism(tp=1), Dtype.BF16),
    ("llama-3.1-70b", "H200", Parallelism(tp=4), Dtype.FP8),
    ("qwen3-30b-a3b", "B200", Parallelism(tp=2, ep=2), Dtype.BF16),
])
def test_fit_recovers_steps_of_its_own_form(model: str, gpu: str, par: Parallelism, dtype: Dtype) -> None:
    """Steps made by scaling the roofline's groups (GEMM compute 0.7, memory 1.3, decode attention 0.8) plus a
    2 ms fixed term are reproduced within 1 % on the fit rows and the held-out rows."""
    predictor = StepTimePredictor(load_model(model), CATALOG.get(gpu), par, dtype)
    code, base = predictor.kernel_coefficients()
    truth = scaled_truth(base, {"gemm_compute": 0.7, "gemm_memory": 1.3, "attention_decode": 0.8}, 2e-3)
    rows = grid_shapes()
    table = MeasuredTable.from_rows("synthetic", "org/model", rows, [1.0] * len(rows))
    steps = np.concatenate([step_s_of(truth, table.calibration_data(held_out=h)) for h in (False, True)])
    order = [i for h in (False, True) for i in range(len(rows)) if rows[i][3] == h]
    step_s = np.empty(len(rows))
    step_s[order] = steps
    table = MeasuredTable.from_rows("synthetic", "org/model", rows, list(step_s))
    fit = fit_coefficients(code, base, table.calibration_data())
    assert fit.fit_max_abs < 0.01
    held = table.calibration_data(held_out=True)
    ratio = step_s_of(np.array(fit.coefficients), held) / held.step_s
    assert np.max(np.abs(ratio - 1.0)) < 0.01
    assert all(c >= 0 for i, c in enumerate(fit.coefficients) if i not in ROOFLINE_SHAPE_COEFS)  # costs


def test_fit_needs_a_roofline_base() -> None:
    table = MeasuredTable.from_rows("synthetic", "org/model", grid_shapes(), [1e-3] * len(grid_shapes()))
    with pytest.raises(ValueError, match="roofline"):
        fit_coefficients(STEP_MODEL_LINEAR, np.zeros(18), table.calibration_data())
