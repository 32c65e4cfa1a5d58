"""``fleetplan optimize``: the cheapest fleet meeting the TTFT SLO (sweep, then verify)."""

from __future__ import annotations

import functools

import click

from fleetplan.cli.errors import one_line_errors
from fleetplan.cli.first_run import Kernel, announce_compile
from fleetplan.cli.model_options import (
    CONTEXT_LIMIT_OPTIONS,
    MODEL_OPTIONS,
    PERF_PROFILE_OPTION,
    context_limit,
    serving_setup,
)
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
    ARRIVAL_OPTIONS,
    FRACTION,
    INT_LIST,
    NAME_LIST,
    POSITIVE,
    arrival_spec,
    csv_option,
    executor_from_options,
    executor_options,
    format_option,
    gpu_profiles_option,
    gpus_option,
    html_option,
    input_fraction_option,
    json_option,
    lam_option,
    percentile_option,
    plots_option,
    price_option,
    quiet_option,
    replications_option,
    seed_option,
    sim_requests_option,
    slo_tpot_option,
    slo_ttft_option,
    ttft_model_option,
    workload_option,
)
from fleetplan.cli.peak_options import peak_valley_doc, print_peak_valley, rate_profile_from_options
from fleetplan.cli.progress import progress_reporter
from fleetplan.cli.report_cmd import report_console, write_optimize_reports
from fleetplan.cli.tables import emit_table, make_console
from fleetplan.errors import ConfigError
from fleetplan.exec.fork import fork_map
from fleetplan.hardware import availability_preset, load_catalog
from fleetplan.plan.disagg.candidates import (
    CALIBRATION_MODEL,
    DEFAULT_AF_RATIOS,
    DEFAULT_KV_LATENCY_S,
    DEFAULT_MICRO_BATCHES,
    GBPS,
    DisaggSettings,
)
from fleetplan.plan.disagg.economics import DEFAULT_MIN_CE_GAIN
from fleetplan.plan.disagg.screen import ModelShape
from fleetplan.plan.headroom import HeadroomSettings
from fleetplan.plan.optimize import (
    AVAILABILITY_FROM_CATALOG,
    DEFAULT_MAX_GPUS,
    DEFAULT_RATE_PER_S,
    DEFAULT_RHO_MAX,
    OptimizeRequest,
    verification_requests,
)
from fleetplan.plan.optimize import (
    optimize as run_optimize,
)
from fleetplan.plan.optimize_errors import infeasible_error, no_verified_fleet_error
from fleetplan.plan.pools import MAX_STEP_TIME_MARGIN
from fleetplan.plan.space import DEFAULT_COMPRESS_GAMMA, DEFAULT_THRESHOLDS_TOKENS, sizing_router, topology
from fleetplan.plan.verify import (
    DEFAULT_MEASURED_LIFETIMES,
    DEFAULT_MIN_COMPLETIONS,
    DEFAULT_REPLICATIONS,
    DEFAULT_VERIFY_TOP,
    DEFAULT_WARMUP_LIFETIMES,
    VerifySettings,
)
from fleetplan.sim.kernel_cache import load_iteration_kernel
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
  fleetplan optimize --workload lmsys --slo-ttft 500 --model llama-3.1-8b --gpus h100 -tp 1 --perf-profile h100.toml
"""



class StepTimeMargin(click.ParamType):
    """A step-time slowdown: ``15%`` or ``0.15``, in [0, ``MAX_STEP_TIME_MARGIN``)."""

    name = "percent"

    def convert(self, value, param, ctx):  # noqa: D102
        if isinstance(value, float):
            return value
        text = str(value).strip()
        pct = text.endswith("%")
        try:
            v = float(text.rstrip("%").strip()) / (100.0 if pct else 1.0)
        except ValueError:
            self.fail(f"{value!r} is not a slowdown; write a percentage or a fraction, e.g. 15% or 0.15", param, ctx)
        if not (0.0 <= v < MAX_STEP_TIME_MARGIN):
            self.fail(f"{value!r} must be a slowdown in [0%, {MAX_STEP_TIME_MARGIN:.0%}), e.g. 15% or 0.15 "
                      "(a bare number is a fraction)", param, ctx)
        return v


def _availability(node_avail: float | None, preset: str | None) -> float | str:
    if node_avail is not None and preset is not None:
        raise ConfigError("give either --node-avail or --avail-preset, not both")
    if node_avail is not None:
        return node_avail
    if preset is None:
        return 1.0
    if preset.strip().lower() == AVAILABILITY_FROM_CATALOG:
        return AVAILABILITY_FROM_CATALOG
    return availability_preset(preset).availability


_PLAN_OPTIONS = [
    workload_option,
    slo_ttft_option(required=True, help="TTFT target in ms at --percentile."),
    percentile_option,
    gpus_option(help="GPU types to consider, e.g. a10g,a100,h100 (default: the calibrated A10G, A100-80GB, "
                "H100-SXM)."),
    click.option("--topology", "topologies", type=NAME_LIST, default=("homo", "two-pool", "multi-pool"),
                 show_default=True,
                 help="Topologies: homo, two-pool, multi-pool (3-4 length pools), pdd (prefill-decode "
                 "disaggregation), afd (PDD with attention-FFN decode units); pdd and afd need --slo-tpot."),
    click.option("--b-short", "b_short", type=INT_LIST, default=DEFAULT_THRESHOLDS_TOKENS,
                 help="Split thresholds (total tokens) to sweep; default 512,...,65536."),
    click.option("--router", "routers", type=NAME_LIST, default=("length", "compress"), show_default=True,
                 help="Sizing routers: length, compress (compress-and-route)."),
    click.option("--compress-gamma", type=POSITIVE, default=DEFAULT_COMPRESS_GAMMA, show_default=True,
                 help="Compress-and-route band: requests up to gamma x B_short are squeezed to B_short."),
    click.option("--node-avail", type=FRACTION, default=None,
                 help="Node availability A in (0, 1]; pools get ceil(n/A)."),
    click.option("--avail-preset", default=None,
                 help="Availability preset: a100-soft, a100-hard, h100-5pct, ideal, or 'catalog' (each GPU's own)."),
    click.option("--rho-max", type=FRACTION, default=DEFAULT_RHO_MAX, show_default=True, help="Utilisation cap."),
    click.option("--max-gpus", type=click.IntRange(min=1), default=DEFAULT_MAX_GPUS, show_default=True,
                 help="Largest fleet considered."),
    click.option("--service-model", type=click.Choice(["engine", "paper"]), default="engine", show_default=True,
                 help="Analytic service model: engine = the simulator's own step model and vLLM limits at the "
                 "load-dependent operating batch (prefill charged, TPOT modelled); paper = the core paper's eqs. 3-5 "
                 "(reproduces its Table 1; --tail-model, --ttft-model and --prefill-seqs apply to it)."),
    click.option("--step-time-margin", "step_time_margin", type=StepTimeMargin(), default=0.0,
                 help="Size and verify the fleet for engine steps this much slower than the step model says, e.g. "
                 "15% (or 0.15): every step time x 1.15 in the analytic phase and the simulator [default: 0%]."),
    click.option("--tail-model", type=click.Choice(["exp", "paper"]), default="exp", show_default=True,
                 help="Wait-tail form: exp = ln(C/(1-p))(1+Cs2)/(2(c mu - lam)) (exact for M/M/c); paper = eq. (2)."),
    ttft_model_option,
    click.option("--prefill-seqs", type=POSITIVE, default=None,
                 help="Batch concurrency while a prompt is prefilled (default n_max, the paper's eq. 5; fleet-sim "
                 "uses 1)."),
    click.option("--min-spare-gpus", type=click.IntRange(min=0), default=0, show_default=True,
                 help="Require GPUs >= ceil(offered load) + N per pool (the reference fleet simulator uses 1)."),
    click.option("--verify-top", type=click.IntRange(min=1), default=DEFAULT_VERIFY_TOP, show_default=True,
                 help="Simulate this many of the cheapest analytic candidates (iteration level; pdd/afd: also "
                 "this many of each)."),
    sim_requests_option(
        type=click.IntRange(min=100), default=None,
        help="Requests per simulated pool and replication, overriding the steady-state rule (default: "
        f"{DEFAULT_WARMUP_LIFETIMES:g} + {DEFAULT_MEASURED_LIFETIMES:g} mean request lifetimes of simulated "
        f"time and at least {DEFAULT_MIN_COMPLETIONS:,} measured completions per pool)."),
    replications_option(type=click.IntRange(min=2), default=DEFAULT_REPLICATIONS,
                        help="Independent replications per simulated fleet (for the P99 confidence interval)."),
    click.option("--no-verify", is_flag=True, help="Skip the simulation phase (analytic ranking only)."),
    slo_tpot_option(help="TPOT target in ms at --percentile, checked by the simulator; sizes the pdd/afd decode "
                    "pools."),
    click.option("--min-ce-gain", type=click.FloatRange(min=0), default=DEFAULT_MIN_CE_GAIN, show_default=True,
                 help="Reject pdd/afd candidates whose cost efficiency vs the all-premium baseline is below this "
                 "(Frontier §6.2)."),
    click.option("--kv-latency-ms", type=click.FloatRange(min=0), default=DEFAULT_KV_LATENCY_S * 1e3,
                 show_default=True, help="pdd/afd: KV transfer latency per request."),
    click.option("--kv-bandwidth-gb-per-s", type=POSITIVE, default=None,
                 help="pdd/afd: KV transfer bandwidth (default: the slower GPU's network_gbps / 8)."),
    click.option("--af-ratios", type=NAME_LIST, default=tuple(f"{a}:{f}" for a, f in DEFAULT_AF_RATIOS),
                 show_default=True, help="afd: attention:FFN GPUs per decode unit to sweep."),
    click.option("--micro-batches", type=click.IntRange(min=1), default=DEFAULT_MICRO_BATCHES, show_default=True,
                 help="afd: micro-batches per decode step (ping-pong)."),
    *ARRIVAL_OPTIONS,
    input_fraction_option,
    gpu_profiles_option,
    *MODEL_OPTIONS,
    PERF_PROFILE_OPTION,
    *CONTEXT_LIMIT_OPTIONS,
    price_option,
    seed_option,
]


def sweep_map(executor: str, workers: int | None, verifies: bool):
    """How the analytic sweep's pools are sized: in forked copies of this process (one per core),
    which with verification to follow size all of them while this process loads the simulator's
    kernel (``fleetplan.exec.fork``); one after another here with ``--workers 1`` or another executor."""
    if executor != "local" or workers == 1:
        return None
    if not verifies:
        return fork_map
    return functools.partial(fork_map, meanwhile=load_iteration_kernel)


def peak_options(func):
    """``--rate-profile`` and ``--peak-window-s`` (optimize)."""
    from fleetplan.cli.peak_options import PEAK_OPTIONS

    for option in reversed(PEAK_OPTIONS):
        func = option(func)
    return func


def plan_options(func):
    """The sweep and verification options shared by ``optimize`` and ``whatif``."""
    for option in reversed(_PLAN_OPTIONS):
        func = option(func)
    return func


def _af_ratios(values) -> tuple[tuple[int, int], ...]:
    out = []
    for v in values:
        a, _, f = str(v).partition(":")
        if not (a.strip().isdigit() and f.strip().isdigit()):
            raise ConfigError(f"--af-ratios value {v!r} is invalid: give attention:FFN GPU counts, e.g. 1:1,2:1")
        out.append((int(a), int(f)))
    return tuple(out)


def _disagg_settings(opts: dict) -> DisaggSettings | None:
    """The pdd/afd screen's settings, or None when neither topology is swept."""
    if not {"pdd", "afd"} & {str(t).strip().lower() for t in opts["topologies"]}:
        return None
    from fleetplan.models.catalog import load_model

    bw = opts["kv_bandwidth_gb_per_s"]
    return DisaggSettings(ModelShape.of(load_model(opts.get("model") or CALIBRATION_MODEL)),
                          kv_latency_s=opts["kv_latency_ms"] / 1e3, kv_bandwidth_bytes_per_s=None if bw is None
                          else bw * GBPS, af_ratios=_af_ratios(opts["af_ratios"]),
                          n_micro_batches=opts["micro_batches"])


def plan_inputs(opts: dict, rate_per_s: float | None):
    """(workload, OptimizeRequest, VerifySettings | None, rate source) from parsed plan options."""
    catalog = load_catalog(opts["gpu_profiles"], dict(opts["prices"]) if opts["prices"] else None)
    wl = load_workload(opts["workload"], opts["input_fraction"])
    if rate_per_s is not None:
        rate, rate_source = rate_per_s, "--lam"
    elif wl.arrival_rate_per_s is not None:
        rate, rate_source = wl.arrival_rate_per_s, "the workload's own arrival rate"
    else:
        rate, rate_source = DEFAULT_RATE_PER_S, "default (the workload records no rate)"
    slo_s = opts["slo_ttft_ms"] / 1e3
    gpus, per_instance, step_models = serving_setup(catalog, opts)
    limit = context_limit(opts["model"], opts["max_model_len"], opts["allow_long_max_model_len"])
    arrivals = plan_arrivals(opts)
    request = OptimizeRequest(
        workload=wl,
        gpus=gpus,
        gpus_per_instance=per_instance,
        slo_ttft_s=slo_s,
        rate_per_s=rate,
        percentile=opts["percentile"],
        topologies=tuple(topology(t) for t in opts["topologies"]),
        thresholds_tokens=tuple(opts["b_short"]),
        routers=tuple(sizing_router(r) for r in opts["routers"]),
        compress_gamma=opts["compress_gamma"],
        availability=_availability(opts["node_avail"], opts["avail_preset"]),
        rho_max=opts["rho_max"],
        max_gpus=opts["max_gpus"],
        tail_model=opts["tail_model"],
        ttft_model=opts["ttft_model"],
        n_prefill_seqs=opts["prefill_seqs"],
        min_spare_gpus=opts["min_spare_gpus"],
        rate_source=rate_source,
        slo_tpot_s=None if opts["slo_tpot_ms"] is None else opts["slo_tpot_ms"] / 1e3,
        min_ce_gain=opts["min_ce_gain"],
        disagg=_disagg_settings(opts),
        service_model=opts["service_model"],
        step_models=step_models,
        max_model_len_tokens=limit,
        arrival_cv2=arrivals.ca2(wl, rate),
        step_time_margin=opts["step_time_margin"],
    )
    verify = None
    if not opts["no_verify"]:
        verify = VerifySettings(
            slo_ttft_s=slo_s,
            slo_tpot_s=None if opts["slo_tpot_ms"] is None else opts["slo_tpot_ms"] / 1e3,
            rate_per_s=rate,
            max_gpus=opts["max_gpus"],
            top_k=opts["verify_top"],
            n_requests=opts["n_requests"],
            n_replications=opts["replications"],
            seed=opts["seed"],
            percentile=opts["percentile"],
            step_models=step_models,
            max_model_len_tokens=limit,
            arrival=arrivals.process.value,
            arrival_cv=arrivals.cv,
            step_time_margin=opts["step_time_margin"],
        )
    return wl, request, verify, rate_source


def plan_arrivals(opts: dict):
    """The run's ``ArrivalSpec`` from the parsed arrival options."""
    return arrival_spec(opts["arrival"], opts["arrival_cv"], opts["ca2_window_s"])


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
@click.option("--headroom/--no-headroom", "headroom", default=True, show_default=True,
              help="Search the simulated recommendation's headroom: the largest uniform step slowdown and arrival-"
              "rate increase at which it still meets the SLOs (searched with the simulator, 2% resolution; about "
              "as long as verification or less). Co-located fleets, with verification.")
@format_option
@quiet_option
@executor_options
@one_line_errors
def optimize(rate_per_s, top, csv_path, candidates_csv, json_path, json_full, html_path, plots_dir, headroom, fmt,
             quiet, executor, workers, ray_address, rate_profile, peak_window_s, **opts) -> None:
    """Find the cheapest fleet whose P99 TTFT meets --slo-ttft at --lam requests/s.

    Phase 1 sizes every candidate (topology x split threshold x GPU type per pool x
    sizing router) with M/G/c queueing (Erlang-C, two-moment tail) and ranks them by
    annual cost.  TTFT is time to first token; P99 the 99th percentile; rho the
    utilisation of a pool's KV slots.
    """
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
             "html": html_path, "plots": plots_dir}
    n_sim = verification_requests(request, verify)
    if verify is not None:
        disagg = {"pdd", "afd"} & {t.value for t in request.topologies}
        announce_compile([Kernel.ITERATION, *([Kernel.PDD] if disagg else [])])
    with progress_reporter(quiet) as progress, \
            executor_from_options(executor, workers, ray_address, simulated_requests=n_sim, threads=True) as run_tasks:
        result = run_optimize(request, verify, progress, map_fn=run_tasks,
                              headroom=HeadroomSettings() if headroom and verify is not None else None,
                              pool_map=sweep_map(executor, workers, verify is not None))
        peak_doc = None if profile is None or result.recommendation is None else peak_valley_doc(
            request, result.recommendation, profile, window_s, opts["gpu_profiles"], opts["prices"])
        notes = write_optimize_reports(result, verify, opts["seed"], paths, progress,
                                       None if peak_doc is None else {"peak_valley": peak_doc})
    console = report_console()
    if fmt != "table":  # stdout carries the table alone (machine-readable); the lines go to stderr
        emit_table(candidates_table(result, top), fmt)
        console = make_console(stderr=True)
    tpot = "" if slo_tpot_ms is None else f", P{percentile:g} TPOT <= {slo_tpot_ms:g} ms"
    console.print(
        f"Workload {wl.name}: λ = {rate:g} req/s ({rate_source}), {plan_arrivals(opts).label()} arrivals "
        f"(Ca² {request.arrival_cv2:.3g}); SLO P{percentile:g} TTFT <= "
        f"{slo_ttft_ms:g} ms{tpot}; {len(result.candidates)} candidates sized analytically in "
        f"{result.analytic_time_s * 1e3:.0f} ms"
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
    if peak_doc is not None:
        print_peak_valley(console, peak_doc)
