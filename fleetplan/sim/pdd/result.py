"""Results of a PDD simulation: per-request table with the TTFT breakdown, and a summary.

Definitions (seconds):

* queue = prefill start - arrival; prefill = prefill end - prefill start;
  transfer = handoff - prefill end (backpressure wait + the part of the KV transfer not
  hidden behind prefill); first decode = first token - handoff (decode queueing + the first
  decode step).  TTFT = queue + prefill + transfer + first decode = first token - arrival.
* TPOT = (E2E - TTFT) / (output - 1) (vLLM's benchmark definition), from the decode side.
* Optimal-assignment ratio (SIBYL Table 1): share of handed-off measured requests whose
  decode instance had the minimum load (token occupancy, prompt + generated) over all decode
  instances at the handoff moment; ``optimal_assignment_ratio_requests`` takes the number of
  requests in decode as the load instead (ties count as optimal in both).
* With a fabric (``PddSpec.network``): ``PddResult.flows`` (one row per KV flow), per-request
  ``kv_flow_s`` / ``kv_ideal_s`` / ``kv_slowdown`` and ``PddSummary.network``
  (``fleetplan.sim.pdd.flows``); all ``None`` / absent without.
* Unfinished or rejected requests have infinite TTFT/TPOT/E2E (never dropped); the first
  ``warmup_fraction`` of arrivals are excluded from statistics.  Rejected requests longer than the
  served model's ``max_model_len`` (``PddSpec.max_model_len_tokens``) are vLLM's error replies: counted
  (``n_too_long``, ``too_long_token_share``) and left out of the latency statistics, as in
  ``fleetplan.sim.result``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from fleetplan.sim.pdd.flows import NetworkSummary
from fleetplan.sim.result import (
    STATUS_NAMES,
    TPOT_DEFINITION,
    LatencyStats,
    _json_safe,
    too_long_rejections,
)
from fleetplan.units import MS_PER_S

__all__ = ["PddResult", "PddSummary", "TTFT_DEFINITION", "summarise_pdd"]

TTFT_DEFINITION = ("TTFT = queue + prefill + transfer + first decode step "
                   "(arrival to the first token, emitted by the decode instance's first step)")


@dataclass(frozen=True)
class PddSummary:
    """Run-level statistics of the measured (non-warm-up) requests."""

    policy: str
    binding: str
    decode_model: str
    rate_per_s: float
    n_requests: int
    n_warmup: int
    n_done: int
    n_unfinished: int
    n_rejected: int
    ttft: LatencyStats
    tpot: LatencyStats
    e2e: LatencyStats
    queue: LatencyStats
    prefill: LatencyStats
    transfer: LatencyStats
    first_decode: LatencyStats
    optimal_assignment_ratio: float
    optimal_assignment_ratio_requests: float
    prefill_utilisation: float
    decode_utilisation: float
    n_events: int
    ttft_definition: str = TTFT_DEFINITION
    tpot_definition: str = TPOT_DEFINITION
    network: NetworkSummary | None = None
    n_too_long: int = 0  # rejected: prompt + output above max_model_len (out of the latency statistics)
    too_long_token_share: float = 0.0  # their share of the measured prompt + output tokens


@dataclass(frozen=True, eq=False)
class PddResult:
    """``requests`` (one row per request, warm-up flagged), ``summary``, and ``flows`` (one row
    per KV flow; ``None`` without a fabric)."""

    requests: pd.DataFrame
    summary: PddSummary
    flows: pd.DataFrame | None = None

    def csv_table(self) -> pd.DataFrame:
        """Per-request export table: latencies in ms (``*_ms``), inf where not reached (the file is
        written by ``fleetplan.report.sim_export``)."""
        df = self.requests.copy()
        for col in CSV_COLUMNS_MS:
            if col in df:
                df[col.removesuffix("_s") + "_ms"] = df.pop(col) * MS_PER_S
        return df

    def to_json_dict(self) -> dict:
        """The summary as plain JSON types (inf/NaN as ``None``)."""
        return _json_safe(asdict(self.summary))


def _span(start_s: np.ndarray, end_s: np.ndarray) -> np.ndarray:
    """``end - start``; inf where the end was never reached."""
    reached = np.isfinite(end_s)
    return np.where(reached, end_s - np.where(reached, start_s, 0.0), np.inf)


def request_frame(arrival_s, prompt, output, out_t, out_i, n_warmup: int) -> pd.DataFrame:
    """The per-request table from the kernel's ``out_t`` / ``out_i`` (layouts in ``codes``)."""
    from fleetplan.sim._kernels.pdd import codes as pc

    status = out_i[:, pc.OI_STATUS]
    done = status == pc.ST_DONE
    first = np.where(done, out_t[:, pc.OT_FIRST_TOKEN], np.inf)
    done_s = np.where(done, out_t[:, pc.OT_DONE], np.inf)
    ttft = first - arrival_s
    e2e = done_s - arrival_s
    with np.errstate(invalid="ignore"):
        tpot = np.where(output > 1, (e2e - ttft) / np.maximum(output - 1, 1), np.nan)
    n = arrival_s.size
    return pd.DataFrame({
        "request_id": np.arange(n, dtype=np.int64),
        "arrival_s": arrival_s,
        "prompt_tokens": prompt,
        "output_tokens": output,
        "prefill_instance": out_i[:, pc.OI_PF_INST],
        "decode_instance": out_i[:, pc.OI_DEC_INST],
        "prefill_start_s": out_t[:, pc.OT_PF_SCHED],
        "prefill_end_s": out_t[:, pc.OT_PF_END],
        "bind_s": out_t[:, pc.OT_BIND],
        "grant_s": out_t[:, pc.OT_GRANT],
        "handoff_s": out_t[:, pc.OT_HANDOFF],
        "first_token_s": out_t[:, pc.OT_FIRST_TOKEN],
        "done_s": done_s,
        "queue_s": _span(arrival_s, out_t[:, pc.OT_PF_SCHED]),
        "prefill_s": _span(out_t[:, pc.OT_PF_SCHED], out_t[:, pc.OT_PF_END]),
        "transfer_s": _span(out_t[:, pc.OT_PF_END], out_t[:, pc.OT_HANDOFF]),
        "first_decode_s": _span(out_t[:, pc.OT_HANDOFF], out_t[:, pc.OT_FIRST_TOKEN]),
        "ttft_s": ttft,
        "tpot_s": tpot,
        "e2e_s": e2e,
        "preemptions": out_i[:, pc.OI_PREEMPTIONS],
        "optimal": out_i[:, pc.OI_OPTIMAL],
        "optimal_requests": out_i[:, pc.OI_OPTIMAL_REQUESTS],
        "status": np.array(STATUS_NAMES, dtype=object)[status],
        "warmup": np.arange(n) < n_warmup,
    })


def summarise_pdd(frame: pd.DataFrame, *, policy: str, binding: str, decode_model: str, rate_per_s: float,
                  pf_busy_s: np.ndarray, dec_busy_s: np.ndarray, n_events: int,
                  network: NetworkSummary | None = None, max_model_len_tokens: int | None = None) -> PddSummary:
    """Statistics of the measured rows of ``frame``; utilisation = busy / (last completion)."""
    measured = frame[~frame["warmup"].to_numpy()]
    status = measured["status"].to_numpy()
    tokens = (measured["prompt_tokens"] + measured["output_tokens"]).to_numpy(dtype=np.float64)
    too_long, too_long_share = too_long_rejections(status, tokens, max_model_len_tokens)
    timed = measured[~too_long]
    handed = measured["optimal"].to_numpy() >= 0

    def share(col: str) -> float:
        return float(np.mean(measured[col].to_numpy()[handed] == 1)) if handed.any() else float("nan")
    finite_done = frame["done_s"].to_numpy()
    finite_done = finite_done[np.isfinite(finite_done)]
    end_s = float(finite_done.max()) if finite_done.size else 0.0

    def util(busy: np.ndarray) -> float:
        return float(np.mean(busy) / end_s) if end_s > 0 and busy.size else float("nan")

    def stats(col: str) -> LatencyStats:
        return LatencyStats.of(timed[col].to_numpy())

    return PddSummary(
        policy=policy, binding=binding, decode_model=decode_model, rate_per_s=float(rate_per_s),
        n_requests=len(frame), n_warmup=len(frame) - len(measured), n_done=int((status == "done").sum()),
        n_unfinished=int((status == "unfinished").sum()), n_rejected=int((status == "rejected").sum()),
        ttft=stats("ttft_s"), tpot=stats("tpot_s"), e2e=stats("e2e_s"), queue=stats("queue_s"),
        prefill=stats("prefill_s"), transfer=stats("transfer_s"), first_decode=stats("first_decode_s"),
        optimal_assignment_ratio=share("optimal"),
        optimal_assignment_ratio_requests=share("optimal_requests"),
        prefill_utilisation=util(pf_busy_s), decode_utilisation=util(dec_busy_s),
        n_events=int(n_events), network=network, n_too_long=int(too_long.sum()),
        too_long_token_share=too_long_share,
    )


CSV_COLUMNS_MS = ("queue_s", "prefill_s", "transfer_s", "first_decode_s", "ttft_s", "tpot_s", "e2e_s", "kv_flow_s",
                  "kv_ideal_s")
