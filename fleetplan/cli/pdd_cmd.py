"""``fleetplan simulate pdd``: simulate a prefill-decode disaggregated fleet."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import click
from rich.table import Table

from fleetplan.cli.first_run import Kernel, announce_compile
from fleetplan.cli.model_options import ALLOW_LONG_OPTION, context_limit
from fleetplan.cli.options import (
    NAME_LIST,
    POSITIVE,
    deprecated_spelling,
    horizon_option,
    input_fraction_option,
    json_option,
    lam_option,
    link_gbps_option,
    max_model_len_option,
    model_option,
    path_policy_option,
    replications_option,
    requests_csv_option,
    seed_option,
    sim_requests_option,
    spine_gbps_option,
    tensor_parallel_option,
    warmup_fraction_option,
    workload_option,
)
from fleetplan.cli.tables import make_console, ms_cell
from fleetplan.hardware import load_catalog
from fleetplan.metrics import student_t_interval
from fleetplan.models.catalog import load_model
from fleetplan.report.sim_export import write_requests_csv, write_summary_json
from fleetplan.rng import task_seed
from fleetplan.sim.builders import build_pool
from fleetplan.sim.defaults import DEFAULT_N_REQUESTS, DEFAULT_WARMUP_FRACTION
from fleetplan.sim.network import LeafSpineFabric
from fleetplan.sim.pdd import (
    AssignPolicy,
    Binding,
    DecodeModel,
    FabricSpec,
    KvTransferSpec,
    PddSpec,
    PsThroughputCurve,
    load_fabric_toml,
)
from fleetplan.sim.pdd.result import TPOT_DEFINITION, TTFT_DEFINITION
from fleetplan.sim.pdd.spec import DEFAULT_BUCKET_TOKENS, DEFAULT_EMA_ALPHA, SibylAblation, SibylParams, SibylPressure
from fleetplan.units import ms_to_s
from fleetplan.workload import load_workload

DEFAULT_RATE_PER_S = 10.0
DEFAULT_MODEL = "llama-3.1-70b"  # the architecture of the catalog's calibrated Llama-3-70B constants
BYTES_PER_GB = 1e9

EXAMPLES = """\b
Examples:
  fleetplan simulate pdd --workload lmsys --lam 20 --prefill-instances 4 --decode-instances 8
  fleetplan simulate pdd --workload lmsys --lam 20 --policy sibyl --layerwise --latency-ms 0.5 \\
      --bandwidth-gb-per-s 50 --json summary.json --requests-csv requests.csv
  fleetplan simulate pdd --workload lmsys --lam 20 --policy oracle --binding late
  fleetplan simulate pdd --workload lmsys --lam 20 --decode-model processor_sharing --policy sibyl \\
      --sibyl-pressure tasks
  fleetplan simulate pdd --workload lmsys --lam 20 --prefill-instances 8 --decode-instances 8 \\
      --fabric 4x4x2 --link-gbps 100 --path-policy reservation
  fleetplan simulate pdd --workload lmsys --lam 20 --fabric fabric.toml
"""

FABRIC_SHAPE = re.compile(r"^(\d+)x(\d+)x(\d+)$")


def _fabric(value: str | None, link_gbps: float, spine_gbps: float,
            policies: tuple[str, ...] | None) -> FabricSpec | None:
    """``--fabric LEAVESxHOSTSxSPINES`` (hosts per leaf) or a TOML file with a [fabric] table."""
    if policies is not None and len(policies) > 1:
        raise click.BadParameter(f"{','.join(policies)} names {len(policies)} policies; simulate pdd runs one: give "
                                 "ecmp or reservation (simulate network compares several)", param_hint="--path-policy")
    policy = None if policies is None else policies[0]
    if value is None:
        if policy is not None:
            raise click.BadParameter("--path-policy needs --fabric", param_hint="--path-policy")
        return None
    shape = FABRIC_SHAPE.match(value.strip())
    if shape:
        n_leaves, per_leaf, n_spines = (int(x) for x in shape.groups())
        return FabricSpec(LeafSpineFabric(n_leaves, per_leaf, n_spines, link_gbps, spine_gbps), policy or "ecmp")
    if not Path(value).is_file():
        raise click.BadParameter(f"{value!r} is neither LEAVESxHOSTSxSPINES (e.g. 4x4x2) nor a TOML file",
                                 param_hint="--fabric")
    spec = load_fabric_toml(value)
    return spec if policy is None else dataclasses.replace(spec, path_policy=policy)


def _sibyl_params(policy: str, pressure: str | None, bucket_tokens: int | None, alpha: float | None,
                  ablate: tuple[str, ...] | None) -> SibylParams:
    """``SibylParams`` from the ``--sibyl-*`` options, which only ``--policy sibyl`` reads."""
    given = {"--sibyl-pressure": pressure, "--sibyl-bucket-tokens": bucket_tokens, "--sibyl-ema-alpha": alpha,
             "--sibyl-ablate": ablate}
    stray = [name for name, value in given.items() if value is not None]
    if stray and policy != AssignPolicy.SIBYL.value:
        raise click.BadParameter(f"{stray[0]} applies to --policy sibyl only (got --policy {policy}); drop it",
                                 param_hint=stray[0])
    return SibylParams(bucket_tokens if bucket_tokens is not None else DEFAULT_BUCKET_TOKENS,
                       alpha if alpha is not None else DEFAULT_EMA_ALPHA, pressure=pressure or SibylPressure.TOKENS,
                       ablate=ablate or ())


def _ps_curve(value: str | None, decode_model: str) -> PsThroughputCurve:
    """``--ps-curve A,B,C``; only the processor-sharing decode model reads it."""
    if value is None:
        return PsThroughputCurve()
    if decode_model != DecodeModel.PROCESSOR_SHARING.value:
        raise click.BadParameter(f"applies to --decode-model processor_sharing only (got {decode_model}); drop it",
                                 param_hint="--ps-curve")
    try:
        a, b, c = (float(x) for x in value.split(","))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not three numbers A,B,C (e.g. -0.423,44.766,-7.753)",
                                 param_hint="--ps-curve") from None
    if not all(math.isfinite(x) for x in (a, b, c)):
        raise click.BadParameter(f"{value!r} must be three finite numbers", param_hint="--ps-curve")
    return PsThroughputCurve(a, b, c)


def _pressure_note(spec: PddSpec) -> str:
    if spec.policy is not AssignPolicy.SIBYL:
        return ""
    off = "" if not spec.sibyl.ablate else f", without {', '.join(a.value for a in spec.sibyl.ablate)}"
    return f" (pressure {spec.sibyl.pressure.value}{off})"


@click.command("pdd", epilog=EXAMPLES)
@workload_option
@input_fraction_option
@lam_option(default=DEFAULT_RATE_PER_S, show_default=True)
@sim_requests_option(default=DEFAULT_N_REQUESTS, show_default=True)
@deprecated_spelling("--requests", "n_requests")
@click.option("--prefill-gpu", default="h100", show_default=True, help="Catalog GPU of the prefill pool.")
@click.option("--prefill-instances", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--prefill-max-num-seqs", type=click.IntRange(min=1), default=None,
              help="vLLM --max-num-seqs of each prefill instance [default: the GPU profile's].")
@click.option("--prefill-max-num-batched-tokens", type=click.IntRange(min=1), default=None,
              help="vLLM --max-num-batched-tokens of each prefill instance (its chunk per step) [default: the GPU "
                   "profile's].")
@click.option("--decode-gpu", default="h100", show_default=True, help="Catalog GPU of the decode pool.")
@click.option("--decode-instances", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--decode-max-num-seqs", type=click.IntRange(min=1), default=None,
              help="vLLM --max-num-seqs of each decode instance (processor_sharing: the most tasks it holds) "
                   "[default: the GPU profile's].")
@max_model_len_option(default=8192, show_default=True,
                      help="Longest prompt + output (tokens) both pools accept (vLLM --max-model-len).")
@deprecated_spelling("--max-context", "max_model_len")
@click.option("--policy", type=click.Choice(AssignPolicy.names()), default="round_robin", show_default=True,
              help="Decode-instance assignment.")
@click.option("--binding", type=click.Choice(Binding.names()), default="early", show_default=True,
              help="Bind the decode instance at prefill start (early) or end (late).")
@click.option("--decode-model", type=click.Choice(DecodeModel.names()), default="steps", show_default=True)
@click.option("--ps-curve", "ps_curve", default=None, metavar="A,B,C",
              help="processor_sharing throughput TPS(N) = A N^2 + B N + C tokens/s of one decode instance with N "
                   "tasks [default: SIBYL's H20 fit -0.423,44.766,-7.753].")
@click.option("--sibyl-pressure", type=click.Choice(SibylPressure.names()), default=None,
              help="SIBYL's load per task: tokens (prompt + generated, the paper's eq. 2; decode cost grows with "
                   "the KV read) or tasks (one per task: speed set by the task count, as processor_sharing) "
                   "[default: tokens].")
@click.option("--sibyl-bucket-tokens", type=click.IntRange(min=1), default=None,
              help=f"SIBYL survival-estimator bucket, tokens [default: {DEFAULT_BUCKET_TOKENS}].")
@click.option("--sibyl-ema-alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
              help=f"SIBYL survival-estimator EMA factor [default: {DEFAULT_EMA_ALPHA}].")
@click.option("--sibyl-ablate", type=NAME_LIST, default=None, metavar="TERM,...",
              help=f"SIBYL terms to switch off, the paper's sensitivity variants: "
                   f"{', '.join(SibylAblation.names())} (prob: survival weights set to 1, PROB @ 1).")
@model_option(default=DEFAULT_MODEL, show_default=True, help="Model whose KV bytes per token size the transfer.")
@ALLOW_LONG_OPTION
@tensor_parallel_option(help="Tensor-parallel ranks sending KV in parallel (bytes per link = KV bytes / tp).")
@click.option("--latency-ms", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="KV transfer latency per request.")
@click.option("--bandwidth-gb-per-s", type=POSITIVE, default=50.0, show_default=True,
              help="KV transfer bandwidth per link (GB/s).")
@click.option("--layerwise/--no-layerwise", default=False, show_default=True,
              help="Stream the KV layer by layer, overlapping all but the last layer with prefill.")
@click.option("--fabric", "fabric", default=None, metavar="LxHxS|TOML",
              help="Send KV transfers as flows over a leaf-spine fabric: leaves x hosts per leaf x spines "
                   "(prefill instances on hosts 0.., decode instances next) or a TOML file with a [fabric] table; "
                   "replaces --bandwidth-gb-per-s.")
@link_gbps_option
@spine_gbps_option
@path_policy_option(help="Fabric path choice with --fabric: ecmp (hash) or reservation (least-loaded spine) "
                    "[default: ecmp].")
@horizon_option
@warmup_fraction_option(default=DEFAULT_WARMUP_FRACTION, show_default=True)
@seed_option
@requests_csv_option
@json_option(help="Write the summary as JSON.")
@replications_option(help="Independent replications (the first with --seed, the others with seeds derived from it); "
                     ">1 prints the mean and 95% upper bound of P99 TTFT and TPOT. Tables and exports show the first.")
def simulate_pdd_cmd(workload, input_fraction, rate_per_s, n_requests, prefill_gpu, prefill_instances,
                     prefill_max_num_seqs, prefill_max_num_batched_tokens, decode_gpu, decode_instances,
                     decode_max_num_seqs, max_model_len, policy, binding, decode_model, ps_curve, sibyl_pressure,
                     sibyl_bucket_tokens, sibyl_ema_alpha, sibyl_ablate, model, allow_long_max_model_len,
                     tensor_parallel_size, latency_ms, bandwidth_gb_per_s, layerwise, fabric, link_gbps, spine_gbps,
                     path_policy, horizon_s, warmup_fraction, seed, requests_csv, json_path, replications) -> None:
    """Simulate prefill pool -> KV transfer -> decode pool; print the TTFT breakdown and TPOT.

    TTFT = queue + prefill + transfer + first decode step; TPOT from the decode side.
    """
    context_limit(model, max_model_len, allow_long_max_model_len)
    catalog = load_catalog()
    pf = build_pool(catalog.get(prefill_gpu), "prefill", prefill_instances, max_model_len,
                    max_num_seqs=prefill_max_num_seqs, max_num_batched_tokens=prefill_max_num_batched_tokens)
    dec = build_pool(catalog.get(decode_gpu), "decode", decode_instances, max_model_len,
                     max_num_seqs=decode_max_num_seqs)
    transfer = KvTransferSpec.from_model(load_model(model), ms_to_s(latency_ms),
                                         bandwidth_gb_per_s * BYTES_PER_GB, layerwise, tensor_parallel_size)
    network = _fabric(fabric, link_gbps, spine_gbps, path_policy)
    sibyl = _sibyl_params(policy, sibyl_pressure, sibyl_bucket_tokens, sibyl_ema_alpha, sibyl_ablate)
    spec = PddSpec(pf, dec, transfer, policy, binding, decode_model, network=network, sibyl=sibyl,
                   ps_curve=_ps_curve(ps_curve, decode_model), max_model_len_tokens=max_model_len)
    wl = load_workload(workload, input_fraction=input_fraction)
    announce_compile([Kernel.PDD])
    from fleetplan.sim.pdd import simulate_pdd  # loads the kernel: only when the command runs, not for --help

    result = simulate_pdd(spec, wl, rate_per_s, n_requests, seed, horizon_s, warmup_fraction)
    s = result.summary
    con = make_console(soft_wrap=True, highlight=False)
    con.print(f"PDD fleet: {prefill_instances} x {pf.gpu} prefill -> {decode_instances} x {dec.gpu} decode; "
              f"policy {s.policy}{_pressure_note(spec)}, binding {s.binding}, decode model {s.decode_model}; "
              f"KV {transfer.kv_bytes_per_token:,.0f} B/token ({model}, tp {tensor_parallel_size})")
    con.print(f"workload {wl.name}, rate {rate_per_s:g} req/s, {s.n_requests:,} requests, seed {seed}")
    table = Table(title="latency (ms)")
    for col in ("metric", "mean", "P50", "P90", "P99"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for name in ("queue", "prefill", "transfer", "first_decode", "ttft", "tpot", "e2e"):
        st = getattr(s, name)
        table.add_row(name, ms_cell(st.mean_s), ms_cell(st.p50_s), ms_cell(st.p90_s), ms_cell(st.p99_s))
    con.print(table)
    con.print(f"done {s.n_done:,}, unfinished {s.n_unfinished:,}, rejected {s.n_rejected:,} (of which "
              f"{s.n_too_long:,} too long for --max-model-len {max_model_len:,}: vLLM's error reply, "
              f"{100 * s.too_long_token_share:.1f}% of tokens, left out of the percentiles); "
              f"optimal-assignment ratio {100 * s.optimal_assignment_ratio:.1f}% (tokens), "
              f"{100 * s.optimal_assignment_ratio_requests:.1f}% (requests); utilisation prefill "
              f"{100 * s.prefill_utilisation:.1f}%, decode {100 * s.decode_utilisation:.1f}%")
    net = s.network
    if net is not None:
        fab = network.fabric
        con.print(f"fabric {fab.n_leaves} leaves x {fab.hosts_per_leaf} hosts, {fab.n_spines} spines "
                  f"({fab.host_link_gbps:g}/{fab.spine_link_gbps:g} Gb/s), {net.path_policy}: {net.n_flows_done:,} "
                  f"KV flows, FCT mean {ms_cell(net.mean_fct_s)} ms, p99 {ms_cell(net.p99_fct_s)} ms; slowdown mean "
                  f"{net.mean_slowdown:.2f}, p99 {net.p99_slowdown:.2f}, max {net.max_slowdown:.2f}; peak "
                  f"{net.peak_active_flows} flows")
    con.print(f"{TTFT_DEFINITION}. {TPOT_DEFINITION}. First {100 * warmup_fraction:g}% of arrivals excluded.")
    if replications > 1:
        runs = [s, *(simulate_pdd(spec, wl, rate_per_s, n_requests, task_seed(seed, "simulate-pdd", i), horizon_s,
                                  warmup_fraction).summary for i in range(1, replications))]
        ttft, _, ttft_hi = student_t_interval([r.ttft.p99_s for r in runs])
        tpot, _, tpot_hi = student_t_interval([r.tpot.p99_s for r in runs])
        con.print(f"{replications} replications: P99 TTFT {ms_cell(ttft)} ms (95% upper {ms_cell(ttft_hi)} ms), "
                  f"P99 TPOT {ms_cell(tpot)} ms (95% upper {ms_cell(tpot_hi)} ms)")
    if requests_csv:
        write_requests_csv(result, requests_csv)
        con.print(f"wrote {requests_csv}")
    if json_path:
        write_summary_json(result, json_path)
        con.print(f"wrote {json_path}")


simulate_pdd_command = simulate_pdd_cmd
