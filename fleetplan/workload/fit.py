"""Fit a CDF document (``cdfs/*.json`` layout) to a request trace.

Each marginal (prompt, output, total tokens) becomes the empirical CDF of the trace
evaluated at a set of breakpoints ``B``:

    B = {v_min - 1 (if > 0)} U {Q_emp(j / M), j = 1..M} U {split thresholds in [v_min, v_max]}
    F(b) = #{v_r <= b} / n

with ``Q_emp`` the empirical (inverted-CDF) quantile, deduplicated, so every breakpoint
is an integer, the maximum is the last point, the fraction at each common split
threshold is exact, and between breakpoints (about ``1/M`` of the requests apart) the
mass is spread uniformly.  The leading ``v_min - 1`` point keeps the smallest requests
at their observed length instead of spreading them down to 0 tokens.

The dependence between prompt and output length is kept as a K x K checkerboard copula:
with ranks ``R`` (ties broken by file order) and ``U = (R + 0.5) / n``,

    C[i, j] = #{r : floor(K U_in,r) = i and floor(K U_out,r) = j} / n

which ``Workload`` samples from (see ``fleetplan.workload.workload``).
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.workload.burstiness import ARRIVALS_KEY, MIN_ARRIVALS, arrival_stats
from fleetplan.workload.traces import Trace, TraceFormat

__all__ = [
    "fit",
    "empirical_cdf_points",
    "empirical_copula",
    "FIT_QUANTILE_POINTS",
    "COPULA_BINS",
    "SPLIT_THRESHOLDS_TOKENS",
    "KNOWN_TRACE_SOURCES",
]

FIT_QUANTILE_POINTS = 1000
"""M: empirical quantiles per fitted CDF (1/M = 0.1% of requests between breakpoints)."""

COPULA_BINS = 16
"""K: quantile bins per axis of the fitted prompt/output copula."""

SPLIT_THRESHOLDS_TOKENS = (512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 32768, 65536)
"""Common length-router split points; always breakpoints so P(L <= threshold) is exact."""

_FRACTION_DECIMALS = 10  # written precision of cumulative fractions and copula cells

KNOWN_TRACE_SOURCES: dict[TraceFormat, tuple[str, str]] = {
    TraceFormat.AZURE_2023: (
        "Azure LLM inference trace 2023 (CC-BY 4.0); cite Patel et al., Splitwise, ISCA 2024",
        "CC-BY-4.0",
    ),
}
"""(source, license) recorded for public traces recognised by layout; other formats
record the file name and the license given by the caller."""


def empirical_cdf_points(
    values: np.ndarray,
    n_quantiles: int = FIT_QUANTILE_POINTS,
    thresholds: tuple[int, ...] = SPLIT_THRESHOLDS_TOKENS,
) -> list[list[float]]:
    """Breakpoints ``[[tokens, F], ...]`` of the empirical CDF of integer ``values`` >= 1."""
    v = np.sort(np.asarray(values, dtype=np.int64))
    if v.size == 0 or v[0] < 1:
        raise ConfigError("empirical CDF needs at least one value, all >= 1 token")
    if n_quantiles < 1:
        raise ConfigError(f"n_quantiles {n_quantiles} must be >= 1")
    levels = np.arange(1, n_quantiles + 1) / n_quantiles
    qs = np.quantile(v, levels, method="inverted_cdf").astype(np.int64)
    extra = [t for t in thresholds if v[0] <= t <= v[-1]]
    lead = [int(v[0]) - 1] if v[0] > 1 else []
    bps = np.unique(np.concatenate((lead, qs, extra, [v[-1]])).astype(np.int64))
    fractions = np.round(np.searchsorted(v, bps, side="right") / v.size, _FRACTION_DECIMALS)
    fractions[-1] = 1.0
    return [[int(b), float(f)] for b, f in zip(bps, fractions, strict=False)]


def _bins(x: np.ndarray, k: int) -> np.ndarray:
    ranks = np.empty(x.size, dtype=np.int64)
    ranks[np.argsort(x, kind="stable")] = np.arange(x.size)
    return np.minimum((k * (ranks + 0.5) / x.size).astype(np.int64), k - 1)


def empirical_copula(
    prompt_tokens: np.ndarray, output_tokens: np.ndarray, bins: int = COPULA_BINS
) -> np.ndarray:
    """K x K checkerboard copula of (prompt, output) ranks; cells sum to 1."""
    if bins < 1:
        raise ConfigError(f"copula bins {bins} must be >= 1")
    i = _bins(np.asarray(prompt_tokens), bins)
    j = _bins(np.asarray(output_tokens), bins)
    cells = np.zeros((bins, bins))
    np.add.at(cells, (i, j), 1.0)
    return cells / i.size


def _version() -> str:
    try:
        return metadata.version("fleetplan")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def fit(
    trace: Trace,
    *,
    command: str,
    license: str | None = None,
    source: str | None = None,
    n_quantiles: int = FIT_QUANTILE_POINTS,
    copula_bins: int = COPULA_BINS,
) -> dict[str, Any]:
    """CDF document (dict, ready for ``write_cdf_json``) fitted to ``trace``.

    Parameters
    ----------
    trace : Trace
        The request trace.
    command : str
        The command that produced the file (recorded as ``generated_by``).
    license, source : str, optional
        Override the license / source text.  Public traces recognised by layout
        (``KNOWN_TRACE_SOURCES``) have their own; otherwise the source is the file name
        and the license ``"unspecified"``.
    n_quantiles, copula_bins : int
        ``M`` and ``K`` of the module docstring.
    """
    if trace.format in KNOWN_TRACE_SOURCES:
        known_source, known_license = KNOWN_TRACE_SOURCES[trace.format]
    else:
        known_source, known_license = f"request trace {trace.source}", "unspecified"
    copula = empirical_copula(trace.prompt_tokens, trace.output_tokens, copula_bins)
    rate = trace.arrival_rate_per_s
    return {
        "source": source if source is not None else known_source,
        "license": license if license is not None else known_license,
        "n_samples": trace.n_requests,
        "generated_by": command,
        "arrival_rate_per_s": None if rate is None else float(rate),
        "provenance": {
            "trace_file": trace.source,
            "trace_format": trace.format.value,
            "n_rows": trace.n_requests,
            "n_zero_clamped": trace.n_zero_clamped,
            "duration_s": trace.duration_s,
            "method": f"empirical CDF at {n_quantiles} quantiles plus split thresholds; "
            f"{copula_bins}x{copula_bins} rank copula of (input, output)",
            "fleetplan_version": _version(),
        },
        "cdf": empirical_cdf_points(trace.total_tokens, n_quantiles),
        "input_cdf": empirical_cdf_points(trace.prompt_tokens, n_quantiles),
        "output_cdf": empirical_cdf_points(trace.output_tokens, n_quantiles),
        "copula": np.round(copula, _FRACTION_DECIMALS).tolist(),
        **({} if rate is None or trace.n_requests < MIN_ARRIVALS
           else {ARRIVALS_KEY: arrival_stats(trace.arrival_s).to_dict()}),
    }
