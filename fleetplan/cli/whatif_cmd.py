"""``fleetplan whatif``: the cheapest verified fleet per arrival rate, step thresholds and,
with ``--growth``, a dated procurement schedule."""

from __future__ import annotations

import datetime as dt
import re

import click
from rich.table import Table

from fleetplan.cli.errors import one_line_errors
from fleetplan.cli.first_run import Kernel, announce_compile
from fleetplan.cli.horizon_options import (
    HORIZON_OPTIONS,
    IN_PROCESS_MAX_PERIODS,
    forecast_from_options,
    horizon_requested,
    run_horizon,
    write_and_render,
)
from fleetplan.cli.optimize_view import context_limit_line
from fleetplan.cli.options import (
    csv_option,
    deploy_option,
    executor_from_options,
    executor_options,
    html_option,
    json_option,
    quiet_option,
)
from fleetplan.cli.plan_options import plan_arrivals, plan_inputs, plan_options
from fleetplan.cli.progress import progress_reporter
from fleetplan.cli.report_output import render_documents, report_console
from fleetplan.errors import ConfigError

_EXAMPLES = """\b
Examples:
  fleetplan whatif --workload azure_conv --lam-range 25:400:25 --slo-ttft 500 --gpus h100 --topology two-pool
  fleetplan whatif --workload lmsys --lam-range 50:300:50 --slo-ttft 500 --no-verify \\
      --growth 15%/month --months 24 --start-lam 50 --lead-time-weeks 8 --start-date 2026-01-01
  fleetplan whatif --workload lmsys --lam-range 50:200:50 --slo-ttft 500 --json growth.json --csv growth.csv
  fleetplan whatif --workload azure_conv --slo-ttft 500 --plan --growth 15%/month --months 24 --start-lam 50 \\
      --current-fleet examples/mixed_a10g_h100.toml --lead-time-weeks 8 --csv plan.csv --html plan.html
  fleetplan whatif --workload lmsys --slo-ttft 500 --forecast demand.csv --budget-per-period 60000 --no-verify
"""
_GROWTH = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*%?\s*(?:/\s*(?:month|mo))?\s*$", re.IGNORECASE)


def _deploy_first_fleet(result, seed: int, deploy_dir: str) -> str:
    """``--deploy DIR``: the first rate's fleet, written as ``fleetplan deploy`` writes a run's recommendation."""
    from fleetplan.cli.report_output import write_deploy_folder
    from fleetplan.plan.deployment import whatif_point_result
    from fleetplan.plan.figures import with_report_figures
    from fleetplan.report.run_json import optimize_run_dict

    point = whatif_point_result(result)
    if point is None:
        return f"--deploy: nothing written to {deploy_dir}: no rate has a fleet"
    return write_deploy_folder(optimize_run_dict(with_report_figures(point, None, seed), seed), deploy_dir)


def horizon_options(func):
    for option in reversed(HORIZON_OPTIONS):
        func = option(func)
    return func


def parse_lam_range(text: str) -> tuple[float, ...]:
    parts = text.split(":")
    try:
        start, stop, step = (float(p) for p in parts)
    except ValueError as exc:
        raise ConfigError(f"--lam-range {text!r} is invalid: write START:STOP:STEP in req/s, e.g. 25:400:25") from exc
    from fleetplan.plan.whatif import rate_grid

    return rate_grid(start, stop, step)


def parse_growth(text: str) -> float:
    """``15%/month``, ``15%`` or ``15`` -> 0.15 per month."""
    m = _GROWTH.match(text)
    if not m or float(m.group(1)) <= 0:
        raise ConfigError(f"--growth {text!r} is invalid: write a monthly percentage > 0, e.g. 15%/month")
    return float(m.group(1)) / 100.0


def parse_date(text: str | None) -> dt.date:
    if text is None:
        return dt.date.today()
    try:
        return dt.date.fromisoformat(text)
    except ValueError as exc:
        raise ConfigError(f"--start-date {text!r} is invalid: write YYYY-MM-DD, e.g. 2026-01-01") from exc


def _threshold_legend(method: str, percentile: float) -> str:
    """What "holds until" tested (simulated: the SLO alone; the fleets follow the sizing rules)."""
    if method == "analytic":
        return ("holds until λ (analytic): the largest rate at which every pool still needs no more GPUs than it "
                "has under the sizing rules (TTFT model, rho cap, spares).")
    return (f"holds until λ (simulated): the largest rate at which the fixed fleet's simulated P{percentile:g} TTFT "
            "(upper 95% bound; and TPOT with --slo-tpot) still meets the SLO. The SLO alone: the fleet at each λ is "
            "sized by the analytic rules (rho cap, spares), which can call for more GPUs before an earlier, "
            "smaller fleet's simulated threshold.")


@click.command("whatif", epilog=_EXAMPLES)
@click.option("--lam-range", "lam_range", default=None,
              help="Rates to plan for, START:STOP:STEP req/s (required without --plan).")
@plan_options
@click.option("--growth", default=None, help="Traffic growth per month, e.g. 15%/month (enables the schedule).")
@click.option("--months", type=click.IntRange(min=1), default=24, show_default=True, help="Schedule horizon.")
@click.option("--start-lam", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Rate at the start date (default: the first --lam-range rate).")
@click.option("--lead-time-weeks", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Order-to-serving lead time; order-by = date the current fleet runs out - lead time.")
@click.option("--start-date", default=None, help="Schedule start, YYYY-MM-DD (default: today).")
@json_option
@csv_option(help="Write the schedule (with --growth) or the per-rate points as CSV.")
@html_option
@deploy_option(help="Write the first rate's fleet (the one to run now) as a deployment folder, as `fleetplan "
               "deploy` does (per-rate what-if).")
@horizon_options
@quiet_option
@executor_options
@one_line_errors
def whatif_command(lam_range, growth, months, start_lam, lead_time_weeks, start_date, json_path, csv_path,
                   html_path, deploy_dir, quiet, executor, workers, ray_address, **opts) -> None:
    """Cheapest fleet per λ and the rate up to which each one holds ("buy before then").

    With --plan (or --forecast / --current-fleet): a procurement plan over the forecast that starts from
    the owned fleet, only adds GPUs (retires with --allow-retire) and minimises the total cost over the
    horizon, every period's fleet simulated at its rate.
    """
    # the planner and the report writers load here, when the command runs (not for --help)
    from fleetplan.plan.growth import procurement_schedule
    from fleetplan.plan.optimize import verification_requests
    from fleetplan.plan.whatif import threshold_requests, whatif
    from fleetplan.report.atomic import atomic_write_text
    from fleetplan.report.procurement import (
        SCHEDULE_COLUMNS,
        WHATIF_COLUMNS,
        rows_to_csv,
        schedule_rows,
        whatif_rows,
    )
    from fleetplan.report.run_json import whatif_dict, write_json

    growth_per_month = None if growth is None else parse_growth(growth)
    start = parse_date(start_date)
    if horizon_requested(opts):
        if lam_range is not None:
            raise ConfigError("--lam-range applies to the per-rate what-if, not to --plan: drop it (the forecast "
                              "gives the rates)")
        if deploy_dir is not None:
            raise ConfigError("--deploy writes the per-rate what-if's first fleet; with --plan, run optimize at the "
                              "first period's rate with --deploy")
        forecast = forecast_from_options(opts, growth_per_month, start, months, start_lam)
        wl, request, verify, _ = plan_inputs(opts, forecast.p90_per_s[0])
        n_sim = 0 if forecast.n_periods <= IN_PROCESS_MAX_PERIODS else None
        with progress_reporter(quiet) as progress, \
                executor_from_options(executor, workers, ray_address, simulated_requests=n_sim) as run_tasks:
            plan = run_horizon(opts, forecast, request, verify, plan_arrivals(opts), lead_time_weeks, progress,
                               run_tasks)
        write_and_render(plan, report_console(), wl.name, opts["seed"], json_path, csv_path, html_path)
        return
    for flag, given in (("--allow-retire", opts["allow_retire"]), ("--budget-per-period", opts["budget_per_period"]),
                        ("--gpu-available", opts["gpu_available"]), ("--procurement-prices",
                                                                      opts["procurement_prices"])):
        if given:
            raise ConfigError(f"{flag} applies to a procurement plan: add --plan, or drop {flag}")
    if lam_range is None:
        raise ConfigError("--lam-range is required without --plan: give START:STOP:STEP req/s, e.g. 25:400:25")
    rates = parse_lam_range(lam_range)
    wl, request, verify, _ = plan_inputs(opts, rates[0])
    n_sim = 0 if verify is None else len(rates) * (verification_requests(request, verify) + threshold_requests(verify))
    announce_compile([Kernel.ITERATION])
    with progress_reporter(quiet) as progress, \
            executor_from_options(executor, workers, ray_address, simulated_requests=n_sim) as run_tasks:
        result = whatif(request, rates, verify, progress=progress, map_fn=run_tasks, arrivals=plan_arrivals(opts))
    schedule = None
    if growth_per_month is not None:
        schedule = procurement_schedule(result.points, start_lam or rates[0], growth_per_month, months, start,
                                        lead_time_weeks)
    doc = whatif_dict(result, opts["seed"], schedule)
    if json_path:
        write_json(doc, json_path)
    if csv_path:
        text = rows_to_csv(SCHEDULE_COLUMNS, schedule_rows(schedule)) if schedule else \
            rows_to_csv(WHATIF_COLUMNS, whatif_rows(result))
        atomic_write_text(csv_path, text)
    notes = render_documents(None, doc, None, html_path, None)
    if deploy_dir is not None:
        notes.append(_deploy_first_fleet(result, opts["seed"], deploy_dir))
    console = report_console()
    table = Table(title=f"What-if on {wl.name}: P{request.percentile:g} TTFT <= {opts['slo_ttft_ms']:g} ms; "
                        f"thresholds {result.threshold_method}")
    for col in ("λ req/s", "fleet", "GPUs", "$/yr", "holds until λ"):
        table.add_column(col, justify="left" if col == "fleet" else "right")
    for row in doc["points"]:
        thr = "-" if row["holds_until_lam_per_s"] is None else f"{row['holds_until_lam_per_s']:,.1f}"
        if row["threshold_is_lower_bound"]:
            thr = ">= " + thr
        table.add_row(f"{row['lam_per_s']:g}", row["fleet"] or (row["reason"] or "-"), str(row["total_gpus"]),
                      "-" if row["cost_usd_per_year"] is None else f"{row['cost_usd_per_year']:,.0f}", thr)
    console.print(table)
    console.print(_threshold_legend(result.threshold_method, request.percentile))
    line = context_limit_line(request, opts["model"], opts["max_model_len"] is not None)
    console.print(line if line.endswith(".") else line + ".")
    if schedule is not None:
        st = Table(title=f"Procurement schedule: {growth_per_month:.1%}/month from {schedule.start_rate_per_s:g} "
                         f"req/s, start {start.isoformat()}, lead time {lead_time_weeks:g} weeks")
        for col in ("month", "λ req/s", "fleet", "GPUs", "add", "current fleet runs out", "order by"):
            st.add_column(col, justify="left" if col == "fleet" else "right")
        for s in doc["schedule"]["steps"]:
            st.add_row(str(s["month"]), f"{s['lam_per_s']:,.1f}", s["fleet"], str(s["total_gpus"]),
                       f"{s['gpus_to_add']:+d}", s["previous_fleet_runs_out_on"] or "-", s["order_by"])
        console.print(st)
        if schedule.uncovered_from_month is not None:
            console.print(f"From month {schedule.uncovered_from_month} λ exceeds every planned fleet's threshold: "
                          "extend --lam-range.")
    for note in notes:
        console.print(note)
