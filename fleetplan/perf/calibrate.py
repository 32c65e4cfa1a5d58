"""Calibrate the roofline predictor on measured engine steps (non-negative least squares).

Data: one row per measured engine step with the batch aggregates the simulator kernel
keeps (``n_seqs``, ``n_decode``, ``prefill_tokens``, ``decode_context_tokens``, twice the
prefill attention work ``attn2``) and the measured duration (format: ``profile_io``).

Model: the base predictor's components for each row (``kernel_coefficients``), in seconds,

    x = [1, gemm, attention_prefill, attention_decode, comm, moe, n_seqs]

and the step time ``y ~ w . x`` with ``w >= 0``, fitted by NNLS on rows weighted by
``1 / y`` (so the fit minimises relative error, like the reported MAPE).  Each weight
scales one block of the kernel's coefficients (``w0`` replaces the fixed term; ``w6`` is a
new per-sequence cost), so the calibrated profile runs in the kernel as ``STEP_MODEL_ROOFLINE``
with the same O(1) evaluation; scaling a roofline ``max(a, b)`` by ``w >= 0`` is exact.

Validation: a seeded random ``holdout_fraction`` of rows is left out of the fit and the
mean absolute percentage error (MAPE) is reported on it for the base predictor, the fit and,
when scikit-learn is installed, a random forest on the same features (comparison only: a
forest has no O(1) kernel form and is never saved in a profile).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.perf.linear import N_STEP_COEFS, STEP_MODEL_ROOFLINE, roofline_step_s

__all__ = ["CalibrationData", "CalibratedStepModel", "CalibrationReport", "FEATURES", "calibrate",
           "feature_matrix", "DEFAULT_HOLDOUT_FRACTION", "DEFAULT_SEED"]

FEATURES = ("fixed", "gemm", "attention_prefill", "attention_decode", "comm", "moe", "per_seq")
DEFAULT_HOLDOUT_FRACTION = 0.2
DEFAULT_SEED = 0
MIN_FIT_ROWS = 8  # at least one row per feature plus one
RF_N_TREES = 200  # random-forest comparison (optional scikit-learn)
# Cost coefficients per feature (``fleetplan.perf.linear``); the tile size (5), wave ratio (6) and MoE
# miss exponent (15) are not costs and are never scaled, and the MoE terms belong to the MoE feature only; the
# window term's cost (18) and the sparse-attention prefill query's (20) are attention, the window's keys (19) a shape;
# the MoE hit experts' compute offset (21) is the MoE feature's.
_GEMM, _ATTN_P, _ATTN_D, _COMM, _MOE, _SEQ = (1, 2, 7, 8, 9), (3, 18, 20), (4,), (10,), (12, 13, 14, 16, 17, 21), (11,)
#: Coefficient counts of profiles saved before the window term (18), before the sparse-attention prefill query
#: (20) and before the MoE hit offset (21) (``fleetplan.perf.linear``): the terms they lack read as zeros.
_LEGACY_N_STEP_COEFS = (18, 20, 21)


@dataclass(frozen=True, eq=False)
class CalibrationData:
    """Measured steps: int64 aggregate columns and ``step_s`` (float64), one entry per step."""

    n_seqs: np.ndarray
    n_decode: np.ndarray
    prefill_tokens: np.ndarray
    decode_context_tokens: np.ndarray
    attn2: np.ndarray
    step_s: np.ndarray
    source: str

    @property
    def n_rows(self) -> int:
        return int(self.step_s.size)


@dataclass(frozen=True)
class CalibratedStepModel:
    """A fitted ``STEP_MODEL_ROOFLINE`` profile: coefficients plus where they came from."""

    coefficients: tuple[float, ...]
    scales: MappingProxyType = field(hash=False)  # feature name -> fitted weight
    model: str
    gpu: str
    parallelism: str  # vLLM flags of the base predictor
    weight_dtype: str
    kv_dtype: str
    holdout_mape: float
    n_rows: int
    source: str

    def __post_init__(self) -> None:
        coef = tuple(float(c) for c in self.coefficients)
        if len(coef) in _LEGACY_N_STEP_COEFS:
            coef += (0.0,) * (N_STEP_COEFS - len(coef))
        if len(coef) != N_STEP_COEFS or not all(math.isfinite(c) for c in coef):
            raise ConfigError(f"a calibrated profile needs {N_STEP_COEFS} finite coefficients, got {len(coef)}")
        object.__setattr__(self, "coefficients", coef)
        object.__setattr__(self, "scales", MappingProxyType(dict(self.scales)))

    def kernel_coefficients(self) -> tuple[int, np.ndarray]:
        """``(STEP_MODEL_ROOFLINE, coef)`` for the simulator kernel."""
        return STEP_MODEL_ROOFLINE, np.array(self.coefficients, dtype=np.float64)

    def step_s(self, n_seqs: int, n_decode: int, prefill_tokens: int, decode_context_tokens: int,
               attn2: int) -> float:
        """Step time (s) from the kernel's aggregates."""
        return roofline_step_s(self.kernel_coefficients()[1], n_seqs, n_decode, prefill_tokens,
                               decode_context_tokens, attn2)

    def t_iter_s(self, n_seqs: float | np.ndarray,
                 context_tokens: float | np.ndarray | None = None) -> float | np.ndarray:
        """Pure-decode step of ``n_seqs`` sequences of ``context_tokens`` (``LinearStepModel``'s signature)."""
        ctx = 0.0 if context_tokens is None else context_tokens
        coef = self.kernel_coefficients()[1]
        f = np.vectorize(lambda n, c: roofline_step_s(coef, int(n), int(n), 0, 0, 0) + coef[4] * n * c)
        out = f(np.asarray(n_seqs, dtype=np.float64), np.asarray(ctx, dtype=np.float64))
        return float(out) if np.ndim(out) == 0 else out


@dataclass(frozen=True)
class CalibrationReport:
    """Held-out errors of the base predictor, the NNLS fit and (optionally) a random forest."""

    profile: CalibratedStepModel
    n_fit: int
    n_holdout: int
    base_mape: float
    fit_mape: float
    forest_mape: float | None  # None when scikit-learn is not installed


def _component(coef: np.ndarray, keep: tuple[int, ...], data: CalibrationData) -> np.ndarray:
    """Step time of the coefficients in ``keep`` alone (others zero), per row."""
    part = np.zeros(N_STEP_COEFS)
    part[list(keep)] = coef[list(keep)]
    part[5], part[6], part[15], part[19] = coef[5], coef[6], coef[15], coef[19]  # tile, wave, MoE miss, window keys
    return np.array([roofline_step_s(part, *row) for row in zip(
        data.n_seqs.tolist(), data.n_decode.tolist(), data.prefill_tokens.tolist(),
        data.decode_context_tokens.tolist(), data.attn2.tolist(), strict=True)])


def feature_matrix(base_coef: np.ndarray, data: CalibrationData) -> np.ndarray:
    """Rows x ``FEATURES`` in seconds (the per-sequence column counts sequences)."""
    return np.column_stack([np.ones(data.n_rows)] + [_component(base_coef, k, data) for k in
                           (_GEMM, _ATTN_P, _ATTN_D, _COMM, _MOE)] + [data.n_seqs.astype(np.float64)])


def _mape(predicted: np.ndarray, measured: np.ndarray) -> float:
    return float(np.mean(np.abs(predicted / measured - 1.0)))


def _forest_mape(x_fit, y_fit, x_out, y_out, seed: int) -> float | None:
    try:
        from sklearn.ensemble import RandomForestRegressor
    except ImportError:
        return None
    forest = RandomForestRegressor(n_estimators=RF_N_TREES, random_state=seed).fit(x_fit, y_fit)
    return _mape(forest.predict(x_out), y_out)


def calibrate(base, data: CalibrationData, *, holdout_fraction: float = DEFAULT_HOLDOUT_FRACTION,
              seed: int = DEFAULT_SEED) -> CalibrationReport:
    """Fit scales of ``base`` (a ``StepTimePredictor``) to ``data`` (module docstring)."""
    if not 0 < holdout_fraction < 1:
        raise ConfigError(f"holdout_fraction={holdout_fraction!r} must be in (0, 1); 0.2 keeps a fifth for testing")
    n_out = max(1, int(round(holdout_fraction * data.n_rows)))
    if data.n_rows - n_out < MIN_FIT_ROWS:
        raise ConfigError(f"{data.source}: {data.n_rows} rows leave {data.n_rows - n_out} to fit; give at least "
                          f"{MIN_FIT_ROWS + n_out} measured steps")
    from scipy.optimize import nnls

    code, base_coef = base.kernel_coefficients()
    x = feature_matrix(base_coef, data)
    y = data.step_s
    order = np.random.default_rng(seed).permutation(data.n_rows)
    out, fit = order[:n_out], order[n_out:]
    weights, _ = nnls(x[fit] / y[fit, None], np.ones(fit.size))
    coef = np.array(base_coef, dtype=np.float64)
    coef[0] = weights[0]
    for w, keep in zip(weights[1:6], (_GEMM, _ATTN_P, _ATTN_D, _COMM, _MOE), strict=True):
        coef[list(keep)] = base_coef[list(keep)] * w
    coef[11] = weights[6]
    profile = CalibratedStepModel(
        coefficients=tuple(coef), scales=dict(zip(FEATURES, map(float, weights), strict=True)),
        model=base.model.name, gpu=base.gpu.name, parallelism=base.parallelism.flags(),
        weight_dtype=base.weight_dtype.value, kv_dtype=base.kv_dtype.value,
        holdout_mape=_mape(x[out] @ weights, y[out]), n_rows=data.n_rows, source=data.source,
    )
    base_pred = np.array([roofline_step_s(base_coef, *row) for row in zip(
        data.n_seqs[out].tolist(), data.n_decode[out].tolist(), data.prefill_tokens[out].tolist(),
        data.decode_context_tokens[out].tolist(), data.attn2[out].tolist(), strict=True)])
    return CalibrationReport(profile, int(fit.size), int(out.size), _mape(base_pred, y[out]),
                             profile.holdout_mape, _forest_mape(x[fit], y[fit], x[out], y[out], seed))
