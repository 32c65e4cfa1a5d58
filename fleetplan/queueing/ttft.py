"""Percentile TTFT of a pool: queueing delay plus the zero-wait TTFT (core paper eq. 5).

    TTFT = W_queue + T_prefill + t_iter                          (eq. 5)

The wait W has the modelled survival P(W > t) = A·exp(-k t) of ``tail.py``
(A = C and k = 2(cμ - λ)/(1 + Cs²) for the default tail model: an atom 1 - C
at zero and an exponential tail).  The zero-wait part T0 = T_prefill + t_iter
is a discrete distribution over the pool's request points (``service.py``).

``TtftModel.QUANTILE`` (default): the exact p-quantile of W + T0 under this
model, with W independent of the request's own length::

    P(W + T0 > x) = Σ_i w_i · P(W > x - T0_i)      (P(W > y) = 1 for y < 0)

With the points sorted, on a segment T0_j <= x < T0_{j+1} this is
R_j + A·exp(-k x)·S_j, where R_j = Σ_{i>j} w_i and S_j = Σ_{i<=j} w_i exp(k T0_i),
so the crossing with 1 - p has the closed form

    x_j = T0_j + [ln A + ln(S_j e^{-k T0_j}) - ln(1 - p - R_j)] / k

and the quantile is the first segment whose crossing lies inside it (S_j is
accumulated in log space; O(points) numpy work, no root finder).  Why: the P99
TTFT is a percentile of a sum, not a sum of percentiles.  Adding W_p to the
p-quantile of T0 over-states it (both tails at once); adding W_p to the *mean*
T0 under-states it whenever prefill varies (long prompts alone can set the P99).
The atom at zero matters: with C < 1 - p most P99 requests do not wait at all
and the P99 is set by their prefill.

``TtftModel.MEAN_PREFILL``: W_p + E[T0].  This is the reference fleet
simulator's analytic TTFT (vllm-project/semantic-router
``src/fleet-sim/fleet_sim/optimizer/base.py``, ``sweep_analytical``: P99 wait +
mean prefill) and is needed to reproduce the paper's Table 1, whose long pools
would otherwise fail a 500 ms P99 on prefill of 30k-60k-token prompts alone.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.names import exact, lookup
from fleetplan.queueing.tail import _quantile_from_params, check_probability_level

__all__ = ["TtftModel", "ttft_model", "ZeroWaitTtft", "ttft_quantile_s", "zero_wait_ttft_quantile_s"]

# k·T above this is treated as "no wait" (the wait is below 1e-300 s anyway).
_MAX_EXPONENT = 1e300
_WEIGHT_SUM_ATOL = 1e-9


class TtftModel(enum.Enum):
    """How the wait percentile and the prefill distribution combine (``PlanSettings.ttft_model``)."""

    QUANTILE = "quantile"
    MEAN_PREFILL = "mean-prefill"


def _resolve(name: str | TtftModel) -> TtftModel:
    return lookup(TtftModel, "TTFT model", name, exact)


def ttft_model(name: str | TtftModel) -> TtftModel:
    """Look up a TTFT model by name (``"quantile"``, ``"mean-prefill"``); unknown names raise."""
    return _resolve(name)


@dataclass(frozen=True, eq=False)
class ZeroWaitTtft:
    """Discrete distribution of the zero-wait TTFT T0 of a pool (seconds, ascending).

    ``weight`` are the point probabilities (sum 1).  The derived arrays are the
    sums the quantile solver needs, computed once per pool.
    """

    ttft_s: np.ndarray
    weight: np.ndarray
    mean_s: float = field(init=False)
    log_weight: np.ndarray = field(init=False, repr=False)
    tail_weight: np.ndarray = field(init=False, repr=False)
    next_ttft_s: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        t = np.array(self.ttft_s, dtype=np.float64)
        w = np.array(self.weight, dtype=np.float64)
        if t.ndim != 1 or t.shape != w.shape or t.size == 0:
            raise ConfigError(
                f"zero-wait TTFT arrays of shapes {t.shape}, {w.shape} must be 1-D, equal and non-empty"
            )
        if not (np.isfinite(t).all() and t[0] >= 0 and not (t[1:] < t[:-1]).any()):
            raise ConfigError("zero-wait TTFT values must be finite, >= 0 seconds and ascending")
        if w.min() < 0 or abs(w.sum() - 1.0) > _WEIGHT_SUM_ATOL:
            raise ConfigError(f"zero-wait TTFT weights must be >= 0 and sum to 1, got sum {w.sum()!r}")
        with np.errstate(divide="ignore"):
            log_w = np.log(w)
        derived = {
            "ttft_s": t,
            "weight": w,
            "mean_s": float(w @ t),
            "log_weight": log_w,
            "tail_weight": tail_weight(w),  # Σ_{i>j} w_i
            "next_ttft_s": np.concatenate([t[1:], [np.inf]]),
        }
        for name, value in derived.items():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
            object.__setattr__(self, name, value)

    def quantile_s(self, p: float) -> float:
        """p-quantile of T0 alone (smallest value with at least p of the mass at or below)."""
        return float(self.ttft_s[np.argmax(self.tail_weight <= 1.0 - p)])


def tail_weight(weight: np.ndarray) -> np.ndarray:
    """Σ_{i>j} w_i for each j of ``weight`` (the mass above point j; 0 at the last)."""
    return np.concatenate([np.cumsum(weight[::-1])[::-1][1:], [0.0]])


def sorted_quantile(values: np.ndarray, weight: np.ndarray, p: float) -> float:
    """p-quantile of the discrete distribution of ascending ``values`` with probabilities ``weight`` (sum 1):
    the smallest value with at least p of the mass at or below, ``ZeroWaitTtft.quantile_s`` without building
    the distribution (the same operations)."""
    return float(values[np.argmax(tail_weight(weight) <= 1.0 - p)])


def _quantile_of_sum(mass: np.ndarray, decay: np.ndarray, dist: ZeroWaitTtft, p: float) -> np.ndarray:
    """p-quantile of W + T0 (P(W > t) = mass·exp(-decay·t)) for each row of (mass, decay).

    Only segments j >= j0, the first with R_j < 1 - p, can hold the crossing (before it
    R_j alone keeps the survival above 1 - p), so S_{j0} is summed once and accumulated
    only over the remaining top points: a P99 touches about 1 % of the points.
    """
    q = 1.0 - p
    t0 = dist.ttft_s
    j0 = int(np.argmax(dist.tail_weight < q))
    stable = decay > 0
    no_wait = (mass <= 0) | (decay * max(float(t0[-1]), 1.0) > _MAX_EXPONENT)
    k = np.where(no_wait | ~stable, 1.0, decay)[:, None]
    # ln S_{j0} - k T0_{j0} = logsumexp_i<=j0 (ln w_i + k (T0_i - T0_{j0})); every exponent <= ln w_i.
    head = dist.log_weight[: j0 + 1] + k * (t0[: j0 + 1] - t0[j0])
    top = head.max(axis=1, keepdims=True)
    log_prefix = top[:, 0] + np.log(np.exp(head - top).sum(axis=1))
    top_t0 = t0[j0:]
    shift = k * top_t0
    terms = dist.log_weight[j0:] + shift
    terms[:, 0] = log_prefix + shift[:, 0]
    log_s = np.logaddexp.accumulate(terms, axis=1) - shift  # ln S_j - k T0_j, j >= j0
    gap = q - dist.tail_weight[j0:]  # > 0 on these segments
    log_mass = np.log(np.where(no_wait, 1.0, mass))[:, None]
    cross = top_t0 + (log_mass + log_s - np.log(gap)) / k
    start = np.maximum(cross, top_t0)
    out = np.where(start < dist.next_ttft_s[j0:], start, np.inf).min(axis=1)
    out = np.where(no_wait, dist.quantile_s(p), out)
    return np.where(stable, out, np.inf)


def ttft_quantile_s(
    wait_mass: np.ndarray,
    wait_decay_per_s: np.ndarray,
    zero_wait: ZeroWaitTtft,
    p: float,
    ttft_model: str | TtftModel = TtftModel.QUANTILE,
) -> np.ndarray:
    """p-quantile of TTFT = W + T0 for each row of wait parameters, seconds.

    Parameters
    ----------
    wait_mass, wait_decay_per_s : array (K,)
        A and k [1/s] of P(W > t) = A·exp(-k t) (``tail.wait_survival_params``);
        k = 0 marks an unstable queue and yields ``inf``.
    zero_wait : ZeroWaitTtft
        Distribution of T0 = T_prefill + t_iter (``ServiceMoments.zero_wait``).
    p : float
        Probability level, 0 < p < 1 (0.99 for P99).
    ttft_model : TtftModel or {"quantile", "mean-prefill"}

    Returns
    -------
    ndarray (K,)
        TTFT p-quantile in seconds.
    """
    model = _resolve(ttft_model)
    p = check_probability_level(p)
    mass = np.atleast_1d(np.asarray(wait_mass, dtype=np.float64))
    decay = np.atleast_1d(np.asarray(wait_decay_per_s, dtype=np.float64))
    return _ttft_quantile(mass, decay, zero_wait, p, model)


def _ttft_quantile(
    mass: np.ndarray, decay: np.ndarray, zero_wait: ZeroWaitTtft, p: float, model: TtftModel
) -> np.ndarray:
    if model is TtftModel.MEAN_PREFILL:
        return _quantile_from_params(mass, decay, p) + zero_wait.mean_s
    return _quantile_of_sum(mass, decay, zero_wait, p)


def zero_wait_ttft_quantile_s(zero_wait: ZeroWaitTtft, p: float, model: TtftModel) -> float:
    """The TTFT p-quantile with no queueing at all: the floor no GPU count can beat."""
    if model is TtftModel.MEAN_PREFILL:
        return zero_wait.mean_s
    return zero_wait.quantile_s(p)
