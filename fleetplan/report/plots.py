"""Plots of run documents (``report.run_json``): PNG/SVG bytes, drawn from the JSON alone.

matplotlib is the optional extra ``fleetplan[plot]``; it is imported only inside the
drawing functions (``matplotlib.figure.Figure``, no pyplot global state).  Without it
``plots_available()`` is False and ``figures`` returns nothing; callers say
``PLOT_HINT``.

Figures (each skipped when its data is absent):

* ``pareto``: every feasible candidate's annual cost vs analytic P99 TTFT, with the
  per-topology Pareto frontiers as lines;
* ``gpu_breakdown``: the recommendation's GPUs per pool (serving + spares, stacked);
* ``latency_cdf``: per-pool simulated TTFT distribution (quantile points, log time axis);
* ``whatif_steps``: GPUs and annual cost vs λ as steps, with each fleet's step threshold;
* ``grid_flex``: fleet kW and P99 TTFT vs curtailment level.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

PLOT_HINT = "plots need matplotlib: pip install 'fleetplan[plot]'"
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


def _pareto(run: dict[str, Any]):
    key = next((k for k in (run.get("candidates") or [{}])[0] if k.endswith("_ttft_ms") and k[1].isdigit()), None)
    pts = [(c["cost_usd_per_year"], c[key]) for c in run.get("candidates", [])
           if c.get("feasible") and key and c.get(key) is not None]
    front = run.get("cost_latency_frontier") or []
    if not pts and not front:
        return None
    fig, ax = _figure()
    if pts:
        ax.scatter([p[1] for p in pts], [p[0] / 1e3 for p in pts], s=8, color="0.7", label="candidates")
    for topo in dict.fromkeys(f["topology"] for f in front):
        rows = [f for f in front if f["topology"] == topo and f["p99_ttft_ms"] is not None]
        ax.plot([r["p99_ttft_ms"] for r in rows], [r["cost_usd_per_year"] / 1e3 for r in rows], "o-",
                label=f"{topo} frontier")
    ax.set_xlabel("analytic P99 TTFT (ms)")
    ax.set_ylabel("cost ($K / year)")
    ax.set_title("Cost vs P99 TTFT (Pareto frontier per topology)")
    ax.legend(fontsize=7)
    return fig


def _breakdown(run: dict[str, Any]):
    rows = [r for r in run.get("procurement") or [] if r["pool"] not in ("total", "rejected")]
    if not rows:
        return None
    fig, ax = _figure()
    labels = [f"{r['pool']}\n{r['gpu']}\n{r['min_tokens'] + 1}-{r['max_tokens']}" for r in rows]
    ax.bar(labels, [r["count"] for r in rows], label="serving")
    ax.bar(labels, [r["spares"] for r in rows], bottom=[r["count"] for r in rows], label="spares")
    ax.set_ylabel("GPUs")
    ax.set_title("Recommended fleet: GPUs per pool")
    ax.legend(fontsize=7)
    return fig


def _latency_cdf(run: dict[str, Any]):
    profiles = run.get("latency_profiles") or []
    if not profiles:
        return None
    fig, ax = _figure()
    for p in profiles:
        pts = [(t, q / 100.0) for t, q in zip(p["ttft_ms"], p["levels_pct"], strict=True) if t is not None and t > 0]
        if pts:
            ax.plot([x for x, _ in pts], [y for _, y in pts], "o-", label=f"{p['pool']} ({p['gpu']})")
    ax.set_xscale("log")
    ax.set_xlabel("simulated TTFT (ms)")
    ax.set_ylabel("fraction of requests")
    ax.set_title("TTFT distribution per pool (simulated)")
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
    ax2 = ax.twinx()
    ax2.plot(lam, [p["cost_usd_per_year"] / 1e3 for p in pts], "o", color="tab:orange", ms=3)
    ax2.set_ylabel("cost ($K / year)")
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


_RUN_FIGURES: dict[str, Callable] = {"pareto": _pareto, "gpu_breakdown": _breakdown, "latency_cdf": _latency_cdf}


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
