"""``--model`` and its sharding/dtype options for the planning commands.

Without ``--model`` the sweep uses the core paper's calibrated Llama-3-70B constants
(A10G, A100-80GB, H100-SXM).  With it, every chosen GPU (default: every catalog GPU with a
price) is placed at each tensor-parallel size that fits the model (or the one given), each
placement is swept as its own GPU type, and the simulator runs the operator-level predictor.
"""

from __future__ import annotations

from dataclasses import replace

import click

from fleetplan.errors import ConfigError
from fleetplan.hardware import GpuCatalog, GpuProfile
from fleetplan.models import dtype, load_model
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.profile_io import load_perf_profile
from fleetplan.plan.optimize import resolve_gpus
from fleetplan.plan.placement import DEFAULT_MAX_TP, place_model
from fleetplan.sim.builders import build_pool
from fleetplan.sim.spec import FleetSpec

MODEL_OPTIONS = [
    click.option("--model", default=None,
                 help="Served model: a bundled name (llama-3.1-70b, qwen3-30b-a3b, ...) or a HuggingFace "
                 "config.json; derives step-time constants for every GPU instead of the paper's Llama-3-70B ones."),
    click.option("--tensor-parallel-size", "-tp", "tensor_parallel_size", type=click.IntRange(min=1), default=None,
                 help="With --model: GPUs per instance (vLLM spelling); default: sweep every size that fits, "
                 f"up to {DEFAULT_MAX_TP}."),
    click.option("--weight-dtype", type=click.Choice(["bf16", "fp8", "int4"]), default="bf16", show_default=True,
                 help="With --model: weight storage type."),
    click.option("--kv-cache-dtype", type=click.Choice(["bf16", "fp8"]), default="bf16", show_default=True,
                 help="With --model: KV-cache storage type."),
]


def serving_setup(
    catalog: GpuCatalog, opts: dict
) -> tuple[tuple[GpuProfile, ...], tuple[tuple[str, int], ...], tuple[tuple[str, object], ...]]:
    """(GPU types to sweep, GPUs per instance of each, simulator step model of each)."""
    if opts.get("model") is None:
        if opts.get("tensor_parallel_size") is not None:
            raise ConfigError("--tensor-parallel-size needs --model (the paper's constants are per GPU)")
        return resolve_gpus(catalog, opts["gpus"]), (), ()
    model = load_model(opts["model"])
    names = opts["gpus"] or tuple(g.name for g in catalog if g.price_usd_per_h is not None)
    par = None if opts["tensor_parallel_size"] is None else Parallelism.vllm(
        tensor_parallel_size=opts["tensor_parallel_size"], enable_expert_parallel=model.is_moe)
    placed = []
    for gpu in {g.name: g for g in (catalog.get(n) for n in names)}.values():
        try:
            placed.extend(place_model(model, gpu, parallelism=par, weight_dtype=dtype(opts["weight_dtype"]),
                                      kv_dtype=dtype(opts["kv_cache_dtype"])))
        except ConfigError:
            if opts["gpus"]:  # a GPU the user asked for must fit; the default list skips misfits
                raise
    if not placed:
        raise ConfigError(f"{model.name} fits on none of {', '.join(names)}; add larger GPUs or use FP8/INT4 weights")
    gpus = tuple(p.gpu for p in placed)
    return gpus, tuple((p.gpu.name, p.gpus_per_instance) for p in placed), tuple((p.gpu.name, p.predictor)
                                                                                 for p in placed)


SIM_MODEL_OPTIONS = [
    *MODEL_OPTIONS,
    click.option("--perf-profile", "perf_profile", type=click.Path(dir_okay=False), default=None,
                 help="Calibrated step-time profile (from `fleetplan perf calibrate`) for the pools on its GPU; "
                 "needs --model naming the same model."),
]


def sim_model_options(func):
    """Add ``SIM_MODEL_OPTIONS`` (``--model``, ``-tp``, dtypes, ``--perf-profile``) to a simulation command;
    the command receives ``SIM_MODEL_OPTION_NAMES`` and passes them to ``apply_model``."""
    for option in reversed(SIM_MODEL_OPTIONS):
        func = option(func)
    return func


SIM_MODEL_OPTION_NAMES = ("model", "tensor_parallel_size", "weight_dtype", "kv_cache_dtype", "perf_profile")


def apply_model(spec: FleetSpec, catalog: GpuCatalog, opts: dict) -> tuple[FleetSpec, str]:
    """``spec`` serving ``--model``: each pool's instance becomes a tensor-parallel group of its GPU
    (the smallest whose KV cache holds the pool's longest request, unless
    ``--tensor-parallel-size``), with derived limits and the
    operator-level predictor (or the ``--perf-profile`` fit for pools on the profile's GPU)."""
    if opts.get("model") is None:
        if opts.get("perf_profile") or opts.get("tensor_parallel_size") is not None:
            raise ConfigError("--perf-profile and --tensor-parallel-size need --model")
        return spec, "step time: the calibrated linear model (W + H·n) of each pool's GPU"
    model = load_model(opts["model"])
    profile = None if opts.get("perf_profile") is None else load_perf_profile(opts["perf_profile"])
    if profile is not None and profile.model != model.name:
        raise ConfigError(f"--perf-profile was calibrated for {profile.model}, not {model.name}; "
                          "give the matching --model or recalibrate")
    par = None if opts["tensor_parallel_size"] is None else Parallelism.vllm(
        tensor_parallel_size=opts["tensor_parallel_size"], enable_expert_parallel=model.is_moe)
    pools, notes = [], []
    for pool in spec.pools:
        gpu = catalog.get(pool.gpu)
        places = place_model(model, gpu, parallelism=par, weight_dtype=dtype(opts["weight_dtype"]),
                             kv_dtype=dtype(opts["kv_cache_dtype"]))
        fitting = [p for p in places if p.gpu.serving.n_max(pool.max_context_tokens) >= 1]
        if not fitting:
            raise ConfigError(
                f"pool {pool.name!r}: no {gpu.name} placement of {model.name} holds a {pool.max_context_tokens}-token "
                f"request in its KV cache (largest tried: {places[-1].gpu.name}); lower max_context_tokens or raise "
                "--tensor-parallel-size"
            )
        place = fitting[0]
        built = build_pool(place.gpu, pool.name, pool.n_instances, pool.max_context_tokens, router=pool.router,
                           model_tag=pool.model_tag,
                           price_usd_per_h=None if gpu.price_usd_per_h is None
                           else gpu.price_usd_per_h * place.gpus_per_instance)
        step = profile if profile is not None and profile.gpu == gpu.name else place.predictor
        pools.append(replace(built, gpu=place.gpu.name, step_model=step))
        kind = "calibrated profile" if step is profile else "roofline predictor"
        notes.append(f"{pool.name}: {place.gpu.name} ({place.parallelism.flags()}, {kind})")
    return replace(spec, pools=tuple(pools)), f"model {model.name}: " + "; ".join(notes)
