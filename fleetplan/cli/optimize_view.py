"""Rendering of ``optimize`` results: the candidate table and the recommendation line."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from fleetplan.plan.optimize import OptimizeResult

TPOT_NOTE = (
    "sim = iteration-level simulation, upper end of the 95% CI of P99 over replications; "
    "'!' marks a >20% gap between the analytic and simulated P99 TTFT at the analytic GPU counts. "
    "TPOT = (E2E - TTFT) / (output tokens - 1)."
)


def fmt_ms(x_s: float | None) -> str:
    if x_s is None:
        return "-"
    return "unstable" if x_s == float("inf") else f"{x_s * 1e3:,.0f}"


def _verdict(c) -> str:
    if not c.feasible:
        return f"no: {c.reason}"
    v = c.verification
    if v is None:
        return "analytic"
    if not v.passed:
        return f"sim fails: {v.reason}"
    if v.verified_counts != v.analytic_counts:
        return "sim: needs " + "+".join(str(n) for n in v.verified_counts)
    return "sim: yes"


def print_candidates(console: Console, result: OptimizeResult, top: int) -> None:
    """One row per pool; candidate-level columns on each candidate's first row."""
    pct = result.request.percentile
    table = Table(
        title=f"Top {min(top, len(result.candidates))} of {len(result.candidates)} candidates "
        "(cheapest first; rho = KV-slot utilisation)"
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
        f"P{pct:g} TTFT ms",
        "sim P99 TTFT ms",
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
        sim = "-" if v is None else fmt_ms(v.p99_ttft_s_sim) + (" !" if v.flagged else "")
        for i, p in enumerate(c.pools):
            first = i == 0
            table.add_row(
                str(c.rank) if first else "",
                topo if first else "",
                f"{p.lo_tokens + 1}-{p.hi_tokens}",
                p.gpu,
                str(p.count),
                str(p.spares),
                f"{p.traffic_share:.1%}",
                "-" if p.count == 0 else f"{p.rho:.2f}",
                fmt_ms(p.ttft_p_s),
                sim if first else "",
                str(c.total_gpus_needed) if first else "",
                f"{c.cost_usd_per_year:,.0f}" if first else "",
                f"{c.cost_usd_per_mtok:.3f}" if first else "",
                _verdict(c) if first else "",
                end_section=i == len(c.pools) - 1,
            )
    console.print(table)


def recommendation_line(result: OptimizeResult) -> str:
    best = result.recommendation
    pct = result.request.percentile
    pools = ", ".join(
        f"{p.count}x {p.gpu}"
        + (f" (+{p.spares} spare)" if p.spares else "")
        + f" for {p.lo_tokens + 1}-{p.hi_tokens} tokens"
        for p in best.pools
        if p.count or p.spares
    )
    v = best.verification
    check = (
        f"P{pct:g} TTFT {fmt_ms(best.ttft_p_s)} ms (analytic)"
        if v is None
        else f"simulated P99 TTFT <= {fmt_ms(v.p99_ttft_s_sim)} ms (95% upper bound), verified"
    )
    return (
        f"Recommendation: {best.topology.value} ({best.router.value} router): {pools}; "
        f"{best.total_gpus_needed} GPUs, ${best.cost_usd_per_year:,.0f}/yr; {check}."
    )
