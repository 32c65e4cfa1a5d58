"""Request-length distributions given as a piecewise-linear CDF.

A ``LengthCDF`` is a list of breakpoints ``(t_i, F_i)``: ``t_i`` tokens (strictly
increasing, > 0) and ``F_i = P(L <= t_i)`` (non-decreasing in [0, 1], last == 1), the
format used by the reference fleet simulator's bundled CDFs (inference-fleet-sim,
section 3.3).  An origin ``(0, 0)`` is always implied, so between knots
``x_0 = 0 < x_1 < ... < x_m`` the distribution is uniform within each bin:

    F(x) = F_{i-1} + (F_i - F_{i-1}) * (x - x_{i-1}) / (x_i - x_{i-1}),   x_{i-1} <= x <= x_i
    Q(u) = inf{x : F(x) >= u}                        (quantile; bins of zero mass are skipped)
    E[L^k] = sum_i p_i * (x_i^(k+1) - x_{i-1}^(k+1)) / ((k + 1) * (x_i - x_{i-1})),  p_i = F_i - F_{i-1}

Conditioning on a pool's length range ``lo < L <= hi`` (a length router's split) gives
again a piecewise-linear CDF: ``F_(lo,hi](x) = (F(x) - F(lo)) / (F(hi) - F(lo))``.

Integer token counts are drawn by inverse transform, ``T = max(1, ceil(Q(U)))``, so
``P(T <= k) = F(k)`` for every integer ``k >= 1`` (the routing probabilities are exact)
and ``E[X] <= E[T] < E[X] + 1``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fleetplan.errors import ConfigError

__all__ = ["LengthCDF", "check_points", "to_tokens"]

# Quantiles are rounded to this many decimals before ``ceil`` so that a float error
# of 1e-12 never pushes a 4096-token request to 4097 (and across a split threshold).
_TOKEN_ROUND_DECIMALS = 6


def check_points(tokens: np.ndarray, fractions: np.ndarray) -> tuple[str, str, str] | None:
    """First rule broken by a breakpoint list, or ``None``.

    Returns ``(where, problem, fix)`` with ``where`` like ``"point 3"`` (1-based), so file
    readers can name the file and library callers raise ``ConfigError``.
    """
    if tokens.ndim != 1 or tokens.shape != fractions.shape:
        return ("points", "tokens and fractions differ in shape", "give one fraction per breakpoint")
    if tokens.size == 0:
        return ("points", "the CDF is empty", "give at least 2 [tokens, cumulative_fraction] points")
    if tokens.size < 2:
        return ("points", f"the CDF has {tokens.size} point", "give at least 2 points")
    for i in range(tokens.size):
        t, f = float(tokens[i]), float(fractions[i])
        where = f"point {i + 1}"
        if not np.isfinite(t) or t <= 0:
            return (where, f"tokens {t!r} is not a finite number > 0", "token breakpoints must be positive")
        if i and t <= float(tokens[i - 1]):
            return (
                where,
                f"tokens {t!r} <= previous breakpoint {float(tokens[i - 1])!r}",
                "token breakpoints must be strictly increasing",
            )
        if not (np.isfinite(f) and 0.0 <= f <= 1.0):
            return (where, f"fraction {f!r} is outside [0, 1]", "cumulative fractions must lie in [0, 1]")
        if i and f < float(fractions[i - 1]):
            return (
                where,
                f"fraction {f!r} < previous fraction {float(fractions[i - 1])!r}",
                "cumulative fractions must be non-decreasing",
            )
    if float(fractions[-1]) != 1.0:
        return (
            f"point {tokens.size}",
            f"last fraction is {float(fractions[-1])!r}, not 1",
            "the CDF must end at exactly 1 (cover every request)",
        )
    return None


def to_tokens(x: np.ndarray) -> np.ndarray:
    """Continuous lengths to integer tokens ``max(1, ceil(x))`` (int64)."""
    rounded = np.round(np.asarray(x, dtype=np.float64), _TOKEN_ROUND_DECIMALS)
    return np.maximum(1, np.ceil(rounded)).astype(np.int64)


@dataclass(frozen=True, eq=False)
class LengthCDF:
    """Piecewise-linear CDF of a token length (see module docstring).

    Parameters
    ----------
    tokens : array_like
        Breakpoints in tokens, strictly increasing, > 0 (at least 2).
    fractions : array_like
        ``P(L <= tokens[i])``, non-decreasing in [0, 1], last exactly 1.
    """

    tokens: np.ndarray
    fractions: np.ndarray
    _xs: np.ndarray = field(init=False, repr=False)
    _ps: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        tokens = np.array(self.tokens, dtype=np.float64)
        fractions = np.array(self.fractions, dtype=np.float64)
        problem = check_points(tokens, fractions)
        if problem is not None:
            where, what, fix = problem
            raise ConfigError(f"length CDF {where}: {what}; {fix}")
        xs = np.concatenate(([0.0], tokens))
        ps = np.concatenate(([0.0], fractions))
        for arr in (tokens, fractions, xs, ps):
            arr.setflags(write=False)
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "fractions", fractions)
        object.__setattr__(self, "_xs", xs)
        object.__setattr__(self, "_ps", ps)

    # ------------------------------------------------------------------ basics
    @property
    def max_tokens(self) -> float:
        """Largest length with positive probability is at most this (last breakpoint)."""
        return float(self.tokens[-1])

    @property
    def min_tokens(self) -> float:
        """Lower end of the support: the last knot (origin included) where F == 0."""
        return float(self._xs[int(np.searchsorted(self._ps, 0.0, side="right")) - 1])

    def points(self) -> list[list[float]]:
        """Breakpoints as ``[[tokens, fraction], ...]`` (the JSON list format)."""
        return [[float(t), float(f)] for t, f in zip(self.tokens, self.fractions, strict=False)]

    def cdf(self, x_tokens: np.ndarray | float) -> np.ndarray:
        """``F(x) = P(L <= x)``; 0 below the origin and 1 beyond the last breakpoint."""
        return np.interp(np.asarray(x_tokens, dtype=np.float64), self._xs, self._ps, left=0.0, right=1.0)

    def prob(self, lo_tokens: float, hi_tokens: float = np.inf) -> float:
        """``P(lo < L <= hi)`` (``hi`` may be ``inf``)."""
        if not hi_tokens >= lo_tokens:
            raise ConfigError(f"length range ({lo_tokens}, {hi_tokens}] is empty; give lo <= hi")
        return float(self.cdf(hi_tokens) - self.cdf(lo_tokens))

    def quantile(self, u: np.ndarray | float) -> np.ndarray:
        """Vectorised inverse ``Q(u) = inf{x : F(x) >= u}`` for ``u`` in [0, 1] (tokens, float)."""
        u = np.asarray(u, dtype=np.float64)
        if np.any(~(u >= 0.0) | ~(u <= 1.0)):
            raise ConfigError("quantile levels must lie in [0, 1]; rescale the probabilities")
        xs, ps = self._xs, self._ps
        i = np.searchsorted(ps, u, side="left")
        i = np.clip(i, 1, ps.size - 1)
        lo_p, hi_p = ps[i - 1], ps[i]
        width = hi_p - lo_p
        frac = np.divide(u - lo_p, width, out=np.zeros_like(u), where=width > 0)
        out = xs[i - 1] + np.clip(frac, 0.0, 1.0) * (xs[i] - xs[i - 1])
        return np.where(u <= 0.0, self.min_tokens, out)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` integer lengths ``max(1, ceil(Q(U)))`` by inverse transform (int64 tokens >= 1)."""
        if n < 0:
            raise ConfigError(f"sample size {n} is negative; give n >= 0")
        return to_tokens(self.quantile(rng.random(n)))

    # ----------------------------------------------------------------- moments
    def moment(self, k: int) -> float:
        """Exact ``E[L^k]`` (tokens^k) of the uniform-within-bin distribution, ``k >= 1``."""
        if int(k) != k or k < 1:
            raise ConfigError(f"moment order {k!r} is not a positive integer; give k = 1, 2, ...")
        k = int(k)
        a, b = self._xs[:-1], self._xs[1:]
        p = np.diff(self._ps)
        per_bin = (b ** (k + 1) - a ** (k + 1)) / ((k + 1) * (b - a))
        return float(np.sum(p * per_bin))

    def mean(self) -> float:
        """``E[L]`` in tokens."""
        return self.moment(1)

    def std(self) -> float:
        """Standard deviation of ``L`` in tokens."""
        return float(np.sqrt(max(self.moment(2) - self.mean() ** 2, 0.0)))

    # --------------------------------------------------------------- slicing
    def restrict(self, lo_tokens: float, hi_tokens: float = np.inf) -> LengthCDF:
        """Conditional distribution of ``L`` given ``lo < L <= hi`` (a pool's length range).

        Raises ``ConfigError`` when the range holds no probability mass.
        """
        mass = self.prob(lo_tokens, hi_tokens)
        if not mass > 0.0:
            raise ConfigError(
                f"length range ({lo_tokens:g}, {hi_tokens:g}] holds no requests of this workload; "
                "choose a range inside the CDF's support"
            )
        lo = max(float(lo_tokens), 0.0)
        hi = min(float(hi_tokens), self.max_tokens)
        inner = self._xs[(self._xs > lo) & (self._xs < hi)]
        knots = np.concatenate(([lo] if lo > 0 else [], inner, [hi]))
        if knots.size < 2:  # one linear segment from the origin: split it at its midpoint (exact)
            knots = np.array([hi / 2.0, hi])
        fractions = np.clip((self.cdf(knots) - self.cdf(lo)) / mass, 0.0, 1.0)
        fractions = np.maximum.accumulate(fractions)
        fractions[-1] = 1.0
        return LengthCDF(knots, fractions)
