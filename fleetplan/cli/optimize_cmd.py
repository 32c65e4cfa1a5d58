"""``fleetplan optimize``: the cheapest fleet meeting the TTFT SLO (sweep, then verify)."""

from __future__ import annotations

import functools

import click

from fleetplan.cli.errors import one_line_errors
from fleetplan.cli.first_run import Kernel, announce_compile
from fleetplan.cli.malloc import freeze_imported
from fleetplan.cli.optimize_view import (
    baseline_line,
    candidates_table,
    headroom_line,
    recommendation_line,
    rejected_line,
    step_time_note,
    tpot_note,
)
from fleetplan.cli.options import (
    csv_option,
    deploy_option,
    executor_from_options,
    executor_options,
    format_option,
    html_option,
    json_option,
    lam_option,
    plots_option,
    quiet_option,
)
from fleetplan.cli.peak_options import peak_valley_doc, print_peak_valley, rate_profile_from_options
from fleetplan.cli.plan_options import (
    CURRENT_FLEET_OPTION,
    current_fleet_gpus,
    plan_arrivals,
    plan_inputs,
    plan_options,
)
from fleetplan.cli.progress import progress_reporter
from fleetplan.cli.report_output import DOCUMENT_KEYS, ProfilesAhead, report_console, write_optimize_reports
from fleetplan.cli.tables import emit_table, make_console
from fleetplan.errors import ConfigError
from fleetplan.exec.fork import fork_map
from fleetplan.plan.defaults import DEFAULT_RATE_PER_S
from fleetplan.units import fmt_ms
from fleetplan.workload import load_workload

_EXAMPLES = """\b
Examples:
  fleetplan optimize --workload lmsys.json --slo-ttft 500
  fleetplan optimize --workload azure_conv --lam 200 --gpus a10g,h100 --topology homo,two-pool
  fleetplan optimize --workload lmsys --slo-ttft 500 --b-short 2048,4096,8192 --csv fleet.csv --json run.json
  fleetplan optimize --workload lmsys --slo-ttft 500 --json sweep.json --json-full
  fleetplan optimize --workload lmsys --slo-ttft 500 --html report.html --plots plots/ --quiet
  fleetplan optimize --workload lmsys --slo-ttft 500 --format csv > candidates.csv
  fleetplan optimize --workload trace.csv --slo-ttft 300 --avail-preset h100-5pct --top 20
  fleetplan optimize --workload lmsys.json --slo-ttft 500 --slo-tpot 50 --topology homo,pdd,afd --min-ce-gain 1.08
  fleetplan optimize --workload lmsys --slo-ttft 500 --step-time-margin 15%
  fleetplan optimize --workload lmsys --slo-ttft 500 --deploy fleet/ --current-fleet deployed/fleet.toml
  fleetplan optimize --workload lmsys --slo-ttft 500 --model llama-3.1-8b --gpus h100 -tp 1 --perf-profile h100.toml
  fleetplan optimize --workload lmsys --slo-ttft 1000 --model qwen3-235b-a22b-fp8 --gpus h200,b200 --engine sglang
"""



def sweep_map(executor: str, workers: int | None, verifies: bool, compiling: bool = False):
    """How the analytic sweep's pools are sized: in forked copies of this process (one per core),
    which with verification to follow size all of them while this process loads the simulator's
    kernel (``fleetplan.exec.fork``); one after another here with ``--workers 1`` or another executor.
    ``compiling``: a child compiles the kernel already (``fleetplan.exec.compile_ahead``), so this
    process sizes pools too."""
    if executor != "local" or workers == 1:
        return None
    if not verifies or compiling:
        return fork_map
    return functools.partial(fork_map, meanwhile=_load_kernels)


def _load_kernels() -> None:
    """``sweep_map``'s head start: the simulator's kernel, then the fleet latency mixtures' (the sweep
    ranks with it next, once the pools are sized: about 13 ms less after the children return)."""
    from fleetplan.queueing.engine import load_mixture_kernel
    from fleetplan.sim.kernel_cache import load_iteration_kernel

    load_iteration_kernel()
    load_mixture_kernel()
    # what numba has built lives as long as the command: out of the collector's way (``cli.malloc``;
    # the full collection that follows the children's results then traverses only what they are)
    freeze_imported()


def after_compile(ahead, run_tasks):
    """``run_tasks`` joining the kernel's compile child (``ahead``, or None) before its first map: the
    first simulation, here or in a pool's workers, then loads the kernel from numba's cache."""
    if ahead is None:
        return run_tasks

    def mapped(fn, tasks):
        ahead.wait()
        return run_tasks(fn, tasks)

    return mapped


def current_fleet_delta(path: str, opts: dict, result) -> dict:
    """The recommendation against the owned fleet of ``path`` (``plan.deployment.fleet_delta``), as the JSON's
    ``current_fleet`` block: GPUs per type owned, needed (spares included), to buy and to retire."""
    from fleetplan.hardware import load_catalog
    from fleetplan.plan.deployment import deployment_of, fleet_delta

    catalog = load_catalog(opts["gpu_profiles"], dict(opts["prices"]) if opts["prices"] else None)
    owned = dict(current_fleet_gpus(path, catalog))
    d = fleet_delta(owned, deployment_of(result.recommendation, result.request))
    return {"path": str(path), "owned_gpus": dict(d.owned), "recommended_gpus": dict(d.needed),
            "buy_gpus": dict(d.buy), "retire_gpus": dict(d.retire),
            "rule": "GPUs per catalog type; recommended = verified instances + spares, x GPUs per instance"}


def current_fleet_line(delta: dict) -> str:
    """One line: what to buy and retire to go from the owned fleet to the recommendation."""
    def fmt(d: dict) -> str:
        return ", ".join(f"{n}x {g}" for g, n in d.items()) or "nothing"

    keep = {g: min(n, delta["recommended_gpus"].get(g, 0)) for g, n in delta["owned_gpus"].items()}
    return (f"Against the current fleet ({delta['path']}): buy {fmt(delta['buy_gpus'])}; retire "
            f"{fmt(delta['retire_gpus'])}; keep {fmt({g: n for g, n in keep.items() if n})}.")


def peak_options(func):
    """``--rate-profile`` and ``--peak-window-s`` (optimize)."""
    from fleetplan.cli.peak_options import PEAK_OPTIONS

    for option in reversed(PEAK_OPTIONS):
        func = option(func)
    return func


@click.command("optimize", epilog=_EXAMPLES)
@lam_option(help="Arrival rate, requests/s (default: the workload's own rate if it records one, else "
            f"{DEFAULT_RATE_PER_S:g}); --request-rate: vLLM's spelling.")
@plan_options
@peak_options
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="Candidates shown.")
@csv_option(help="Write the procurement report (one row per pool of the recommendation + total) as CSV.")
@click.option("--candidates-csv", "candidates_csv", type=click.Path(dir_okay=False), default=None,
              help="Write every candidate as CSV (one row per candidate).")
@json_option(help="Write the run as JSON: what the report shows (the cheapest 30 and every simulated candidate, "
             "verification, latency profiles); re-render with `fleetplan report RUN.json --html OUT.html`.")
@click.option("--json-full", is_flag=True, default=False,
              help="With --json: keep every swept candidate (megabytes) instead of the cheapest ones.")
@html_option(help="Write one self-contained HTML report (tables and embedded plots).")
@plots_option
@deploy_option
@CURRENT_FLEET_OPTION
@click.option("--headroom/--no-headroom", "headroom", default=True, show_default=True,
              help="Search the simulated recommendation's headroom: the largest uniform step slowdown and arrival-"
              "rate increase at which it still meets the SLOs (searched with the simulator, 2% resolution; about "
              "as long as verification or less). Co-located fleets, with verification.")
@format_option
@quiet_option
@executor_options
@one_line_errors
def optimize(rate_per_s, top, csv_path, candidates_csv, json_path, json_full, html_path, plots_dir, deploy_dir,
             current_fleet, headroom, fmt, quiet, executor, workers, ray_address, rate_profile, peak_window_s,
             **opts) -> None:
    """Find the cheapest fleet whose P99 TTFT meets --slo-ttft at --lam requests/s.

    Phase 1 sizes every candidate (topology x split threshold x GPU type per pool x
    sizing router) with M/G/c queueing (Erlang-C, two-moment tail) and ranks them by
    annual cost.  TTFT is time to first token; P99 the 99th percentile; rho a pool's
    load: its rate over its capacity (the throughput with every KV slot busy, or of its
    prefill server), at most --rho-max.
    """
    # a cold start: the simulator's kernel compiles in a child while this process plans
    from fleetplan.exec.compile_ahead import start_compile_ahead

    ahead = start_compile_ahead() if executor == "local" and not opts["no_verify"] else None
    if ahead is not None:
        click.get_current_context().call_on_close(ahead.cancel)  # ended early (an error): stop the child
    # the planner and the simulator load here, when the command runs (not for --help)
    from fleetplan.plan.headroom import HeadroomSettings
    from fleetplan.plan.optimize import optimize as run_optimize
    from fleetplan.plan.optimize import verification_requests
    from fleetplan.plan.optimize_errors import infeasible_error, no_verified_fleet_error
    freeze_imported()  # what is loaded stays: the sweep's collections skip it (fleetplan.cli.malloc)

    profile, window_s = rate_profile_from_options(rate_profile, peak_window_s, rate_per_s,
                                                  load_workload(opts["workload"], opts["input_fraction"]))
    if profile is not None:
        rate_per_s = profile.busiest_window_rate(window_s)[0]
    wl, request, verify, rate_source = plan_inputs(opts, rate_per_s)
    if profile is not None:
        rate_source = f"busiest {window_s:g} s of the rate profile"
    rate, percentile, slo_ttft_ms, slo_tpot_ms = request.rate_per_s, request.percentile, opts["slo_ttft_ms"], \
        opts["slo_tpot_ms"]
    if json_full and not json_path:
        raise ConfigError("--json-full goes with --json RUN.json; give the file to write")
    paths = {"csv": csv_path, "candidates_csv": candidates_csv, "json": json_path, "json_full": json_full,
             "html": html_path, "plots": plots_dir, "deploy": deploy_dir}
    n_sim = verification_requests(request, verify)
    if verify is not None:
        disagg = {"pdd", "afd"} & {t.value for t in request.topologies}
        announce_compile([Kernel.ITERATION, *([Kernel.PDD] if disagg else [])])
    # the reports' own simulation of the recommendation runs beside its headroom search
    ahead_profiles = ProfilesAhead(request, verify, opts["seed"]) if verify is not None and any(
        paths.get(k) for k in DOCUMENT_KEYS) else None
    with progress_reporter(quiet) as progress, \
            executor_from_options(executor, workers, ray_address, simulated_requests=n_sim, threads=True) as run_tasks:
        result = run_optimize(request, verify, progress, map_fn=after_compile(ahead, run_tasks),
                              headroom=HeadroomSettings() if headroom and verify is not None else None,
                              pool_map=sweep_map(executor, workers, verify is not None,
                                                 ahead is not None and ahead.compiling()),
                              on_recommendation=None if ahead_profiles is None else ahead_profiles.start)
        if ahead is not None:
            ahead.wait()  # the reports' figures simulate the recommendation
        peak_doc = None if profile is None or result.recommendation is None else peak_valley_doc(
            request, result.recommendation, profile, window_s, opts["gpu_profiles"], opts["prices"])
        delta = None if current_fleet is None or result.recommendation is None else current_fleet_delta(
            current_fleet, opts, result)
        extra = {**({} if peak_doc is None else {"peak_valley": peak_doc}),
                 **({} if delta is None else {"current_fleet": delta})}
        notes = write_optimize_reports(result, verify, opts["seed"], paths, progress, extra or None, ahead_profiles)
    console = report_console()
    if fmt != "table":  # stdout carries the table alone (machine-readable); the lines go to stderr
        emit_table(candidates_table(result, top), fmt)
        console = make_console(stderr=True)
    tpot = "" if slo_tpot_ms is None else f", P{percentile:g} TPOT <= {slo_tpot_ms:g} ms"
    console.print(
        f"Workload {wl.name}: λ = {rate:g} req/s ({rate_source}), {plan_arrivals(opts).label()} arrivals "
        f"(Ca² {request.arrival_cv2:.3g}); SLO P{percentile:g} TTFT <= "
        f"{slo_ttft_ms:g} ms{tpot}; {len(result.candidates)} candidates sized analytically in "
        f"{fmt_ms(result.analytic_time_s, '.0f')}"
        + ("." if verify is None else f"; top {len(result.verification)} simulated in {result.verify_time_s:.1f} s.")
    )
    if fmt == "table":
        console.print(candidates_table(result, top))
    console.print(rejected_line(result, opts["model"], opts["max_model_len"] is not None))
    note = step_time_note(result)
    if note:
        console.print(note)
    if result.baselines:
        console.print(baseline_line(result))
    if verify is not None:
        console.print(tpot_note(percentile))
    for note in notes:
        console.print(note)
    if result.recommendation is None:
        if verify is not None and any(c.feasible for c in result.candidates):
            raise no_verified_fleet_error(request, result)
        raise infeasible_error(request, result.candidates)
    console.print(recommendation_line(result))
    line = headroom_line(result, requested=headroom)
    if line:
        console.print(line)
    if delta is not None:
        console.print(current_fleet_line(delta))
    if peak_doc is not None:
        print_peak_valley(console, peak_doc)
