"""Horizon plan documents: action CSV rows, the JSON document and an HTML page with the capacity
chart (formats only; the figures come from the JSON document alone).

CSV columns: date, order_by, action (buy / retire / rent / release / move), gpu, count, pool,
fleet_after, cost_usd_period (the period's discounted cost), cumulative_cost_usd, terms (rent /
release: reserved until a date, on demand, or a reserved term that ended).
Chart: each period's fleet capacity (req/s, ``plan.horizon.schedule.capacity_per_s``) as steps
against the forecast band P50-P90, purchases marked at their dates.
"""

from __future__ import annotations

import base64
import html
import math
import os
from typing import TYPE_CHECKING, Any

from fleetplan.plan.horizon.schedule import fleet_label
from fleetplan.report.atomic import atomic_write_text
from fleetplan.report.html import _STYLE, table
from fleetplan.report.plots import PLOT_HINT, _bytes, _figure, plots_available

if TYPE_CHECKING:
    from fleetplan.plan.horizon.plan import HorizonPlan, PeriodPlan
    from fleetplan.plan.horizon.schedule import Action

PLAN_COLUMNS = ("date", "order_by", "action", "gpu", "count", "pool", "fleet_after", "cost_usd_period",
                "cumulative_cost_usd", "terms")
PERIOD_COLUMNS = ("date", "p50_per_s", "p90_per_s", "arrival_cv2", "fleet", "capacity_per_s", "owned", "rented",
                  "reserved", "on_demand", "verified", "cost_usd", "spend_usd", "baseline_fleet", "baseline_cost_usd")
MONEY_DIGITS = 2


def plan_rows(actions: tuple[Action, ...]) -> list[dict[str, Any]]:
    """One row per action (``HorizonPlan.actions`` / ``baseline_actions``)."""
    return [{"date": a.date.isoformat(), "order_by": a.order_by.isoformat(), "action": a.action, "gpu": a.gpu,
             "count": a.count, "pool": a.pool, "fleet_after": a.fleet_after,
             "cost_usd_period": round(a.cost_usd_period, MONEY_DIGITS),
             "cumulative_cost_usd": round(a.cumulative_cost_usd, MONEY_DIGITS), "terms": a.terms}
            for a in actions]


def _counts(types: tuple[str, ...], values: tuple[int, ...]) -> str:
    return ", ".join(f"{n}x {g}" for g, n in zip(types, values, strict=True) if n) or "-"


def _period_row(plan: HorizonPlan, p: PeriodPlan, b: PeriodPlan, cap: float) -> dict[str, Any]:
    return {"date": p.date.isoformat(), "p50_per_s": round(p.p50_per_s, 4), "p90_per_s": round(p.p90_per_s, 4),
            "arrival_cv2": round(p.arrival_cv2, 4), "fleet": fleet_label(p.fleet),
            "capacity_per_s": None if math.isinf(cap) else round(cap, 3),
            "owned": _counts(plan.types, p.owned), "rented": _counts(plan.types, p.rented),
            "reserved": _counts(plan.types, p.reserved), "on_demand": _counts(plan.types, p.on_demand),
            "verified": p.verified, "cost_usd": round(p.cost_usd, MONEY_DIGITS),
            "spend_usd": round(p.spend_usd, MONEY_DIGITS), "baseline_fleet": fleet_label(b.fleet),
            "baseline_cost_usd": round(b.cost_usd, MONEY_DIGITS)}


def horizon_dict(plan: HorizonPlan, workload: str, seed: int, version: str = "") -> dict[str, Any]:
    s = plan.settings
    saving = plan.saving_usd
    return {
        "kind": "horizon_plan",
        "version": version,
        "seed": seed,
        "workload": workload,
        "forecast": s.forecast.source,
        "types": list(plan.types),
        "initial_fleet": {g: n for g, n in zip(plan.types, plan.initial, strict=True) if n},
        "allow_retire": s.allow_retire,
        "lead_time_weeks": s.lead_time_weeks,
        "budget_usd_per_period": s.budget_usd_per_period,
        "discount_rate_per_year": s.discount_rate_per_year,
        "available_from": {g: d.isoformat() for g, d in s.available_from},
        "total_cost_usd": round(plan.total_cost_usd, MONEY_DIGITS),
        "baseline_cost_usd": round(plan.baseline_cost_usd, MONEY_DIGITS),
        "saving_usd": round(saving, MONEY_DIGITS),
        "saving_fraction": round(saving / plan.baseline_cost_usd, 6) if plan.baseline_cost_usd > 0 else 0.0,
        "verified": all(p.verified for p in plan.periods),
        "prices": {g: {"on_demand_usd_per_h": pr.on_demand_usd_per_h, "reserved_usd_per_h": pr.reserved_usd_per_h,
                       "reserved_term_months": pr.reserved_term_months,
                       "capex_usd": pr.capex_usd, "amortisation_months": pr.amortisation_months,
                       "resale_fraction": pr.resale_fraction, "sources": dict(pr.sources)}
                   for g, pr in s.prices.items() if g in plan.types},
        "periods": [_period_row(plan, p, b, cap) for p, b, cap
                    in zip(plan.periods, plan.baseline, plan.capacities_per_s, strict=True)],
        "actions": plan_rows(plan.actions),
        "baseline_actions": plan_rows(plan.baseline_actions),
    }


def capacity_figure(doc: dict[str, Any]) -> bytes | None:
    """PNG of capacity vs the forecast band with purchases marked (None without matplotlib)."""
    if not plots_available() or not doc.get("periods"):
        return None
    import datetime as dt

    fig, ax = _figure()
    per = doc["periods"]
    dates = [dt.date.fromisoformat(p["date"]) for p in per]
    ax.fill_between(dates, [p["p50_per_s"] for p in per], [p["p90_per_s"] for p in per], step="post",
                    color="tab:blue", alpha=0.25, label="forecast P50-P90")
    ax.plot(dates, [p["p90_per_s"] for p in per], drawstyle="steps-post", color="tab:blue", lw=1)
    caps = [p["capacity_per_s"] if p["capacity_per_s"] is not None else float("nan") for p in per]
    ax.plot(dates, caps, drawstyle="steps-post", color="tab:green", lw=2, label="fleet capacity")
    buys = [a for a in doc["actions"] if a["action"] == "buy"]
    cap_at = dict(zip([p["date"] for p in per], caps, strict=True))
    if buys:
        ax.plot([dt.date.fromisoformat(a["date"]) for a in buys], [cap_at[a["date"]] for a in buys], "v",
                color="tab:red", ms=7, label="purchase")
        for a in buys:
            ax.annotate(f"+{a['count']} {a['gpu']}", (dt.date.fromisoformat(a["date"]), cap_at[a["date"]]),
                        textcoords="offset points", xytext=(2, 6), fontsize=6)
    ax.set_ylabel("req/s")
    ax.set_title("Capacity vs forecast (purchases marked)")
    ax.legend(fontsize=7, loc="upper left")
    fig.autofmt_xdate()
    return _bytes(fig, "png")


def render_horizon_html(doc: dict[str, Any]) -> str:
    img = capacity_figure(doc)
    chart = (f"<img alt='capacity' id='plot-capacity' src='data:image/png;base64,"
             f"{base64.b64encode(img).decode('ascii')}'>" if img else f"<p class='hint'>{html.escape(PLOT_HINT)}</p>")
    head = (f"<p>Workload {html.escape(doc['workload'])}; forecast {html.escape(doc['forecast'])}. Horizon-optimal "
            f"plan ${doc['total_cost_usd']:,.0f} vs per-step cheapest ${doc['baseline_cost_usd']:,.0f} "
            f"(saving ${doc['saving_usd']:,.0f}, {doc['saving_fraction']:.1%}); "
            f"{'every fleet simulation-verified' if doc['verified'] else 'analytic only'}.</p>")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>fleetplan procurement plan</title>"
            f"<style>{_STYLE}</style></head><body><h1>Procurement plan</h1>{head}<h2>Capacity</h2>{chart}"
            f"<h2>Actions</h2>{table(PLAN_COLUMNS, doc['actions'])}"
            f"<h2>Periods</h2>{table(PERIOD_COLUMNS, doc['periods'])}</body></html>\n")


def write_horizon_html(doc: dict[str, Any], path: str | os.PathLike) -> None:
    atomic_write_text(path, render_horizon_html(doc))


def peak_valley_dict(pv) -> dict[str, Any]:
    """``plan.peak.PeakValley`` as JSON (rates req/s, money USD per day)."""
    return {
        "profile": pv.profile.source,
        "step_s": pv.profile.step_s,
        "rates_per_s": list(pv.profile.rates_per_s),
        "window_s": pv.window_s,
        "peak_lam_per_s": pv.peak_rate_per_s,
        "peak_starts_at_s": pv.peak_starts_at_s,
        "utilisation": [round(u, 4) for u in pv.utilisation],
        "peak_gpus": dict(pv.peak_gpus),
        "all_owned_usd_per_day": round(pv.all_owned_usd_per_day, MONEY_DIGITS),
        "base_gpus": dict(pv.base_gpus),
        "base_plus_on_demand_usd_per_day": round(pv.base_plus_on_demand_usd_per_day, MONEY_DIGITS),
    }
