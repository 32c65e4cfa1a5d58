"""Full-run JSON documents: everything a report needs, so ``fleetplan report`` re-renders
without recomputing (formats only).

Three kinds, each a strict-JSON object (no NaN/Infinity: non-finite values are ``null``)
with ``kind``, ``version`` and ``seed``:

* ``optimize-run``: ``optimize_report.result_dict`` (inputs, the cheapest candidates with their
  verification -- by default the ones the report shows, every swept one with ``all_candidates`` --,
  ``n_candidates`` swept, Pareto set, recommendation) plus ``verification_results`` (one entry per
  simulated candidate), ``procurement`` (``report.procurement`` rows), ``cost_latency_frontier``
  (per-topology Pareto points) and ``latency_profiles`` (per-pool simulated TTFT/TPOT
  quantiles in ms at ``levels_pct``; empty when nothing was simulated); each candidate the run keeps a
  fleet for (the cheapest, the simulated ones, the recommendation) carries ``deployment``
  (``optimize_report.deployment_dict``: what ``fleetplan deploy`` exports);
* ``whatif``: inputs, the per-rate points and, with growth, the procurement schedule;
* ``grid-flex``: inputs and one row per curtailment level.

``load_run`` reads any of them back and checks ``kind``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fleetplan
from fleetplan.errors import DataFormatError
from fleetplan.report.atomic import atomic_write_text
from fleetplan.report.html import DEFAULT_MAX_CANDIDATES
from fleetplan.report.optimize_report import _ms, perf_profile_dict, result_dict, verification_dict
from fleetplan.report.procurement import cost_latency_rows, procurement_rows, schedule_rows, whatif_rows
from fleetplan.units import s_to_ms

if TYPE_CHECKING:
    from fleetplan.plan.frontier import PoolLatencyProfile
    from fleetplan.plan.gridflex import GridFlexResult
    from fleetplan.plan.growth import ProcurementSchedule
    from fleetplan.plan.optimize import OptimizeResult
    from fleetplan.plan.whatif import WhatIfResult

KINDS = ("optimize-run", "whatif", "grid-flex")


def _strict(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v) for v in value]
    return value


#: Candidates an ``optimize-run`` document keeps by default: the cheapest ones the HTML report shows
#: (``report.html.DEFAULT_MAX_CANDIDATES``) plus every simulated one; ``all_candidates=True`` keeps the sweep.
DEFAULT_JSON_CANDIDATES = DEFAULT_MAX_CANDIDATES


def profile_dict(p: PoolLatencyProfile) -> dict[str, Any]:
    return {"pool": p.pool, "gpu": p.gpu, "levels_pct": list(p.levels_pct),
            "ttft_ms": [_ms(x) for x in p.ttft_s], "tpot_ms": [_ms(x) for x in p.tpot_s],
            "utilisation_sim": None if p.utilisation is None else round(p.utilisation, 6)}


def optimize_run_dict(result: OptimizeResult, seed: int, all_candidates: bool = False) -> dict[str, Any]:
    """The ``optimize-run`` document (see module docstring) of a result carrying its report figures
    (``plan.figures.with_report_figures``: latency profiles, procurement, frontier, economics).

    ``all_candidates=False`` keeps the ``DEFAULT_JSON_CANDIDATES`` cheapest candidates and every simulated
    one (what the report shows; well under 1 MB), ``True`` every swept candidate (megabytes)."""
    top = None
    if not all_candidates:
        simulated = [c.rank for c in result.candidates if c.verification is not None]
        top = max([DEFAULT_JSON_CANDIDATES, *simulated])
    out = {"kind": "optimize-run", **result_dict(result, seed, top)}
    out["candidates_in_file"] = "all" if top is None else f"the {len(out['candidates'])} cheapest"
    out["verification_results"] = [{"rank": v.rank, **verification_dict(v)} for v in result.verification]
    out["procurement"] = procurement_rows(result)
    out["cost_latency_frontier"] = cost_latency_rows(result.cost_latency)
    out["latency_profiles"] = [profile_dict(p) for p in result.latency_profiles]
    return _strict(out)


def whatif_dict(result: WhatIfResult, seed: int, schedule: ProcurementSchedule | None = None) -> dict[str, Any]:
    r = result.request
    out = {
        "kind": "whatif",
        "version": fleetplan.__version__,
        "seed": seed,
        "inputs": {
            "workload": r.workload.name,
            "slo_ttft_ms": s_to_ms(r.slo_ttft_s),
            "gpus": [g.name for g in r.gpus],
            "topologies": [t.value for t in r.topologies],
            "threshold_method": result.threshold_method,
            "ttft_model": r.ttft_model,
            "prefill_seqs": r.n_prefill_seqs,
            "min_spare_gpus": r.min_spare_gpus,
            "sim_requests": None if result.verify is None else result.verify.n_requests,
            "replications": None if result.verify is None else result.verify.n_replications,
            "max_model_len_tokens": r.max_model_len_tokens,
            "rejected_request_share": round(result.rejected_traffic.request_share, 6),
            "rejected_token_share": round(result.rejected_traffic.token_share, 6),
            "step_time_margin": r.step_time_margin,
            "perf_profile": [perf_profile_dict(g, p) for g, p in r.calibrated_profiles()] or None,
            "engine": r.engine,  # the engine profile of a served model's placements; its limits' flags
            "engine_version": r.engine_version,  # the release whose profile values timed them (default: the newest)
            "engine_values_version": r.engine_values_version,
        },
        "points": whatif_rows(result),
        "schedule": None,
    }
    if schedule is not None:
        out["schedule"] = {
            "start_date": schedule.start_date.isoformat(),
            "start_lam_per_s": schedule.start_rate_per_s,
            "growth_per_month": schedule.growth_per_month,
            "months": schedule.months,
            "lead_time_weeks": schedule.lead_time_weeks,
            "uncovered_from_month": schedule.uncovered_from_month,
            "steps": schedule_rows(schedule),
        }
    return _strict(out)


def gridflex_rows(result: GridFlexResult) -> list[dict[str, Any]]:
    return [{
        "flex_pct": lv.flex_pct,
        "n_max": lv.n_max,
        "target_w": round(lv.target_w, 1),
        "power_w_per_gpu": round(lv.power_w_per_gpu, 1),
        "fleet_kw": round(lv.fleet_kw, 2),
        "rho": round(lv.rho, 4),
        "p99_ttft_ms_analytic": _ms(lv.p99_ttft_s_analytic),
        "p99_ttft_ms_sim_window": None if lv.p99_ttft_s_window is None else _ms(lv.p99_ttft_s_window),
        "p99_ttft_ms_sim_steady": None if lv.p99_ttft_s_steady is None else _ms(lv.p99_ttft_s_steady),
        "slo_ok_window": lv.slo_ok_window,
        "slo_ok_steady": lv.slo_ok_steady,
    } for lv in result.levels]


def gridflex_dict(result: GridFlexResult, workload: str, seed: int) -> dict[str, Any]:
    return _strict({
        "kind": "grid-flex",
        "version": fleetplan.__version__,
        "seed": seed,
        "inputs": {"workload": workload, "gpu": result.gpu, "n_gpus": result.n_gpus, "lam_per_s": result.rate_per_s,
                   "slo_ttft_ms": s_to_ms(result.slo_ttft_s), "max_context_tokens": result.max_context_tokens,
                   "n_max_uncapped": result.n_max_uncapped, "window_s": result.window_s},
        "levels": gridflex_rows(result),
    })


def write_json(doc: dict[str, Any], path: str | os.PathLike) -> None:
    """Strict JSON, atomically."""
    atomic_write_text(path, json.dumps(doc, indent=2, allow_nan=False) + "\n")


def load_run(path: str | os.PathLike, kind: str | None = None) -> dict[str, Any]:
    """A document written by this module; ``DataFormatError`` naming the file otherwise."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFormatError(str(p), f"line {exc.lineno}", f"not valid JSON ({exc.msg})",
                              "give a run file fleetplan wrote (optimize, whatif or grid flex as JSON)") from exc
    if not isinstance(doc, dict) or doc.get("kind") not in KINDS:
        raise DataFormatError(str(p), None, f"kind {doc.get('kind') if isinstance(doc, dict) else None!r} "
                              f"is not one of {', '.join(KINDS)}",
                              "give a run file fleetplan wrote (optimize, whatif or grid flex as JSON)")
    if kind is not None and doc["kind"] != kind:
        raise DataFormatError(str(p), None, f"is a {doc['kind']!r} document, expected {kind!r}",
                              f"pass a {kind} JSON here")
    return doc
