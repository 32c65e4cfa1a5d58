"""``fleetplan bench serve``: ``vllm bench serve`` against a simulated serving instance.

Same flags and meanings as vLLM's client (``vllm bench serve``) plus the engine flags of
``vllm serve``; prints vLLM's "Serving Benchmark Result" block and, with ``--save-result``,
writes a result JSON with vLLM's keys (and a ``fleetplan`` section with the simulated
configuration), so a prediction diffs against a real run.

Parallelism in each engine's spelling (``fleetplan.bench.instance.engine_parallelism`` reads them):
vLLM ``--tensor-parallel-size/-tp``, ``--pipeline-parallel-size/-pp``, ``--data-parallel-size/-dp``,
``--enable-expert-parallel``; under ``--engine sglang`` SGLang's ``--tp-size/--tp``, ``--dp-size/--dp``,
``--ep-size``, ``--enable-dp-attention``; ``--nnodes`` for an instance spanning nodes.  A flag of the
other engine, or a sharding the model cannot take, ends in one line (exit 2).
"""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from fleetplan.atomic import atomic_write_text
from fleetplan.bench.datasets import DatasetName, DatasetSpec
from fleetplan.bench.instance import EngineArgs, engine_parallelism
from fleetplan.cli.errors import FleetplanGroup
from fleetplan.cli.options import (
    FLAG_OF_COMMAND,
    FRACTION,
    KV_CACHE_DTYPES,
    CliParam,
    api_server_count_option,
    block_size_option,
    chat_template_tokens_option,
    client_backend_option,
    data_parallel_option,
    enable_dp_attention_option,
    enable_expert_parallel_option,
    engine_option,
    engine_version_option,
    expert_parallel_size_option,
    gpu_memory_utilization_option,
    gpu_option,
    instances_option,
    kv_cache_dtype_option,
    max_concurrency_option,
    max_model_len_option,
    max_num_batched_tokens_option,
    max_num_seqs_option,
    model_option,
    nnodes_option,
    num_prompts_option,
    perf_profile_option,
    pipeline_parallel_option,
    request_rate_option,
    seed_option,
    tensor_parallel_option,
    timing_source_option,
)
from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, ModelConfig, load_model
from fleetplan.perf.engine_profile import ENGINE_NAMES, load_engine_profile
from fleetplan.perf.measured import timing_source as timing_label
from fleetplan.perf.overheads import ExecutionMode
from fleetplan.perf.profile_io import load_perf_profile
from fleetplan.sim.features.speculative import SpeculativeConfig

if TYPE_CHECKING:  # the simulator loads when the command runs, not for its --help
    from fleetplan.bench.serve import BenchServeResult

#: The flags of the parallelism parameters only ``bench serve`` has (library errors name the parameters).
FLAG_OF_COMMAND.setdefault("bench serve", {}).update({
    "expert_parallel_size": CliParam("--ep-size"), "enable_dp_attention": CliParam("--enable-dp-attention"),
    "nnodes": CliParam("--nnodes"), "parallelism_spec": CliParam("--tensor-parallel-size"),
    "enable_mixed_chunk": CliParam("--enable-mixed-chunk"), "block_size_tokens": CliParam("--block-size"),
    "async_scheduling": CliParam("--async-scheduling"),
})

#: vLLM ``--quantization`` methods and the weight storage they mean for the predictor.
QUANTIZATION_WEIGHTS = {"fp8": Dtype.FP8, "awq": Dtype.INT4, "awq_marlin": Dtype.INT4, "gptq": Dtype.INT4,
                        "gptq_marlin": Dtype.INT4, "compressed-tensors-w4a16": Dtype.INT4}

EXAMPLES = """\b
Examples:
  fleetplan bench serve --model llama-3.1-8b --gpu h100 --dataset-name random \\
      --random-input-len 1024 --random-output-len 128 --num-prompts 1000 --request-rate inf
  fleetplan bench serve --model llama-3.1-70b --gpu h100 -tp 4 --max-concurrency 32 \\
      --num-prompts 500 --save-result --result-dir results/
  fleetplan bench serve --model qwen3-30b-a3b --gpu h200 -tp 2 --engine sglang --request-rate 8 \\
      --burstiness 0.5 --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99
  fleetplan bench serve --model deepseek-v3 --gpu h200 -tp 1 -dp 8 --enable-expert-parallel -q fp8 \\
      --random-input-len 1000 --random-output-len 1000 --max-concurrency 64 --num-prompts 320
  fleetplan bench serve --model deepseek-v3 --gpu b200 --engine sglang --tp-size 8 --dp-size 8 \\
      --ep-size 8 --enable-dp-attention -q fp8 --random-range-ratio-rule sglang --max-concurrency 100
"""


def _floats(flag: str, text: str) -> tuple[float, ...]:
    try:
        return tuple(float(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise ConfigError(f"{flag} {text!r} must be comma-separated numbers, e.g. 50,90,99") from None


def _sizes(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ConfigError(f"--cudagraph-capture-sizes {text!r} must be comma-separated positive integers, "
                          "e.g. 1,2,4,8,16,32,64")
    return tuple(int(p) for p in parts)


def _weights(quantization: str | None, model: ModelConfig) -> Dtype:
    """Weight storage: ``--quantization``'s, else the checkpoint's (vLLM reads its quantization_config)."""
    if quantization is None:
        return model.default_weight_dtype
    key = quantization.strip().lower()
    if key not in QUANTIZATION_WEIGHTS:
        raise UnknownNameError("quantization", quantization, sorted(QUANTIZATION_WEIGHTS))
    return QUANTIZATION_WEIGHTS[key]


def _sglang_flag(engine: str, sglang_flag: str, sglang_value, vllm_flag: str, vllm_value, given=None):
    """A value given in SGLang's spelling (accepted with ``--engine sglang`` only: the parallel sizes ``--tp-size``,
    ``--dp-size`` and the engine limits) or vLLM's (accepted under every engine; None or False when not given); one
    line when both are given and disagree.  ``given``: the SGLang flag's value as typed when ``sglang_value`` is its
    per-rank conversion."""
    if sglang_value is None or sglang_value is False:
        return vllm_value
    if engine != "sglang":
        shown = "" if sglang_value is True else f" {sglang_value if given is None else given}"
        raise click.UsageError(f"{sglang_flag}{shown} is SGLang's spelling; under --engine {engine} give "
                               f"{vllm_flag}{shown}, or add --engine sglang")
    if vllm_value not in (None, False) and vllm_value != sglang_value:
        per_rank = "" if given in (None, sglang_value) else f" (= {sglang_value} per attention rank)"
        raise click.UsageError(f"{sglang_flag} {sglang_value if given is None else given}{per_rank} and {vllm_flag} "
                               f"{vllm_value} disagree; give one of them")
    return sglang_value


def _per_rank(flag: str, value: int | None, ranks: int) -> int | None:
    """An SGLang limit given for the whole server, per data-parallel-attention rank: SGLang divides
    ``chunked_prefill_size`` and ``max_running_requests`` by ``dp_size`` under ``enable_dp_attention``
    (sgl-project/sglang python/sglang/srt/server_args.py; ``ENGINE_LIMIT_FLAGS``)."""
    if value is None or ranks == 1:
        return value
    if value < ranks:
        raise click.UsageError(f"{flag} {value} is for the whole server and leaves less than one for each of the "
                               f"{ranks} attention ranks (SGLang divides it by --dp-size); give at least {ranks}")
    return value // ranks


def _line(label: str, value, fmt: str = "") -> str:
    return f"{label:<40} {format(value, fmt) if fmt else str(value):<10}"


def result_block(result: BenchServeResult) -> str:
    """vLLM's "Serving Benchmark Result" block for ``result``."""
    from fleetplan.bench.serve import METRICS

    m, cfg = result.metrics, result.config
    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="),
             _line("Successful requests:", m["completed"]), _line("Failed requests:", m["failed"])]
    if cfg.max_concurrency is not None:
        lines.append(_line("Maximum request concurrency:", cfg.max_concurrency))
    if math.isfinite(cfg.request_rate_per_s):
        lines.append(_line("Request rate configured (RPS):", cfg.request_rate_per_s, ".2f"))
    lines += [_line("Benchmark duration (s):", m["duration"], ".2f"),
              _line("Total input tokens:", m["total_input_tokens"]),
              _line("Total generated tokens:", m["total_output_tokens"]),
              _line("Request throughput (req/s):", m["request_throughput"], ".2f"),
              _line("Output token throughput (tok/s):", m["output_throughput"], ".2f"),
              _line("Total token throughput (tok/s):", m["total_token_throughput"], ".2f")]
    headers = {"ttft": ("TTFT", "Time to First Token"), "tpot": ("TPOT", "Time per Output Token (excl. 1st token)"),
               "itl": ("ITL", "Inter-token Latency"), "e2el": ("E2EL", "End-to-end Latency")}
    for name in METRICS:
        if name not in cfg.percentile_metrics:
            continue
        short, header = headers[name]
        lines.append("{s:{c}^{n}}".format(s=header, n=50, c="-"))
        lines.append(_line(f"Mean {short} (ms):", m[f"mean_{name}_ms"], ".2f"))
        lines.append(_line(f"Median {short} (ms):", m[f"median_{name}_ms"], ".2f"))
        for p in cfg.metric_percentiles:
            word = str(int(p)) if int(p) == p else str(p)
            lines.append(_line(f"P{word} {short} (ms):", m[f"p{word}_{name}_ms"], ".2f"))
    lines.append("=" * 50)
    return "\n".join(lines)


def result_json(result: BenchServeResult, label: str, model_id: str, engine: str, date: str) -> dict:
    """vLLM's result JSON keys (setup, traffic, metrics) plus the simulated configuration under ``fleetplan``."""
    cfg, eng = result.config, result.engine
    pool = result.fleet.pools[0]
    rate = cfg.request_rate_per_s
    doc = {"date": date, "endpoint_type": "fleetplan-sim", "backend": "fleetplan-sim", "label": label,
           "model_id": model_id, "tokenizer_id": None, "num_prompts": cfg.num_prompts,
           "request_rate": rate if math.isfinite(rate) else "inf", "burstiness": cfg.burstiness,
           "max_concurrency": cfg.max_concurrency, **dict(result.metrics)}
    doc["fleetplan"] = {
        "engine": engine, "gpu": eng.gpu.name, "tensor_parallel_size": eng.tensor_parallel_size,
        "parallelism": eng.parallelism.flags(), "gpus_per_instance": eng.parallelism.gpus_per_replica,
        "instances": eng.instances, "api_server_count": eng.api_server_count,
        "weight_dtype": eng.weight_dtype.value, "kv_cache_dtype": eng.kv_cache_dtype.value,
        "max_num_seqs": pool.limits.max_num_seqs, "max_num_batched_tokens": pool.limits.max_num_batched_tokens,
        "max_model_len": pool.max_context_tokens, "kv_blocks": pool.limits.kv_blocks,
        "gpu_memory_utilization": eng.memory_fraction, "enable_prefix_caching": eng.prefix_caching,
        "scheduler_policy": eng.scheduler_policy.value, "async_scheduling": eng.async_scheduling,
        "dataset_name": cfg.dataset.name.value, "dataset_path": cfg.dataset.path,
        "random_input_len": cfg.dataset.random_input_len, "random_output_len": cfg.dataset.random_output_len,
        "random_range_ratio": cfg.dataset.random_range_ratio,
        "random_range_ratio_rule": cfg.dataset.random_range_ratio_rule.value,
        "random_prefix_len": cfg.dataset.random_prefix_len,
        "client_backend": cfg.backend, "chat_template_tokens": result.chat_template_tokens,
        "block_size": pool.limits.block_size_tokens, "execution": eng.options.execution.value,
        "stream_interval": eng.options.api_server_stream_interval_tokens,
        "seed": cfg.seed, "perf_profile": None if eng.perf_profile is None else eng.perf_profile.source,
    }
    return doc


def _finite(value):
    """JSON-safe: non-finite floats become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


@click.group("bench", cls=FleetplanGroup)
def bench() -> None:
    """Serving benchmarks against the simulator (vLLM's client, predicted)."""


@bench.command("serve", epilog=EXAMPLES)
@model_option(required=True, help="Bundled model name (fleetplan models list) or a config.json path.")
@gpu_option(required=True, help="GPU name (fleetplan gpus list).")
@tensor_parallel_option(help="GPUs sharing each layer (vLLM; SGLang --tp-size/--tp: GPUs of one server).")
@pipeline_parallel_option
@data_parallel_option(help="vLLM: data-parallel ranks, each -tp GPUs; SGLang (--dp-size/--dp): attention ranks "
                      "with --enable-dp-attention, else copies of the server.")
@enable_expert_parallel_option(help="Spread routed experts over TP x DP GPUs instead of splitting each expert.")
@click.option("--tp-size", "tp_size", type=click.IntRange(min=1), default=None,
              help="SGLang's spelling of -tp (with --engine sglang).")
@click.option("--dp-size", "dp_size", type=click.IntRange(min=1), default=None,
              help="SGLang's spelling of -dp (with --engine sglang).")
@expert_parallel_size_option(help="SGLang: GPUs the routed experts are spread over (with --engine sglang).")
@enable_dp_attention_option(help="SGLang: --dp-size attention ranks of tp/dp GPUs each (with --engine sglang).")
@nnodes_option(help="Nodes one instance spans (the step model puts ceil(GPUs / 8) nodes under it).")
@instances_option(default=1, show_default=True, help="Identical instances behind a least-outstanding-requests router.")
@api_server_count_option
@engine_option(help=f"Engine profile ({'|'.join(ENGINE_NAMES)}): efficiencies and per-step overheads.")
@engine_version_option
@perf_profile_option(help="Calibrated step-time profile (fleetplan perf calibrate) instead of the engine profile.")
@client_backend_option(help="The client's endpoint, as vllm bench serve's --backend: openai-chat "
                       "(/v1/chat/completions) streams a role-only chunk first, one ~0 ms gap more per request in its "
                       "ITL list.")
@chat_template_tokens_option(help="With --backend openai-chat: tokens the server's chat template adds around each "
                             "prompt, prefilled but not counted by the client [default: the bundled model's count, as "
                             "fleetplan models show M prints it; needed for a config.json model].")
@click.option("--dataset-name", default="random", show_default=True, help="random|sharegpt|burstgpt|custom")
@click.option("--dataset-path", default=None, help="Dataset file (sharegpt JSON, BurstGPT CSV, custom JSONL).")
@click.option("--random-input-len", type=int, default=1024, show_default=True)
@click.option("--random-output-len", type=int, default=128, show_default=True)
@click.option("--random-range-ratio", type=float, default=0.0, show_default=True)
@click.option("--random-range-ratio-rule", type=click.Choice(["vllm", "sglang"]), default="vllm", show_default=True,
              help="Whose --random-range-ratio: vllm = lengths on [L(1-r), L(1+r)]; sglang (sglang.bench_serving) "
              "= lengths on [rL, L], r = 0 meaning uniform from 1.")
@click.option("--random-prefix-len", type=int, default=0, show_default=True)
@click.option("--sharegpt-output-len", type=int, default=None)
@click.option("--custom-output-len", type=int, default=256, show_default=True)
@request_rate_option
@click.option("--burstiness", type=float, default=1.0, show_default=True,
              help="Gamma shape of the inter-arrival gaps (1 = Poisson).")
@num_prompts_option(default=1000, show_default=True)
@max_concurrency_option
@seed_option
@click.option("--percentile-metrics", default="ttft,tpot,itl", show_default=True)
@click.option("--metric-percentiles", default="99", show_default=True)
@click.option("--save-result", is_flag=True, default=False, help="Write the result JSON.")
@click.option("--result-dir", default=None, help="Directory of the result JSON.")
@click.option("--result-filename", default=None, help="File name of the result JSON.")
@click.option("--label", default=None, help="Label (prefix) of the result file name (default fleetplan-ENGINE).")
@max_num_seqs_option(help="Default: vLLM's (1024 on >= 70 GiB non-A100, else 256).")
@max_num_batched_tokens_option(help="Default: vLLM's (8192 / 2048).")
@max_model_len_option(help="Default: the KV capacity, at most 131072.")
@gpu_memory_utilization_option
@kv_cache_dtype_option
@click.option("--quantization", "-q", default=None,
              help="fp8 | awq | gptq (+ _marlin): weight storage [default: the checkpoint's, from its config.json "
              "quantization_config; bf16 without one].")
@click.option("--enable-chunked-prefill/--no-enable-chunked-prefill", default=True, show_default=True)
@click.option("--enable-prefix-caching/--no-enable-prefix-caching", default=None,
              help="Prefix caching [default: the engine's: on for vllm (v1) and sglang (radix cache), off for "
              "trtllm and lmdeploy]; with random prompts it acts through preemption (a preempted request's "
              "computed blocks are hits when it is admitted again).")
@click.option("--disable-radix-cache", is_flag=True, default=False,
              help="SGLang's spelling of --no-enable-prefix-caching (with --engine sglang).")
@click.option("--async-scheduling", "async_scheduling", is_flag=True, default=False,
              help="vLLM: schedule one step ahead so the step's host time overlaps the GPU (the step model drops its "
              "per-step host time); SGLang overlaps its scheduler by default.")
@click.option("--enable-mixed-chunk", is_flag=True, default=False,
              help="SGLang: mix the running decodes into prefill batches (with --engine sglang; default: prefill "
              "batches apart from decode batches).")
@click.option("--speculative-config", default=None, help='vLLM JSON, e.g. \'{"method": "mtp", '
              '"num_speculative_tokens": 2, "acceptance_rate": 0.7}\'.')
@click.option("--cudagraph-capture-sizes", default=None, help="Capture sizes (tokens); turns on graph padding.")
@click.option("--enforce-eager", is_flag=True, default=False,
              help="vLLM: no CUDA graphs, every kernel launched eagerly (the step model's eager execution, as "
              "perf explain --execution eager).")
@click.option("--disable-cuda-graph", is_flag=True, default=False,
              help="SGLang's spelling of --enforce-eager (with --engine sglang).")
@click.option("--stream-interval", "stream_interval", type=click.IntRange(min=1), default=None,
              help="Output tokens per streamed chunk (vLLM and SGLang --stream-interval; the API server pays its "
              "per-chunk cost once per chunk) [default: the engine profile's, 1].")
@click.option("--max-running-requests", "max_running_requests", type=click.IntRange(min=1), default=None,
              help="SGLang's --max-num-seqs (with --engine sglang): for the whole server, divided by --dp-size "
              "under --enable-dp-attention.")
@click.option("--chunked-prefill-size", "chunked_prefill_size", type=click.IntRange(min=1), default=None,
              help="SGLang's --max-num-batched-tokens (with --engine sglang): for the whole server, divided by "
              "--dp-size under --enable-dp-attention.")
@click.option("--mem-fraction-static", "mem_fraction_static", type=FRACTION, default=None,
              help="SGLang's memory fraction (with --engine sglang), in SGLang's meaning: the weights' and KV pool's "
              "share of HBM, activations and CUDA graphs outside it [default: the value SGLang derives from the "
              "GPU's memory, the chunk and the parallel sizes].")
@block_size_option
@timing_source_option(help="Step timing: roofline = the roofline + engine profile (docs/serving_validation.md's "
                      "figures), measured = aiconfigurator-core's measured tables only (the extra "
                      "fleetplan[aiconfigurator]), auto = the tables where they cover the instance "
                      "[default: roofline].")
def serve(model, gpu, tensor_parallel_size, pipeline_parallel_size, data_parallel_size, enable_expert_parallel, tp_size,
          dp_size, ep, enable_dp_attention, nnodes, instances, engine, engine_version, perf_profile, backend,
          chat_template_tokens, dataset_name,
          dataset_path, random_input_len, random_output_len, random_range_ratio, random_range_ratio_rule,
          random_prefix_len, sharegpt_output_len,
          custom_output_len, request_rate, burstiness, num_prompts, max_concurrency, seed, percentile_metrics,
          metric_percentiles, save_result, result_dir, result_filename, label, max_num_seqs, max_num_batched_tokens,
          max_model_len, gpu_memory_utilization, kv_cache_dtype, quantization, enable_chunked_prefill,
          enable_prefix_caching, disable_radix_cache, async_scheduling, enable_mixed_chunk, speculative_config,
          cudagraph_capture_sizes,
          enforce_eager, disable_cuda_graph, stream_interval, max_running_requests, chunked_prefill_size,
          mem_fraction_static, block_size, api_server_count, timing_source) -> None:
    """Predict `vllm bench serve` against one serving instance: vLLM's result block and JSON."""
    from fleetplan.bench.serve import BenchServeConfig, run_bench_serve

    dataset = DatasetSpec(DatasetName.parse(dataset_name), dataset_path, random_input_len, random_output_len,
                          random_range_ratio, random_prefix_len, sharegpt_output_len, custom_output_len,
                          random_range_ratio_rule)
    cfg = BenchServeConfig(dataset, num_prompts, request_rate, burstiness, max_concurrency, seed,
                           tuple(m.strip() for m in percentile_metrics.split(",") if m.strip()),
                           _floats("--metric-percentiles", metric_percentiles), backend=backend,
                           chat_template_tokens=chat_template_tokens)
    model_cfg, gpu_profile = load_model(model), load_catalog().get(gpu)
    weights = _weights(quantization, model_cfg)
    profile = load_engine_profile(engine)
    tp = _sglang_flag(profile.name, "--tp-size", tp_size, "--tensor-parallel-size",
                      None if tensor_parallel_size == 1 else tensor_parallel_size) or 1
    dp = _sglang_flag(profile.name, "--dp-size", dp_size, "--data-parallel-size",
                      None if data_parallel_size == 1 else data_parallel_size) or 1
    par, copies = engine_parallelism(profile.name, model_cfg, tp, pipeline_parallel_size, dp, enable_expert_parallel,
                                     ep, enable_dp_attention, nnodes)
    if disable_radix_cache:
        if profile.name != "sglang":
            raise click.UsageError(f"--disable-radix-cache is SGLang's spelling; under --engine {profile.name} give "
                                   "--no-enable-prefix-caching, or add --engine sglang")
        if enable_prefix_caching:
            raise click.UsageError("--disable-radix-cache and --enable-prefix-caching disagree; give one of them")
        enable_prefix_caching = False
    eager = _sglang_flag(profile.name, "--disable-cuda-graph", disable_cuda_graph, "--enforce-eager", enforce_eager)
    if eager and cudagraph_capture_sizes is not None:
        raise click.UsageError("--enforce-eager (--disable-cuda-graph) captures no CUDA graphs; drop "
                               "--cudagraph-capture-sizes or the eager flag")
    ranks = par.attn_dp
    max_num_seqs = _sglang_flag(profile.name, "--max-running-requests",
                                _per_rank("--max-running-requests", max_running_requests, ranks),
                                "--max-num-seqs", max_num_seqs, max_running_requests)
    max_num_batched_tokens = _sglang_flag(profile.name, "--chunked-prefill-size",
                                          _per_rank("--chunked-prefill-size", chunked_prefill_size, ranks),
                                          "--max-num-batched-tokens", max_num_batched_tokens, chunked_prefill_size)
    fraction = _sglang_flag(profile.name, "--mem-fraction-static", mem_fraction_static, "--gpu-memory-utilization",
                            None if gpu_memory_utilization == 0.9 else gpu_memory_utilization)
    if fraction is None and profile.name != "sglang":
        fraction = gpu_memory_utilization  # vLLM's 0.9 unless given; under SGLang None: its derived default
    gpu_memory_utilization = fraction
    options = profile.options_for(gpu_profile, weights, engine_version)
    if eager:
        options = dataclasses.replace(options, execution=ExecutionMode.EAGER)
    if stream_interval is not None:
        options = dataclasses.replace(options, api_server_stream_interval_tokens=stream_interval)
    args = EngineArgs(
        model_cfg, gpu_profile, tp, weights, Dtype(KV_CACHE_DTYPES[kv_cache_dtype]), max_num_seqs,
        max_num_batched_tokens, max_model_len, gpu_memory_utilization, enable_chunked_prefill, enable_prefix_caching,
        None if speculative_config is None else SpeculativeConfig.from_json(speculative_config),
        _sizes(cudagraph_capture_sizes), options,
        None if perf_profile is None else load_perf_profile(perf_profile), instances * copies, par, api_server_count,
        engine=profile.name, engine_version=engine_version, enable_mixed_chunk=enable_mixed_chunk,
        async_scheduling=async_scheduling,
        timing_source=timing_source or "roofline", block_size_tokens=block_size,
    )
    named = engine_version or f"{profile.default_version} (default)"
    values = profile.values_version(engine_version)
    result = run_bench_serve(args, cfg)
    click.echo(f"fleetplan bench serve (simulated): {model_cfg.name} on {args.instances} x {par.gpus_per_replica} "
               f"{gpu_profile.name} ({par.flags()}), engine profile {profile.name} {named}"
               + ("" if values == (engine_version or profile.default_version) else f" (values of {values})")
               + (f", perf profile {perf_profile}" if perf_profile else f", timing {timing_label(args.step_model())}"))
    click.echo(f"Traffic request rate: {request_rate:g}")
    click.echo(f"Burstiness factor: {burstiness} ({'Poisson process' if burstiness == 1.0 else 'Gamma distribution'})")
    click.echo(f"Maximum request concurrency: {max_concurrency}")
    click.echo(result_block(result))
    if "itl" in cfg.percentile_metrics:
        click.echo(f"ITL: {result.metrics['itl_percentiles_method']}.")
    if save_result or result_filename:
        date = datetime.now().strftime("%Y%m%d-%H%M%S")
        label = label or f"fleetplan-{profile.name}"
        conc = f"-concurrency{max_concurrency}" if max_concurrency is not None else ""
        name = result_filename or f"{label}-{cfg.request_rate_per_s}qps{conc}-{model_cfg.name}-{date}.json"
        path = Path(result_dir) / name if result_dir else Path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = result_json(result, label, model_cfg.name, profile.name, date)
        atomic_write_text(path, json.dumps(_finite(doc), indent=2))
        click.echo(f"wrote {path}")
