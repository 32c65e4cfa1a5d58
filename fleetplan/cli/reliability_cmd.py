"""``fleetplan reliability``: spares per pool for hardware failures, by formula and by simulation.

Also defines the failure options shared with ``fleetplan simulate`` (``FAILURE_OPTIONS``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import click
from rich.table import Table

from fleetplan.cli.failure_options import failure_options, failures_from_options
from fleetplan.cli.first_run import Kernel, announce_compile
from fleetplan.cli.options import (
    FRACTION,
    POSITIVE,
    deprecated_spelling,
    fleet_option,
    input_fraction_option,
    lam_option,
    replications_option,
    seed_option,
    sim_requests_option,
    slo_tpot_option,
    slo_ttft_option,
    workload_option,
)
from fleetplan.cli.tables import make_console, ms_cell
from fleetplan.plan.defaults import DEFAULT_RELIABILITY_TARGET as DEFAULT_TARGET
from fleetplan.sim.fleet_toml import load_fleet_toml
from fleetplan.units import ms_to_s
from fleetplan.workload import load_workload

if TYPE_CHECKING:  # the planner and the simulator load when the command runs
    from fleetplan.plan.reliability import ReliabilityReport

DEFAULT_RATE_PER_S = 100.0
DEFAULT_HORIZON_DAYS = 30.0
SECONDS_PER_HOUR = 3600.0

def _hours(value_s: float) -> str:
    return "never" if math.isinf(value_s) else f"{value_s / SECONDS_PER_HOUR:,.4g} h"


def _table(report: ReliabilityReport, horizon_days: float) -> Table:
    table = Table(title="spares per pool")
    for col in ("spares/pool", "instances", "P(>= n up), random time", f"P(never short, {horizon_days:g} d)",
                "short h / horizon", "sim P99 TTFT ms (bound)", "sim P99 TPOT ms (bound)", "meets SLO"):
        table.add_column(col, justify="right")
    for r in report.rows:
        table.add_row(str(r.spares), str(r.n_instances), f"{r.prob_up:.6f}", f"{r.prob_hold_horizon:.6f}",
                      f"{r.shortfall_h:,.2f}", f"{ms_cell(r.p99_ttft_s)} ({ms_cell(r.p99_ttft_bound_s)})",
                      f"{ms_cell(r.p99_tpot_s)} ({ms_cell(r.p99_tpot_bound_s)})", "yes" if r.meets_slo else "no")
    return table


EXAMPLES = """\b
Examples:
  fleetplan reliability --fleet examples/two_pool_a100.toml --workload lmsys --lam 100 --slo-ttft 500
  fleetplan reliability --fleet examples/two_pool_a100.toml --workload lmsys --lam 100 --slo-ttft 500 \\
      --mtbf-h 2 --mttr-h 0.5 --target 0.999 --replications 5
  fleetplan reliability --fleet examples/homogeneous_h100.toml --workload lmsys --lam 50 --slo-ttft 500 \\
      --mtbf-h 720 --mttr-h 4 --repair fixed --horizon-days 90
"""


@click.command("reliability", epilog=EXAMPLES)
@fleet_option(required=True, help="Fleet TOML; each pool's instances are the instances it needs in service.")
@workload_option
@input_fraction_option
@lam_option(help=f"Arrival rate, requests/s (default: the workload's own, else {DEFAULT_RATE_PER_S:g}); "
            "--request-rate: vLLM's spelling.")
@slo_ttft_option(required=True, help="P99 TTFT SLO, ms.")
@slo_tpot_option(help="P99 TPOT SLO, ms (optional).")
@failure_options
@click.option("--target", type=FRACTION, default=DEFAULT_TARGET, show_default=True,
              help="Probability that every pool has at least its needed instances up.")
@click.option("--horizon-days", type=POSITIVE, default=DEFAULT_HORIZON_DAYS, show_default=True,
              help="Horizon of the 'never short' probability and the expected hours short.")
@click.option("--max-spares", type=click.IntRange(min=0), default=None,
              help="Largest spares count per pool in the table (default: the binomial answer + 1).")
@sim_requests_option(default=20_000, show_default=True, help="Requests per simulation.")
@deprecated_spelling("--requests", "n_requests")
@replications_option(default=3, help="Independent replications per spares count (each a random time of the "
                     "fleet's life).")
@seed_option
def reliability(fleet_path, workload, input_fraction, rate_per_s, slo_ttft_ms, slo_tpot_ms, mtbf_h, mttr_h, repair,
                target, horizon_days, max_spares, n_requests, replications, seed) -> None:
    """Spares per pool so that P(at least n of n+s instances up) >= TARGET (binomial, eq. 6
    availability), and the simulated P99 TTFT/TPOT with failure injection for each spares count.

    Instances fail and are repaired independently (exponential up times, mean MTBF; repairs of
    mean MTTR); each simulation starts at a random time of the fleet's life.
    """
    spec = load_fleet_toml(fleet_path)
    failures = failures_from_options(spec, mtbf_h, mttr_h, repair)
    wl = load_workload(workload, input_fraction=input_fraction)
    rate = rate_per_s or (float(wl.arrival_rate_per_s) if wl.arrival_rate_per_s else DEFAULT_RATE_PER_S)
    from fleetplan.plan.reliability import reliability_table

    announce_compile([Kernel.FAILURES])
    report = reliability_table(
        spec, wl, rate, ms_to_s(slo_ttft_ms), failures, horizon_days * 24 * SECONDS_PER_HOUR, target=target,
        max_spares=max_spares, slo_tpot_s=None if slo_tpot_ms is None else ms_to_s(slo_tpot_ms),
        n_requests=n_requests, n_replications=replications, seed=seed,
    )
    mtbf, mttr = failures.pool_times_s(len(spec.pools))
    con = make_console(soft_wrap=True, highlight=False)
    con.print(f"fleet {fleet_path}: workload {wl.name}, rate {rate:.4g} req/s, {replications} replication(s) of "
              f"{n_requests:,} requests, seed {seed}")
    for pool, b, r, a in zip(spec.pools, mtbf, mttr, report.availability, strict=True):
        con.print(f"pool {pool.name}: needs {pool.n_instances} x {pool.gpu}; MTBF {_hours(b)}, MTTR {_hours(r)} "
                  f"({repair}), availability A = {a:.6f}")
    con.print(_table(report, horizon_days))
    con.print(f"binomial: {report.spares_binomial} spare(s) per pool give P(>= n up) >= {target:g} at a random "
              "time.")
    sim = (f"{report.spares_simulated} spare(s) per pool" if report.spares_simulated is not None
           else "no spares count in the table")
    con.print(f"simulated: {sim} meet(s) P99 TTFT <= {slo_ttft_ms:g} ms"
              + (f" and P99 TPOT <= {slo_tpot_ms:g} ms" if slo_tpot_ms else "")
              + " (upper 95% bound over replications).")
    con.print(f"without failures (no spares, same seeds): P99 TTFT {ms_cell(report.p99_ttft_no_failures_s)} ms, "
              f"P99 TPOT {ms_cell(report.p99_tpot_no_failures_s)} ms.")
