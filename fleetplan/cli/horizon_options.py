"""``fleetplan whatif --plan``: the horizon-optimal incremental procurement plan (options, rendering)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import click
from rich.table import Table

from fleetplan.cli.peak_options import (  # noqa: F401 - re-exported for the commands that import them here
    PEAK_OPTIONS,
    peak_valley_doc,
    print_peak_valley,
    rate_profile_from_options,
)
from fleetplan.cli.plan_options import CURRENT_FLEET_OPTION, current_fleet_gpus
from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.hardware.procurement import load_gpu_prices
from fleetplan.plan.defaults import DEFAULT_CANDIDATES_PER_PERIOD
from fleetplan.plan.horizon.forecast import compound_forecast, read_forecast_csv

#: Plans of at most this many periods sweep in this process (no worker start-up) unless --workers is given.
IN_PROCESS_MAX_PERIODS = 3

HORIZON_OPTIONS = (
    click.option("--plan", "plan_mode", is_flag=True,
                 help="Plan procurement over the horizon: start from the owned fleet, only add (or retire with "
                 "--allow-retire), minimise the total cost (implied by --forecast or --current-fleet)."),
    click.option("--forecast", "forecast_csv", type=click.Path(exists=True, dir_okay=False), default=None,
                 help="Demand forecast CSV: date plus rate and/or p50,p90 (req/s); the plan meets p90."),
    CURRENT_FLEET_OPTION,
    click.option("--allow-retire", is_flag=True, help="Let the plan sell owned GPUs (at their resale value)."),
    click.option("--budget-per-period", type=click.FloatRange(min=0, min_open=True), default=None,
                 help="Most USD spent in one period (capex of purchases + rent)."),
    click.option("--gpu-available", "gpu_available", multiple=True,
                 help="GPU=YYYY-MM-DD: the type can be bought or rented only from that date (repeatable)."),
    click.option("--discount-rate", type=click.FloatRange(min=0), default=0.0, show_default=True,
                 help="Yearly discount rate of future costs (fraction, e.g. 0.08)."),
    click.option("--procurement-prices", type=click.Path(exists=True, dir_okay=False), default=None,
                 help="Buy / reserved prices TOML (default: gpu_profiles/procurement/prices.toml)."),
    click.option("--candidates-per-period", type=click.IntRange(min=1), default=DEFAULT_CANDIDATES_PER_PERIOD,
                 show_default=True, help="Cheapest distinct fleets per period the plan chooses from."),
)


def horizon_requested(opts: dict) -> bool:
    return bool(opts["plan_mode"] or opts["forecast_csv"] or opts["current_fleet"])


def _available(values: tuple[str, ...], catalog) -> tuple[tuple[str, dt.date], ...]:
    out = []
    for v in values:
        name, _, date = v.partition("=")
        try:
            when = dt.date.fromisoformat(date.strip())
        except ValueError as exc:
            raise ConfigError(f"--gpu-available {v!r} is invalid: write GPU=YYYY-MM-DD, e.g. h200=2026-06-01") from exc
        out.append((catalog.get(name.strip()).name, when))
    return tuple(out)


def forecast_from_options(opts: dict, growth_per_month: float | None, start: dt.date, months: int,
                          start_lam: float | None):
    if opts["forecast_csv"]:
        if growth_per_month is not None or start_lam is not None:
            raise ConfigError("--forecast gives the rates: drop --growth and --start-lam, or drop --forecast")
        return read_forecast_csv(opts["forecast_csv"])
    if growth_per_month is None or start_lam is None:
        raise ConfigError("a plan needs a forecast: give --forecast FILE.csv, or --growth (e.g. 15%/month) with "
                          "--start-lam and --months")
    return compound_forecast(start_lam, growth_per_month, months, start)


def run_horizon(opts: dict, forecast, request, verify, arrivals, lead_time_weeks: float, progress, map_fn):
    """The plan for the parsed options (library call only)."""
    catalog = load_catalog(opts["gpu_profiles"], dict(opts["prices"]) if opts["prices"] else None)
    current = current_fleet_gpus(opts["current_fleet"], catalog)
    types = tuple(sorted({g.name for g in request.gpus} | {g for g, _ in current}))
    from fleetplan.plan.horizon.plan import HorizonSettings, plan_horizon  # the planner: on use, not for --help

    settings = HorizonSettings(
        forecast=forecast,
        prices=load_gpu_prices(catalog, types, opts["procurement_prices"]),
        current_fleet=current,
        allow_retire=opts["allow_retire"],
        lead_time_weeks=lead_time_weeks,
        budget_usd_per_period=opts["budget_per_period"],
        available_from=_available(opts["gpu_available"], catalog),
        discount_rate_per_year=opts["discount_rate"],
        n_candidates=opts["candidates_per_period"],
    )
    return plan_horizon(request, settings, arrivals, verify, progress, map_fn=map_fn)


def write_and_render(plan, console, workload: str, seed: int, json_path, csv_path, html_path) -> None:
    from fleetplan.report.atomic import atomic_write_text
    from fleetplan.report.horizon import PLAN_COLUMNS, horizon_dict, write_horizon_html
    from fleetplan.report.procurement import rows_to_csv
    from fleetplan.report.run_json import write_json

    doc = horizon_dict(plan, workload, seed)
    if json_path:
        write_json(doc, json_path)
    if csv_path:
        atomic_write_text(csv_path, rows_to_csv(PLAN_COLUMNS, doc["actions"]))
    if html_path:
        write_horizon_html(doc, html_path)
    t = Table(title=f"Procurement plan ({doc['forecast']}; " + ("simulation-verified" if doc["verified"]
                                                                else "analytic only") + ")")
    for col in ("date", "order by", "action", "GPU", "count", "terms", "pool", "fleet after", "cumulative $"):
        t.add_column(col, justify="left" if col in ("action", "GPU", "terms", "pool", "fleet after") else "right")
    for a in doc["actions"]:
        t.add_row(a["date"], a["order_by"], a["action"], a["gpu"], str(a["count"]), a["terms"] or "-", a["pool"],
                  a["fleet_after"], f"{a['cumulative_cost_usd']:,.0f}")
    console.print(t)
    console.print(f"Horizon-optimal plan: ${doc['total_cost_usd']:,.0f} over {len(doc['periods'])} periods; per-step "
                  f"cheapest fleets: ${doc['baseline_cost_usd']:,.0f}; saving ${doc['saving_usd']:,.0f} "
                  f"({doc['saving_fraction']:.1%}). Costs: purchases amortised straight-line, rent reserved "
                  "for its term (paid used or not) or on demand, owned GPUs at the start sunk (prices and sources "
                  "in the JSON).")
    for p in (json_path, csv_path, html_path):
        if p:
            console.print(f"wrote {Path(p)}")
