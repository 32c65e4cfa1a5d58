"""Linear iteration-time model of the core paper (inference-fleet-sim, eq. 3).

    t_iter(n) = W + H * n                                  (eq. 3)

W is the per-iteration base cost (weights streamed once per step), H the cost per
sequence in the batch (KV reads).  For the iteration-level simulator a prefill
chunk also costs ``prefill_s_per_token`` per prompt token in the step.  Its
default, ``H * n_max(ref) / chunk``, makes one full chunk cost about one full
batch of decode work, which is what the paper's eq. (5) assumes when it charges
each prefill chunk one ``t_iter(n_max)``.

Step-model codes and coefficient layout form the one seam between performance
models and the simulator kernel (see ``fleetplan.sim._kernels``): the kernel gets
``(code, coef[K])`` per pool and evaluates

    step_s = coef[0] + coef[1] * n_seqs + coef[2] * prefill_tokens
             + coef[3] * decode_context_tokens + coef[4] * prefill_attention_work

for ``STEP_MODEL_LINEAR``.  Richer predictors add codes, never arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

STEP_MODEL_LINEAR = 0
N_STEP_COEFS = 8


@dataclass(frozen=True)
class LinearStepModel:
    """``t = W + H * n + prefill_s_per_token * prefill_tokens`` (seconds)."""

    iter_base_s: float
    iter_per_seq_s: float
    prefill_s_per_token: float = 0.0

    def __post_init__(self) -> None:
        for name in ("iter_base_s", "iter_per_seq_s", "prefill_s_per_token"):
            value = getattr(self, name)
            if not np.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be finite and >= 0, got {value}")

    @classmethod
    def from_serving(cls, serving, prefill_s_per_token: float | None = None) -> LinearStepModel:
        """Build from ``hardware.ServingConstants`` (W, H, n_max at the reference
        context, chunk).  ``prefill_s_per_token`` defaults to H * n_max(ref) / chunk."""
        if prefill_s_per_token is None:
            n_ref = serving.n_max(serving.ref_context_tokens)
            prefill_s_per_token = serving.iter_per_seq_s * n_ref / serving.chunk_tokens
        return cls(serving.iter_base_s, serving.iter_per_seq_s, prefill_s_per_token)

    def t_iter_s(self, n_seqs: float | np.ndarray) -> float | np.ndarray:
        """Eq. (3): duration of a decode iteration with ``n_seqs`` sequences."""
        return self.iter_base_s + self.iter_per_seq_s * np.asarray(n_seqs, dtype=np.float64)

    def kernel_coefficients(self) -> tuple[int, np.ndarray]:
        """``(STEP_MODEL_LINEAR, coef)`` for the simulator kernel."""
        coef = np.zeros(N_STEP_COEFS, dtype=np.float64)
        coef[0] = self.iter_base_s
        coef[1] = self.iter_per_seq_s
        coef[2] = self.prefill_s_per_token
        return STEP_MODEL_LINEAR, coef
