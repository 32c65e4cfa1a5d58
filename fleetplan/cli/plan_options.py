"""Options and input plumbing shared by the planning commands (``optimize``, ``whatif``).

``plan_options`` adds the sweep and verification options; ``plan_inputs`` turns the parsed options
into the library's ``OptimizeRequest`` and ``VerifySettings``; ``plan_arrivals`` the arrival process.
Commands import these from here, never from each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from fleetplan.cli.errors import render_error
from fleetplan.cli.model_options import (
    CONTEXT_LIMIT_OPTIONS,
    MAX_GPUS_PER_INSTANCE_OPTION,
    MODEL_OPTIONS,
    MTP_OPTIONS,
    PERF_PROFILE_OPTION,
    PLAN_ENGINE_OPTION,
    PLAN_ENGINE_VERSION_OPTION,
    context_limit,
    plan_engine,
    serving_setup,
)
from fleetplan.cli.options import (
    ARRIVAL_OPTIONS,
    FRACTION,
    INT_LIST,
    NAME_LIST,
    POSITIVE,
    arrival_spec,
    gpu_profiles_option,
    gpus_option,
    input_fraction_option,
    max_num_batched_tokens_option,
    max_num_seqs_option,
    percentile_option,
    price_option,
    replications_option,
    seed_option,
    sim_requests_option,
    slo_tpot_option,
    slo_ttft_option,
    ttft_model_option,
    workload_option,
)
from fleetplan.errors import ConfigError
from fleetplan.hardware import availability_preset, load_catalog
from fleetplan.plan.defaults import (
    AVAILABILITY_FROM_CATALOG,
    CALIBRATION_MODEL,
    DEFAULT_AF_RATIOS,
    DEFAULT_KV_LATENCY_S,
    DEFAULT_MAX_GPUS,
    DEFAULT_MEASURED_LIFETIMES,
    DEFAULT_MICRO_BATCHES,
    DEFAULT_MIN_CE_GAIN,
    DEFAULT_MIN_COMPLETIONS,
    DEFAULT_RATE_PER_S,
    DEFAULT_REPLICATIONS,
    DEFAULT_RHO_MAX,
    DEFAULT_VERIFY_TOP,
    DEFAULT_WARMUP_LIFETIMES,
    GBPS,
    MAX_STEP_TIME_MARGIN,
)
from fleetplan.plan.space import DEFAULT_COMPRESS_GAMMA, DEFAULT_THRESHOLDS_TOKENS, sizing_router, topology
from fleetplan.units import ms_to_s, s_to_ms
from fleetplan.workload import load_workload

if TYPE_CHECKING:
    from fleetplan.plan.disagg import DisaggSettings


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
    max_num_seqs_option(help="Sequences per engine step of every co-located pool, in both phases (vLLM "
                        "--max-num-seqs; default: the pool's KV slots at its longest request, so nothing is "
                        "preempted)."),
    max_num_batched_tokens_option(help="Tokens per engine step of every co-located pool, in both phases (vLLM "
                                  "--max-num-batched-tokens; default: the pool's slots plus its chunk and, with "
                                  "--model, vLLM's own default (8192, or 2048 on A100 and GPUs under 70 GiB) where "
                                  "it needs fewer GPUs)."),
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
    click.option("--kv-latency-ms", type=click.FloatRange(min=0), default=s_to_ms(DEFAULT_KV_LATENCY_S),
                 show_default=True, help="pdd/afd: KV transfer latency per request."),
    click.option("--kv-bandwidth-gb-per-s", type=POSITIVE, default=None,
                 help="pdd/afd: KV transfer bandwidth (default: the slower GPU's network_gbps / 8)."),
    click.option("--af-ratios", type=NAME_LIST, default=tuple(f"{a}:{f}" for a, f in DEFAULT_AF_RATIOS),
                 show_default=True, help="afd: attention:FFN GPUs per decode unit to sweep."),
    click.option("--pd-ratios", type=NAME_LIST, default=None, metavar="XP:YD,...",
                 help="pdd: deploy prefill:decode instances in these xPyD groups, e.g. 1:1,1:2,1:4,1:8 (each role "
                 "rounded up to whole groups; default: each role sized on its own)."),
    click.option("--micro-batches", type=click.IntRange(min=1), default=DEFAULT_MICRO_BATCHES, show_default=True,
                 help="afd: micro-batches per decode step (ping-pong)."),
    *ARRIVAL_OPTIONS,
    input_fraction_option,
    gpu_profiles_option,
    *MODEL_OPTIONS,
    PLAN_ENGINE_OPTION,
    PLAN_ENGINE_VERSION_OPTION,
    MAX_GPUS_PER_INSTANCE_OPTION,
    *MTP_OPTIONS,
    PERF_PROFILE_OPTION,
    *CONTEXT_LIMIT_OPTIONS,
    price_option,
    seed_option,
]


#: The owned fleet, a fleet TOML (``fleetplan deploy``'s fleet.toml too): whatif --plan starts from it, optimize
#: reports the GPUs to buy and retire against its recommendation.  One declaration for both commands.
CURRENT_FLEET_OPTION = click.option(
    "--current-fleet", "current_fleet", type=click.Path(exists=True, dir_okay=False), default=None,
    help="The fleet the team owns: a fleet TOML, e.g. the fleet.toml `fleetplan deploy` wrote (instances x GPUs per "
    "instance count as GPUs). whatif --plan starts from it; optimize reports the GPUs to buy and to retire against "
    "its recommendation. Default: none.")


def current_fleet_gpus(path: str | None, catalog) -> tuple[tuple[str, int], ...]:
    """GPUs per catalog type of the fleet file at ``path`` (``plan.deployment.owned_gpus``); none without one."""
    if path is None:
        return ()
    from fleetplan.plan.deployment import owned_gpus
    from fleetplan.sim.fleet_toml import read_fleet_toml

    return tuple(sorted(owned_gpus(read_fleet_toml(path, catalog).pools).items()))



def plan_options(func):
    """The sweep and verification options shared by ``optimize`` and ``whatif``."""
    for option in reversed(_PLAN_OPTIONS):
        func = option(func)
    return func


def _ratios(values, flag: str) -> tuple[tuple[int, int], ...]:
    """``A:B,...`` as integer pairs (``DisaggSettings`` checks that no role is left empty)."""
    out = []
    for v in values or ():
        a, _, f = str(v).upper().replace("P", "").replace("D", "").partition(":")
        if not (a.strip().isdigit() and f.strip().isdigit()):
            raise ConfigError(f"{flag} value {v!r} is invalid: give two instance counts per group, e.g. 1:1,2:1")
        out.append((int(a), int(f)))
    return tuple(out)


def _disagg_settings(opts: dict) -> DisaggSettings | None:
    """The pdd/afd screen's settings, or None when neither topology is swept."""
    if not {"pdd", "afd"} & {str(t).strip().lower() for t in opts["topologies"]}:
        return None
    from fleetplan.cli.options import KV_CACHE_DTYPES
    from fleetplan.models import dtype
    from fleetplan.models.catalog import load_model
    from fleetplan.plan.disagg import DisaggSettings, ModelShape

    bw = opts["kv_bandwidth_gb_per_s"]
    kv_dtype = dtype(KV_CACHE_DTYPES[opts.get("kv_cache_dtype") or "auto"]) if opts.get("model") else None
    return DisaggSettings(ModelShape.of(load_model(opts.get("model") or CALIBRATION_MODEL), kv_dtype),
                          kv_latency_s=ms_to_s(opts["kv_latency_ms"]), kv_bandwidth_bytes_per_s=None if bw is None
                          else bw * GBPS, af_ratios=_ratios(opts["af_ratios"], "--af-ratios"),
                          pd_ratios=_ratios(opts.get("pd_ratios"), "--pd-ratios"),
                          n_micro_batches=opts["micro_batches"])


def plan_inputs(opts: dict, rate_per_s: float | None):
    """(workload, OptimizeRequest, VerifySettings | None, rate source) from parsed plan options."""
    from fleetplan.plan.optimize import OptimizeRequest  # the planner loads on use, not for --help
    from fleetplan.plan.verify import VerifySettings

    catalog = load_catalog(opts["gpu_profiles"], dict(opts["prices"]) if opts["prices"] else None)
    wl = load_workload(opts["workload"], opts["input_fraction"])
    if rate_per_s is not None:
        rate, rate_source = rate_per_s, "--lam"
    elif wl.arrival_rate_per_s is not None:
        rate, rate_source = wl.arrival_rate_per_s, "the workload's own arrival rate"
    else:
        rate, rate_source = DEFAULT_RATE_PER_S, "default (the workload records no rate)"
    slo_s = ms_to_s(opts["slo_ttft_ms"])
    slo_tpot_s = None if opts["slo_tpot_ms"] is None else ms_to_s(opts["slo_tpot_ms"])
    gpus, per_instance, step_models, left_out = serving_setup(catalog, opts)
    for line in left_out:  # GPU types that cannot hold the model (the others are swept), in the CLI's flags
        click.echo(f"note: {render_error(ConfigError(line), 'optimize')}", err=True)
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
        slo_tpot_s=slo_tpot_s,
        min_ce_gain=opts["min_ce_gain"],
        disagg=_disagg_settings(opts),
        service_model=opts["service_model"],
        step_models=step_models,
        max_model_len_tokens=limit,
        arrival_cv2=arrivals.ca2(wl, rate),
        step_time_margin=opts["step_time_margin"],
        max_num_seqs=opts["max_num_seqs"],
        max_num_batched_tokens=opts["max_num_batched_tokens"],
        engine=plan_engine(opts),
        engine_version=opts.get("engine_version"),
    )
    verify = None
    if not opts["no_verify"]:
        verify = VerifySettings(
            slo_ttft_s=slo_s,
            slo_tpot_s=slo_tpot_s,
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
