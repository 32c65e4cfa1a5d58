"""``fleetplan simulate``: run the discrete-event simulator on a fleet TOML."""

from __future__ import annotations

import math

import click
from rich.console import Console
from rich.table import Table

from fleetplan.cli.failure_options import failure_options, failures_from_options
from fleetplan.cli.feature_options import (
    FEATURE_OPTION_NAMES,
    feature_table,
    features_on,
    runtime_feature_options,
    serving_fleet,
)
from fleetplan.cli.first_run import Kernel, announce_compile
from fleetplan.cli.model_options import MAX_MODEL_LEN_OPTION, sim_model_options
from fleetplan.cli.options import (
    arrival_option,
    cv_option,
    deprecated_spelling,
    executor_from_options,
    executor_options,
    fleet_option,
    gpu_profiles_option,
    horizon_option,
    input_fraction_option,
    json_option,
    lam_option,
    replications_option,
    requests_csv_option,
    seed_option,
    sim_requests_option,
    slo_tpot_option,
    slo_ttft_option,
    warmup_fraction_option,
    workload_option,
)
from fleetplan.cli.tables import make_console, ms_cell
from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.sim.defaults import DEFAULT_N_REQUESTS, DEFAULT_WARMUP_FRACTION
from fleetplan.sim.fleet_toml import read_fleet_toml
from fleetplan.sim.result import TPOT_DEFINITION, GroupSummary, SimResult
from fleetplan.sim.shared_prefix import parse_shared_prefix
from fleetplan.sim.spec import ArrivalProcess, Level
from fleetplan.units import ms_to_s
from fleetplan.workload import load_workload

DEFAULT_RATE_PER_S = 100.0  # used when the workload carries no arrival rate of its own
DEFAULT_GAMMA_CV = 1.0  # --arrival gamma without --cv: exponential gaps' variability
SHOWN_PERCENTILES = (("P50", "p50_s"), ("P90", "p90_s"), ("P99", "p99_s"))


def _frac(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{100 * value:.1f}%"


def _num(value: float | None, fmt: str = ",.2f") -> str:
    return "-" if value is None or math.isnan(value) else format(value, fmt)


#: Label of the whole-fleet row: parentheses keep it apart from any pool name (a pool may be named "all").
FLEET_TOTAL_LABEL = "(fleet total)"


def _groups(result: SimResult) -> list[GroupSummary]:
    """Each pool, then the whole fleet."""
    return [*result.summary.pools, result.summary.overall]


def _label(g: GroupSummary, result: SimResult) -> str:
    return FLEET_TOTAL_LABEL if g is result.summary.overall else g.name


def _latency_table(result: SimResult) -> Table:
    table = Table(title="latency (ms)")
    table.add_column("pool")
    for metric in ("TTFT", "TPOT", "E2E"):
        for label, _ in SHOWN_PERCENTILES:
            table.add_column(f"{metric} {label}", justify="right")
    for g in _groups(result):
        cells = [_label(g, result)]
        for stats in (g.ttft, g.tpot, g.e2e):
            cells += [ms_cell(getattr(stats, attr)) for _, attr in SHOWN_PERCENTILES]
        table.add_row(*cells)
    return table


def _capacity_table(result: SimResult) -> Table:
    table = Table(title="requests and capacity")
    for col in ("pool", "gpu", "instances", "requests", "done", "unfinished", "rejected", "too long",
                "SLO attain.", "goodput req/s", "throughput req/s", "utilisation", "mean batch"):
        table.add_column(col, justify="left" if col in ("pool", "gpu") else "right")
    for g in _groups(result):
        table.add_row(
            _label(g, result), g.gpu, str(g.n_instances), f"{g.n_requests:,}", f"{g.n_done:,}",
            f"{g.n_unfinished:,}", f"{g.n_rejected:,}", f"{g.n_too_long:,}", _frac(g.slo_attainment),
            _num(g.goodput_per_s), _num(g.throughput_per_s), _frac(g.utilisation), _num(g.mean_batch, ".1f"),
        )
    return table


def _print_failures(con: Console, result: SimResult, no_failures: SimResult) -> None:
    """Outages, evictions and P99s with and without failures (same seed)."""
    f, on, off = result.summary.failures, result.summary.overall, no_failures.summary.overall
    pools = ", ".join(f"{p.name} MTBF {b / 3600:,.4g} h, MTTR {r / 3600:,.4g} h, A = {a:.4f}"
                      for p, b, r, a in zip(result.summary.pools, f.mtbf_s, f.mttr_s, f.availability, strict=True))
    con.print(f"failures ({f.repair} repairs; {pools}): {f.n_outages:,} outage(s), instances up "
              f"{100 * f.up_fraction:.2f}% of the time (fewest up at once: {f.min_instances_up}), "
              f"{f.n_evictions:,} running request(s) lost their KV cache and were recomputed elsewhere.")
    con.print(f"same seed without failures: P99 TTFT {ms_cell(off.ttft.p99_s)} ms -> {ms_cell(on.ttft.p99_s)} ms with "
              f"failures; P99 TPOT {ms_cell(off.tpot.p99_s)} ms -> {ms_cell(on.tpot.p99_s)} ms.")


EXAMPLES = """\b
Examples:
  fleetplan simulate --fleet examples/two_pool_a100.toml --workload lmsys --lam 100
  fleetplan simulate --fleet examples/homogeneous_h100.toml --workload lmsys --lam 50 \\
      --slo-ttft 500 --slo-tpot 100 --requests-csv requests.csv --json summary.json
  fleetplan simulate --fleet examples/two_pool_a100.toml --workload lmsys --lam 100 --failures \\
      --mtbf-h 0.5 --mttr-h 0.1
  fleetplan simulate --fleet examples/two_pool_a100.toml --workload lmsys --lam 50 --model llama-3.1-70b \\
      --cudagraph-mode full_decode_only --cudagraph-capture-sizes 1,2,4,8,16,32,64 --enable-prefix-caching \\
      --speculative-config '{"method": "mtp", "num_speculative_tokens": 2, "acceptance_rate": 0.7}' \\
      --scheduler-policy long=sglang
  fleetplan simulate --fleet examples/two_pool_a100.toml --workload lmsys --lam 100 --scheduler-policy mlfq \\
      --scheduler-config '{"mlfq_quantum0_ms": 20, "mlfq_levels": 6}'
  fleetplan simulate --fleet examples/homogeneous_h100.toml --workload lmsys --lam 50 --model llama-3.1-8b \\
      --cudagraph-mode none
  fleetplan simulate --fleet examples/two_pool_a100.toml --workload lmsys --level request --seed 7
"""


@click.command("simulate", epilog=EXAMPLES)
@fleet_option(required=True)
@workload_option
@input_fraction_option
@lam_option(help=f"Arrival rate, requests/s (default: the workload's own, else {DEFAULT_RATE_PER_S:g}); "
            "--request-rate: vLLM's spelling.")
@sim_requests_option(default=DEFAULT_N_REQUESTS, show_default=True)
@deprecated_spelling("--requests", "n_requests")
@click.option("--level", type=click.Choice(Level.names()), default=Level.ITERATION.value, show_default=True,
              help="iteration: vLLM continuous batching per step; request: the paper's eq. 4-5 slot model.")
@arrival_option(help="Arrival process (replay needs a trace workload).")
@cv_option(help="Inter-arrival coefficient of variation for --arrival gamma [default: 1.0, Poisson-like].")
@horizon_option
@warmup_fraction_option(default=DEFAULT_WARMUP_FRACTION, show_default=True)
@seed_option
@slo_ttft_option(help="TTFT SLO in ms (for goodput).")
@slo_tpot_option(help="TPOT SLO in ms (for goodput).")
@requests_csv_option
@json_option(help="Write the summary as JSON (inf/NaN written as null).")
@click.option("--failures", "inject_failures", is_flag=True, default=False,
              help="Inject instance failures and repairs (iteration level): MTBF/MTTR from the GPU catalog unless "
              "--mtbf-h/--mttr-h are given (either implies --failures). Also prints P99s without failures.")
@failure_options
@sim_model_options
@MAX_MODEL_LEN_OPTION
@gpu_profiles_option
@runtime_feature_options
@click.option("--shared-prefix", "shared_prefix", default=None, metavar="TOKENS[xCOUNT]",
              help="Every prompt starts with one of COUNT shared system prompts of TOKENS tokens (part of the "
              "prompt length; prefix-cache identities for --enable-prefix-caching and the prefix_affinity "
              "router), e.g. 1024x4.")
@replications_option(help="Independent replications (seeds derived from --seed); >1 adds a 95% confidence interval "
                     "of P99 TTFT and TPOT. Tables and exports show the first replication.")
@executor_options
def simulate_cmd(fleet_path, workload, input_fraction, rate_per_s, n_requests, level, arrival, arrival_cv, horizon_s,
                 warmup_fraction, seed, slo_ttft_ms, slo_tpot_ms, requests_csv, json_path, shared_prefix, replications,
                 inject_failures, mtbf_h, mttr_h, repair, executor, workers, ray_address, max_model_len, gpu_profiles,
                 **model_opts) -> None:
    """Simulate a fleet serving a workload; print P50/P90/P99 TTFT, TPOT, E2E per pool.

    TPOT is (E2E - TTFT) / (output tokens - 1), as vLLM's benchmark defines it.
    Unfinished and rejected requests count as infinite latency, except requests longer than
    max_model_len (--max-model-len, or with --model its max_position_embeddings): vLLM answers those
    with an error, so they are counted ("too long") and left out of the percentiles.  Every limit the
    fleet file gives (max_num_seqs, max_num_batched_tokens, kv_blocks, block_size) is kept with --model.
    """
    # the simulator loads here, when the command runs (not for --help)
    from fleetplan.sim.engine import simulate as run_simulation
    from fleetplan.sim.replications import replicate
    from fleetplan.sim.split import STATELESS_POOL_ROUTERS, simulate_pools_parallel

    feature_opts = {key: model_opts.pop(key) for key in FEATURE_OPTION_NAMES}
    if arrival_cv is not None and arrival != ArrivalProcess.GAMMA.value:
        raise ConfigError(f"--cv applies to --arrival gamma only (got --arrival {arrival}); add --arrival gamma or "
                          "drop --cv")
    cv = DEFAULT_GAMMA_CV if arrival_cv is None else arrival_cv
    fleet = read_fleet_toml(fleet_path, load_catalog(gpu_profiles))
    spec, step_note = serving_fleet(fleet, model_opts, feature_opts, max_model_len)
    with_features = features_on(spec)
    wl = load_workload(workload, input_fraction=input_fraction)
    if rate_per_s is not None:
        rate, why = rate_per_s, "from --lam"
    elif wl.arrival_rate_per_s is not None:
        rate, why = float(wl.arrival_rate_per_s), f"workload {wl.name}'s own rate"
    else:
        rate, why = DEFAULT_RATE_PER_S, "default; the workload has no arrival rate"
    failures = None
    if inject_failures or mtbf_h is not None or mttr_h is not None:
        failures = failures_from_options(spec, mtbf_h, mttr_h, repair)
    run_kwargs = dict(
        n_requests=n_requests, level=level, seed=seed, arrival=arrival, cv=cv, horizon_s=horizon_s,
        warmup_fraction=warmup_fraction, slo_ttft_s=None if slo_ttft_ms is None else ms_to_s(slo_ttft_ms),
        slo_tpot_s=None if slo_tpot_ms is None else ms_to_s(slo_tpot_ms),
    )
    if shared_prefix is not None:
        run_kwargs["shared_prefix"] = parse_shared_prefix(shared_prefix)
    # Parallel execution is opt-in here (--workers N > 1 or --executor ray): one simulation of a
    # small fleet is faster in this process than a pool's start-up.
    parallel = executor == "ray" or (workers or 1) > 1
    split = (parallel and failures is None and not with_features and shared_prefix is None and len(spec.pools) > 1
             and spec.pool_router in STATELESS_POOL_ROUTERS)
    if level == Level.REQUEST.value:
        kernels = [Kernel.REQUEST]
    elif failures is not None:
        kernels = [Kernel.FAILURES, Kernel.ITERATION]
    else:
        kernels = [Kernel.FEATURES if with_features or shared_prefix is not None else Kernel.ITERATION]
    announce_compile(kernels)
    with executor_from_options(executor, workers if parallel else 1, ray_address) as run_tasks:
        if split:
            result = simulate_pools_parallel(spec, wl, rate, map_fn=run_tasks, **run_kwargs)
        else:
            result = run_simulation(spec, wl, rate, failures=failures, **run_kwargs)
        rep = None
        if replications > 1:
            rep = replicate(spec, wl, rate, n_replications=replications, failures=failures,
                            map_fn=run_tasks if parallel else None, **run_kwargs)
    con = make_console(soft_wrap=True, highlight=False)
    s = result.summary
    con.print(f"fleet {fleet_path}: {len(spec.pools)} pool(s), {spec.n_instances} instances, "
              f"pool router {spec.pool_router.value}, {_num(spec.cost_usd_per_h)} USD/h")
    con.print(f"workload {wl.name}, rate {rate:.4g} req/s ({why}), {s.n_requests:,} requests, "
              f"{arrival} arrivals, level {level}, seed {seed}")
    con.print(step_note)
    if split:
        con.print(result.split_note)
    con.print(_latency_table(result))
    con.print(_capacity_table(result))
    if with_features:
        con.print(feature_table(spec, result))
    slos = [f"{name} <= {value:g} ms" for name, value in (("TTFT", slo_ttft_ms), ("TPOT", slo_tpot_ms))
            if value is not None]
    if s.overall.n_too_long:
        o = s.overall
        con.print(f"too long for max_model_len: {o.n_too_long:,} of {o.n_requests:,} measured requests "
                  f"({_frac(o.n_too_long / o.n_requests)}, {_frac(o.too_long_token_share)} of their tokens) rejected "
                  "as vLLM rejects them (an error reply, never served); counted in 'rejected', left out of the "
                  "latency percentiles.")
    con.print(f"{TPOT_DEFINITION}. Unfinished/rejected requests count as inf. First "
              f"{100 * s.warmup_fraction:g}% of arrivals ({s.n_warmup:,}) excluded as warm-up.")
    con.print("goodput (vLLM --goodput): requests/s meeting " + (" and ".join(slos) if slos else
              "all SLOs; give --slo-ttft/--slo-tpot to compute it") + ".")
    if failures is not None:
        _print_failures(con, result, run_simulation(spec, wl, rate, **run_kwargs))
    if rep is not None:
        lo, hi = rep.p99_ttft_interval_s
        tlo, thi = rep.p99_tpot_interval_s
        con.print(f"{replications} replications: P99 TTFT {ms_cell(rep.mean_p99_ttft_s)} ms "
                  f"(95% CI {ms_cell(lo)} to {ms_cell(hi)}); P99 TPOT {ms_cell(rep.mean_p99_tpot_s, 2)} ms "
                  f"(95% CI {ms_cell(tlo, 2)} to {ms_cell(thi, 2)}).")
    if requests_csv or json_path:
        from fleetplan.report.sim_export import write_requests_csv, write_summary_json
    if requests_csv:
        write_requests_csv(result, requests_csv)
        con.print(f"wrote {requests_csv} ({len(result.requests):,} rows)")
    if json_path:
        write_summary_json(result, json_path)
        con.print(f"wrote {json_path}")


simulate = simulate_cmd
