"""One self-contained HTML page from run documents (``report.run_json``); formats only.

No network fetches: styles are inline and every plot is a ``data:image/png;base64`` URI
(``report.plots``).  Without matplotlib the page still carries every table and says
``PLOT_HINT``.  Sections: inputs, recommendation (with the step-time margin and the headroom),
procurement (one row per pool + total), verification (analytic vs simulated at the analytic counts,
per candidate and pool), candidates (the ``max_candidates`` cheapest), what-if points and schedule,
grid flex.
"""

from __future__ import annotations

import base64
import html
import os
from typing import Any

from fleetplan.report.atomic import atomic_write_text
from fleetplan.report.plots import PLOT_HINT, figures
from fleetplan.report.procurement import PROCUREMENT_COLUMNS, SCHEDULE_COLUMNS, WHATIF_COLUMNS

DEFAULT_MAX_CANDIDATES = 30
CANDIDATE_COLUMNS = ("rank", "topology", "router", "thresholds_tokens", "gpus", "total_gpus_needed",
                     "cost_usd_per_year", "p99_ttft_ms_sim", "verified", "feasible")
_STYLE = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
          "table{border-collapse:collapse;font-size:13px;margin:1em 0}"
          "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#eee}"
          "td:first-child{text-align:left}img{max-width:100%;border:1px solid #ddd;margin:.5em 0}"
          ".hint{color:#a33}")
FIGURE_TITLES = {"pareto": "Cost vs P99 TTFT (analytic and simulated)", "gpu_breakdown": "GPU-count breakdown",
                 "utilisation": "Utilisation per pool", "latency_cdf": "TTFT and TPOT distributions per pool",
                 "whatif_steps": "Cost and GPUs vs λ (steps)", "grid_flex": "Grid flex"}


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:,.3f}".rstrip("0").rstrip(".") if abs(v) < 1e6 else f"{v:,.0f}"
    if isinstance(v, list):
        return html.escape(";".join(str(x) for x in v))
    return html.escape(str(v))


def table(columns: tuple[str, ...] | list[str], rows: list[dict[str, Any]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _recommendation(run: dict[str, Any]) -> str:
    rec = run.get("recommendation")
    if rec is None:
        return "<p><b>No fleet meets the SLO.</b></p>"
    pools = ", ".join(f"{p['count']}x {p['gpu']}" + (f" (+{p['spares']} spare)" if p["spares"] else "")
                      + f" for {p['min_tokens'] + 1}-{p['max_tokens']} tokens"
                      for p in rec["pools"] if p["count"] or p["spares"])
    sim = rec.get("p99_ttft_ms_sim")
    check = "analytic only" if sim is None else f"simulated P99 TTFT &le; {sim:,.0f} ms (95% upper bound), verified"
    margin = (run.get("inputs") or {}).get("step_time_margin") or 0.0
    sized = "" if not margin else (f"<p>Sized and verified for every engine step {margin * 100:.0f} % slower than "
                                   "the step model (step-time margin).</p>")
    return (f"<p><b>Recommendation:</b> {html.escape(rec['topology'])} ({html.escape(rec['router'])} router): "
            f"{html.escape(pools)}; {rec['total_gpus_needed']} GPUs, ${rec['cost_usd_per_year']:,.0f}/yr; "
            f"{check}.</p>" + sized + _headroom(run.get("headroom")))


def _headroom(h: dict[str, Any] | None) -> str:
    """The recommendation's headroom paragraph ('' without one)."""
    if not h:
        return ""
    r = h["resolution"]

    def bound(found: float, capped: bool, at_bottom: bool) -> str:
        if capped:
            return f"&ge; {found * 100:.0f} %"
        return f"less than {(found + r) * 100:.0f} %" if at_bottom else f"{found * 100:.0f} %"

    step = bound(h["step_slowdown_max"], h["step_slowdown_capped"], h["step_slowdown_max"] <= h["step_time_margin"])
    rate = bound(h["rate_multiplier_max"] - 1, h["rate_multiplier_capped"], h["rate_multiplier_max"] <= 1.0)
    binding = "".join(f"; binding ({what}): pool {', '.join(map(str, pools))}"
                      for what, pools in (("steps", h["step_binding_pools"]), ("traffic", h["rate_binding_pools"]))
                      if pools)
    return (f"<p id='headroom'><b>Headroom:</b> steps may be {step} slower, or traffic {rate} higher, with the SLOs "
            f"still met (simulated; {h['resolution'] * 100:g} % resolution{html.escape(binding)}).</p>")


VERIFICATION_COLUMNS = ("rank", "pool", "analytic_count", "verified_count", "direction", "p99_ttft_ms_analytic",
                        "p99_ttft_ms_sim", "p99_tpot_ms_analytic", "p99_tpot_ms_sim", "drifting", "warmup_s",
                        "measured_lifetimes")


def verification_rows(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Analytic and simulated figures side by side at the analytic counts: per verified candidate a
    fleet row (all requests) then one row per pool (``verification_results`` of the run document)."""
    rows = []
    for v in run.get("verification_results") or []:
        at = v.get("at_analytic")
        if not at:
            continue
        keys = ("p99_ttft_ms_analytic", "p99_ttft_ms_sim", "p99_tpot_ms_analytic", "p99_tpot_ms_sim")
        rows.append({"rank": v["rank"], "pool": "fleet", "analytic_count": sum(v["analytic_counts"]),
                     "verified_count": sum(v["verified_counts"]), "direction": v.get("direction"),
                     **{k: at[k] for k in keys}, "drifting": bool(v.get("drifting_pools"))})
        steady = v.get("steady_state") or []
        directions = v.get("pool_direction") or []
        for i, p in enumerate(at["pools"]):
            if p is None:
                continue
            st = steady[i] if i < len(steady) and steady[i] else {}
            rows.append({"rank": "", "pool": i + 1, "analytic_count": v["analytic_counts"][i],
                         "verified_count": v["verified_counts"][i],
                         "direction": directions[i] if i < len(directions) else None,
                         **{k: p[k] for k in keys}, "drifting": p["drifting"], "warmup_s": st.get("warmup_s"),
                         "measured_lifetimes": st.get("measured_lifetimes")})
    return rows


def _images(imgs: dict[str, bytes]) -> str:
    return "".join(
        f"<h3>{html.escape(FIGURE_TITLES.get(name, name))}</h3>"
        f"<img alt='{html.escape(name)}' id='plot-{html.escape(name)}' "
        f"src='data:image/png;base64,{base64.b64encode(data).decode('ascii')}'>"
        for name, data in imgs.items()
    )


def render_html(run: dict[str, Any] | None = None, whatif: dict[str, Any] | None = None,
                gridflex: dict[str, Any] | None = None, max_candidates: int = DEFAULT_MAX_CANDIDATES) -> str:
    """The page as a string (see module docstring)."""
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>fleetplan report</title>"
             f"<style>{_STYLE}</style></head><body><h1>fleetplan report</h1>"]
    version = next((d.get("version") for d in (run, whatif, gridflex) if d), None)
    parts.append(f"<p>fleetplan {html.escape(str(version))}</p>")
    if run:
        inputs = run.get("inputs", {})
        parts.append("<h2>Inputs</h2>" + table(("key", "value"), [{"key": k, "value": v} for k, v in inputs.items()]))
        parts.append("<h2>Recommendation</h2>" + _recommendation(run))
        parts.append("<h2>Procurement</h2>" + table(PROCUREMENT_COLUMNS, run.get("procurement") or []))
        checks = verification_rows(run)
        if checks:
            parts.append("<h2>Verification: analytic vs simulated at the analytic counts</h2>"
                         "<p>P99 = the SLO percentile; simulated: mean over replications, pools simulated apart "
                         "in steady state (warm-up cut by MSER-5), fleet = all requests; direction: whether the "
                         "analytic count was too high or too low for the simulator.</p>"
                         + table(VERIFICATION_COLUMNS, checks))
        cands = (run.get("candidates") or [])[:max_candidates]
        parts.append(f"<h2>Candidates (cheapest {len(cands)} of {run.get('n_candidates', len(cands))})</h2>"
                     + table(CANDIDATE_COLUMNS, cands))
    if whatif:
        parts.append("<h2>What-if: fleet per arrival rate</h2>" + table(WHATIF_COLUMNS, whatif.get("points") or []))
        sched = whatif.get("schedule")
        if sched:
            parts.append(f"<h2>Procurement schedule ({sched['growth_per_month']:.1%}/month from "
                         f"{sched['start_lam_per_s']:g} req/s, start {html.escape(sched['start_date'])}, lead "
                         f"time {sched['lead_time_weeks']:g} weeks)</h2>" + table(SCHEDULE_COLUMNS, sched["steps"]))
    if gridflex:
        rows = gridflex.get("levels") or []
        parts.append("<h2>Grid flex</h2>" + table(tuple(rows[0]) if rows else ("flex_pct",), rows))
    imgs = figures(run, whatif, gridflex, "png")
    parts.append("<h2>Plots</h2>")
    parts.append(_images(imgs) if imgs else f"<p class='hint'>{html.escape(PLOT_HINT)}</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_html(path: str | os.PathLike, run: dict[str, Any] | None = None, whatif: dict[str, Any] | None = None,
               gridflex: dict[str, Any] | None = None) -> None:
    """``render_html`` written atomically."""
    atomic_write_text(path, render_html(run, whatif, gridflex))


def write_plots(directory: str | os.PathLike, run: dict[str, Any] | None = None,
                whatif: dict[str, Any] | None = None, gridflex: dict[str, Any] | None = None) -> list[str]:
    """Every figure as PNG and SVG in ``directory`` (atomic writes); returns the file names written."""
    from pathlib import Path

    from fleetplan.report.atomic import atomic_write_bytes
    from fleetplan.report.plots import FORMATS

    written = []
    for fmt in FORMATS:
        for name, data in figures(run, whatif, gridflex, fmt).items():
            atomic_write_bytes(Path(directory) / f"{name}.{fmt}", data)
            written.append(f"{name}.{fmt}")
    return written
