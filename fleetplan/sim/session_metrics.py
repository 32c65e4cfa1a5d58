"""Session metrics from the per-request (per-round) result table.

Definitions (seconds; rows of ``SessionTable`` map one to one onto the simulator's request
rows, ``fleetplan.sim.sessions``):

* Release of round k: the session's arrival for k = 0, else ``done(k-1) + delay(k)`` (the
  contract's rule, docs/runtime_features_contract.md "Sessions"); never if k-1 never finished.
* A session is finished when every round finished.  Unfinished sessions count as infinite
  latency (their aTTFT, aTPOT and burst makespan are ``inf``), so they push percentiles to
  ``inf`` instead of being dropped (``fleetplan.metrics``).  ``n_rejected`` counts the measured
  sessions with a rejected round (its context does not fit any pool); its later rounds are never
  released.
* aTTFT (answer-visible TTFT, Frontier paper §6.3 and appendix B.1): session arrival -> first
  token of the final round (the end of the answer round's prefill).
* aTPOT: the final round's TPOT, ``(done - first token) / (output - 1)`` (NaN, left out, for a
  one-token answer).
* Per-round TTFT: release of the round -> its first token, grouped by round number (1-based).
* Hidden planning throughput (the paper's "hidden planning-token rate over the fixed trace"):
  tokens of finished non-final rounds of measured sessions, new prompt tokens (the context
  reused from earlier rounds excluded) plus output tokens, divided by the measured span, first
  measured session arrival -> last completion of a measured round.  The output-only rate is
  reported beside it.
* RL bursts (sessions with ``burst >= 0``, all trajectories, no warm-up): makespan = last
  trajectory completion - burst release; ``t90`` = time from release until ``ceil(0.9 n)`` of
  the ``n`` trajectories finished; tail share = ``(makespan - t90) / makespan``, the fraction
  of the makespan spent after 90 % of the trajectories finished (NaN when the makespan is
  ``inf`` or 0).
* Warm-up: the first ``floor(warmup_fraction * n_sessions)`` sessions (by arrival) are left out
  of every statistic except the bursts'.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from fleetplan.sim.result import LatencyStats
from fleetplan.workload.session_table import SessionTable

__all__ = [
    "BurstStats", "ROUND_CSV_COLUMNS", "RoundTtft", "SessionMetrics", "TAIL_QUANTILE", "release_times", "round_frame",
    "session_metrics",
]

TAIL_QUANTILE = 0.9  # the tail of a burst starts when this share of its trajectories finished
ROUND_CSV_COLUMNS = (
    "request_id", "session", "round", "is_final", "template", "burst", "session_arrival_s", "delay_s",
    "prompt_tokens", "new_prompt_tokens", "output_tokens", "release_s", "first_token_s", "done_s", "round_ttft_s",
    "status",
)


@dataclass(frozen=True)
class RoundTtft:
    """TTFT (release -> first token) of round ``round_number`` (1-based) over measured sessions."""

    round_number: int
    ttft: LatencyStats


@dataclass(frozen=True)
class BurstStats:
    """One RL burst (see the module docstring)."""

    burst: int
    n_trajectories: int
    n_finished: int
    release_s: float
    makespan_s: float
    t90_s: float
    tail_share: float


@dataclass(frozen=True)
class SessionMetrics:
    """Session-level statistics of one run (definitions in the module docstring)."""

    n_sessions: int
    n_warmup_sessions: int
    n_measured: int
    n_finished: int
    n_rejected: int
    attft: LatencyStats
    atpot: LatencyStats
    round_ttft: tuple[RoundTtft, ...]
    hidden_prompt_tokens: int
    hidden_output_tokens: int
    hidden_span_s: float
    hidden_tokens_per_s: float
    hidden_output_tokens_per_s: float
    bursts: tuple[BurstStats, ...]

    def to_json_dict(self) -> dict:
        """Plain JSON types; inf and NaN become ``None``."""
        def safe(v):
            if isinstance(v, float):
                return v if math.isfinite(v) else None
            if isinstance(v, dict):
                return {k: safe(x) for k, x in v.items()}
            if isinstance(v, list | tuple):
                return [safe(x) for x in v]
            return v
        return safe(asdict(self))


def release_times(table: SessionTable, done_s: np.ndarray) -> np.ndarray:
    """Release time of every round (module docstring); ``inf`` when the previous round never finished."""
    done = np.asarray(done_s, dtype=np.float64)
    release = table.session_arrival_s.copy()
    later = table.round_index > 0
    release[later] = done[np.flatnonzero(later) - 1] + table.delay_s[later]
    return release


def _round_ttft(done_mask: np.ndarray, first_token_s: np.ndarray, release_s: np.ndarray) -> np.ndarray:
    """Release -> first token of every finished round; ``inf`` for the others (never released
    included: their release is ``inf``)."""
    with np.errstate(invalid="ignore"):
        return np.where(done_mask, first_token_s - release_s, np.inf)


def _bursts(table: SessionTable, final_rows: np.ndarray, completion_s: np.ndarray) -> tuple[BurstStats, ...]:
    burst = table.burst[final_rows]
    out = []
    for b in np.unique(burst[burst >= 0]):
        mine = burst == b
        release = float(table.session_arrival_s[final_rows][mine].min())
        c = np.sort(completion_s[mine]) - release
        n = c.size
        makespan = float(c[-1])
        t90 = float(c[math.ceil(TAIL_QUANTILE * n) - 1])
        share = (makespan - t90) / makespan if math.isfinite(makespan) and makespan > 0 else float("nan")
        out.append(BurstStats(int(b), n, int(np.isfinite(c).sum()), release, makespan, t90, share))
    return tuple(out)


def session_metrics(requests: pd.DataFrame, table: SessionTable, warmup_fraction: float = 0.0) -> SessionMetrics:
    """``SessionMetrics`` from the run's per-request frame (columns ``first_token_s``, ``done_s``,
    ``status``; row i is round i of ``table``)."""
    status = requests["status"].to_numpy()
    done_mask = status == "done"
    first_token = np.where(done_mask, requests["first_token_s"].to_numpy(dtype=np.float64), np.inf)
    done = np.where(done_mask, requests["done_s"].to_numpy(dtype=np.float64), np.inf)
    n_sessions = table.n_sessions
    n_warm = min(int(math.floor(warmup_fraction * n_sessions)), max(n_sessions - 1, 0))
    session_done = np.ones(n_sessions, dtype=bool)
    np.logical_and.at(session_done, table.session, done_mask)
    session_rejected = np.zeros(n_sessions, dtype=bool)
    np.logical_or.at(session_rejected, table.session, status == "rejected")
    final = np.flatnonzero(table.is_final)
    arrival = table.session_arrival_s[final]
    ok = session_done
    attft = np.where(ok, first_token[final] - arrival, np.inf)
    out_final = table.output_tokens[final]
    with np.errstate(invalid="ignore", divide="ignore"):
        atpot = np.where(ok, (done[final] - first_token[final]) / np.maximum(out_final - 1, 1), np.inf)
    atpot = np.where(out_final > 1, atpot, np.nan)
    measured_s = np.arange(n_sessions) >= n_warm
    row_measured = measured_s[table.session]
    release = release_times(table, done)
    round_ttft_all = _round_ttft(done_mask, first_token, release)
    rounds = tuple(
        RoundTtft(int(k) + 1, LatencyStats.of(round_ttft_all[row_measured & (table.round_index == k)]))
        for k in np.unique(table.round_index[row_measured])
    )
    hidden = row_measured & ~table.is_final & done_mask
    hidden_prompt = int(table.new_prompt_tokens[hidden].sum())
    hidden_output = int(table.output_tokens[hidden].sum())
    finished_rows = row_measured & done_mask
    if finished_rows.any():
        span = float(done[finished_rows].max() - arrival[measured_s].min())
    else:
        span = float("nan")
    per_s = 1.0 / span if span > 0 else float("nan")
    completion = np.where(ok, done[final], np.inf)
    return SessionMetrics(
        n_sessions=n_sessions,
        n_warmup_sessions=n_warm,
        n_measured=int(measured_s.sum()),
        n_finished=int((ok & measured_s).sum()),
        n_rejected=int((session_rejected & measured_s).sum()),
        attft=LatencyStats.of(attft[measured_s]),
        atpot=LatencyStats.of(atpot[measured_s]),
        round_ttft=rounds,
        hidden_prompt_tokens=hidden_prompt,
        hidden_output_tokens=hidden_output,
        hidden_span_s=span,
        hidden_tokens_per_s=(hidden_prompt + hidden_output) * per_s,
        hidden_output_tokens_per_s=hidden_output * per_s,
        bursts=_bursts(table, final, completion),
    )


def round_frame(requests: pd.DataFrame, table: SessionTable) -> pd.DataFrame:
    """One row per round (``ROUND_CSV_COLUMNS``): the session columns beside the run's times."""
    done_mask = requests["status"].to_numpy() == "done"
    done = np.where(done_mask, requests["done_s"].to_numpy(dtype=np.float64), np.inf)
    first_token = np.where(done_mask, requests["first_token_s"].to_numpy(dtype=np.float64), np.inf)
    release = release_times(table, done)
    return pd.DataFrame({
        "request_id": np.arange(table.n_rows, dtype=np.int64),
        "session": table.session,
        "round": table.round_index + 1,
        "is_final": table.is_final,
        "template": np.array(table.template_names, dtype=object)[table.template],
        "burst": table.burst,
        "session_arrival_s": table.session_arrival_s,
        "delay_s": table.delay_s,
        "prompt_tokens": requests["prompt_tokens"].to_numpy(),
        "new_prompt_tokens": table.new_prompt_tokens,
        "output_tokens": table.output_tokens,
        "release_s": release,
        "first_token_s": first_token,
        "done_s": done,
        "round_ttft_s": _round_ttft(done_mask, first_token, release),
        "status": requests["status"].to_numpy(),
    }, columns=list(ROUND_CSV_COLUMNS))
