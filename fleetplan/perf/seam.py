"""The step-time seam between performance models and the simulator.

Anything the simulator can run is a ``StepModel``: it gives the iteration kernel one step
code and a coefficient vector (``kernel_coefficients``), and gives the request level and the
analytic side the duration of an iteration of ``n`` sequences of a given context
(``t_iter_s``).  ``LinearStepModel`` (the paper's W + H·n), ``StepTimePredictor`` (roofline
operators) and ``CalibratedStepModel`` (fitted to measurements) all satisfy it.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class StepModel(Protocol):
    """What the simulator needs from a step-time model."""

    def kernel_coefficients(self) -> tuple[int, np.ndarray]:
        """``(step code, coefficients)`` evaluated by ``fleetplan.sim._kernels.step_model``."""
        ...

    def t_iter_s(self, n_seqs: float | np.ndarray, context_tokens: float | np.ndarray | None = None):
        """Seconds of one decode iteration of ``n_seqs`` sequences of ``context_tokens`` each."""
        ...
