"""``fleetplan grid-flex``: power curtailment levels of a fixed fleet vs P99 TTFT (core paper §4.8)."""

from __future__ import annotations

import click
from rich.table import Table

from fleetplan.cli.errors import one_line_errors
from fleetplan.cli.first_run import Kernel, announce_compile
from fleetplan.cli.options import (
    POSITIVE,
    arrival_option,
    arrival_spec,
    ca2_window_option,
    cv_option,
    deprecated_spelling,
    gpu_profiles_option,
    gpus_option,
    html_option,
    input_fraction_option,
    json_option,
    lam_option,
    max_model_len_option,
    quiet_option,
    seed_option,
    sim_requests_option,
    slo_ttft_option,
    ttft_model_option,
    workload_option,
)
from fleetplan.cli.progress import progress_reporter
from fleetplan.cli.report_output import render_documents, report_console
from fleetplan.cli.tables import ms_cell
from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.plan.defaults import DEFAULT_FLEX_LEVELS_PCT as DEFAULT_LEVELS_PCT
from fleetplan.plan.defaults import DEFAULT_FLEX_STEADY_REQUESTS as DEFAULT_STEADY_REQUESTS
from fleetplan.plan.defaults import DEFAULT_FLEX_WINDOW_S as DEFAULT_WINDOW_S
from fleetplan.units import ms_to_s
from fleetplan.workload import load_workload

_EXAMPLES = """\b
Examples:
  fleetplan grid-flex --workload azure_conv --lam 200 --gpus h100 --n-gpus 40
  fleetplan grid-flex --workload azure_conv --lam 200 --gpus h100 --n-gpus 40 --levels 0,10,20,30,40,50 --window-s 75
  fleetplan grid-flex --workload lmsys --lam 100 --gpus h100 --n-gpus 12 --no-sim --json flex.json
  fleetplan grid-flex --workload lmsys --lam 100 --gpus h100 --no-sim
"""


def _levels(text: str) -> tuple[float, ...]:
    try:
        out = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError as exc:
        raise ConfigError(f"--levels {text!r} is invalid: give comma-separated percentages, e.g. 0,10,20,30") from exc
    if not out:
        raise ConfigError("--levels is empty: give comma-separated percentages, e.g. 0,10,20,30")
    return out


@click.command("grid-flex", epilog=_EXAMPLES)
@workload_option
@lam_option(required=True)
@gpus_option(required=True, help="GPU type of the fleet (one, with a power curve), e.g. h100.")
@click.option("--n-gpus", type=click.IntRange(min=1), default=None,
              help="GPUs in the fleet (default: the fewest that meet --slo-ttft, from optimize's analytic sweep of "
              "one pool of --gpus; printed).")
@slo_ttft_option(default=500.0, show_default=True, help="P99 TTFT, ms.")
@click.option("--levels", default=",".join(f"{x:g}" for x in DEFAULT_LEVELS_PCT), show_default=True,
              help="Curtailment levels, percent of the GPU's nominal power.")
@click.option("--window-s", type=POSITIVE, default=DEFAULT_WINDOW_S, show_default=True,
              help="Demand-response event length: window_s x λ requests simulated from an empty, capped fleet.")
@sim_requests_option(type=click.IntRange(min=100), default=DEFAULT_STEADY_REQUESTS, show_default=True,
                     help="Requests per steady-state replication.")
@max_model_len_option(help="Pool context in tokens, vLLM --max-model-len (default: where the workload's CDF "
                      "reaches 1).")
@deprecated_spelling("--max-context", "max_model_len")
@ttft_model_option(help="Analytic TTFT form (mean-prefill = the reference tool's).")
@click.option("--no-sim", is_flag=True, help="Analytic only (no window or steady-state simulation).")
@json_option(help="Write the table as JSON.")
@html_option
@arrival_option
@cv_option
@ca2_window_option
@input_fraction_option
@gpu_profiles_option
@seed_option
@quiet_option
@one_line_errors
def grid_flex_command(workload, rate_per_s, gpus, n_gpus, slo_ttft_ms, levels, window_s, n_requests, max_model_len,
                      ttft_model, no_sim, json_path, html_path, input_fraction, gpu_profiles, seed, quiet, arrival,
                      arrival_cv, ca2_window_s) -> None:
    """Batch-cap (vLLM --max-num-seqs) curtailment levels: n_max, W/GPU, fleet kW, P99 TTFT."""
    # the planner, the simulator and the report writers load when the command runs, not for its --help
    from fleetplan.plan.gridflex import grid_flex, size_fleet_analytic
    from fleetplan.report.run_json import gridflex_dict, write_json

    if len(gpus) != 1:
        raise ConfigError(f"--gpus {','.join(gpus)} names {len(gpus)} GPU types; grid-flex curtails a fleet of one: "
                          f"give one, e.g. --gpus {gpus[0]}")
    wl = load_workload(workload, input_fraction)
    gpu = load_catalog(gpu_profiles).get(gpus[0])
    if n_gpus is None:
        sized = size_fleet_analytic(wl, gpu, rate_per_s, ms_to_s(slo_ttft_ms), ttft_model=ttft_model)
        n_gpus = sized.n_gpus
        click.echo(f"assumed --n-gpus {n_gpus}: the fewest {gpu.name} GPUs (one pool) meeting P99 TTFT <= "
                   f"{slo_ttft_ms:g} ms at λ = {rate_per_s:g} req/s in optimize's analytic sweep (P99 "
                   f"{ms_cell(sized.analytic_p_ttft_s, 0)} ms, rho {sized.rho:.2f})", err=True)
    if not no_sim:
        announce_compile([Kernel.ITERATION])
    with progress_reporter(quiet) as progress:
        res = grid_flex(wl, gpu, rate_per_s, n_gpus, ms_to_s(slo_ttft_ms), _levels(levels),
                        max_context_tokens=max_model_len, window_s=None if no_sim else window_s,
                        steady_requests=None if no_sim else n_requests,
                        ttft_model=ttft_model, seed=seed, progress=progress,
                        arrivals=arrival_spec(arrival, arrival_cv, ca2_window_s))
    doc = gridflex_dict(res, wl.name, seed)
    if json_path:
        write_json(doc, json_path)
    notes = render_documents(None, None, doc, html_path, None)
    console = report_console()
    table = Table(title=f"Grid flex: {n_gpus}x {res.gpu}, λ = {rate_per_s:g} req/s, P99 TTFT SLO {slo_ttft_ms:g} ms, "
                        f"context {res.max_context_tokens} tokens (uncapped n_max {res.n_max_uncapped})")
    for col in ("flex %", "n_max", "W/GPU", "fleet kW", "rho", "P99 analytic ms", f"P99 sim {window_s:g} s ms",
                "P99 sim steady ms", "SLO ok"):
        table.add_column(col, justify="right")
    for lv in res.levels:
        ok = ("yes" if lv.slo_ok_steady else "no") + ("" if lv.slo_ok_window is None else
                                                      f" / window {'yes' if lv.slo_ok_window else 'no'}")
        table.add_row(f"{lv.flex_pct:g}", str(lv.n_max), f"{lv.power_w_per_gpu:.0f}", f"{lv.fleet_kw:.1f}",
                      f"{lv.rho:.2f}", ms_cell(lv.p99_ttft_s_analytic, inf="unstable"),
                      ms_cell(lv.p99_ttft_s_window, inf="unstable"),
                      ms_cell(lv.p99_ttft_s_steady, inf="unstable"), ok)
    console.print(table)
    console.print("Curtailment is relative to the GPU's nominal power; n_max = largest batch whose logistic-curve "
                  "power fits; W/GPU = P(n_max). Steady = replicated upper 95% bound (unstable when rho >= 1).")
    for note in notes:
        console.print(note)
