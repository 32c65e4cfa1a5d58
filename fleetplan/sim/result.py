"""Simulation results: the per-request table and its frozen summary.

Definitions (seconds inside; milliseconds only in ``csv_table``, the export table that
``fleetplan.report.sim_export`` writes):

* TTFT = first token - arrival.  E2E = done - arrival.  Queue wait = first scheduled - arrival.
* TPOT = (E2E - TTFT) / (output tokens - 1), vLLM's benchmark definition
  ("time per output token, excluding the first").  Undefined (NaN) for one-token
  outputs, which are left out of TPOT percentiles.
* A request that is unfinished at the horizon or rejected (too long for its
  pool) has TTFT = TPOT = E2E = inf, so it pushes percentiles to inf instead of
  being silently dropped (``fleetplan.metrics``); counts of each status are reported.
  Except: a rejected request longer than the served model's ``max_model_len`` (prompt + output,
  ``FleetSpec.max_model_len_tokens``) is an error reply that no fleet can avoid, as in vLLM; it
  is counted (``n_too_long``, ``too_long_token_share``: share of the group's prompt + output
  tokens) and left out of the latency percentiles.
* Warm-up: the first ``warmup_fraction`` of arrivals are simulated but excluded
  from every statistic (instance utilisation excepted: it covers the whole run).
* SLO attainment = share of measured requests that finished and met every given
  SLO.  Goodput follows vLLM ``benchmark_serving``'s goodput: completed requests
  meeting all given SLOs (TTFT <= SLO, TPOT <= SLO with TPOT taken as 0 for
  one-token outputs) divided by the measured duration, first measured arrival
  to last completion (or the horizon, if something is still unfinished).
* ``failures`` (per request): times the request lost its KV cache because its instance failed
  (``fleetplan.sim.failures``); 0 when failures are off.
* Runtime features: latencies from ``release_s`` (= arrival but for session rounds); figures: ``features.engine``.
* ``to_json_dict`` maps inf and NaN to ``null`` (JSON has neither).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from fleetplan.errors import UnknownNameError
from fleetplan.metrics import REPORTED_PERCENTILES, percentiles
from fleetplan.sim.failures import FailureSummary
from fleetplan.units import s_to_ms

if TYPE_CHECKING:
    import pandas as pd  # imported where a table is built (start-up time)

__all__ = [
    "CSV_COLUMNS",
    "GroupSummary",
    "LatencyStats",
    "SimResult",
    "SimSummary",
    "STATUS_NAMES",
    "TPOT_DEFINITION",
    "summarise",
    "too_long_rejections",
]

TPOT_DEFINITION = "TPOT = (E2E - TTFT) / (output tokens - 1), as vLLM's benchmark defines it"
STATUS_NAMES = ("done", "unfinished", "rejected")  # indexed by the kernels' status codes
CSV_COLUMNS = (
    "request_id", "pool", "instance", "arrival_s", "prompt_tokens", "original_prompt_tokens",
    "output_tokens", "queue_wait_ms", "ttft_ms", "tpot_ms", "e2e_ms", "preemptions", "failures", "status",
    "warmup",
)
OVERALL_NAME = "all"


@dataclass(frozen=True)
class LatencyStats:
    """Mean and empirical percentiles (s) of one latency over ``n`` requests."""

    n: int
    mean_s: float
    p50_s: float
    p90_s: float
    p95_s: float
    p99_s: float
    p99_9_s: float

    @classmethod
    def of(cls, values_s: np.ndarray) -> LatencyStats:
        arr = np.asarray(values_s, dtype=np.float64)
        arr = arr[~np.isnan(arr)]
        q = percentiles(arr, REPORTED_PERCENTILES)
        mean = float(np.mean(arr)) if arr.size else float("nan")
        return cls(int(arr.size), mean, q[50.0], q[90.0], q[95.0], q[99.0], q[99.9])


@dataclass(frozen=True)
class GroupSummary:
    """Statistics of one pool (or of the whole fleet, ``name == "all"``)."""

    name: str
    gpu: str
    n_instances: int
    n_requests: int
    n_done: int
    n_unfinished: int
    n_rejected: int
    ttft: LatencyStats
    tpot: LatencyStats
    e2e: LatencyStats
    queue_wait: LatencyStats
    throughput_per_s: float
    slo_attainment: float | None
    goodput_per_s: float | None
    utilisation: float
    mean_batch: float
    instance_utilisation: tuple[float, ...] = field(default=())
    instance_mean_batch: tuple[float, ...] = field(default=())
    padding_inflation: float | None = None  # runtime features: fleetplan.sim.features.engine
    graph_step_share: float | None = None
    spec_acceptance_rate: float | None = None
    spec_mean_accepted_tokens: float | None = None
    spec_acceptance_by_position: tuple[float, ...] | None = None
    prefix_hit_ratio: float | None = None
    n_too_long: int = 0  # rejected: prompt + output above the model's max_model_len (out of latency stats)
    too_long_token_share: float = 0.0  # their share of the group's prompt + output tokens


@dataclass(frozen=True)
class SimSummary:
    """Run-level facts plus per-pool and overall ``GroupSummary``."""

    level: str
    rate_per_s: float
    n_requests: int
    n_warmup: int
    warmup_fraction: float
    measured_duration_s: float
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    overall: GroupSummary
    pools: tuple[GroupSummary, ...]
    tpot_definition: str = TPOT_DEFINITION
    warmup_note: str = "first warmup_fraction of arrivals excluded from all request statistics"
    failures: FailureSummary | None = None

    def pool(self, name: str) -> GroupSummary:
        """The summary of pool ``name``; ``UnknownNameError`` listing the pools otherwise."""
        for g in self.pools:
            if g.name == name:
                return g
        raise UnknownNameError("pool", name, [g.name for g in self.pools])


def _json_safe(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.generic):
        return _json_safe(value.item())
    return value


@dataclass(frozen=True, eq=False)
class SimResult:
    """Per-request table (``requests``, one row per simulated request, warm-up
    rows flagged) and its ``summary``; ``step_log`` = ``(duration_s, tokens)`` arrays, when the run
    asked for it (``CompiledRun.log_steps``), else None: the featureless kernel's every step that
    emitted tokens past a request's first (``fleetplan.sim._kernels.iteration_steps``), or the feature
    kernel's streamed inter-token gaps as (bin centre, count) (``fleetplan.sim._kernels.features.itl``)."""

    requests: pd.DataFrame
    summary: SimSummary
    step_log: tuple[np.ndarray, np.ndarray] | None = None

    def csv_table(self) -> pd.DataFrame:
        """The export table: ``CSV_COLUMNS``, latencies in ms, ``inf`` where unfinished/rejected."""
        import pandas as pd

        df = self.requests
        out = pd.DataFrame({
            "request_id": df["request_id"],
            "pool": df["pool"],
            "instance": df["instance"],
            "arrival_s": df["arrival_s"],
            "prompt_tokens": df["prompt_tokens"],
            "original_prompt_tokens": df["original_prompt_tokens"],
            "output_tokens": df["output_tokens"],
            "queue_wait_ms": s_to_ms(df["queue_wait_s"]),
            "ttft_ms": s_to_ms(df["ttft_s"]),
            "tpot_ms": s_to_ms(df["tpot_s"]),
            "e2e_ms": s_to_ms(df["e2e_s"]),
            "preemptions": df["preemptions"],
            "failures": df["failures"] if "failures" in df else 0,  # tables built before failures existed
            "status": df["status"],
            "warmup": df["warmup"],
        })
        return out

    def to_json_dict(self) -> dict:
        """The summary as plain JSON types; inf/NaN become ``None`` (``null``)."""
        return _json_safe(asdict(self.summary))


def too_long_rejections(status: np.ndarray, tokens: np.ndarray,
                        max_model_len_tokens: int | None) -> tuple[np.ndarray, float]:
    """Requests rejected because ``tokens`` (prompt + output) exceed ``max_model_len_tokens``: their
    mask (all false without a limit) and their share of the tokens (0 when there are none)."""
    too_long = np.zeros(status.size, dtype=bool) if max_model_len_tokens is None else (
        (status == "rejected") & (tokens > max_model_len_tokens))
    share = float(tokens[too_long].sum() / tokens.sum()) if tokens.sum() > 0 else 0.0
    return too_long, share


def _group(
    name: str,
    gpu: str,
    rows: pd.DataFrame,
    inst_util: np.ndarray,
    inst_batch: np.ndarray,
    duration_s: float,
    slo_ttft_s: float | None,
    slo_tpot_s: float | None,
    max_model_len_tokens: int | None = None,
) -> GroupSummary:
    status = rows["status"].to_numpy()
    done = status == "done"
    n = len(rows)
    tokens = (rows["original_prompt_tokens"] + rows["output_tokens"]).to_numpy(dtype=np.float64)
    too_long, too_long_share = too_long_rejections(status, tokens, max_model_len_tokens)
    timed = rows[~too_long]
    good = None
    attainment = goodput = None
    if slo_ttft_s is not None or slo_tpot_s is not None:
        good = done.copy()
        if slo_ttft_s is not None:
            good &= rows["ttft_s"].to_numpy() <= slo_ttft_s
        if slo_tpot_s is not None:
            tpot_goodput = np.nan_to_num(rows["tpot_s"].to_numpy(), nan=0.0)  # 1-token outputs: 0
            good &= tpot_goodput <= slo_tpot_s
        n_good = int(good.sum())
        attainment = n_good / n if n else float("nan")
        goodput = n_good / duration_s if duration_s > 0 else (0.0 if n_good == 0 else float("nan"))
    return GroupSummary(
        name=name,
        gpu=gpu,
        n_instances=int(inst_util.size),
        n_requests=n,
        n_done=int(done.sum()),
        n_unfinished=int((status == "unfinished").sum()),
        n_rejected=int((status == "rejected").sum()),
        ttft=LatencyStats.of(timed["ttft_s"].to_numpy()),
        tpot=LatencyStats.of(timed["tpot_s"].to_numpy()),
        e2e=LatencyStats.of(timed["e2e_s"].to_numpy()),
        queue_wait=LatencyStats.of(timed["queue_wait_s"].to_numpy()),
        throughput_per_s=int(done.sum()) / duration_s if duration_s > 0 else float("nan"),
        slo_attainment=attainment,
        goodput_per_s=goodput,
        utilisation=float(np.mean(inst_util)) if inst_util.size else float("nan"),
        mean_batch=float(np.mean(inst_batch)) if inst_batch.size else float("nan"),
        instance_utilisation=tuple(float(x) for x in inst_util),
        instance_mean_batch=tuple(float(x) for x in inst_batch),
        n_too_long=int(too_long.sum()),
        too_long_token_share=too_long_share,
    )


def summarise(
    requests: pd.DataFrame,
    *,
    pool_names: tuple[str, ...],
    pool_gpus: tuple[str, ...],
    inst_pool: np.ndarray,
    inst_utilisation: np.ndarray,
    inst_mean_batch: np.ndarray,
    level: str,
    rate_per_s: float,
    warmup_fraction: float,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    horizon_s: float = float("inf"),
    feature_figures: tuple[dict, ...] | None = None,
    max_model_len_tokens: int | None = None,
) -> SimSummary:
    """Summary of a request table built by the engine (columns as in ``SimResult``;
    ``warmup`` flags the excluded rows); ``feature_figures``: one dict per pool, then the fleet's;
    ``max_model_len_tokens``: the served model's limit (rejections above it are ``n_too_long``)."""
    n_total = len(requests)
    measured = requests[~requests["warmup"].to_numpy()]
    if len(measured):
        start_s = float(measured["arrival_s"].min())
        finished = measured["done_s"].to_numpy()
        finished = finished[np.isfinite(finished)]
        end_s = float(finished.max()) if finished.size else start_s
        if (measured["status"] == "unfinished").any() and math.isfinite(horizon_s):
            end_s = max(end_s, float(horizon_s))
        duration_s = end_s - start_s
    else:
        duration_s = float("nan")
    inst_pool = np.asarray(inst_pool)
    pools = []
    for p, (name, gpu) in enumerate(zip(pool_names, pool_gpus, strict=True)):
        mask = inst_pool == p
        pools.append(_group(
            name, gpu, measured[measured["pool"] == name], np.asarray(inst_utilisation)[mask],
            np.asarray(inst_mean_batch)[mask], duration_s, slo_ttft_s, slo_tpot_s, max_model_len_tokens,
        ))
    gpus = sorted(set(pool_gpus))
    overall = _group(
        OVERALL_NAME, "+".join(gpus), measured, np.asarray(inst_utilisation),
        np.asarray(inst_mean_batch), duration_s, slo_ttft_s, slo_tpot_s, max_model_len_tokens,
    )
    if feature_figures is not None:
        pools = [replace(g, **figures) for g, figures in zip(pools, feature_figures[:-1], strict=True)]
        overall = replace(overall, **feature_figures[-1])
    return SimSummary(
        level=level,
        rate_per_s=float(rate_per_s),
        n_requests=n_total,
        n_warmup=n_total - len(measured),
        warmup_fraction=float(warmup_fraction),
        measured_duration_s=float(duration_s),
        slo_ttft_s=slo_ttft_s,
        slo_tpot_s=slo_tpot_s,
        overall=overall,
        pools=tuple(pools),
    )
