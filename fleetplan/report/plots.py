"""Plots of run documents (``report.run_json``): PNG/SVG bytes, drawn from the JSON alone.

matplotlib is a dependency; it is imported only inside the drawing functions
(``matplotlib.figure.Figure``, no pyplot global state), so commands that draw nothing never pay
for it.  ``plots_available()`` stays for environments that removed it (then ``figures`` returns
nothing and callers say ``PLOT_HINT``).

Figures (each skipped when its data is absent):

* ``pareto``: annual cost vs P99 TTFT of the candidates in the file: analytic P99 (grey), and for
  simulated candidates the simulated P99 (upper 95 % bound, joined to the analytic point), with the
  per-topology Pareto frontiers (analytic) as lines;
* ``gpu_breakdown``: the recommendation's GPUs per pool (serving + spares, stacked; integer axis);
* ``utilisation``: per pool, analytic utilisation and the simulated busy fraction;
* ``latency_cdf``: per-pool simulated TTFT and TPOT distributions (empirical CDFs from the
  recommendation's simulation, log time axis);
* ``whatif_steps``: GPUs and annual cost vs λ as steps, with each fleet's step threshold;
* ``grid_flex``: fleet kW and P99 TTFT vs curtailment level.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

PLOT_HINT = "plots need matplotlib (a fleetplan dependency): pip install matplotlib"
FIG_SIZE_IN = (6.4, 3.8)
DPI = 110
FORMATS = ("png", "svg")


def plots_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _figure():
    from matplotlib.figure import Figure

    fig = Figure(figsize=FIG_SIZE_IN, dpi=DPI, layout="constrained")
    return fig, fig.add_subplot()


def _bytes(fig, fmt: str) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt)
    return buf.getvalue()


def _p_key(run: dict[str, Any]) -> str | None:
    first = (run.get("candidates") or [{}])[0]
    return next((k for k in first if k.endswith("_ttft_ms") and k[1].isdigit()), None)


def _pareto(run: dict[str, Any]):
    key = _p_key(run)
    cands = [c for c in run.get("candidates", []) if c.get("feasible") and key and c.get(key) is not None]
    front = run.get("cost_latency_frontier") or []
    if not cands and not front:
        return None
    fig, ax = _figure()
    if cands:
        ax.scatter([c[key] for c in cands], [c["cost_usd_per_year"] / 1e3 for c in cands], s=10, color="0.65",
                   label="candidates (analytic P99)", zorder=2)
    for topo in dict.fromkeys(f["topology"] for f in front):
        rows = [f for f in front if f["topology"] == topo and f["p99_ttft_ms"] is not None]
        ax.plot([r["p99_ttft_ms"] for r in rows], [r["cost_usd_per_year"] / 1e3 for r in rows], "-", lw=1,
                alpha=0.7, label=f"{topo} frontier (analytic)")
    sim = [c for c in cands if c.get("p99_ttft_ms_sim") is not None]
    for c in sim:
        ax.plot([c[key], c["p99_ttft_ms_sim"]], [c["cost_usd_per_year"] / 1e3] * 2, color="tab:red", lw=0.8,
                alpha=0.6, zorder=3)
    if sim:
        ax.scatter([c["p99_ttft_ms_sim"] for c in sim], [c["cost_usd_per_year"] / 1e3 for c in sim], marker="D",
                   s=22, color="tab:red", label="simulated P99 (95% upper bound)", zorder=4)
    rec = run.get("recommendation")
    if rec and rec.get("p99_ttft_ms_sim") is not None:
        ax.scatter([rec["p99_ttft_ms_sim"]], [rec["cost_usd_per_year"] / 1e3], marker="*", s=160,
                   color="gold", edgecolor="black", label="recommendation", zorder=5)
    slo = (run.get("inputs") or {}).get("slo_ttft_ms")
    if slo:
        ax.axvline(slo, color="0.3", ls=":", lw=1, label=f"SLO {slo:g} ms")
    ax.set_xscale("log")
    _log_ms_axis(ax.xaxis)
    ax.set_xlabel("P99 TTFT (ms)")
    ax.set_ylabel("cost ($K / year)")
    ax.set_title("Cost vs P99 TTFT (cheapest candidates; frontier per topology)")
    ax.legend(fontsize=7)
    return fig


def _log_ms_axis(axis) -> None:
    """Log axis labelled 1, 2, 5, 10, 20, 50, ... in plain numbers (no overlapping minor labels)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.3g}"))
    axis.set_minor_formatter(NullFormatter())


def _integer_axis(axis) -> None:
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _pool_label(r: dict[str, Any]) -> str:
    return f"{r['pool']}\n{r['gpu']}\n{r['min_tokens'] + 1}-{r['max_tokens']}"


def _breakdown(run: dict[str, Any]):
    rows = [r for r in run.get("procurement") or [] if r["pool"] not in ("total", "rejected")]
    if not rows:
        return None
    fig, ax = _figure()
    labels = [_pool_label(r) for r in rows]
    ax.bar(labels, [r["count"] for r in rows], label="serving")
    if any(r["spares"] for r in rows):
        ax.bar(labels, [r["spares"] for r in rows], bottom=[r["count"] for r in rows], label="spares")
    for i, r in enumerate(rows):
        ax.annotate(str(r["count"] + r["spares"]), (i, r["count"] + r["spares"]), ha="center", va="bottom",
                    fontsize=8)
    _integer_axis(ax.yaxis)
    ax.set_ylim(0, max(r["count"] + r["spares"] for r in rows) * 1.15 + 0.5)
    ax.set_ylabel("GPUs")
    ax.set_title("Recommended fleet: GPUs per pool")
    ax.legend(fontsize=7, loc="upper left")
    return fig


def _utilisation(run: dict[str, Any]):
    rows = [r for r in run.get("procurement") or [] if r["pool"] != "total" and r.get("utilisation") is not None]
    if not rows:
        return None
    sim = {p["pool"]: p.get("utilisation_sim") for p in run.get("latency_profiles") or []}
    fig, ax = _figure()
    x = list(range(len(rows)))
    width = 0.38
    ax.bar([i - width / 2 for i in x], [r["utilisation"] for r in rows], width,
           label="analytic load ρ (rate / capacity)")
    sim_x = [(i, sim[r["pool"]]) for i, r in zip(x, rows, strict=True) if sim.get(r["pool"]) is not None]
    if sim_x:
        ax.bar([i + width / 2 for i, _ in sim_x], [u for _, u in sim_x], width,
               label="simulated (share of time a step runs)")
    rho_max = (run.get("inputs") or {}).get("rho_max")
    if rho_max:
        ax.axhline(rho_max, color="0.3", ls=":", lw=1, label=f"ρ cap {rho_max:g}")
    ax.set_xticks(x, [_pool_label(r) for r in rows])
    ax.set_ylim(0, 1.35)  # room for the legend above the bars
    ax.set_yticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_ylabel("utilisation")
    ax.set_title("Recommended fleet: utilisation per pool")
    ax.legend(fontsize=7, loc="upper left", ncols=2)
    return fig


def _latency_cdf(run: dict[str, Any]):
    profiles = run.get("latency_profiles") or []
    if not profiles:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(FIG_SIZE_IN[0] * 1.6, FIG_SIZE_IN[1]), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, 2)
    slo = {"ttft_ms": (run.get("inputs") or {}).get("slo_ttft_ms"), "tpot_ms": (run.get("inputs") or {}).get(
        "slo_tpot_ms")}
    for ax, key, what in ((axes[0], "ttft_ms", "TTFT"), (axes[1], "tpot_ms", "TPOT")):
        drawn = False
        for p in profiles:
            pts = [(t, q / 100.0) for t, q in zip(p[key], p["levels_pct"], strict=True) if t is not None and t > 0]
            if len(pts) > 1:
                ax.plot([x for x, _ in pts], [y for _, y in pts], "-", drawstyle="steps-post",
                        label=f"{p['pool']} ({p['gpu']})")
                drawn = True
        if slo[key]:
            ax.axvline(slo[key], color="0.3", ls=":", lw=1, label=f"SLO {slo[key]:g} ms")
        ax.axhline(0.99, color="0.75", lw=0.8)
        if drawn:
            ax.set_xscale("log")
            _log_ms_axis(ax.xaxis)
        ax.set_ylim(0, 1.0)
        ax.set_xlabel(f"simulated {what} (ms)")
        ax.set_ylabel("fraction of requests")
        ax.set_title(f"{what} distribution per pool")
        ax.legend(fontsize=7)
    return fig


def _whatif(doc: dict[str, Any] | None):
    pts = [p for p in (doc or {}).get("points", []) if p.get("total_gpus")]
    if not pts:
        return None
    fig, ax = _figure()
    lam = [p["lam_per_s"] for p in pts]
    ax.step(lam, [p["total_gpus"] for p in pts], where="post", label="GPUs")
    for p in pts:
        if p.get("holds_until_lam_per_s") is not None:
            ax.plot([p["lam_per_s"], p["holds_until_lam_per_s"]], [p["total_gpus"]] * 2, color="0.6", lw=1)
            ax.plot([p["holds_until_lam_per_s"]], [p["total_gpus"]], "|", color="red", ms=10)
    ax.set_xlabel("arrival rate λ (req/s)")
    ax.set_ylabel("GPUs")
    _integer_axis(ax.yaxis)
    ax2 = ax.twinx()
    ax2.plot(lam, [p["cost_usd_per_year"] / 1e3 for p in pts], "o", color="tab:orange", ms=3,
             label="cost ($K / year)")
    ax2.set_ylabel("cost ($K / year)")
    lines = ax.get_legend_handles_labels()[0][:1] + ax2.get_legend_handles_labels()[0]
    ax.legend(lines, [h.get_label() for h in lines], fontsize=7, loc="upper left")
    ax.set_title("Fleet steps vs λ (red tick: fleet holds until)")
    return fig


def _gridflex(doc: dict[str, Any] | None):
    rows = (doc or {}).get("levels") or []
    if not rows:
        return None
    fig, ax = _figure()
    flex = [r["flex_pct"] for r in rows]
    ax.plot(flex, [r["fleet_kw"] for r in rows], "o-", label="fleet kW")
    ax.set_xlabel("curtailment (%)")
    ax.set_ylabel("fleet power (kW)")
    ax2 = ax.twinx()
    for key, label in (("p99_ttft_ms_analytic", "P99 analytic"), ("p99_ttft_ms_sim_window", "P99 sim window"),
                       ("p99_ttft_ms_sim_steady", "P99 sim steady")):
        pts = [(f, r[key]) for f, r in zip(flex, rows, strict=True) if r.get(key) is not None]
        if pts:
            ax2.plot([p[0] for p in pts], [p[1] for p in pts], "s--", ms=3, label=label)
    ax2.set_yscale("log")
    ax2.set_ylabel("P99 TTFT (ms)")
    ax2.legend(fontsize=7)
    ax.set_title("Grid flex: power and latency vs curtailment")
    return fig


def throughput_frontier_figure(rows: list[dict[str, Any]], fmt: str = "png") -> bytes | None:
    """Throughput per GPU vs tokens/s per user (``report.procurement.throughput_rows``);
    None without matplotlib or rows."""
    if not plots_available() or not rows:
        return None
    fig, ax = _figure()
    ok = [r for r in rows if r["meets_ttft"]]
    bad = [r for r in rows if not r["meets_ttft"]]
    front = sorted((r for r in ok if r["on_frontier"]), key=lambda r: r["tokens_per_s_per_user"])
    ax.scatter([r["tokens_per_s_per_user"] for r in ok], [r["throughput_tokens_per_s_per_gpu"] for r in ok],
               s=10, color="0.6", label="meets TTFT limit")
    ax.scatter([r["tokens_per_s_per_user"] for r in bad], [r["throughput_tokens_per_s_per_gpu"] for r in bad],
               s=10, marker="x", color="tab:red", label="misses TTFT limit")
    ax.plot([r["tokens_per_s_per_user"] for r in front], [r["throughput_tokens_per_s_per_gpu"] for r in front],
            "o-", label="Pareto frontier")
    ax.set_xlabel("tokens/s per user (1 / P95 TPOT)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_title(f"Throughput vs interactivity ({rows[0]['architecture']})")
    ax.legend(fontsize=7)
    return _bytes(fig, fmt)


_RUN_FIGURES: dict[str, Callable] = {"pareto": _pareto, "gpu_breakdown": _breakdown, "utilisation": _utilisation,
                                     "latency_cdf": _latency_cdf}


def figures(run: dict[str, Any] | None, whatif: dict[str, Any] | None = None,
            gridflex: dict[str, Any] | None = None, fmt: str = "png") -> dict[str, bytes]:
    """Name -> image bytes in ``fmt`` for every figure the documents support ({} without matplotlib)."""
    if not plots_available():
        return {}
    out: dict[str, bytes] = {}
    makers: list[tuple[str, Callable, Any]] = [(n, f, run) for n, f in _RUN_FIGURES.items() if run]
    makers += [("whatif_steps", _whatif, whatif), ("grid_flex", _gridflex, gridflex)]
    for name, make, doc in makers:
        fig = make(doc)
        if fig is not None:
            out[name] = _bytes(fig, fmt)
    return out
