"""A workload: the joint distribution of (prompt, output) tokens per request.

Two descriptions, one mapping from a pair of uniforms ``(u1, u2)`` to lengths, shared by
``sample`` (random ``u``) and ``quadrature`` (deterministic ``u``):

* totals only (``input``/``output`` absent): ``T = max(1, ceil(Q_total(u1)))``,
  ``prompt = max(1, round(f * T))`` (half to even), ``output = max(1, T - prompt)`` with
  ``f`` the ``input_fraction`` (``u2`` is unused);
* marginals + coupling: ``input`` and ``output`` CDFs joined by a K x K checkerboard
  copula ``C`` (``C[i, j] = P(input in its i-th K-quantile bin, output in its j-th)``;
  ``K = 1`` is independence).  ``u1`` picks the cell through the cumulative cell
  probabilities in row-major order, and its position inside that cell's probability
  interval gives the input's position inside bin ``i``; ``u2`` gives the output's
  position inside bin ``j``:

      u_in = (i + r) / K,  r = (u1 - S_{c-1}) / C_c;      u_out = (j + u2) / K
      prompt = max(1, ceil(Q_in(u_in))),                   output = max(1, ceil(Q_out(u_out)))

  Marginals are reproduced exactly when the copula's rows and columns each sum to
  1/K; the fitted trace copula (``fleetplan.workload.fit``) keeps the trace's
  dependence between prompt and output length at K-quantile resolution.

``quadrature(n)`` uses ``u1 = (k + 0.5) / n`` (stratified) and ``u2 = frac((k + 1) * g)``
with ``g`` the golden-ratio conjugate (a Kronecker sequence), weights ``1/n``, so the
analytical phase integrates over the same distribution the simulator samples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.workload.burstiness import ArrivalStats
from fleetplan.workload.cdf import LengthCDF, to_tokens
from fleetplan.workload.traces import Trace

__all__ = ["Workload", "DEFAULT_INPUT_FRACTION", "DEFAULT_QUADRATURE_POINTS"]

DEFAULT_INPUT_FRACTION = 0.8
"""Prompt share of a request's total tokens when a CDF gives totals only.

The reference fleet simulator's CDFs (inference-fleet-sim, section 3.3) give only the
total token budget per request, which decides routing; service time also needs the
prompt/output split.  0.8 matches conversational traffic: in the Azure 2023
conversation trace prompts are 85% of all tokens (median per request 78%); in the
coding trace they are 99%.  Override per workload (``input_fraction`` key of a CDF
file) or per run (``input_fraction``)."""

DEFAULT_QUADRATURE_POINTS = 2048
"""Points used by the analytical phase when the caller does not choose."""

_GOLDEN_CONJUGATE = 0.6180339887498949  # (sqrt(5) - 1) / 2, the Kronecker-sequence step


@dataclass(frozen=True, eq=False)
class Workload:
    """Request-length distribution plus provenance (see module docstring).

    ``input_fraction`` is used only when ``input``/``output`` are absent; ``copula`` only
    when they are present (``None`` there means independent marginals).
    """

    name: str
    total: LengthCDF
    input: LengthCDF | None = None
    output: LengthCDF | None = None
    copula: np.ndarray | None = None
    input_fraction: float = DEFAULT_INPUT_FRACTION
    source: str = ""
    license: str = ""
    n_samples: int | None = None
    generated_by: str = ""
    arrival_rate_per_s: float | None = None
    trace: Trace | None = None
    # Burstiness and daily profile of the fitted trace's arrivals (``workloads fit`` saves them)
    arrival_stats: ArrivalStats | None = None

    def __post_init__(self) -> None:
        if (self.input is None) != (self.output is None):
            raise ConfigError(f"workload {self.name}: give both input and output CDFs, or neither")
        if not 0.0 < self.input_fraction < 1.0:
            raise ConfigError(f"workload {self.name}: input_fraction {self.input_fraction} must be in (0, 1)")
        if self.arrival_rate_per_s is not None and not (
            np.isfinite(self.arrival_rate_per_s) and self.arrival_rate_per_s > 0
        ):
            raise ConfigError(
                f"workload {self.name}: arrival_rate_per_s {self.arrival_rate_per_s} must be > 0"
            )
        if self.copula is not None:
            if self.input is None:
                raise ConfigError(f"workload {self.name}: a copula needs input and output CDFs")
            c = np.array(self.copula, dtype=np.float64)
            if c.ndim != 2 or c.shape[0] != c.shape[1] or np.any(c < 0) or not np.isclose(c.sum(), 1.0):
                raise ConfigError(f"workload {self.name}: copula must be K x K, >= 0, summing to 1")
            c = c / c.sum()
            c.setflags(write=False)
            object.__setattr__(self, "copula", c)

    @property
    def has_split(self) -> bool:
        """True when prompt and output have their own CDFs."""
        return self.input is not None

    def _lengths(self, u1: np.ndarray, u2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.input is None or self.output is None:
            total = to_tokens(self.total.quantile(u1))
            prompt = np.maximum(1, np.round(self.input_fraction * total)).astype(np.int64)
            return prompt, np.maximum(1, total - prompt)
        cells = np.ones((1, 1)) if self.copula is None else self.copula
        k = cells.shape[0]
        flat = cells.ravel()
        cum = np.cumsum(flat)
        cum[-1] = 1.0
        cell = np.minimum(np.searchsorted(cum, u1, side="right"), flat.size - 1)
        # skip empty cells (u1 landing exactly on a boundary)
        start = np.where(cell > 0, cum[cell - 1], 0.0)
        width = flat[cell]
        r = np.clip(np.divide(u1 - start, width, out=np.full_like(u1, 0.5), where=width > 0), 0.0, 1.0)
        row, col = np.divmod(cell, k)
        u_in = np.clip((row + r) / k, 0.0, 1.0)
        u_out = np.clip((col + u2) / k, 0.0, 1.0)
        return to_tokens(self.input.quantile(u_in)), to_tokens(self.output.quantile(u_out))

    def lengths_at(self, u1: np.ndarray, u2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(prompt_tokens, output_tokens)`` (int64) at uniforms ``(u1, u2)`` in [0, 1]: the
        mapping of the module docstring, shared by ``sample`` and ``quadrature``."""
        return self._lengths(np.asarray(u1, dtype=np.float64), np.asarray(u2, dtype=np.float64))

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``n`` random requests: ``(prompt_tokens, output_tokens)``, int64, each >= 1."""
        if n < 0:
            raise ConfigError(f"sample size {n} is negative; give n >= 0")
        u1 = rng.random(n)
        u2 = rng.random(n)
        return self._lengths(u1, u2)

    def quadrature(
        self, n_points: int = DEFAULT_QUADRATURE_POINTS
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Deterministic stratified points of the length distribution.

        Returns
        -------
        prompt_tokens, output_tokens, weight : ndarray (float64, length ``n_points``)
            Integer-valued token counts and weights ``1 / n_points`` (summing to 1).
        """
        if int(n_points) != n_points or n_points < 1:
            raise ConfigError(f"quadrature size {n_points!r} must be a positive integer")
        n = int(n_points)
        k = np.arange(n, dtype=np.float64)
        u1 = (k + 0.5) / n
        u2 = np.mod((k + 1.0) * _GOLDEN_CONJUGATE, 1.0)
        prompt, output = self._lengths(u1, u2)
        return prompt.astype(np.float64), output.astype(np.float64), np.full(n, 1.0 / n)
