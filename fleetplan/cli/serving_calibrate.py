"""``fleetplan perf calibrate --bench-result FILE / --metrics FILE``: fit the predictor on serving runs.

Options are added to ``perf calibrate`` by ``serving_calibrate_options``; ``run_serving_calibrate``
reads the files (``fleetplan.bench.calibrate``), fits, prints the residuals before and after and
writes the profile JSON that ``simulate``, ``bench serve``, ``optimize`` and ``whatif`` accept with
``--perf-profile``.
"""

from __future__ import annotations

import math
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from fleetplan.cli.options import (
    KV_CACHE_DTYPES,
    chat_template_tokens_option,
    client_backend_option,
    engine_option,
    max_concurrency_option,
    num_prompts_option,
    request_rate_option,
)
from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.perf.engine_profile import ENGINE_NAMES, load_engine_profile
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.profile_io import save_perf_profile

SERVING_OPTIONS = [
    click.option("--bench-result", "bench_results", multiple=True, type=click.Path(exists=True, dir_okay=False),
                 help="vllm bench serve result JSON (repeatable); fits to its mean TTFT, TPOT and throughput."),
    click.option("--metrics", "metrics_dumps", multiple=True, type=click.Path(exists=True, dir_okay=False),
                 help="Text of a vLLM server's /metrics after one benchmark run (repeatable); the run's client "
                 "settings come from --input-len/--output-len/--num-prompts/--request-rate/--max-concurrency."),
    engine_option(help=f"Engine profile the fit starts from ({'|'.join(ENGINE_NAMES)})."),
    click.option("--input-len", type=click.IntRange(min=1), default=None,
                 help="Prompt tokens per request (overrides a result file's mean; needed for --metrics)."),
    click.option("--output-len", type=click.IntRange(min=1), default=None,
                 help="Output tokens per request (overrides a result file's mean; needed for --metrics)."),
    client_backend_option.option(help="The --metrics run's client endpoint, as vllm bench serve's --backend "
                                 "(openai-chat: the chat endpoint, its template's tokens prefilled); a result file "
                                 "names its own."),
    chat_template_tokens_option.option(help="Tokens the chat template adds around each prompt, for the chat "
                                       "endpoint's runs (default: the model's count, fleetplan models show; a "
                                       "fleetplan result file's recorded count)."),
    num_prompts_option(default=None, help="Requests of the --metrics run (vLLM --num-prompts)."),
    request_rate_option(help="Request rate of the --metrics run (vLLM --request-rate: requests/s or inf)."),
    max_concurrency_option(help="Client concurrency of the --metrics run (vLLM --max-concurrency)."),
]


def serving_calibrate_options(func):
    for option in reversed(SERVING_OPTIONS):
        func = option(func)
    return func


def run_serving_calibrate(out_path: Path, bench_results, metrics_dumps, engine, input_len, output_len, backend,
                          chat_template_tokens, num_prompts, request_rate: float, max_concurrency, model, gpu,
                          tensor_parallel_size, pipeline_parallel_size, data_parallel_size, ep, weight_dtype,
                          kv_cache_dtype, gpu_profiles, **_ignored) -> None:
    """Fit and report (module docstring)."""
    # the simulator is imported only when a serving fit runs (perf explain stays light)
    from fleetplan.bench.calibrate import (
        FIT_BOUNDS,
        FIT_OPTIONS,
        fit_serving,
        measurement_from_metrics,
        read_bench_result,
    )
    from fleetplan.bench.datasets import DatasetSpec
    from fleetplan.bench.instance import EngineArgs
    from fleetplan.bench.serve import CHAT_BACKEND, BenchServeConfig

    profile = load_engine_profile(engine)
    tp = tensor_parallel_size
    gpu_profile = load_catalog(gpu_profiles).get(gpu)
    model_cfg = load_model(model)
    par = None  # the instance's default sharding, unless -pp/-dp/--ep say otherwise
    if (pipeline_parallel_size, data_parallel_size, ep) != (1, 1, 1):
        par = Parallelism(tp=tp, pp=pipeline_parallel_size, dp=data_parallel_size, ep=ep)
    weights = model_cfg.default_weight_dtype if weight_dtype is None else Dtype(weight_dtype)  # the checkpoint's
    args = EngineArgs(model_cfg, gpu_profile, tp, weights, Dtype(KV_CACHE_DTYPES[kv_cache_dtype]),
                      options=profile.options_for(gpu_profile, weights), parallelism_spec=par)
    measurements = [read_bench_result(p, input_len, output_len, chat_template_tokens) for p in bench_results]
    if metrics_dumps:
        if input_len is None or output_len is None or num_prompts is None:
            raise ConfigError("--metrics needs the run's --input-len, --output-len and --num-prompts "
                              "(and --request-rate / --max-concurrency when set)")
        cfg = BenchServeConfig(DatasetSpec(random_input_len=input_len, random_output_len=output_len), num_prompts,
                               request_rate, 1.0, max_concurrency, backend=backend,
                               chat_template_tokens=chat_template_tokens if backend == CHAT_BACKEND else None)
        measurements += [measurement_from_metrics(p, cfg) for p in metrics_dumps]
    if backend != "vllm" and not metrics_dumps:
        raise ConfigError(f"--backend {backend} is the client of --metrics runs, and none was given: a --bench-result "
                          "file names its own client (its backend); drop --backend, or add the run's --metrics")
    if chat_template_tokens is not None and not any(m.backend == CHAT_BACKEND for m in measurements):
        raise ConfigError(f"--chat-template-tokens {chat_template_tokens} applies to chat endpoint runs only, and "
                          "no --bench-result file ran one (its backend) nor --backend openai-chat was given: drop "
                          "it, or give the chat run's file")
    fit = fit_serving(args, measurements)
    save_perf_profile(fit.profile, out_path)
    table = Table(title=f"serving calibration of {args.model.name} on {args.parallelism.gpus_per_replica}x "
                        f"{gpu_profile.name}, {args.parallelism.flags()} (relative error, "
                        f"predicted / measured - 1; start: engine profile {profile.name})")
    for col in ("measurement", "before", "after"):
        table.add_column(col, justify="left" if col == "measurement" else "right")
    for label, b, a in zip(fit.labels, fit.residuals_before, fit.residuals_after, strict=True):
        table.add_row(label, f"{b:+.1%}", f"{a:+.1%}")
    table.add_row("mean |error|", f"{sum(abs(fit.residuals_before)) / len(fit.labels):.1%}",
                  f"{sum(abs(fit.residuals_after)) / len(fit.labels):.1%}", style="bold")
    con = Console()
    con.print(table)
    fitted = ", ".join(f"{n}={getattr(fit.options, n) * (1e3 if n.endswith('_s') else 1):.3g}"
                       f"{' ms' if n.endswith('_s') else ''} (bounds {lo * (1e3 if n.endswith('_s') else 1):g}-"
                       f"{hi * (1e3 if n.endswith('_s') else 1):g})"
                       for n, (lo, hi) in zip(FIT_OPTIONS, FIT_BOUNDS, strict=True))
    con.print(f"fitted (least squares): {fitted}")
    con.print(f"wrote {out_path} (use with --perf-profile in simulate, bench serve, optimize and whatif)")
    if any(math.isnan(x) for x in fit.residuals_after):
        raise ConfigError("the fit produced NaN residuals; check that every run completed requests")
