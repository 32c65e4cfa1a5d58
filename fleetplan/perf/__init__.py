"""Step-time predictors: roofline operators, calibrated profiles, linear W + H n; comm; KV budget.

Public surface:

* ``StepTimePredictor`` (``predictor``): per-operator step time from a batch's composition
  (``BatchComposition``, ``parse_batch``) and O(1) simulator coefficients
  (``kernel_coefficients``); options in ``PredictorOptions`` / ``ExecutionMode``.
* ``derive_serving_constants`` (``derive``): (W, H, KV blocks, chunk) for the analytical phase.
* ``calibrate`` (``calibrate``), ``read_calibration_csv`` / ``save_perf_profile`` /
  ``load_perf_profile`` (``profile_io``): fitted profiles (``CalibratedStepModel``).
* ``LinearStepModel`` (``linear``): the core paper's eq. 3.
* ``Fp8Scaling`` (``quant``): per-tensor or 128x128 block-scaled FP8 weights (``StepTimePredictor(fp8_scaling=)``).
"""

from fleetplan.perf.batch import BatchComposition, parse_batch
from fleetplan.perf.calibrate import CalibratedStepModel, CalibrationReport, calibrate
from fleetplan.perf.derive import derive_serving_constants
from fleetplan.perf.linear import N_STEP_COEFS, STEP_MODEL_LINEAR, STEP_MODEL_ROOFLINE, LinearStepModel
from fleetplan.perf.overheads import ExecutionMode, PredictorOptions
from fleetplan.perf.predictor import StepBreakdown, StepTimePredictor
from fleetplan.perf.profile_io import load_perf_profile, read_calibration_csv, save_perf_profile
from fleetplan.perf.quant import Fp8Scaling

__all__ = [
    "N_STEP_COEFS",
    "STEP_MODEL_LINEAR",
    "STEP_MODEL_ROOFLINE",
    "BatchComposition",
    "CalibratedStepModel",
    "CalibrationReport",
    "ExecutionMode",
    "Fp8Scaling",
    "LinearStepModel",
    "PredictorOptions",
    "StepBreakdown",
    "StepTimePredictor",
    "calibrate",
    "derive_serving_constants",
    "load_perf_profile",
    "parse_batch",
    "read_calibration_csv",
    "save_perf_profile",
]
