"""Arrival processes (times in seconds, first arrival after one inter-arrival gap).

* Poisson at rate λ: gaps ``X ~ Exp(λ)``, ``E[X] = 1/λ``, CV 1.
* Gamma renewal with burstiness ``cv``: gaps ``X ~ Gamma(shape = 1/cv², scale = cv²/λ)``,
  so ``E[X] = 1/λ`` and ``CV[X] = cv``; ``cv = 1`` is the Poisson process, ``cv > 1``
  is burstier, ``cv < 1`` smoother (a standard model of bursty LLM traffic, e.g.
  BurstGPT, Wang et al. 2024).
* Replay of a trace's own timestamps, optionally time-scaled to a target mean rate:
  ``t'_r = t_r * λ_trace / λ`` (keeps the burst structure, changes only the clock).

Arrival times are ``t_r = X_1 + ... + X_r``; the process starts empty at t = 0.
"""

from __future__ import annotations

import math

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.workload.traces import Trace

__all__ = ["poisson_arrivals_s", "gamma_arrivals_s", "replay_arrivals_s"]


def _check_rate(rate_per_s: float) -> float:
    r = float(rate_per_s)
    if not (math.isfinite(r) and r > 0):
        raise ConfigError(f"arrival rate {rate_per_s!r} req/s must be a finite number > 0; give e.g. 10")
    return r


def _check_n(n: int) -> int:
    if int(n) != n or n < 0:
        raise ConfigError(f"number of arrivals {n!r} must be an integer >= 0")
    return int(n)


def poisson_arrivals_s(rng: np.random.Generator, rate_per_s: float, n: int) -> np.ndarray:
    """``n`` Poisson arrival times (seconds, increasing) at ``rate_per_s``."""
    rate = _check_rate(rate_per_s)
    return np.cumsum(rng.exponential(1.0 / rate, _check_n(n)))


def gamma_arrivals_s(rng: np.random.Generator, rate_per_s: float, cv: float, n: int) -> np.ndarray:
    """``n`` arrival times of a Gamma renewal process with mean rate ``rate_per_s`` and gap CV ``cv``."""
    rate = _check_rate(rate_per_s)
    c = float(cv)
    if not (math.isfinite(c) and c > 0):
        raise ConfigError(f"burstiness cv {cv!r} must be a finite number > 0 (1 = Poisson)")
    shape = 1.0 / (c * c)
    return np.cumsum(rng.gamma(shape, 1.0 / (rate * shape), _check_n(n)))


def replay_arrivals_s(trace: Trace, rate_per_s: float | None = None) -> np.ndarray:
    """The trace's arrival times (from 0), or rescaled to mean rate ``rate_per_s``."""
    if rate_per_s is None:
        return trace.arrival_s.copy()
    rate = _check_rate(rate_per_s)
    own = trace.arrival_rate_per_s
    if own is None:
        raise ConfigError(
            f"trace {trace.source} has no arrival rate (all arrivals simultaneous); "
            "replay it without a target rate"
        )
    return trace.arrival_s * (own / rate)
