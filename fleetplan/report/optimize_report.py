"""Rows, CSV and JSON for an ``optimize`` run (formats only; computes nothing).

CSV: one row per candidate; unit-suffixed headers; per-pool columns
``pool{i}_role, pool{i}_gpu, pool{i}_count, pool{i}_spares, pool{i}_min_tokens, pool{i}_max_tokens,
pool{i}_lam_per_s, pool{i}_traffic_share, pool{i}_rho, pool{i}_p99_ttft_ms`` for
i = 1..(largest pool count); pools with no GPUs and no traffic are left out (empty CSV cells; not
listed in the JSON, whose ``pool_index`` is a pool's 1-based place in the candidate's layout, as
``pool{i}`` here, in ``verified_counts`` and in the procurement report).  Co-located, PDD and AFD
candidates share the rows: ``roles`` names a disaggregated candidate's pools (prefill, decode /
attention, ffn; co-located: empty),
``spend_ratio`` and ``ce_gain`` are Frontier §6.2's SR and CE against the family's all-premium
baseline (``plan.disagg.economics``), ``p99_tpot_ms_analytic`` the screen's TPOT (pdd/afd: the
decode step at the sized batch), ``verified_by`` how the row was checked.  These columns (and
``pool{i}_role``) are written when the run swept ``pdd`` or ``afd``; co-located-only runs keep the
original columns.  Every figure comes with the result (``plan.figures.with_report_figures``:
economics, rejected traffic).  JSON: ``{"inputs", "rejected", "candidates", "pareto",
"recommendation", "headroom", "version", "seed"}`` (``rejected``: share of requests and tokens above the
served model's ``max_model_len``, served by no pool; ``headroom``: the recommendation's largest step
slowdown and arrival-rate multiplier with the SLOs met, ``plan.headroom``, or null; ``inputs`` carry
``step_time_margin`` and the calibrated ``perf_profile`` used; a candidate's ``deployment``: the fleet
``fleetplan deploy`` exports, ``deployment_dict``); values that are not finite (an unstable
pool's latency) are written as ``null``, so the file is strict JSON.
Both are written atomically.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import fleetplan
from fleetplan.perf.dp_instance import attention_dp_ranks, per_rank_limit, per_rank_token_budget
from fleetplan.plan.disagg.candidates import VERIFIED_BY
from fleetplan.report.atomic import atomic_write_text
from fleetplan.units import s_to_ms

if TYPE_CHECKING:
    from fleetplan.plan.deployment import Deployment
    from fleetplan.plan.disagg.economics import Economics
    from fleetplan.plan.optimize import OptimizeResult
    from fleetplan.plan.pools import PoolPlan
    from fleetplan.plan.sweep import Candidate


def _finite(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _ms(x_s: float) -> float | None:
    v = _finite(x_s)
    return None if v is None else round(s_to_ms(v), 3)


def latency_key(percentile: float) -> str:
    """``p99_ttft_ms`` for the 99th percentile, ``p95_ttft_ms`` for the 95th, ..."""
    return f"p{percentile:g}_ttft_ms".replace(".", "_")


def pool_dict(p: PoolPlan, percentile: float, ranks: int = 1) -> dict[str, Any]:
    """One pool of a candidate; ``ranks``: the attention data-parallel ranks of its instance, whose engine
    limits are given as vLLM reads them, per DP rank (``perf.dp_instance.per_rank_limit``)."""
    return {
        "gpu": p.gpu,
        "count": p.count,
        "spares": p.spares,
        "min_tokens": p.lo_tokens,
        "max_tokens": p.hi_tokens,
        "n_max": p.n_max,
        "lam_per_s": round(p.lam_per_s, 6),
        "traffic_share": round(p.traffic_share, 6),
        "rho": _finite(round(p.rho, 6)),
        latency_key(percentile): _ms(p.ttft_p_s),
        "mean_service_gpu_s": _finite(p.mean_service_s),
        "cs2": _finite(p.cs2),
        "price_usd_per_h": p.price_usd_per_h,
        "feasible": p.feasible,
        "reason": p.reason,
        # the engine limits both phases served it with, as vLLM's flags (per DP rank)
        "max_num_seqs": per_rank_limit(p.max_num_seqs, ranks) or None,
        "max_num_batched_tokens": (per_rank_token_budget(p.max_num_batched_tokens, p.max_num_seqs, ranks)
                                   if ranks > 1 and p.max_num_batched_tokens and p.max_num_seqs
                                   else per_rank_limit(p.max_num_batched_tokens, ranks) or None),
        "data_parallel_size": ranks,
    }


def shown_pools(c: Candidate) -> list[tuple[int, PoolPlan]]:
    """``(index, pool)`` of the pools a report shows: every pool but those with no GPUs and no traffic
    (a range the sizing router leaves empty); at least the first pool."""
    pools = [(i, p) for i, p in enumerate(c.pools) if p.count + p.spares > 0 or p.traffic_share > 0]
    return pools or [(0, c.pools[0])]


def at_analytic_dict(v) -> dict[str, Any] | None:
    """Both phases at the analytic counts under one definition (SLO percentile; simulated: mean
    over replications), fleet-wide over all requests and per pool (``None`` for an empty pool)."""
    a = getattr(v, "at_analytic", None)
    if a is None:
        return None
    return {
        "p99_ttft_ms_analytic": _ms(a.ttft_p_s_analytic),
        "p99_ttft_ms_sim": _ms(a.ttft_p_s_sim),
        "p99_tpot_ms_analytic": _ms(a.tpot_p_s_analytic),
        "p99_tpot_ms_sim": _ms(a.tpot_p_s_sim),
        "pools": [None if p is None else {
            "p99_ttft_ms_analytic": _ms(p.ttft_p_s_analytic),
            "p99_ttft_ms_sim": _ms(p.ttft_p_s_sim),
            "p99_tpot_ms_analytic": _ms(p.tpot_p_s_analytic),
            "p99_tpot_ms_sim": _ms(p.tpot_p_s_sim),
            "drifting": p.drifting,
        } for p in a.pools],
    }


def steady_dict(st) -> dict[str, Any] | None:
    """How one pool was simulated at its verified count (run length, warm-up cut, drift)."""
    if st is None:
        return None
    return {
        "requests_per_replication": st.n_requests,
        "lifetime_s": _finite(round(st.lifetime_s, 6)),
        "lifetime_source": st.lifetime_source,
        "warmup_s": _finite(round(st.warmup_s, 6)),
        "warmup_requests": st.n_warmup,
        "measured_s": _finite(round(st.measured_s, 6)),
        "measured_lifetimes": _finite(round(st.measured_lifetimes, 3)),
        "measured_requests": st.n_measured,
        "drifting": st.drifting,
    }


def verification_dict(v) -> dict[str, Any]:
    """Phase-2 detail: analytic vs verified counts and direction, simulated P99s (upper CI bound),
    the like-for-like figures at the analytic counts, disagreement, steady-state facts."""
    return {
        "analytic_counts": list(v.analytic_counts),
        "verified_counts": list(v.verified_counts),
        "verified_spares": list(v.verified_spares),
        "passed": v.passed,
        "p99_ttft_ms_sim": _ms(v.p99_ttft_s_sim),
        "p99_ttft_ms_sim_mean": _ms(getattr(v, "p99_ttft_s_sim_mean", float("nan"))),
        "p99_tpot_ms_sim": _ms(v.p99_tpot_s_sim),
        "p99_ttft_ms_analytic": _ms(v.p99_ttft_s_analytic),
        "disagreement": _finite(round(v.disagreement, 6)),
        "disagreement_flagged": v.flagged,
        "total_gpus": v.total_gpus,
        "cost_usd_per_year": round(v.cost_usd_per_year, 2),
        "reason": v.reason,
        "too_long_share_sim": _finite(round(v.too_long_share_sim, 6)),
        "too_long_token_share_sim": _finite(round(v.too_long_token_share_sim, 6)),
        "at_analytic": at_analytic_dict(v),
        "direction": getattr(v, "direction", "") or None,
        "pool_direction": list(getattr(v, "pool_direction", ())),
        "drifting_pools": list(getattr(v, "drifting_pools", ())),
        "steady_state": [steady_dict(st) for st in getattr(v, "steady", ())],
        "n_simulations": getattr(v, "n_simulations", 0),
    }


def tpot_key(percentile: float) -> str:
    """``p99_tpot_ms_analytic`` for the 99th percentile, ..."""
    return f"p{percentile:g}_tpot_ms_analytic".replace(".", "_")


def _verified_by(c: Candidate) -> str:
    if c.verification is None:
        return "analytic"
    return VERIFIED_BY.get(c.topology, "simulated (iteration level)")


def run_length_dict(s) -> dict[str, Any]:
    """The run-length rule of phase 2 (``plan.verify``)."""
    return {
        "fixed_requests": s.n_requests,
        "warmup_lifetimes": s.warmup_lifetimes,
        "measured_lifetimes": s.measured_lifetimes,
        "min_completions": s.min_completions,
        "warmup_rule": "MSER-5 on TTFT in arrival order",
        "drift_rule": f"second half's P{s.percentile:g} TTFT above the first half's by > {s.drift_tolerance:.0%} "
                      "with the 95% interval of the rise above 0 (fails the check)",
        "replications": s.n_replications,
        "resolution": s.resolution,
    }


def deployment_dict(d: Deployment | None) -> dict[str, Any] | None:
    """The fleet ``fleetplan deploy`` exports (``plan.deployment.Deployment``): the fleet-file document,
    per pool its catalog GPU, parallelism, band, traffic and the source that timed its steps
    (``perf.measured.timing_source``), and how the model is served."""
    if d is None:
        return None
    return {
        "counts": d.counts,
        "fleet": d.fleet,
        "pools": [{"name": p.name, "pool_index": p.pool_index, "gpu": p.gpu, "gpus_per_instance": p.gpus_per_instance,
                   "parallelism": dict(p.parallelism), "min_tokens": p.min_tokens, "max_tokens": p.max_tokens,
                   "traffic_share": round(p.traffic_share, 6), "lam_per_s": round(p.lam_per_s, 6),
                   "timing_source": p.timing_source} for p in d.pools],
        "model": d.model,
        "weight_dtype": d.weight_dtype,
        "kv_cache_dtype": d.kv_cache_dtype,
        "calibrated_gpus": list(d.calibrated_gpus),
        "step_time_margin": d.step_time_margin,
        "max_model_len_tokens": d.max_model_len_tokens,
        "disaggregated": getattr(d, "disaggregated", None),
    }


def candidate_dict(c: Candidate, percentile: float, econ: Economics | None = None,
                   ranks: Mapping[str, int] | None = None, deployment: Deployment | None = None) -> dict[str, Any]:
    """One candidate; ``ranks``: attention data-parallel ranks per GPU type of a served model
    (``dp_ranks``; absent: 1); ``deployment``: the fleet ``fleetplan deploy`` exports of it."""
    ranks = ranks or {}
    roles = list(getattr(c, "roles", ()))
    tpot = getattr(c, "tpot_p_s", None)
    out: dict[str, Any] = {
        "rank": c.rank,
        "topology": c.topology.value,
        "router": c.router.value,
        "thresholds_tokens": list(c.thresholds_tokens),
        "gpus": c.gpu_label,
        "total_gpus_needed": c.total_gpus_needed,
        "cost_usd_per_year": round(c.cost_usd_per_year, 2),
        "cost_usd_per_mtok": _finite(round(c.cost_usd_per_mtok, 6)),
        latency_key(percentile): _ms(c.ttft_p_s),
        "feasible": c.feasible,
        "reason": c.reason,
        "p99_ttft_ms_sim": None if c.verification is None else _ms(c.verification.p99_ttft_s_sim),
        "p99_tpot_ms_sim": None if c.verification is None else _ms(c.verification.p99_tpot_s_sim),
        "verified": None if c.verification is None else c.verification.passed,
        "verification": None if c.verification is None else verification_dict(c.verification),
        "verified_by": _verified_by(c),
        "roles": roles,
        "role_counts": {r: p.count for r, p in zip(roles, c.pools, strict=True)} if roles else None,
        "role_gpus": {r: p.gpu for r, p in zip(roles, c.pools, strict=True)} if roles else None,
        "af_unit": f"{c.unit[0]}:{c.unit[1]}" if c.topology.value == "afd" else None,
        "decode_batch": getattr(c, "decode_batch", None),
        tpot_key(percentile): None if tpot is None else _ms(tpot),
        "spend_ratio": None if econ is None else _finite(round(econ.spend_ratio, 6)),
        "ce_gain": None if econ is None else _finite(round(econ.ce_gain, 6)),
        "capacity_per_s": None if econ is None else _finite(round(econ.capacity_per_s, 6)),
        "binding": getattr(c, "binding", None) or None,
        "pools": [{"pool_index": i + 1, "role": roles[i] if roles else None,
                   **pool_dict(p, percentile, ranks.get(p.gpu, 1))} for i, p in shown_pools(c)],
        "deployment": deployment_dict(deployment),
    }
    return out


def perf_profile_dict(gpu: str, p) -> dict[str, Any]:
    """A calibrated profile as used (``perf.calibrate``): what it was fitted to and its coefficients."""
    return {"gpu_type": gpu, "model": p.model, "gpu": p.gpu, "parallelism": p.parallelism,
            "weight_dtype": p.weight_dtype, "kv_dtype": p.kv_dtype, "source": p.source, "n_rows": p.n_rows,
            "holdout_mape": _finite(p.holdout_mape), "scales": dict(p.scales), "coefficients": list(p.coefficients)}


def headroom_dict(h) -> dict[str, Any] | None:
    """The recommendation's headroom (``plan.headroom.Headroom``) or None."""
    if h is None:
        return None
    return {
        "step_slowdown_max": h.step_slowdown_max,
        "step_slowdown_capped": h.step_slowdown_capped,
        "rate_multiplier_max": h.rate_multiplier_max,
        "rate_multiplier_capped": h.rate_multiplier_capped,
        "resolution": h.resolution,
        "step_time_margin": h.step_time_margin,
        "step_binding_pools": list(h.step_binding_pools),
        "rate_binding_pools": list(h.rate_binding_pools),
        "n_simulations": h.n_simulations,
        "method": h.method,
    }


def inputs_dict(result: OptimizeResult, seed: int) -> dict[str, Any]:
    r = result.request
    return {
        "workload": r.workload.name,
        "workload_source": r.workload.source,
        "lam_per_s": r.rate_per_s,
        "lam_source": r.rate_source,
        "arrival_cv2": r.arrival_cv2,
        "slo_ttft_ms": s_to_ms(r.slo_ttft_s),
        "percentile": r.percentile,
        "gpus": [g.name for g in r.gpus],
        "topologies": [t.value for t in r.topologies],
        "b_short_tokens": list(r.thresholds_tokens),
        "routers": [x.value for x in r.routers],
        "compress_gamma": r.compress_gamma,
        "node_availability": r.availability,
        "rho_max": r.rho_max,
        "max_gpus": r.max_gpus,
        "tail_model": r.tail_model,
        "ttft_model": r.ttft_model,
        "prefill_seqs": r.n_prefill_seqs,
        "input_fraction": None if r.workload.has_split else r.workload.input_fraction,
        "seed": seed,
        "slo_tpot_ms": None if r.slo_tpot_s is None else s_to_ms(r.slo_tpot_s),
        "min_ce_gain": r.min_ce_gain,
        "max_model_len_tokens": r.max_model_len_tokens,
        "step_time_margin": r.step_time_margin,
        "perf_profile": [perf_profile_dict(g, p) for g, p in r.calibrated_profiles()] or None,
        "engine": r.engine,  # the engine profile of a served model's placements; its limits' flags
        "engine_version": r.engine_version,  # the release whose profile values timed them (default: the newest)
        "engine_values_version": r.engine_values_version,
        "disagg": None if r.disagg is None else {
            "model": r.disagg.model.name,
            "kv_bytes_per_token": r.disagg.model.kv_bytes_per_token,
            "kv_latency_ms": s_to_ms(r.disagg.kv_latency_s),
            "kv_bandwidth_gb_per_s": None if r.disagg.kv_bandwidth_bytes_per_s is None
            else r.disagg.kv_bandwidth_bytes_per_s / 1e9,
            "af_ratios": [f"{a}:{f}" for a, f in r.disagg.af_ratios],
            "micro_batches": r.disagg.n_micro_batches,
            "attention_weight_share": round(r.disagg.model.attention_weight_share, 6),
        },
    }


def _economics(result: OptimizeResult, c: Candidate) -> Economics | None:
    return result.candidate_economics.get(c.key())


def dp_ranks(result: OptimizeResult) -> dict[str, int]:
    """Attention data-parallel ranks of each served GPU type with more than one
    (``perf.dp_instance.attention_dp_ranks`` of its step model)."""
    ranks = {gpu: attention_dp_ranks(step) for gpu, step in result.request.step_models}
    return {gpu: r for gpu, r in ranks.items() if r > 1}


def _rejected(result: OptimizeResult):
    if result.rejected_traffic is None:
        raise ValueError("the result carries no report figures: pass it through plan.figures.with_report_figures")
    return result.rejected_traffic


def rejected_dict(result: OptimizeResult) -> dict[str, Any]:
    """Requests above the served model's max_model_len: rejected, sized into no pool (analytic shares)."""
    r = _rejected(result)
    return {
        "max_model_len_tokens": r.max_model_len_tokens,
        "request_share": round(r.request_share, 6),
        "token_share": round(r.token_share, 6),
        "lam_per_s": round(result.request.rate_per_s * r.request_share, 6),
        "rule": "prompt + output > max_model_len is rejected as vLLM rejects it (an error, never served)",
    }


def result_dict(result: OptimizeResult, seed: int, top: int | None = None) -> dict[str, Any]:
    """The whole run as a JSON-ready dict (strict JSON: no NaN/Infinity)."""
    pct = result.request.percentile
    ranks = dp_ranks(result)
    cands = result.candidates if top is None else result.candidates[:top]
    return {
        "version": fleetplan.__version__,
        "seed": seed,
        "inputs": inputs_dict(result, seed),
        "analytic_time_s": round(result.analytic_time_s, 6),
        "verify_time_s": round(result.verify_time_s, 6),
        "headroom_time_s": None if result.headroom is None else round(result.headroom.time_s, 6),
        "verification": None
        if not result.verification
        else {
            "n_verified": len(result.verification),
            "n_passed": sum(v.passed for v in result.verification),
            "statistic": "upper end of the 95% Student-t interval of P99 over independent replications",
            "at_analytic_statistic": "mean over replications of the SLO percentile; fleet-wide: of all requests "
                                     "(pools simulated apart, mixed by traffic share)",
            "run_length": None if result.verification_settings is None else run_length_dict(
                result.verification_settings),
        },
        "rejected": rejected_dict(result),
        "n_candidates": len(result.candidates),
        "baselines": {fam: candidate_dict(b, pct, _economics(result, b), ranks) for fam, b in result.baselines},
        "candidates": [candidate_dict(c, pct, _economics(result, c), ranks, result.deployments.get(c.key()))
                       for c in cands],
        "pareto": [candidate_dict(c, pct, _economics(result, c), ranks) for c in result.pareto],
        "recommendation": None if result.recommendation is None
        else candidate_dict(result.recommendation, pct, _economics(result, result.recommendation), ranks,
                            result.deployments.get(result.recommendation.key())),
        "headroom": headroom_dict(result.headroom),
    }


def candidate_rows(result: OptimizeResult) -> tuple[list[str], list[dict[str, Any]]]:
    """Header and one flat row per candidate."""
    pct = result.request.percentile
    ranks = dp_ranks(result)
    key = latency_key(pct)
    n_pools = max((len(c.pools) for c in result.candidates), default=1)
    header = [
        "rank",
        "topology",
        "router",
        "thresholds_tokens",
        "gpus",
        "total_gpus_needed",
        "cost_usd_per_year",
        "cost_usd_per_mtok",
        key,
        "feasible",
        "reason",
        "p99_ttft_ms_sim",
        "p99_tpot_ms_sim",
        "verified",
    ]
    disagg = any(t.value in ("pdd", "afd") for t in result.request.topologies)
    if disagg:
        header += ["verified_by", "roles", "af_unit", "decode_batch", tpot_key(pct), "spend_ratio", "ce_gain",
                   "capacity_per_s", "binding"]
    n_top = len(header)
    pool_fields = ["role"] * disagg + ["gpu", "count", "spares", "min_tokens", "max_tokens", "lam_per_s",
                                       "traffic_share", "rho", key]
    for i in range(1, n_pools + 1):
        header += [f"pool{i}_{f}" for f in pool_fields]
    rows = []
    for c in result.candidates:
        d = candidate_dict(c, pct, _economics(result, c), ranks)
        row = {k: d[k] for k in header[:n_top]}
        row["thresholds_tokens"] = ";".join(str(b) for b in c.thresholds_tokens)
        if disagg:
            row["roles"] = ";".join(d["roles"])
        for p in d["pools"]:
            for f in pool_fields:
                row[f"pool{p['pool_index']}_{f}"] = p[f]
        rows.append(row)
    return header, rows


def write_candidates_csv(result: OptimizeResult, path: str | os.PathLike) -> None:
    """One row per candidate (atomic write)."""
    header, rows = candidate_rows(result)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=header, restval="", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    atomic_write_text(path, buf.getvalue())


def write_result_json(result: OptimizeResult, path: str | os.PathLike, seed: int) -> None:
    """The run as strict JSON (atomic write)."""
    text = json.dumps(result_dict(result, seed), indent=2, allow_nan=False)
    atomic_write_text(path, text + "\n")
