"""``fleetplan perf``: explain a step's time per operator; calibrate a profile from measurements."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from fleetplan.cli.errors import FleetplanGroup
from fleetplan.cli.options import (
    FRACTION,
    KV_CACHE_DTYPES,
    api_server_count_option,
    data_parallel_option,
    enable_dp_attention_option,
    enable_expert_parallel_option,
    engine_option,
    engine_version_option,
    expert_parallel_size_option,
    gpu_option,
    gpu_profiles_option,
    kv_cache_dtype_option,
    model_option,
    mtp_acceptance_option,
    nnodes_option,
    out_option,
    pipeline_parallel_option,
    seed_option,
    tensor_parallel_option,
    timing_source_option,
    weight_dtype_option,
)
from fleetplan.cli.serving_calibrate import run_serving_calibrate, serving_calibrate_options
from fleetplan.cli.tables import make_console
from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.perf.api_server import api_server_max_request_rate_per_s
from fleetplan.perf.attention import flash_head_dim_factor
from fleetplan.perf.batch import BATCH_SYNTAX, parse_batch
from fleetplan.perf.calibrate import DEFAULT_HOLDOUT_FRACTION, DEFAULT_SEED, calibrate
from fleetplan.perf.engine_profile import ENGINE_NAMES, load_engine_profile
from fleetplan.perf.kv_budget import DEFAULT_MAX_NUM_SEQS, kv_budget
from fleetplan.perf.measured import ROOFLINE_SOURCE, measured_step_model, timing_source
from fleetplan.perf.measured.coverage import Fp8Scheme
from fleetplan.perf.measured.source import measured_coverage
from fleetplan.perf.overheads import DEFAULT_CPU_OVERHEAD_S, ExecutionMode, PredictorOptions
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.perf.profile_io import read_calibration_csv, save_perf_profile
from fleetplan.perf.quant import Fp8Scaling, checkpoint_fp8_scaling
from fleetplan.perf.speculative import MtpStepModel, mtp_step, speculative_step, verify_batch
from fleetplan.perf.typical_batch import typical_step
from fleetplan.units import ms_to_s, s_to_ms

SERVING_OPTION_NAMES = ("bench_results", "metrics_dumps", "engine", "input_len", "output_len", "backend",
                        "chat_template_tokens", "num_prompts", "request_rate", "max_concurrency")
KV_REPORT_CONTEXT_TOKENS = 8192  # context at which explain reports n_max (the core paper's reference)


def _predictor_options(func):
    """--model, --gpu, parallelism, dtypes and overheads shared by explain and calibrate."""
    options = [
        model_option(required=True, help="Bundled model (llama-3.1-70b) or a config.json."),
        gpu_option(required=True, help="GPU name or alias from the catalog (h100, a100)."),
        tensor_parallel_option,
        pipeline_parallel_option,
        data_parallel_option,
        expert_parallel_size_option,
        weight_dtype_option(default=None, show_default=False,
                            help="Weight storage type (fp8/int4/mxfp4 = quantized) [default: the checkpoint's, from "
                            "its config.json quantization_config; bf16 without one]."),
        kv_cache_dtype_option,
        click.option("--execution", type=click.Choice([m.value for m in ExecutionMode]), default="cuda_graph",
                     show_default=True, help="Kernel issue: eager pays per-kernel launch overhead."),
        click.option("--cpu-overhead-ms", type=click.FloatRange(min=0), default=None,
                     help=f"Host scheduling/sampling time per step (0 hides real TTFT cost) [default: the engine "
                     f"profile's, else {s_to_ms(DEFAULT_CPU_OVERHEAD_S):g}]."),
        gpu_profiles_option,
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _build(model, gpu, tensor_parallel_size, pipeline_parallel_size, data_parallel_size, ep, weight_dtype,
           kv_cache_dtype, execution, cpu_overhead_ms, gpu_profiles, par=None, engine=None, fp8_scaling=None,
           engine_version=None):
    """The predictor of the flags; weights in the checkpoint's type and FP8 scaling unless given
    (``checkpoint_fp8_scaling``: block-scaled for a block-scaled FP8 checkpoint, else per tensor);
    options: the ``engine`` profile's for this GPU and weight type at ``engine_version`` (its per-GPU and
    per-release overrides), or the defaults."""
    profile = load_catalog(gpu_profiles).get(gpu)
    model_cfg = load_model(model)
    weights = model_cfg.default_weight_dtype if weight_dtype is None else Dtype(weight_dtype)
    scaling = checkpoint_fp8_scaling(model_cfg, weights) if fp8_scaling is None else Fp8Scaling(fp8_scaling)
    options = PredictorOptions(cpu_overhead_s=DEFAULT_CPU_OVERHEAD_S) if engine is None else \
        load_engine_profile(engine).options_for(profile, weights, engine_version)
    opts = dataclasses.replace(options, execution=ExecutionMode(execution),
                               cpu_overhead_s=options.cpu_overhead_s if cpu_overhead_ms is None
                               else ms_to_s(cpu_overhead_ms))
    if par is None:
        par = Parallelism(tp=tensor_parallel_size, pp=pipeline_parallel_size, dp=data_parallel_size, ep=ep)
    return StepTimePredictor(model_cfg, profile, par, weights, Dtype(KV_CACHE_DTYPES[kv_cache_dtype]), opts, scaling)


def _engine_parallelism(engine: str | None, tp: int, pp: int, dp: int, ep: int, enable_expert_parallel: bool,
                        enable_dp_attention: bool) -> tuple[Parallelism, str | None]:
    """The replica's ``Parallelism`` from the flags in the engine's own meaning, and a note for stderr.

    vLLM: ``--tensor-parallel-size`` x ``--data-parallel-size`` GPUs per stage, attention TP inside each DP
    rank; ``--enable-expert-parallel`` spreads the experts over all of them (ep = tp dp).
    SGLang: ``--tp`` counts every GPU of the instance; ``--enable-dp-attention`` with ``--dp`` splits the
    attention into ``dp`` ranks of ``tp / dp`` GPUs; ``--ep-size`` spreads the experts over ``ep`` of the
    ``tp`` GPUs (the rest split each expert's width); without dp attention, ``--dp`` runs independent
    replicas (one is timed)."""
    if engine == "sglang":
        note = None
        if enable_dp_attention:
            if tp % dp:
                raise ConfigError(f"--dp {dp} must divide --tp {tp} with --enable-dp-attention (SGLang: tp counts "
                                  f"every GPU; attention runs {dp} ranks of tp/dp GPUs); use --dp dividing {tp}",
                                  param="data_parallel_size", value=dp)
            attn_tp, attn_dp = tp // dp, dp
        else:
            if dp > 1:
                note = (f"SGLang --dp {dp} without --enable-dp-attention runs {dp} independent replicas of --tp {tp}; "
                        "timing one")
            attn_tp, attn_dp = tp, 1
        ep_size = tp if enable_expert_parallel else ep
        if tp % ep_size:
            raise ConfigError(f"--ep-size {ep_size} must divide --tp {tp} (SGLang spreads the experts over ep of the "
                              f"tp GPUs); use a divisor of {tp}", param="ep", value=ep_size)
        return Parallelism(tp=attn_tp, pp=pp, dp=attn_dp, ep=ep_size if ep_size > 1 else 1, tp_attn=attn_tp,
                           dp_attn=attn_dp, tp_ffn=tp // ep_size, ep_ffn=ep_size), note
    if enable_dp_attention:
        raise ConfigError("--enable-dp-attention is SGLang's flag: give --engine sglang, or for vLLM use "
                          "--data-parallel-size N with --enable-expert-parallel", param="enable_dp_attention",
                          value=True)
    return Parallelism(tp=tp, pp=pp, dp=dp, ep=tp * dp if enable_expert_parallel else ep), None


def _check_nodes(par: Parallelism, gpus_per_node: int, nnodes: int | None) -> str:
    """Nodes the replica spans; ``ConfigError`` when ``--nnodes`` cannot hold it or leaves a node empty."""
    world = par.gpus_per_replica
    needed = -(-world // gpus_per_node)
    if nnodes is not None and nnodes != needed:
        raise ConfigError(f"--nnodes {nnodes} does not fit {world} GPUs per replica on nodes of {gpus_per_node} "
                          f"GPUs (they need exactly {needed}); use --nnodes {needed} or change the parallel sizes",
                          param="nnodes", value=nnodes)
    return f"{needed} node{'s' if needed > 1 else ''} of {gpus_per_node} GPUs"


_GROUP_EXAMPLES = """\b
Examples:
  fleetplan perf explain --model llama-3.1-70b --gpu h100 -tp 4 --batch "prefill=2048@0;decode=128x1024"
  fleetplan perf calibrate examples/calibration_example.csv --model llama-3.1-8b --gpu h100 --out h100.json
"""
_EXPLAIN_EXAMPLES = f"""\b
Batch syntax: {BATCH_SYNTAX}
  TOKENS@OFFSET  a prefill chunk of TOKENS new tokens after OFFSET cached ones
  COUNTxCONTEXT  COUNT decoding requests holding CONTEXT tokens each
\b
Examples:
  fleetplan perf explain --model llama-3.1-70b --gpu h100 -tp 4 --batch "prefill=2048@0,512@4096;decode=128x1024"
  fleetplan perf explain --model qwen3-30b-a3b --gpu h100 -tp 4 --ep 4 --batch "decode=256x2048"
  fleetplan perf explain --model llama-3.1-8b --gpu a100 --execution eager --batch "decode=1x512"
  fleetplan perf explain --model llama-3.1-70b --gpu h100 -tp 4
  fleetplan perf explain --model deepseek-v3 --gpu h200 --engine vllm -tp 8 --enable-expert-parallel \
      --weight-dtype fp8 --fp8-scaling block --mtp-tokens 1 --batch "decode=64x2048"
  fleetplan perf explain --model deepseek-v3 --gpu h200 --engine sglang --tp 8 --dp 8 --enable-dp-attention \
      --ep-size 8 --weight-dtype fp8 --batch "decode=16x2048"
  fleetplan perf explain --model qwen3-235b-a22b --gpu h100 -tp 16 --enable-expert-parallel --nnodes 2 \
      --weight-dtype fp8 --batch "decode=64x2048"
"""
_CALIBRATE_EXAMPLES = """\b
CSV columns (fleetplan.perf.profile_io): n_seqs, n_decode, prefill_tokens,
decode_context_tokens, prefill_attention_work, step_ms; '#' lines are comments.
\b
Examples:
  fleetplan perf calibrate examples/calibration_example.csv --model llama-3.1-8b --gpu h100 --out h100.json
  fleetplan perf calibrate steps.csv --model llama-3.1-70b --gpu a100 -tp 8 --holdout 0.3 --out a100.json
  fleetplan perf calibrate --bench-result c1.json --bench-result c16.json --model llama-3.1-8b --gpu h100 \
      --out h100.json
  fleetplan perf calibrate --metrics metrics.txt --input-len 1024 --output-len 128 --num-prompts 500 \
      --max-concurrency 32 --model llama-3.1-8b --gpu h100 --out h100.json
"""


@click.group(cls=FleetplanGroup, epilog=_GROUP_EXAMPLES)
def perf() -> None:
    """Step-time predictor: per-operator breakdown and calibration from measured steps."""


@perf.command("explain", epilog=_EXPLAIN_EXAMPLES)
@_predictor_options
@click.option("--batch", "batch_text", default=None,
              help=f"The step's batch: {BATCH_SYNTAX} (default: a typical step, printed: the model's operating "
              "batch decoding plus one prefill chunk).")
@engine_option(default=None, show_default=False,
               help=f"Engine profile ({'|'.join(ENGINE_NAMES)}): efficiencies, overheads and the meaning of the "
               "parallel flags (default: the predictor's defaults, vLLM flag meaning).")
@engine_version_option(help="With --engine: its release as the engine numbers it (vLLM 0.10.1): the profile values "
                       "measured on the newest profiled release at or before it [default: the profile's newest "
                       "profiled release, shown in the title].")
@enable_expert_parallel_option(help="vLLM: experts spread over all tp x dp GPUs (ep = tp*dp); SGLang: ep = --tp.")
@enable_dp_attention_option
@nnodes_option
@click.option("--fp8-scaling", type=click.Choice([m.value for m in Fp8Scaling]), default=None,
              help="FP8 weights: per-tensor scales or 128x128 blocks [default: the checkpoint's (block for "
              "DeepSeek-V3, Qwen3-*-FP8); per_tensor for FP8 chosen for a BF16 checkpoint].")
@click.option("--mtp-tokens", type=click.IntRange(min=0), default=0, show_default=True,
              help="MTP speculative tokens per step (DeepSeek num_nextn_predict_layers heads): times the verify "
              "step and the draft passes, and the time per output token.")
@mtp_acceptance_option
@api_server_count_option
@timing_source_option
def explain(batch_text: str | None, engine: str | None, engine_version: str | None, enable_expert_parallel: bool,
            enable_dp_attention: bool,
            nnodes: int | None, fp8_scaling: str | None, mtp_tokens: int, mtp_acceptance: float,
            api_server_count: int, timing_source: str | None, **kw) -> None:
    """Per-operator time of one engine step, which source timed it, and the replica's KV-cache budget.

    A batch whose requests hold more KV blocks than the replica's cache is still timed (a what-if),
    with a note that vLLM would never run it.
    """
    profile = None if engine is None else load_engine_profile(engine)  # unknown names: one line, exit 2
    engine = None if profile is None else profile.name
    if profile is None and engine_version is not None:
        raise ConfigError("--engine-version names a release of the --engine profile; give --engine too (e.g. "
                          "--engine vllm --engine-version 0.10.1)", param="engine_version", value=engine_version)
    par, note = _engine_parallelism(engine, kw["tensor_parallel_size"], kw["pipeline_parallel_size"],
                                    kw["data_parallel_size"], kw["ep"], enable_expert_parallel, enable_dp_attention)
    if note:
        click.echo(note, err=True)
    p = _build(**kw, par=par, engine=engine, fp8_scaling=fp8_scaling, engine_version=engine_version)
    nodes = _check_nodes(p.parallelism, p.gpu.gpus_per_node, nnodes)
    budget = kv_budget(p.model, p.gpu, p.parallelism, weight_dtype=p.weight_dtype, kv_dtype=p.kv_dtype,
                       n_mtp_layers=1 if mtp_tokens else 0, gpu_memory_utilization=None,
                       engine=engine or "vllm", engine_version=engine_version)
    if batch_text is None:
        step = typical_step(budget)
        batch_text = step.batch_text
        click.echo(f"assumed --batch \"{batch_text}\": {step.reason}", err=True)
    batch = parse_batch(batch_text)
    mtp = None
    if mtp_tokens:
        if batch.n_decode == 0:
            raise ConfigError("--mtp-tokens needs decoding requests in --batch (drafts extend decodes), e.g. "
                              "\"decode=16x2048\"", param="mtp_tokens", value=mtp_tokens)
        mtp = mtp_step(p, batch, (mtp_acceptance,) * mtp_tokens)
    breakdown = p.predict(batch if mtp is None else verify_batch(batch, mtp_tokens))
    rows = [(name, seconds, breakdown.source.get(name, "roofline")) for name, seconds in breakdown.seconds.items()]
    if mtp is not None:
        rows.append((f"mtp_draft x{mtp_tokens}", mtp.draft_s, "roofline"))
    total = sum(seconds for _, seconds, _ in rows)
    fp8 = f" ({p.fp8_scaling.value})" if p.weight_dtype is Dtype.FP8 else ""
    table = Table(title=f"{p.model.name} on {p.parallelism.gpus_per_replica}x {p.gpu.name}, {nodes} "
                        f"({p.parallelism.flags()}, {p.weight_dtype.value}{fp8} weights, {p.kv_dtype.value} KV, "
                        f"{p.options.execution.value}, {_profile_label(profile, engine_version, p.gpu)})")
    for header in ("operator", "ms", "share", "source"):
        table.add_column(header, justify="left" if header in ("operator", "source") else "right")
    for name, seconds, source in rows:
        if seconds > 0:
            table.add_row(name, f"{s_to_ms(seconds):.3f}", f"{seconds / total:.1%}", source)
    table.add_row("total", f"{s_to_ms(total):.3f}", "100.0%", "", style="bold")
    console = make_console()
    console.print(table)
    if mtp is not None:
        console.print(f"MTP: {mtp_tokens} draft pass{'es' if mtp_tokens > 1 else ''} and a verify step of "
                      f"{mtp_tokens + 1} tokens per decoding request (timed above); acceptance {mtp_acceptance:g} per "
                      f"position -> {mtp.tokens_per_step:.2f} tokens per step, {s_to_ms(mtp.s_per_token):.3f} ms per "
                      f"output token against {s_to_ms(mtp.plain_step_s):.3f} ms without MTP ({mtp.speedup:.2f}x)")
    console.print(f"batch: {batch.n_seqs} requests ({batch.n_decode} decoding), {batch.n_tokens} tokens through the "
                  f"GEMMs ({breakdown.gemm_bound}-bound), decode context {batch.decode_context_sum} tokens")
    console.print(escape(_timing_source_line(p, batch, engine or "vllm", timing_source, mtp_tokens, mtp_acceptance)))
    per_seq = -(-KV_REPORT_CONTEXT_TOKENS // budget.block_size_tokens)
    fraction = (f"SGLang's derived --mem-fraction-static {budget.gpu_memory_utilization:g}" if engine == "sglang"
                else f"--gpu-memory-utilization {budget.gpu_memory_utilization:g}")
    console.print(f"KV budget: {budget.kv_blocks_per_replica} blocks of {budget.block_size_tokens} tokens per "
                  f"replica ({budget.kv_blocks_per_replica * budget.block_size_tokens} tokens) at {fraction}; "
                  f"n_max at {KV_REPORT_CONTEXT_TOKENS} tokens = {budget.kv_blocks_per_replica // per_seq}")
    if budget.state_reserved_bytes:
        console.print(f"fixed per-sequence state (linear-attention state): "
                      f"{budget.state_bytes_per_seq / 2**20:.2f} MiB per sequence per GPU, "
                      f"{budget.state_reserved_bytes / 2**30:.2f} GiB reserved per GPU for {DEFAULT_MAX_NUM_SEQS} "
                      "sequences ahead of the KV blocks")
    if budget.window_tokens_per_seq:
        console.print(f"sliding-window KV: {budget.window_tokens_per_seq} tokens of the KV blocks per running "
                      "request (vLLM's hybrid allocator, not reserved)")
    o = p.options
    if p.model.attention_sinks and o.sink_attention_prefill_efficiency is not None:
        flash = o.attention_efficiency * flash_head_dim_factor(p.model.head_dim)
        console.print(f"attention sinks: {p.model.name} runs on Triton attention kernels on {p.gpu.name} "
                      f"(FlashAttention 2 takes no sinks): prefill attention at "
                      f"{o.sink_attention_prefill_efficiency:.2f} of the BF16 peak, not FlashAttention's {flash:.2f} "
                      "(sink_attention_prefill_efficiency)")
    if o.api_server_s_per_request or o.api_server_s_per_token or o.api_server_s_per_output_chunk:
        ceiling = api_server_max_request_rate_per_s(o, KV_REPORT_CONTEXT_TOKENS, 0, api_server_count)
        interval = o.api_server_stream_interval_tokens
        per = "output token" if interval == 1 else f"{interval} output tokens, --stream-interval"
        chunk = (f" + {s_to_ms(o.api_server_s_per_output_chunk) * 1e3:.3g} us per streamed chunk (one per {per})"
                 if o.api_server_s_per_output_chunk else "")
        console.print(f"API server: {s_to_ms(o.api_server_s_per_request):.3g} ms per request + "
                      f"{s_to_ms(o.api_server_s_per_token) * 1e3:.3g} us per token{chunk}: at most {ceiling:,.0f} "
                      f"requests/s of {KV_REPORT_CONTEXT_TOKENS} tokens with {api_server_count} API server "
                      f"process{'es' if api_server_count > 1 else ''} (--api-server-count)")
    held = batch.kv_blocks(budget.block_size_tokens)
    if held > budget.kv_blocks_per_replica:
        console.print(f"note: this batch holds {held:,} KV blocks ({held * budget.block_size_tokens:,} tokens), more "
                      f"than the replica's {budget.kv_blocks_per_replica:,}: vLLM never runs it (it would preempt or "
                      "queue requests to stay within the cache); the step time above is hypothetical. Shrink the "
                      "batch, or give more GPUs (-tp) or --kv-cache-dtype fp8.")


def _profile_label(profile, engine_version: str | None, gpu) -> str:
    """``vllm 0.24.0 profile`` (the release named, else the default one; ``(values of 0.10.1 on MI300X)`` when an
    older profiled release's values apply), or ``default profile`` without --engine."""
    if profile is None:
        return "default profile"
    named = engine_version or f"{profile.default_version} (default)"
    values = profile.values_version(engine_version)
    shown = f"{profile.name} {named} profile"
    return shown if values == (engine_version or profile.default_version) else f"{shown}, values of {values}"


def _timing_source_line(p: StepTimePredictor, batch, engine: str, timing: str | None, mtp_tokens: int = 0,
                        mtp_acceptance: float = 0.0) -> str:
    """Which source times this pool in planning (``fleetplan.perf.measured``; ``--timing-source``): the measured
    tables of ``engine`` with their step for the batch (with ``--mtp-tokens``: the measured verify step and draft
    passes, ``perf.speculative.speculative_step``), or the roofline above and why."""
    scheme = Fp8Scheme.BLOCK if p.block_fp8 else Fp8Scheme.PER_TENSOR
    measured = measured_step_model(p, engine, scheme, timing)
    if measured is None:
        return f"timing source: {ROOFLINE_SOURCE} ({measured_coverage(p, engine, scheme, timing)})"
    if mtp_tokens:
        mtp = MtpStepModel(measured, mtp_acceptance, mtp_tokens, roofline=p)
        step = speculative_step(mtp, batch)
        return (f"timing source: {timing_source(mtp)}: this step's verify {s_to_ms(step.verify_s):.3f} ms + drafts "
                f"{s_to_ms(step.draft_s):.3f} ms -> {s_to_ms(step.s_per_token):.3f} ms per output token against "
                f"{s_to_ms(step.plain_step_s):.3f} ms without MTP (planning and simulation use it; the operator rows "
                "above are the roofline's)")
    step_s = measured.step_s(batch.n_seqs, batch.n_decode, batch.n_prefill_tokens, batch.decode_context_sum,
                             batch.attn2)
    return (f"timing source: {timing_source(measured)}: this step {s_to_ms(step_s):.3f} ms (planning and simulation "
            "use it; the operator rows above are the roofline's)")


@perf.command("calibrate", epilog=_CALIBRATE_EXAMPLES)
@click.argument("csv_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=False)
@serving_calibrate_options
@_predictor_options
@out_option(help="Profile to write, JSON or TOML by the name's suffix (load with --perf-profile).")
@click.option("--holdout", type=FRACTION, default=DEFAULT_HOLDOUT_FRACTION, show_default=True,
              help="Share of rows kept out of the fit to report MAPE on.")
@seed_option(default=DEFAULT_SEED, help="Seed of the held-out split.")
def calibrate_cmd(csv_path: Path, out_path: str, holdout: float, seed: int, **kw) -> None:
    """Fit the predictor's scales to measured steps (NNLS) or its efficiencies to serving runs
    (--bench-result / --metrics, least squares) and write a profile."""
    serving = {k: kw.pop(k) for k in SERVING_OPTION_NAMES}
    if serving["bench_results"] or serving["metrics_dumps"]:
        if csv_path is not None:
            raise ConfigError("give either a step CSV or --bench-result/--metrics, not both")
        run_serving_calibrate(Path(out_path), **serving, **kw)
        return
    if csv_path is None:
        raise ConfigError("perf calibrate needs a step CSV or --bench-result FILE / --metrics FILE")
    data = read_calibration_csv(csv_path)
    report = calibrate(_build(**kw), data, holdout_fraction=holdout, seed=seed)
    save_perf_profile(report.profile, out_path)
    table = Table(title=f"held-out MAPE ({report.n_holdout} of {data.n_rows} steps; fit on {report.n_fit})")
    table.add_column("predictor")
    table.add_column("MAPE", justify="right")
    table.add_row("uncalibrated roofline", f"{report.base_mape:.1%}")
    table.add_row("calibrated (NNLS, saved)", f"{report.fit_mape:.1%}")
    forest = "scikit-learn not installed" if report.forest_mape is None else f"{report.forest_mape:.1%}"
    table.add_row("random forest (comparison)", forest)
    console = make_console()
    console.print(table)
    scales = ", ".join(f"{k}={v:.3g}" for k, v in report.profile.scales.items())
    console.print(f"scales: {scales}\nwrote {out_path}")
