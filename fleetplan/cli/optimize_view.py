"""Rendering of ``optimize`` results: the candidate table and the recommendation line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from fleetplan.cli.model_options import mtp_launch_flags
from fleetplan.cli.options import ENGINE_LIMIT_FLAGS
from fleetplan.cli.tables import ms_cell
from fleetplan.perf.dp_instance import (
    attention_dp_ranks,
    per_rank_limit,
    per_rank_token_budget,
    sglang_chunked_prefill_total,
)
from fleetplan.perf.speculative import mtp_of
from fleetplan.units import fmt_ms

if TYPE_CHECKING:  # the planner loads when a run needs it, not for --help
    from fleetplan.plan.optimize import OptimizeResult


def tpot_note(percentile: float) -> str:
    """The legend under the candidate table (``percentile``: the SLO's, ``--percentile``)."""
    q = f"P{percentile:g}"
    return (
        f"Latencies in ms at {q}. an/sim = analytic/simulated {q} at the analytic GPU counts (sim: mean over "
        f"replications; pools simulated apart in steady state, fleet = all requests); 'sim {q} TTFT ms' = upper end "
        f"of the 95% CI of {q} TTFT of the verified fleet (pdd/afd: the PDD simulator; afd with its step "
        f"linearised); '!' marks a >20% gap between the analytic and simulated fleet {q} TTFT; '~' a pool whose "
        "simulated TTFT was still drifting up (overloaded). TPOT = (E2E - TTFT) / (output tokens - 1). SR = spend "
        "ratio, CE = cost efficiency vs the all-premium baseline of the candidate's family (Frontier §6.2)."
    )


def ttft_cell(x_s: float | None) -> str:
    """A TTFT cell: whole milliseconds, ``unstable`` when infinite."""
    return ms_cell(x_s, 0, inf="unstable")


def _verdict(c) -> str:
    if not c.feasible:
        return f"no: {c.reason}"
    v = c.verification
    if v is None:
        return "analytic"
    drift = "" if not getattr(v, "drifting_pools", ()) else (
        " (drifting at analytic: pool " + ",".join(str(i) for i in v.drifting_pools) + ")")
    if not v.passed:
        return f"sim fails: {v.reason}{drift}"
    if v.verified_counts != v.analytic_counts:
        how = {"too_high": "analytic too high", "too_low": "analytic too low", "mixed": "mixed"}.get(
            getattr(v, "direction", ""), "")
        return "sim: needs " + "+".join(str(n) for n in v.verified_counts) + (f" ({how})" if how else "") + drift
    return "sim: yes" + drift


def _pair(analytic_s: float | None, sim_s: float | None, digits: int = 0) -> str:
    return f"{ms_cell(analytic_s, digits)}/{ms_cell(sim_s, digits)}"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def roles_of(c) -> tuple[str, ...]:
    return tuple(getattr(c, "roles", ()))


def _pool_label(c, i: int, p) -> str:
    roles = roles_of(c)
    if roles:
        unit = f" {c.unit[0]}:{c.unit[1]}" if c.topology.value == "afd" and i > 0 else ""
        return f"{roles[i]}{unit}" + (f" n={c.decode_batch}" if i == 1 else "")
    return f"{p.lo_tokens + 1}-{p.hi_tokens}"


def baseline_line(result: OptimizeResult) -> str:
    """Which all-premium fleet each family's SR and CE are measured against."""
    parts = [f"{fam}: {b.gpu_label} x{b.total_gpus_needed} (${b.cost_usd_per_year:,.0f}/yr)"
             for fam, b in result.baselines]
    families = {fam for fam, _ in result.baselines}
    disagg = [fam for fam in ("pdd", "afd") if fam in families]
    gate = "" if not disagg else (f"; {'/'.join(disagg)} candidates with CE < {result.request.min_ce_gain:g} are "
                                  "rejected")
    return f"All-premium baselines (SR = CE = 1): {'; '.join(parts)}{gate}."


def context_limit_line(request, model: str | None, explicit: bool) -> str:
    """Which context limit applied to ``request`` (an ``OptimizeRequest``) and how much traffic it rejects."""
    r = request.rejected()
    if r.max_model_len_tokens is None:
        return "Context limit: none (no --model, no --max-model-len): every request is sized into a pool."
    source = "--max-model-len" if explicit else f"{model}'s max_position_embeddings"
    return (f"Context limit: max_model_len {r.max_model_len_tokens:,} tokens ({source}); {r.request_share:.2%} of "
            f"requests ({r.token_share:.2%} of tokens) are longer and rejected as vLLM rejects them (an error, never "
            f"served); no pool is sized for them and pool shares sum to {1 - r.request_share:.2%}")


def rejected_line(result: OptimizeResult, model: str | None, explicit: bool) -> str:
    """``context_limit_line`` plus what the recommendation's simulation rejected (when verified)."""
    v = None if result.recommendation is None else result.recommendation.verification
    sim = "" if v is None or result.request.max_model_len_tokens is None else (
        f"; the recommendation's simulation rejected {v.too_long_share_sim:.2%} of requests "
        f"({v.too_long_token_share_sim:.2%} of tokens), counted, out of its percentiles")
    line = context_limit_line(result.request, model, explicit)
    return line if line.endswith(".") else f"{line}{sim}."


def print_candidates(console: Console, result: OptimizeResult, top: int) -> None:
    """One row per pool (not pools with no GPUs and no traffic); candidate-level columns on each
    candidate's first row."""
    console.print(candidates_table(result, top))


def candidates_table(result: OptimizeResult, top: int) -> Table:
    """The candidate table: one row per pool (not pools with no GPUs and no traffic); candidate-level
    columns on each candidate's first row."""
    from fleetplan.report.optimize_report import shown_pools

    table = Table(
        title=f"Top {min(top, len(result.candidates))} of {len(result.candidates)} candidates "
        f"(cheapest first; rho = load / capacity; latencies: P{result.request.percentile:g} ms)"
    )
    cols = (
        "#",
        "topology",
        "tokens",
        "GPU",
        "count",
        "spares",
        "share",
        "rho",
        "TTFT an/sim",
        "TPOT an/sim",
        "fleet TTFT an/sim",
        f"sim P{result.request.percentile:g} TTFT ms",
        "SR",
        "CE",
        "GPUs",
        "$/yr",
        "$/M tok",
        "verdict",
    )
    for col in cols:
        table.add_column(col, justify="left" if col in ("topology", "GPU", "verdict") else "right")
    for c in result.candidates[:top]:
        topo = c.topology.value + ("" if c.router.value == "length" else f" [{c.router.value}]")
        v = c.verification
        sim = "-" if v is None else ttft_cell(v.p99_ttft_s_sim)
        at = None if v is None else getattr(v, "at_analytic", None)
        fleet = _pair(c.ttft_p_s, None if at is None else at.ttft_p_s_sim) + (" !" if v is not None and v.flagged
                                                                                else "")
        e = result.economics_of(c)
        tpot = getattr(c, "tpot_p_s", None)
        shown = shown_pools(c)
        for k, (i, p) in enumerate(shown):
            first = k == 0
            pf = None if at is None or i >= len(at.pools) else at.pools[i]
            pool_tpot = tpot if roles_of(c) and i == 1 else p.tpot_p_s
            table.add_row(
                str(c.rank) if first else "",
                topo if first else "",
                _pool_label(c, i, p),
                p.gpu,
                str(p.count),
                str(p.spares),
                f"{p.traffic_share:.1%}",
                "-" if p.count == 0 else f"{p.rho:.2f}",
                "-" if p.count == 0 else _pair(p.ttft_p_s, None if pf is None else pf.ttft_p_s_sim)
                + (" ~" if pf is not None and pf.drifting else ""),
                "-" if p.count == 0 else _pair(pool_tpot, None if pf is None else pf.tpot_p_s_sim, 1),
                fleet if first else "",
                sim if first else "",
                _ratio(e and e.spend_ratio) if first else "",
                _ratio(e and e.ce_gain) if first else "",
                str(c.total_gpus_needed) if first else "",
                f"{c.cost_usd_per_year:,.0f}" if first else "",
                f"{c.cost_usd_per_mtok:.3f}" if first else "",
                _verdict(c) if first else "",
                end_section=k == len(shown) - 1,
            )
    return table


def recommendation_line(result: OptimizeResult) -> str:
    best = result.recommendation
    pct = result.request.percentile
    roles = getattr(best, "roles", ())
    pools = ", ".join(
        f"{p.count}x {p.gpu}"
        + (f" (+{p.spares} spare)" if p.spares else "")
        + (f" {roles[i]}" if roles else f" for {p.lo_tokens + 1}-{p.hi_tokens} tokens")
        + _engine_flags(result.request, p)
        for i, p in enumerate(best.pools)
        if p.count or p.spares
    )
    v = best.verification
    check = (
        f"P{pct:g} TTFT {ttft_cell(best.ttft_p_s)} ms (analytic)"
        if v is None
        else f"simulated P{pct:g} TTFT <= {ttft_cell(v.p99_ttft_s_sim)} ms (95% upper bound), verified"
    )
    e = result.economics_of(best)
    econ = "" if e is None else f"; SR {e.spend_ratio:.2f}, CE {e.ce_gain:.2f}"
    how = "" if not roles else (f" (decode batch {best.decode_batch}, TPOT <= {fmt_ms(best.tpot_p_s, '.1f')} "
                                "analytic)")
    router = "" if roles else f" ({best.router.value} router)"  # disaggregated roles: no length router
    return (
        f"Recommendation: {best.topology.value}{how}{router}: {pools}; "
        f"{best.total_gpus_needed} GPUs, ${best.cost_usd_per_year:,.0f}/yr{econ}; {check}."
    )


def _engine_flags(request, p) -> str:
    """A served model's (or user-limited) pool's engine limits as the request's engine's launch flags
    (``ENGINE_LIMIT_FLAGS``); empty for the paper's GPUs.  A data-parallel-attention instance's are given
    per DP rank where the engine reads them so (vLLM; ``perf.dp_instance.per_rank_limit``), else for the
    whole instance (SGLang divides both over its DP ranks)."""
    served = p.gpu in dict(request.step_models)
    given = request.max_num_seqs is not None or request.max_num_batched_tokens is not None
    if not p.max_num_batched_tokens or not (served or given):
        return ""
    engine, seqs, tokens, per_rank = ENGINE_LIMIT_FLAGS[request.engine]
    step = dict(request.step_models).get(p.gpu)
    ranks = attention_dp_ranks(step)
    mtp = mtp_of(step)  # an "MTP on" pool (plan.placement): the engine's flags turning it on
    spec = "" if mtp is None else f"; MTP on: {mtp_launch_flags(mtp, request.engine)}"
    if ranks == 1 or not per_rank:
        if ranks == 1:
            return f" ({engine} {seqs} {p.max_num_seqs} {tokens} {p.max_num_batched_tokens}{spec})"
        total = sglang_chunked_prefill_total(p.max_num_batched_tokens, p.max_num_seqs, ranks)
        return f" ({engine} {seqs} {p.max_num_seqs} {tokens} {total}, over {ranks} DP attention ranks{spec})"
    return (f" ({engine} per DP rank: {seqs} {per_rank_limit(p.max_num_seqs, ranks)} {tokens} "
            f"{per_rank_token_budget(p.max_num_batched_tokens, p.max_num_seqs, ranks)}, {ranks} ranks{spec})")


def _pct(fraction: float) -> str:
    return f"{fraction * 100:.0f} %"


def step_time_note(result: OptimizeResult) -> str:
    """What the step times were: the margin sized for and the calibrated profiles run ('' when neither)."""
    r = result.request
    parts = []
    if r.step_time_margin > 0:
        parts.append(f"Step-time margin: sized and verified for every engine step {_pct(r.step_time_margin)} slower "
                     "than the step model (--step-time-margin)")
    for name, p in r.calibrated_profiles():
        parts.append(f"Perf profile: {name} runs the step model calibrated for {p.model} on {p.gpu} "
                     f"({p.n_rows} measured steps of {p.source}, held-out error {p.holdout_mape:.1%}) in both phases")
    return "; ".join(parts) + "." if parts else ""


def headroom_line(result: OptimizeResult, requested: bool = True) -> str:
    """``Headroom: steps may be 23 % slower, or traffic 31 % higher ...`` for the recommendation, or why it
    was not searched ('' when not requested)."""
    h = result.headroom
    if h is None:
        if not requested or result.recommendation is None:
            return ""
        if result.recommendation.verification is None:
            return "Headroom: not searched (it needs the simulator; drop --no-verify)."
        return "Headroom: not searched for pdd/afd fleets (their roles are simulated together, not pool by pool)."
    sized = "" if h.step_time_margin <= 0 else f" than the step model (sized for {_pct(h.step_time_margin)})"
    binding = []
    if h.step_binding_pools:
        binding.append("steps: pool " + ",".join(map(str, h.step_binding_pools)))
    if h.rate_binding_pools:
        binding.append("traffic: pool " + ",".join(map(str, h.rate_binding_pools)))
    step = _bound(h.step_slowdown_max, h.step_slowdown_capped, h.step_slowdown_max <= h.step_time_margin,
                  h.resolution)
    rate = _bound(h.rate_multiplier_max - 1.0, h.rate_multiplier_capped, h.rate_multiplier_max <= 1.0, h.resolution)
    return (f"Headroom: steps may be {step} slower{sized}, or traffic {rate} higher, with the SLOs still met "
            f"(simulated, {_pct(h.resolution)} resolution" + (f"; binding {', '.join(binding)}" if binding else "")
            + ").")


def _bound(found: float, capped: bool, at_bottom: bool, resolution: float) -> str:
    """``23 %``, ``>= 200 %`` (the search's top passed) or ``less than 2 %`` (one resolution up failed)."""
    if capped:
        return f">= {_pct(found)}"
    return f"less than {_pct(found + resolution)}" if at_bottom else _pct(found)
