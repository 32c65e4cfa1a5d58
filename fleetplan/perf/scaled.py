"""A step model whose every step lasts ``factor`` times another's (a uniform slowdown).

A slowdown s of the engine (a pessimistic step-time margin, or the headroom search of
``fleetplan.plan.headroom``) multiplies every step time by f = 1 + s:

    step'(batch) = f · step(batch)                     for every batch composition

It is applied to the kernel's coefficient vector (``fleetplan.perf.linear`` gives both layouts),
so the simulator kernel and its vectorised twin ``step_time_array_s`` (the analytic engine model)
evaluate the same slower steps.  Scaling the coefficients is exact in real arithmetic (in floating
point up to rounding, a relative 1e-15) because every step expression is built from terms that are a
cost coefficient times a batch aggregate, added together or combined by ``max``:

* ``STEP_MODEL_LINEAR``: c[0] + c[1] n + c[2] p + c[3] ctx + c[4] attn — each term linear in one
  coefficient, all of which are seconds (per unit);
* ``STEP_MODEL_ROOFLINE``: sums of such terms and two ``max(a, b)`` (GEMM roofline, MoE), where
  both a and b are sums of scaled cost terms, and max(f a, f b) = f max(a, b) for f > 0.  The
  coefficients that are not costs — tile tokens c[5], wave ratio c[6] and the MoE miss exponent
  c[15] (``ROOFLINE_SHAPE_COEFS``) — shape the batch aggregates and stay as they are; the MoE
  branch's test (c[12] > 0 or c[14] > 0) is unchanged by f > 0.

``t_iter_s`` (the request level and the simulator's full-batch step) is f times the base's.
A ``LinearStepModel`` stays a ``LinearStepModel`` (W, H and the prefill cost times f: what the
paper's eqs. 3-5 read); any other model is wrapped in ``ScaledStepModel``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.perf.linear import ROOFLINE_SHAPE_COEFS, STEP_MODEL_LINEAR, STEP_MODEL_ROOFLINE, LinearStepModel
from fleetplan.perf.seam import StepModel

__all__ = ["ScaledStepModel", "scale_step_coefficients", "slowed"]


def _check_factor(factor: float) -> float:
    f = float(factor)
    if not (math.isfinite(f) and f > 0):
        raise ConfigError(f"step-time factor {factor!r} is invalid: it must be a finite number > 0 (1 = as modelled)")
    return f


def scale_step_coefficients(code: int, coef: np.ndarray, factor: float) -> np.ndarray:
    """``coef`` of step code ``code`` with every cost coefficient times ``factor`` (module docstring)."""
    f = _check_factor(factor)
    out = np.array(coef, dtype=np.float64) * f
    if code == STEP_MODEL_ROOFLINE:
        for i in ROOFLINE_SHAPE_COEFS:
            out[i] = coef[i]
    elif code != STEP_MODEL_LINEAR:
        raise ConfigError(f"step-model code {code} is unknown: cannot scale its coefficients")
    return out


@dataclass(frozen=True)
class ScaledStepModel:
    """``base`` with every step ``factor`` times as long (a ``fleetplan.perf.seam.StepModel``)."""

    base: StepModel
    factor: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", _check_factor(self.factor))
        if not isinstance(self.base, StepModel):
            raise ConfigError(f"{type(self.base).__name__} is not a step model (kernel_coefficients, t_iter_s)")

    def kernel_coefficients(self) -> tuple[int, np.ndarray]:
        """The base's ``(code, coef)`` with its cost coefficients times ``factor``."""
        code, coef = self.base.kernel_coefficients()
        return int(code), scale_step_coefficients(int(code), coef, self.factor)

    def t_iter_s(self, n_seqs, context_tokens=None):
        """``factor`` x the base's decode iteration of ``n_seqs`` sequences of ``context_tokens``."""
        return self.factor * self.base.t_iter_s(n_seqs, context_tokens)


def slowed(step_model: StepModel, factor: float) -> StepModel:
    """``step_model`` with every step ``factor`` times as long; the model itself when factor is 1."""
    f = _check_factor(factor)
    if f == 1.0:
        return step_model
    if isinstance(step_model, LinearStepModel):
        return replace(step_model, iter_base_s=step_model.iter_base_s * f, iter_per_seq_s=step_model.iter_per_seq_s * f,
                       prefill_s_per_token=step_model.prefill_s_per_token * f)
    if isinstance(step_model, ScaledStepModel):
        return ScaledStepModel(step_model.base, step_model.factor * f)
    return ScaledStepModel(step_model, f)
