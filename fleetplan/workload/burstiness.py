"""Burstiness and daily profile of an arrival stream (times in seconds).

Index of dispersion of counts (Cox & Lewis 1966, *The Statistical Analysis of Series of Events*,
§4.5): cut the stream into consecutive windows of length T and count arrivals N_k per window;

    I(T) = Var[N] / E[N].

I(T) = 1 for a Poisson process at every T; for a renewal process with inter-arrival CV c,
I(T) -> c² as T grows (Cox & Lewis §4.5), so I(T) at the time scale the queue integrates over is
the arrival Ca² a two-moment queueing approximation needs (Whitt 1983, "The Queueing Network
Analyzer", BSTJ 62(9), §3: the asymptotic method).  The CV of the inter-arrival gaps themselves
(``interarrival_cv``) is the renewal special case.

A trace replayed at another mean rate λ is the same stream on a rescaled clock
(``workload.arrivals.replay_arrivals_s``: t' = t λ_trace / λ), so a window T' on the replay's clock
is a window T' λ / λ_trace of the trace's own clock: ``replay_ca2``.

Daily profile: the mean rate in each of the 24 hours of the day, counting hours from the trace's
first arrival (traces keep no time zone; a trace shorter than a day leaves later hours empty and
they are reported as ``nan``).  Averaged over however many days the trace covers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError, DataFormatError
from fleetplan.workload.traces import Trace

__all__ = ["ArrivalStats", "DEFAULT_WINDOWS_S", "DEFAULT_CA2_WINDOW_S", "arrival_stats", "index_of_dispersion",
           "interarrival_cv", "replay_ca2", "ARRIVALS_KEY", "MIN_ARRIVALS"]

#: Time scales reported by ``workloads fit`` (seconds).
DEFAULT_WINDOWS_S = (1.0, 10.0, 60.0)
#: Time scale of the replay's Ca² on the replay clock (seconds): about a P99 TTFT SLO, the span over
#: which a queue meeting a sub-second SLO integrates its arrivals.
DEFAULT_CA2_WINDOW_S = 1.0
#: Fewest whole windows for a dispersion estimate.
MIN_WINDOWS = 8
S_PER_HOUR = 3600.0
HOURS_PER_DAY = 24
#: Fewest arrivals with a gaps' CV (two gaps).
MIN_ARRIVALS = 3
#: Key of the stats in a CDF JSON document (kept as metadata by ``cdf_io``).
ARRIVALS_KEY = "arrivals"


def _times(arrival_s: np.ndarray) -> np.ndarray:
    t = np.asarray(arrival_s, dtype=np.float64)
    if t.ndim != 1 or t.size < MIN_ARRIVALS or not np.all(np.isfinite(t)) or np.any(np.diff(t) < 0):
        raise ConfigError(f"arrival times must be at least {MIN_ARRIVALS} finite, non-decreasing seconds")
    return t


def index_of_dispersion(arrival_s: np.ndarray, window_s: float) -> float | None:
    """I(T) of the counts in consecutive windows of ``window_s`` (None: fewer than ``MIN_WINDOWS``)."""
    if not (math.isfinite(window_s) and window_s > 0):
        raise ConfigError(f"window {window_s!r} s is invalid: give a time scale > 0 s, e.g. 10")
    t = _times(arrival_s)
    t = t - t[0]
    n_windows = int(t[-1] // window_s)
    if n_windows < MIN_WINDOWS:
        return None
    counts = np.bincount((t[t < n_windows * window_s] // window_s).astype(np.int64), minlength=n_windows)
    mean = counts.mean()
    return float(counts.var(ddof=1) / mean) if mean > 0 else None


def interarrival_cv(arrival_s: np.ndarray) -> float:
    """CV of the gaps between consecutive arrivals."""
    gaps = np.diff(_times(arrival_s))
    m = gaps.mean()
    if m <= 0:
        raise ConfigError("arrival times are all equal: the stream has no inter-arrival gaps")
    return float(gaps.std(ddof=1) / m)


def hourly_rates_per_s(arrival_s: np.ndarray) -> tuple[float, ...]:
    """Mean rate (req/s) in each hour of the day since the first arrival (nan where never covered)."""
    t = _times(arrival_s)
    t = t - t[0]
    hour = (t // S_PER_HOUR).astype(np.int64)
    counts = np.bincount(hour % HOURS_PER_DAY, minlength=HOURS_PER_DAY).astype(np.float64)
    # seconds of each hour-of-day slot the trace covers
    covered = np.zeros(HOURS_PER_DAY)
    span = t[-1]
    for h in range(int(span // S_PER_HOUR) + 1):
        covered[h % HOURS_PER_DAY] += min(S_PER_HOUR, span - h * S_PER_HOUR)
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(covered > 0, counts / np.where(covered > 0, covered, 1.0), np.nan)
    return tuple(float(r) for r in rates)


@dataclass(frozen=True)
class ArrivalStats:
    """Burstiness and daily profile of a trace's arrivals.

    ``dispersion``: (window seconds, I(T) or None when the trace is too short) per time scale;
    ``hourly_rates_per_s``: 24 mean rates, hour 0 starting at the first arrival (nan: not covered).
    """

    interarrival_cv: float
    dispersion: tuple[tuple[float, float | None], ...]
    hourly_rates_per_s: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.hourly_rates_per_s) != HOURS_PER_DAY:
            raise ConfigError(f"a daily profile has {HOURS_PER_DAY} hourly rates, got {len(self.hourly_rates_per_s)}")

    def to_dict(self) -> dict:
        return {
            "interarrival_cv": self.interarrival_cv,
            "index_of_dispersion": [{"window_s": w, "value": v} for w, v in self.dispersion],
            "hourly_rates_per_s": [None if math.isnan(r) else r for r in self.hourly_rates_per_s],
            "method": "index of dispersion of counts Var[N]/E[N] in consecutive windows (Cox & Lewis 1966 §4.5); "
                      "hours counted from the trace's first arrival",
        }

    @classmethod
    def from_dict(cls, obj: object, path: str) -> ArrivalStats:
        """Read back ``to_dict`` output (``path`` names the file in errors)."""
        try:
            disp = tuple((float(d["window_s"]), None if d["value"] is None else float(d["value"]))
                         for d in obj["index_of_dispersion"])
            hourly = tuple(float("nan") if r is None else float(r) for r in obj["hourly_rates_per_s"])
            return cls(float(obj["interarrival_cv"]), disp, hourly)
        except (KeyError, TypeError, ValueError, ConfigError) as exc:
            raise DataFormatError(f"{path}: {ARRIVALS_KEY!r} is malformed ({exc}); refit the trace with "
                                  "`fleetplan workloads fit`") from exc


def arrival_stats(arrival_s: np.ndarray, windows_s: tuple[float, ...] = DEFAULT_WINDOWS_S) -> ArrivalStats:
    """Inter-arrival CV, I(T) at each of ``windows_s`` and the 24 hourly rates of a stream."""
    return ArrivalStats(interarrival_cv(arrival_s), tuple((float(w), index_of_dispersion(arrival_s, w))
                                                          for w in windows_s), hourly_rates_per_s(arrival_s))


def replay_ca2(trace: Trace, rate_per_s: float, window_s: float = DEFAULT_CA2_WINDOW_S) -> float:
    """Arrival Ca² of ``trace`` replayed at mean rate ``rate_per_s``: I(T) at ``window_s`` of the
    replay's clock (see module docstring); the gaps' CV² when the trace is too short for that window."""
    own = trace.arrival_rate_per_s
    if own is None:
        raise ConfigError(f"trace {trace.source} has no arrival rate (all arrivals simultaneous); it cannot be "
                          "replayed at a rate: use arrival poisson or gamma")
    if not (math.isfinite(rate_per_s) and rate_per_s > 0):
        raise ConfigError(f"arrival rate {rate_per_s!r} req/s is invalid: give a rate > 0")
    idc = index_of_dispersion(trace.arrival_s, window_s * rate_per_s / own)
    return idc if idc is not None else interarrival_cv(trace.arrival_s) ** 2
