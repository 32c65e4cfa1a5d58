"""Percentiles and mean of the M/G/c queueing delay (two-moment approximations).

Legend: c servers, λ arrival rate (1/s), μ service rate per server (1/s),
ρ = λ/(cμ), C = C(c, λ/μ) the Erlang-C wait probability (``erlang.py``),
Cs² = Var[S]/E[S]² the squared coefficient of variation of service time,
p the probability level (0.99 for P99).

Both tail models describe the wait W by a survival function of one shape,

    P(W > t) = A · exp(-k t),  t >= 0,

whose p-quantile is ``W_p = ln(A / (1-p)) / k`` when A > 1-p and 0 otherwise.

``TailModel.EXP`` (default)  A = C,  k = θ = 2(cμ - λ) / (1 + Cs²)::

    W_p = ln(C / (1-p)) · (1 + Cs²) / (2 (cμ - λ)),   0 when C <= 1-p.

  An atom 1 - C at zero plus an exponential tail whose rate is the M/M/c rate
  cμ - λ stretched by the two-moment factor (1 + Cs²)/2.  Exact for M/M/c
  (Cs² = 1), where P(W > t) = C·exp(-(cμ-λ)t).  The reference simulator
  (vllm-project/semantic-router ``src/fleet-sim/fleet_sim/optimizer/analytical.py``,
  ``p99_wait``) uses this form for P99.

``TailModel.PAPER``  A = 1,  k = θ / C  (an exponential with the mean wait)::

    W_p = C / (cμ (1-ρ)) · (1 + Cs²)/2 · ln(1/(1-p))          (core paper eq. 2)

  It is E[W] · ln(1/(1-p)).  At Cs² = 1 its ratio to the exact quantile is
  C·ln(1/(1-p)) / ln(C/(1-p)), below 1 whenever 1-p < C < 1 (0.59 at
  C = 0.5, p = 0.99; 0.25 at c = 64, ρ = 0.85), so it under-sizes; against
  simulation it was 22-80 % low for P99 at Cs² in {0, 1, 4, 16} (project
  PERF_NOTES).  Selectable for reproducing the paper; ``EXP`` is the default
  because it is exact for M/M/c and was within ±15 % of simulation for
  Cs² <= 1 (it errs for heavy-tailed service, where the simulator decides).

Mean wait (both models, the two-moment M/G/c correction of the M/M/c mean)::

    E[W] = C / (cμ - λ) · (1 + Cs²) / 2.

For ρ >= 1 every wait is ``inf``, never a finite number.
"""

from __future__ import annotations

import enum

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.names import exact, lookup
from fleetplan.queueing.erlang import _as_output, _erlang_c_raw, _validated

__all__ = ["TailModel", "tail_model", "wait_quantile_s", "mean_wait_s", "wait_survival_params"]


class TailModel(enum.Enum):
    """How the wait percentile is approximated (``exp`` or ``paper``)."""

    EXP = "exp"
    PAPER = "paper"


def _resolve(name: str | TailModel) -> TailModel:
    return lookup(TailModel, "tail model", name, exact)


def tail_model(name: str | TailModel) -> TailModel:
    """Look up a tail model by its CLI name (``"exp"``, ``"paper"``); unknown names raise."""
    return _resolve(name)


def check_probability_level(p: float) -> float:
    """Validate a probability level 0 < p < 1 (0.99 for P99); returns it as a float."""
    if not (isinstance(p, (int, float, np.floating)) and 0.0 < p < 1.0):
        raise ConfigError(
            f"probability level p={p!r} is out of range: it must satisfy 0 < p < 1; "
            "pass 0.99 for P99 (not 99)"
        )
    return float(p)


def _first_bad(values: np.ndarray, ok: np.ndarray) -> float:
    return float(values[~ok].flat[0])


def _prepare(
    c: np.ndarray | int, lam: np.ndarray | float, mu: np.ndarray | float, cs2: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    lam_arr = np.asarray(lam, dtype=np.float64)
    mu_arr = np.asarray(mu, dtype=np.float64)
    cs2_arr = np.asarray(cs2, dtype=np.float64)
    ok = np.isfinite(lam_arr) & (lam_arr >= 0)
    if not ok.all():
        raise ConfigError(
            f"arrival rate λ={_first_bad(lam_arr, ok)} is invalid: it must be finite and >= 0 per second"
        )
    ok = np.isfinite(mu_arr) & (mu_arr > 0)
    if not ok.all():
        raise ConfigError(
            f"service rate μ={_first_bad(mu_arr, ok)} is invalid: it must be finite and > 0 per second; "
            "check the mean service time"
        )
    ok = np.isfinite(cs2_arr) & (cs2_arr >= 0)
    if not ok.all():
        raise ConfigError(f"service-time Cs²={_first_bad(cs2_arr, ok)} is invalid: it must be finite and >= 0")
    c_arr, _ = _validated(c, 0.0)
    return tuple(np.broadcast_arrays(c_arr, lam_arr, mu_arr, cs2_arr))  # type: ignore[return-value]


def _survival_params(
    c: np.ndarray, lam: np.ndarray | float, mu: np.ndarray | float, cs2: np.ndarray | float, model: TailModel
) -> tuple[np.ndarray, np.ndarray]:
    """(A, k) of P(W > t) = A exp(-k t) on validated arrays; k = 0 where ρ >= 1, A = 0 at λ = 0."""
    wait_prob = _erlang_c_raw(c, lam / mu)
    slack = c * mu - lam
    theta = np.where(slack > 0, 2.0 * slack / (1.0 + cs2), 0.0)
    if model is TailModel.EXP:
        return wait_prob, theta
    waits = wait_prob > 0
    with np.errstate(over="ignore"):  # θ / C for a denormal C is +inf: a wait of zero
        decay = np.divide(theta, wait_prob, out=np.full(np.shape(theta), np.inf), where=waits)
    return waits.astype(np.float64), np.where(slack > 0, decay, 0.0)


def _quantile_from_params(mass: np.ndarray, decay: np.ndarray, p: float) -> np.ndarray:
    """p-quantile of P(W > t) = mass·exp(-decay·t); inf where decay = 0 (unstable)."""
    q = 1.0 - p
    waits = (mass > q) & (decay > 0)
    log_ratio = np.log(np.where(waits, mass / q, 1.0))
    w = np.divide(log_ratio, decay, out=np.zeros(np.shape(log_ratio)), where=waits)
    return np.where(decay > 0, w, np.inf)


def wait_survival_params(
    c: np.ndarray | int,
    lam: np.ndarray | float,
    mu: np.ndarray | float,
    cs2: np.ndarray | float,
    tail_model: str | TailModel = TailModel.EXP,
) -> tuple[np.ndarray, np.ndarray]:
    """Parameters ``(A, k)`` of the modelled wait survival P(W > t) = A·exp(-k t).

    ``A`` is dimensionless, ``k`` in 1/s.  ``k = 0`` marks an unstable queue
    (ρ >= 1); ``A = 0`` means nobody waits (λ = 0).  Inputs broadcast together.
    """
    model = _resolve(tail_model)
    return _survival_params(*_prepare(c, lam, mu, cs2), model)


def wait_quantile_s(
    c: np.ndarray | int,
    lam: np.ndarray | float,
    mu: np.ndarray | float,
    cs2: np.ndarray | float,
    p: float = 0.99,
    tail_model: str | TailModel = TailModel.EXP,
) -> float | np.ndarray:
    """p-quantile of the M/G/c queueing delay, seconds.

    Parameters
    ----------
    c : int or array
        Servers (>= 1).
    lam : float or array
        Arrival rate λ, requests per second (>= 0).
    mu : float or array
        Service rate per server μ = 1/E[S], per second (> 0).
    cs2 : float or array
        Squared coefficient of variation of the service time (>= 0).
    p : float
        Probability level, 0 < p < 1 (0.99 for P99).
    tail_model : TailModel or {"exp", "paper"}
        See the module docstring; ``"exp"`` is the default and exact for M/M/c.

    Returns
    -------
    float or ndarray
        W_p in seconds; 0 when few enough arrivals wait, ``inf`` where ρ >= 1.
    """
    p = check_probability_level(p)
    mass, decay = wait_survival_params(c, lam, mu, cs2, tail_model)
    return _as_output(_quantile_from_params(mass, decay, p), c, lam, mu, cs2)


def mean_wait_s(
    c: np.ndarray | int,
    lam: np.ndarray | float,
    mu: np.ndarray | float,
    cs2: np.ndarray | float,
) -> float | np.ndarray:
    """Two-moment M/G/c mean queueing delay E[W] = C/(cμ - λ)·(1 + Cs²)/2, seconds.

    Same parameters as :func:`wait_quantile_s`; ``inf`` where ρ >= 1, 0 at λ = 0.
    """
    c_arr, lam_arr, mu_arr, cs2_arr = _prepare(c, lam, mu, cs2)
    wait_prob = _erlang_c_raw(c_arr, lam_arr / mu_arr)
    slack = c_arr * mu_arr - lam_arr
    stable = slack > 0
    mean = np.divide(
        wait_prob * (1.0 + cs2_arr) / 2.0, slack, out=np.full(np.shape(slack), np.inf), where=stable
    )
    return _as_output(mean, c, lam, mu, cs2)
