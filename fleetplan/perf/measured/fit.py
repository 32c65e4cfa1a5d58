"""Coefficients of the roofline step model fitted to measured steps (bounded least squares, log ratio).

The roofline predictor of the pool (``fleetplan.perf.predictor``, the engine profile's options) gives
the shape of each term in the kernel's expression (``fleetplan.perf.linear``): which batch aggregate
drives it, where the GEMMs turn compute-bound, the tile and wave quantisation, the MoE expert-miss curve.
The measured steps set the size of each term.  With ``c`` the base coefficients and ``s_g`` one scale per
group ``g`` of cost coefficients (``GROUPS``),

    c'[i] = s_g c[i]   for i in g          c'[0] = f,   c'[10] = c[10] s_comm + t,   c'[11] = q

(``f`` a fixed time per step, ``t`` a time per token through the GEMMs, ``q`` a time per sequence; all
>= 0; ``s_g`` in [e^-6, e^6]) minimise ``sum_rows log(step'(row) / measured(row))^2`` (relative error,
like the reported shares).  Unlike ``perf.calibrate`` (one NNLS weight per operator family, both sides
of the GEMM roofline scaled together) the compute and memory sides of the GEMM and MoE rooflines get
their own scales: measured small-M kernels (e.g. block-FP8 GEMMs) and large-M ones depart from the
roofline's peaks by different factors.  Groups whose base coefficients are all zero (no collectives at
TP 1, no MoE in a dense model) are left out.  Tile (5), wave (6) and MoE miss exponent (15) are shape
parameters and stay as the roofline has them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.perf.calibrate import CalibrationData
from fleetplan.perf.linear import STEP_MODEL_ROOFLINE, step_time_array_s

__all__ = ["GROUPS", "MeasuredFit", "fit_coefficients", "step_s_of"]

#: Scaled groups of ``STEP_MODEL_ROOFLINE`` cost coefficients (``fleetplan.perf.linear``).
GROUPS = {
    "gemm_compute": (1, 8),
    "gemm_memory": (2, 7, 9),
    "attention_prefill": (3,),
    "attention_decode": (4,),
    "comm": (10,),
    "moe_compute": (12, 13),
    "moe_memory": (14, 16, 17),
}
LOG_SCALE_BOUND = 6.0
ADDITIVE = ("fixed_s", "per_token_s", "per_seq_s")
_ADDITIVE_SCALE = (1e-3, 1e-6, 1e-5)  # typical sizes (s): conditioning of the solver only
_ADDITIVE_BOUND = (1.0, 1e-3, 1e-2)


@dataclass(frozen=True)
class MeasuredFit:
    """Fitted coefficients and their error on the fit rows."""

    coefficients: tuple[float, ...]
    scales: dict  # group or additive term -> value
    fit_max_abs: float  # max |step' / measured - 1| over the fit rows
    fit_within_10pct: float  # share of fit rows within +-10 %


def step_s_of(coef: np.ndarray, data: CalibrationData) -> np.ndarray:
    """``STEP_MODEL_ROOFLINE`` step times (s) of ``data``'s rows."""
    return step_time_array_s(STEP_MODEL_ROOFLINE, coef, data.n_seqs, data.n_decode, data.prefill_tokens,
                             data.decode_context_tokens, data.attn2)


def _coefficients(base: np.ndarray, groups: list[tuple[int, ...]], p: np.ndarray) -> np.ndarray:
    c = np.array(base, dtype=np.float64)
    for scale, idx in zip(np.exp(p[:len(groups)]), groups, strict=True):
        c[list(idx)] = base[list(idx)] * scale
    fixed, per_token, per_seq = p[len(groups):]
    c[0] = fixed
    c[10] = c[10] + per_token
    c[11] = per_seq
    return c


def fit_coefficients(base_code: int, base: np.ndarray, data: CalibrationData) -> MeasuredFit:
    """Fit the scales of the module docstring to ``data`` (``base_code`` must be ``STEP_MODEL_ROOFLINE``)."""
    from scipy.optimize import least_squares

    if base_code != STEP_MODEL_ROOFLINE:
        raise ValueError(f"measured fits start from a roofline step model (code {STEP_MODEL_ROOFLINE}), "
                         f"got code {base_code}")
    base = np.asarray(base, dtype=np.float64)
    names = [name for name, idx in GROUPS.items() if np.any(base[list(idx)] != 0.0)]
    groups = [GROUPS[name] for name in names]
    y = np.asarray(data.step_s, dtype=np.float64)

    def residual(p: np.ndarray) -> np.ndarray:
        return np.log(step_s_of(_coefficients(base, groups, p), data) / y)

    k = len(groups)
    p0 = np.r_[np.zeros(k), 0.5 * float(y.min()), 0.0, 0.0]
    lower = np.r_[np.full(k, -LOG_SCALE_BOUND), 0.0, 0.0, 0.0]
    upper = np.r_[np.full(k, LOG_SCALE_BOUND), _ADDITIVE_BOUND]
    sol = least_squares(residual, p0, bounds=(lower, upper), x_scale=np.r_[np.ones(k), _ADDITIVE_SCALE])
    coef = _coefficients(base, groups, sol.x)
    ratio = np.exp(residual(sol.x))
    scales = dict(zip(names, map(float, np.exp(sol.x[:k])), strict=True))
    scales.update(zip(ADDITIVE, map(float, sol.x[k:]), strict=True))
    return MeasuredFit(tuple(float(c) for c in coef), scales, float(np.max(np.abs(ratio - 1.0))),
                       float(np.mean(np.abs(ratio - 1.0) <= 0.1)))
