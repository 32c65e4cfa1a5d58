"""Latency summary statistics shared by the analytic and simulated sides.

Percentiles are empirical order statistics (``numpy`` method ``inverted_cdf``:
the smallest value with at least p% of the sample at or below it), so a request
that never finished (recorded as ``inf``) pushes the percentile to ``inf``
instead of being silently dropped.
"""

from __future__ import annotations

import numpy as np

REPORTED_PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)


def percentile(values: np.ndarray, p: float) -> float:
    """Empirical p-th percentile (0 < p < 100) of ``values``; ``nan`` if empty."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return float("nan")
    return float(np.quantile(arr, p / 100.0, method="inverted_cdf"))


def percentiles(values: np.ndarray, ps: tuple[float, ...] = REPORTED_PERCENTILES) -> dict[float, float]:
    """Several percentiles at once, keyed by p."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return {p: float("nan") for p in ps}
    qs = np.quantile(arr, np.asarray(ps) / 100.0, method="inverted_cdf")
    return {p: float(q) for p, q in zip(ps, qs, strict=True)}


#: Two-sided confidence of Student-t intervals unless a caller says otherwise (verification's pass rule).
DEFAULT_CONFIDENCE = 0.95


def student_t_interval(samples: np.ndarray, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float, float]:
    """Mean and two-sided Student-t confidence interval of independent replications.

    Returns ``(mean, low, high)``; with one replication the interval is
    ``(-inf, inf)`` around the value (no spread can be estimated).  The t quantile is
    ``scipy.special.stdtrit``, the function ``scipy.stats.t.ppf`` evaluates (same values), without
    importing ``scipy.stats`` (half a second).
    """
    from scipy.special import stdtrit

    x = np.asarray(samples, dtype=np.float64)
    mean = float(np.mean(x))
    if x.size < 2 or not np.all(np.isfinite(x)):
        if not np.all(np.isfinite(x)):
            return (float("inf"), float("inf"), float("inf"))
        return (mean, float("-inf"), float("inf"))
    half = float(stdtrit(x.size - 1, 0.5 + confidence / 2.0) * np.std(x, ddof=1) / np.sqrt(x.size))
    return (mean, mean - half, mean + half)
