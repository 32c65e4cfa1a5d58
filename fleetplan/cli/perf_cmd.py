"""``fleetplan perf``: explain a step's time per operator; calibrate a profile from measurements."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from fleetplan.cli.errors import FleetplanGroup
from fleetplan.cli.options import (
    FRACTION,
    KV_CACHE_DTYPES,
    data_parallel_option,
    gpu_option,
    gpu_profiles_option,
    kv_cache_dtype_option,
    model_option,
    out_option,
    pipeline_parallel_option,
    seed_option,
    tensor_parallel_option,
    weight_dtype_option,
)
from fleetplan.cli.serving_calibrate import run_serving_calibrate, serving_calibrate_options
from fleetplan.cli.tables import make_console
from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.perf.batch import BATCH_SYNTAX, parse_batch
from fleetplan.perf.calibrate import DEFAULT_HOLDOUT_FRACTION, DEFAULT_SEED, calibrate
from fleetplan.perf.kv_budget import kv_budget
from fleetplan.perf.measured import ROOFLINE_SOURCE, measured_step_model, timing_source
from fleetplan.perf.measured.source import measured_coverage
from fleetplan.perf.overheads import DEFAULT_CPU_OVERHEAD_S, ExecutionMode, PredictorOptions
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.perf.profile_io import read_calibration_csv, save_perf_profile
from fleetplan.perf.typical_batch import typical_step
from fleetplan.units import ms_to_s, s_to_ms

SERVING_OPTION_NAMES = ("bench_results", "metrics_dumps", "engine", "input_len", "output_len", "num_prompts",
                        "request_rate", "max_concurrency")
KV_REPORT_CONTEXT_TOKENS = 8192  # context at which explain reports n_max (the core paper's reference)


def _predictor_options(func):
    """--model, --gpu, parallelism, dtypes and overheads shared by explain and calibrate."""
    options = [
        model_option(required=True, help="Bundled model (llama-3.1-70b) or a config.json."),
        gpu_option(required=True, help="GPU name or alias from the catalog (h100, a100)."),
        tensor_parallel_option,
        pipeline_parallel_option,
        data_parallel_option,
        click.option("--ep", type=click.IntRange(min=1), default=1, show_default=True,
                     help="Expert parallel size (MoE; must divide tp*dp)."),
        weight_dtype_option,
        kv_cache_dtype_option,
        click.option("--execution", type=click.Choice([m.value for m in ExecutionMode]), default="cuda_graph",
                     show_default=True, help="Kernel issue: eager pays per-kernel launch overhead."),
        click.option("--cpu-overhead-ms", type=click.FloatRange(min=0), default=s_to_ms(DEFAULT_CPU_OVERHEAD_S),
                     show_default=True, help="Host scheduling/sampling time per step (0 hides real TTFT cost)."),
        gpu_profiles_option,
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _build(model, gpu, tensor_parallel_size, pipeline_parallel_size, data_parallel_size, ep, weight_dtype,
           kv_cache_dtype, execution, cpu_overhead_ms, gpu_profiles):
    profile = load_catalog(gpu_profiles).get(gpu)
    opts = PredictorOptions(execution=execution, cpu_overhead_s=ms_to_s(cpu_overhead_ms))
    par = Parallelism(tp=tensor_parallel_size, pp=pipeline_parallel_size, dp=data_parallel_size, ep=ep)
    return StepTimePredictor(load_model(model), profile, par, Dtype(weight_dtype),
                             Dtype(KV_CACHE_DTYPES[kv_cache_dtype]), opts)


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
def explain(batch_text: str | None, **kw) -> None:
    """Per-operator time of one engine step, and the replica's KV-cache budget.

    A batch whose requests hold more KV blocks than the replica's cache is still timed (a what-if),
    with a note that vLLM would never run it.
    """
    p = _build(**kw)
    budget = kv_budget(p.model, p.gpu, p.parallelism, weight_dtype=p.weight_dtype, kv_dtype=p.kv_dtype)
    if batch_text is None:
        step = typical_step(budget)
        batch_text = step.batch_text
        click.echo(f"assumed --batch \"{batch_text}\": {step.reason}", err=True)
    batch = parse_batch(batch_text)
    breakdown = p.predict(batch)
    total = breakdown.total_s
    table = Table(title=f"{p.model.name} on {p.parallelism.gpus_per_replica}x {p.gpu.name} ({p.parallelism.flags()}, "
                        f"{p.weight_dtype.value} weights, {p.kv_dtype.value} KV, {p.options.execution.value})")
    for header in ("operator", "ms", "share"):
        table.add_column(header, justify="left" if header == "operator" else "right")
    for name, seconds in breakdown.seconds.items():
        if seconds > 0:
            table.add_row(name, f"{s_to_ms(seconds):.3f}", f"{seconds / total:.1%}")
    table.add_row("total", f"{s_to_ms(total):.3f}", "100.0%", style="bold")
    console = make_console()
    console.print(table)
    console.print(f"batch: {batch.n_seqs} requests ({batch.n_decode} decoding), {batch.n_tokens} tokens through the "
                  f"GEMMs ({breakdown.gemm_bound}-bound), decode context {batch.decode_context_sum} tokens")
    console.print(escape(_timing_source_line(p, batch)))
    per_seq = -(-KV_REPORT_CONTEXT_TOKENS // budget.block_size_tokens)
    console.print(f"KV budget: {budget.kv_blocks_per_replica} blocks of {budget.block_size_tokens} tokens per "
                  f"replica ({budget.kv_blocks_per_replica * budget.block_size_tokens} tokens); "
                  f"n_max at {KV_REPORT_CONTEXT_TOKENS} tokens = {budget.kv_blocks_per_replica // per_seq}")
    held = batch.kv_blocks(budget.block_size_tokens)
    if held > budget.kv_blocks_per_replica:
        console.print(f"note: this batch holds {held:,} KV blocks ({held * budget.block_size_tokens:,} tokens), more "
                      f"than the replica's {budget.kv_blocks_per_replica:,}: vLLM never runs it (it would preempt or "
                      "queue requests to stay within the cache); the step time above is hypothetical. Shrink the "
                      "batch, or give more GPUs (-tp) or --kv-cache-dtype fp8.")


def _timing_source_line(p: StepTimePredictor, batch) -> str:
    """Which source times this pool in planning (``fleetplan.perf.measured``): the measured tables with their
    step for the batch, or the roofline above and why."""
    measured = measured_step_model(p)
    if measured is None:
        return f"timing source: {ROOFLINE_SOURCE} ({measured_coverage(p)})"
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
