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

__all__ = ["FIT_VERSION", "GROUPS", "MeasuredFit", "fit_coefficients", "step_s_of"]

FIT_VERSION = 1  # raised whenever the fit changes (cached fits of another version are not read)

#: Scaled groups of ``STEP_MODEL_ROOFLINE`` cost coefficients (``fleetplan.perf.linear``).
GROUPS = {
    "gemm_compute": (1, 8),
    "gemm_memory": (2, 7, 9),
    "attention_prefill": (3,),
    "attention_decode": (4,),
    "comm": (10,),
    "moe_compute": (12, 13, 21),
    "moe_memory": (14, 16, 17),
}
LOG_SCALE_BOUND = 6.0
ADDITIVE = ("fixed_s", "per_token_s", "per_seq_s")
_ADDITIVE_SCALE = (1e-3, 1e-6, 1e-5)  # typical sizes (s): conditioning of the solver only
_ADDITIVE_BOUND = (1.0, 1e-3, 1e-2)
LOSS_SCALE = 0.05  # soft-L1 loss: residuals beyond ~5 % weigh linearly, so a few kernel switches do not dominate
#: (tile tokens, wave ratio) tried besides the roofline's: kernel switches between small-M and large-M GEMMs
#: show as steps the wave term can express (one wave up to 1 / ratio tiles).
SHAPE_CANDIDATES = ((16.0, 0.125), (16.0, 0.25), (32.0, 0.125), (64.0, 0.5), (64.0, 0.0), (128.0, 0.0))


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


def _fit_shape(base: np.ndarray, names: list[str], data: CalibrationData):
    from scipy.optimize import least_squares

    groups = [GROUPS[name] for name in names]
    y = np.asarray(data.step_s, dtype=np.float64)

    def residual(p: np.ndarray) -> np.ndarray:
        return np.log(step_s_of(_coefficients(base, groups, p), data) / y)

    k = len(groups)
    p0 = np.r_[np.zeros(k), 0.5 * float(y.min()), 0.0, 0.0]
    lower = np.r_[np.full(k, -LOG_SCALE_BOUND), 0.0, 0.0, 0.0]
    upper = np.r_[np.full(k, LOG_SCALE_BOUND), _ADDITIVE_BOUND]
    sol = least_squares(residual, p0, bounds=(lower, upper), x_scale=np.r_[np.ones(k), _ADDITIVE_SCALE],
                        loss="soft_l1", f_scale=LOSS_SCALE)
    return sol, _coefficients(base, groups, sol.x), np.exp(residual(sol.x))


def fit_coefficients(base_code: int, base: np.ndarray, data: CalibrationData) -> MeasuredFit:
    """Fit the scales of the module docstring to ``data`` (``base_code`` must be ``STEP_MODEL_ROOFLINE``)."""
    if base_code != STEP_MODEL_ROOFLINE:
        raise ValueError(f"measured fits start from a roofline step model (code {STEP_MODEL_ROOFLINE}), "
                         f"got code {base_code}")
    base = np.asarray(base, dtype=np.float64)
    names = [name for name, idx in GROUPS.items() if np.any(base[list(idx)] != 0.0)]
    best = None
    for tile, wave in [(base[5], base[6]), *SHAPE_CANDIDATES]:
        shaped = base.copy()
        shaped[5], shaped[6] = tile, wave
        sol, coef, ratio = _fit_shape(shaped, names, data)
        if best is None or sol.cost < best[0].cost:
            best = (sol, coef, ratio)
    sol, coef, ratio = best
    k = len(names)
    scales = dict(zip(names, map(float, np.exp(sol.x[:k])), strict=True))
    scales.update(zip(ADDITIVE, map(float, sol.x[k:]), strict=True))
    scales.update(tile_tokens=float(coef[5]), wave_ratio=float(coef[6]))
    return MeasuredFit(tuple(float(c) for c in coef), scales, float(np.max(np.abs(ratio - 1.0))),
                       float(np.mean(np.abs(ratio - 1.0) <= 0.1)))
