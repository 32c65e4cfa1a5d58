"""Procurement report: one row per pool of the recommendation plus a total row (formats only).

Columns (units in the names): pool, gpu, count (GPUs serving load; for a served model every GPU of
an instance's tensor-parallel group), spares (availability),
total_gpus, min_tokens/max_tokens (the pool's length range), traffic_share, lam_per_s,
utilisation (ρ at the pool's count = λ_pool · E[S per GPU] / count), mean_batch (the engine
model's operating batch n*, or ρ · n_max with the paper's model),
power_w_per_gpu and power_kw (all GPUs of the pool, spares idle at the same draw, i.e. an
upper bound) with power_basis saying whether the GPU's logistic power curve or a TDP-based
estimate was used (``plan.gridflex.pool_power_w``; every figure from the result's
``procurement`` lines, ``plan.figures``), price_usd_per_h, cost_usd_per_year,
p99_ttft_ms_analytic (the pool's analytic percentile TTFT at its sized count) and
p99_ttft_ms_sim (the pool's simulated P99 from the run's latency profile, when simulated).
The total row sums the counts, kW and cost of the rows as written (so the file adds up) and gives
the fleet's worst P99s.  With a context limit
(``max_model_len``, ``plan.context_limit``) a last row ``rejected`` holds the requests longer than
it: no GPUs, min_tokens = the limit, traffic_share and lam_per_s of those requests and
rejected_token_share (their share of prompt + output tokens; empty on every other row).

Also: whatif points and procurement-schedule rows (``whatif_rows``, ``schedule_rows``).
Written atomically; empty cells for missing values.
"""

from __future__ import annotations

import csv
import io
import os
from typing import TYPE_CHECKING, Any

from fleetplan.plan.sweep import candidate_label
from fleetplan.report.atomic import atomic_write_text
from fleetplan.report.optimize_report import _finite, _ms, _rejected

if TYPE_CHECKING:
    from fleetplan.plan.growth import ProcurementSchedule
    from fleetplan.plan.optimize import OptimizeResult
    from fleetplan.plan.whatif import WhatIfResult

PROCUREMENT_COLUMNS = (
    "pool", "gpu", "count", "spares", "total_gpus", "min_tokens", "max_tokens", "traffic_share", "lam_per_s",
    "utilisation", "mean_batch", "power_w_per_gpu", "power_kw", "power_basis", "price_usd_per_h",
    "cost_usd_per_year", "p99_ttft_ms_analytic", "p99_ttft_ms_sim", "rejected_token_share",
)
TOTAL_LABEL = "total"
REJECTED_LABEL = "rejected"
ROUND_DIGITS = 4


def _r(x: float | None, digits: int = ROUND_DIGITS) -> float | None:
    v = _finite(x)
    return None if v is None else round(v, digits)


def procurement_rows(result: OptimizeResult) -> list[dict[str, Any]]:
    """Rows for the recommendation (empty when there is none) from the result's ``procurement`` lines
    (``plan.figures``); the total row adds the rows as written; see module docstring."""
    best = result.recommendation
    if best is None:
        return []
    if not result.procurement:
        raise ValueError("the result carries no procurement lines: pass it through plan.figures.with_report_figures")
    rows: list[dict[str, Any]] = [{
        "pool": ln.pool,
        "gpu": ln.gpu,
        "count": ln.count,
        "spares": ln.spares,
        "total_gpus": ln.total_gpus,
        "min_tokens": ln.min_tokens,
        "max_tokens": ln.max_tokens,
        "traffic_share": _r(ln.traffic_share, 6),
        "lam_per_s": _r(ln.rate_per_s, 6),
        "utilisation": _r(ln.utilisation),
        "mean_batch": _r(ln.mean_batch, 2),
        "power_w_per_gpu": _r(ln.power_w_per_gpu, 1),
        "power_kw": _r(ln.power_kw, 3),
        "power_basis": ln.power_basis,
        "price_usd_per_h": ln.price_usd_per_h,
        "cost_usd_per_year": round(ln.cost_usd_per_year, 2),
        "p99_ttft_ms_analytic": _ms(ln.ttft_p_s_analytic),
        "p99_ttft_ms_sim": None if ln.ttft_p_s_sim is None else _ms(ln.ttft_p_s_sim),
    } for ln in result.procurement]
    sims = [r["p99_ttft_ms_sim"] for r in rows if r["p99_ttft_ms_sim"] is not None]
    rows.append({
        "pool": TOTAL_LABEL,
        "gpu": best.gpu_label,
        "count": sum(r["count"] for r in rows),
        "spares": sum(r["spares"] for r in rows),
        "total_gpus": sum(r["total_gpus"] for r in rows),
        "min_tokens": min(r["min_tokens"] for r in rows),
        "max_tokens": max(r["max_tokens"] for r in rows),
        "traffic_share": _r(sum(r["traffic_share"] for r in rows), 6),
        "lam_per_s": result.request.rate_per_s,
        "utilisation": None,
        "mean_batch": None,
        "power_w_per_gpu": None,
        "power_kw": _r(sum(r["power_kw"] for r in rows), 3),
        "power_basis": "sum of pools",
        "price_usd_per_h": None,
        "cost_usd_per_year": round(sum(r["cost_usd_per_year"] for r in rows), 2),
        "p99_ttft_ms_analytic": max((r["p99_ttft_ms_analytic"] for r in rows
                                     if r["p99_ttft_ms_analytic"] is not None), default=None),
        "p99_ttft_ms_sim": max(sims) if sims else None,
    })
    rejected = _rejected(result)
    if rejected.max_model_len_tokens is not None:
        rows.append({
            "pool": REJECTED_LABEL, "gpu": None, "count": 0, "spares": 0, "total_gpus": 0,
            "min_tokens": rejected.max_model_len_tokens, "max_tokens": None,
            "traffic_share": _r(rejected.request_share, 6),
            "lam_per_s": _r(result.request.rate_per_s * rejected.request_share, 6),
            "power_basis": "longer than max_model_len: rejected as vLLM rejects them, never served",
            "power_kw": 0.0, "cost_usd_per_year": 0.0, "rejected_token_share": _r(rejected.token_share, 6),
        })
    return rows


def rows_to_csv(header: tuple[str, ...] | list[str], rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(header), restval="", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in header})
    return buf.getvalue()


def write_procurement_csv(rows: list[dict[str, Any]], path: str | os.PathLike) -> None:
    """The procurement rows as CSV (atomic write)."""
    atomic_write_text(path, rows_to_csv(PROCUREMENT_COLUMNS, rows))


WHATIF_COLUMNS = ("lam_per_s", "fleet", "total_gpus", "cost_usd_per_year", "holds_until_lam_per_s",
                  "threshold_is_lower_bound", "fails_at_own_rate", "reason")
SCHEDULE_COLUMNS = ("month", "lam_per_s", "fleet", "total_gpus", "gpus_to_add", "cost_usd_per_year",
                    "holds_until_lam_per_s", "previous_fleet_runs_out_on", "order_by")


def whatif_rows(result: WhatIfResult) -> list[dict[str, Any]]:
    return [{
        "lam_per_s": p.rate_per_s,
        "fleet": None if p.fleet is None else candidate_label(p.fleet),
        "total_gpus": p.total_gpus,
        "cost_usd_per_year": None if p.fleet is None else round(p.fleet.cost_usd_per_year, 2),
        "holds_until_lam_per_s": _r(p.holds_until_rate_per_s, 2),
        "threshold_is_lower_bound": p.threshold_capped,
        "fails_at_own_rate": p.fails_at_own_rate,
        "reason": p.reason,
    } for p in result.points]


def schedule_rows(schedule: ProcurementSchedule) -> list[dict[str, Any]]:
    return [{
        "month": s.month,
        "lam_per_s": _r(s.rate_per_s, 2),
        "fleet": s.fleet_label,
        "total_gpus": s.total_gpus,
        "gpus_to_add": s.gpus_to_add,
        "cost_usd_per_year": round(s.cost_usd_per_year, 2),
        "holds_until_lam_per_s": _r(s.holds_until_rate_per_s, 2),
        "previous_fleet_runs_out_on": None if s.previous_runs_out_on is None else s.previous_runs_out_on.isoformat(),
        "order_by": s.order_by.isoformat(),
    } for s in schedule.steps]


THROUGHPUT_COLUMNS = ("architecture", "gpu", "n_instances", "max_num_seqs", "lam_per_s",
                      "throughput_tokens_per_s_per_gpu", "tokens_per_s_per_user", "p99_ttft_ms", "p95_tpot_ms",
                      "meets_ttft", "on_frontier")
COST_LATENCY_COLUMNS = ("topology", "label", "total_gpus", "cost_usd_per_year", "p99_ttft_ms")


def throughput_rows(points) -> list[dict[str, Any]]:
    """``plan.frontier.ThroughputPoint`` rows (ms at the edge)."""
    return [{
        "architecture": p.architecture, "gpu": p.gpu, "n_instances": p.n_instances, "max_num_seqs": p.max_num_seqs,
        "lam_per_s": p.rate_per_s, "throughput_tokens_per_s_per_gpu": _r(p.throughput_tokens_per_s_per_gpu, 2),
        "tokens_per_s_per_user": _r(p.tokens_per_s_per_user, 3), "p99_ttft_ms": _ms(p.p99_ttft_s),
        "p95_tpot_ms": _ms(p.p95_tpot_s), "meets_ttft": p.meets_ttft, "on_frontier": p.on_frontier,
    } for p in points]


def cost_latency_rows(points) -> list[dict[str, Any]]:
    """``plan.frontier.CostLatencyPoint`` rows."""
    return [{"topology": p.topology, "label": p.label, "total_gpus": p.total_gpus,
             "cost_usd_per_year": round(p.cost_usd_per_year, 2), "p99_ttft_ms": _ms(p.p99_ttft_s)} for p in points]
