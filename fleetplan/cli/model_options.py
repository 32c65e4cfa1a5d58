"""``--model`` and its sharding/dtype options for the planning commands.

Without ``--model`` the sweep uses the core paper's calibrated Llama-3-70B constants
(A10G, A100-80GB, H100-SXM).  With it, every chosen GPU (default: every catalog GPU with a
price) is placed at each instance sharding that fits the model (``plan.placement``: TP within
a node, PP or data-parallel attention with expert parallelism across nodes, up to
``--max-gpus-per-instance``; or the ``-tp`` given), each placement is swept as its own GPU
type, and the simulator runs the operator-level predictor (or the measured tables: ``--timing-source``).
A GPU type that cannot hold the model is left out with one line on stderr; none holding it is an
error.  Weights default to the checkpoint's type (its ``quantization_config``: FP8 for DeepSeek-V3, MXFP4 for gpt-oss).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from fleetplan.cli.options import (
    KV_CACHE_DTYPES,
    declare,
    engine_option,
    engine_version_option,
    kv_cache_dtype_option,
    max_model_len_option,
    model_option,
    mtp_acceptance_option,
    perf_profile_option,
    tensor_parallel_option,
    timing_source_option,
    weight_dtype_option,
)
from fleetplan.errors import ConfigError
from fleetplan.hardware import GpuCatalog, GpuProfile
from fleetplan.models import ContextLimitError, ContextLimitRule, dtype, load_model, served_context_limit
from fleetplan.perf.engine_profile import load_engine_profile
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.profile_io import load_perf_profile
from fleetplan.plan.defaults import DEFAULT_MAX_GPUS_PER_INSTANCE, GPUS_PER_NODE

if TYPE_CHECKING:  # the planner and the simulator load on use, not for --help
    from fleetplan.plan.model_fleet import ModelServing
    from fleetplan.sim.fleet_toml import FleetFile
    from fleetplan.sim.spec import FleetSpec

DEFAULT_KV_DTYPE = "bf16"
MODEL_OPTIONS = [
    model_option(help="Served model: a bundled name (llama-3.1-70b, deepseek-v3, gpt-oss-120b, ...; `fleetplan models "
                 "list`) or a HuggingFace config.json; derives step-time constants for every GPU instead of the "
                 "paper's Llama-3-70B ones."),
    tensor_parallel_option(default=None, show_default=False,
                           help="With --model: GPUs per instance (vLLM spelling); default: search the shardings that "
                           f"fit (TP within a {GPUS_PER_NODE}-GPU node, then PP or DP attention + EP across nodes)."),
    weight_dtype_option(default=None, show_default=False,
                        help="With --model: weight storage type [default: the checkpoint's, from its config.json "
                        "quantization_config; bf16 without one]."),
    kv_cache_dtype_option(default=None, show_default=False,
                          help="With --model: KV-cache storage type, vLLM spelling "
                          f"[default: auto = {DEFAULT_KV_DTYPE}]."),
    timing_source_option,
]
MAX_GPUS_PER_INSTANCE_OPTION = declare(
    "largest serving instance", "--max-gpus-per-instance", "max_gpus_per_instance", type=click.IntRange(min=1),
    default=None,
    help=f"With --model: largest serving instance searched, in GPUs [default: {DEFAULT_MAX_GPUS_PER_INSTANCE}, "
    f"{DEFAULT_MAX_GPUS_PER_INSTANCE // GPUS_PER_NODE} nodes of {GPUS_PER_NODE}].")()

#: MTP in the search (optimize, whatif): ``--mtp`` tries each placement of a model with MTP heads with MTP on
#: too (``plan.placement``), each draft position accepted at ``--mtp-acceptance``.
MTP_OPTIONS = [
    click.option("--mtp/--no-mtp", "mtp", default=False, show_default=True,
                 help="With --model: for a model that ships MTP heads (num_nextn_predict_layers: DeepSeek-V3/R1, "
                 "GLM-4.5/4.6), sweep each placement with MTP speculative decoding on as well as off (vLLM "
                 "--speculative-config '{\"method\": \"deepseek_mtp\", ...}', SGLang --speculative-algorithm EAGLE); "
                 "the recommendation's GPU type says 'mtp1' when it runs MTP."),
    mtp_acceptance_option(help="With --mtp: conditional acceptance of each MTP draft position (DeepSeek-V3 "
                          "Technical Report, arXiv:2412.19437 sec. 5.4.3: 0.85-0.90)."),
]


def mtp_launch_flags(mtp, engine: str) -> str:
    """The launch flags turning MTP on for ``engine`` (an engine profile name), ``mtp`` a
    ``perf.speculative.MtpStepModel``: the spelling ``fleetplan deploy`` writes (``deploy.engines.Speculation``:
    vLLM's ``--speculative-config`` with the model's MTP method, e.g. deepseek_mtp; SGLang's
    ``--speculative-algorithm EAGLE`` with ``k`` steps, top-k 1 and ``k + 1`` draft tokens); the trtllm profile
    reads vLLM's.  A model whose MTP the engine does not run says so instead of flags."""
    from fleetplan.deploy.engines import Speculation
    from fleetplan.deploy.export import model_type_of

    model = mtp.predictor().model.name
    spec = Speculation((("method", "mtp"), ("num_speculative_tokens", mtp.num_speculative_tokens)),
                       model_type_of(model))
    try:
        if engine == "sglang":
            return " ".join(spec.sglang_flags(model))
        return f"--speculative-config '{spec.vllm_json(model)}'"
    except ConfigError:
        return f"{engine} does not run {model}'s MTP heads (fleetplan deploy refuses this pool; plan with --no-mtp)"


#: The engine ``--engine`` names when a caller's options leave it out (the option's own default).
DEFAULT_PLAN_ENGINE = "vllm"
PLAN_ENGINE_OPTION = engine_option(
    help="Serving engine (vllm|sglang|trtllm): with --model its profile times every placement (fitted "
    "efficiencies, per-step overhead, MoE layer latency, block-FP8 GEMMs; measured tables of that engine where "
    "installed); the recommendation gives the pools' limits in its launch flags.")


PLAN_ENGINE_VERSION_OPTION = engine_version_option()


def plan_engine(opts: dict) -> str:
    """The engine profile's name of ``--engine`` (an unknown name is one line listing the known ones)."""
    return load_engine_profile(opts.get("engine", DEFAULT_PLAN_ENGINE)).name


def _without_model(opts: dict, extra: tuple[str, ...] = ()) -> None:
    """Refuse the options that only a served model reads when no ``--model`` is given."""
    flags = {"tensor_parallel_size": "--tensor-parallel-size", "weight_dtype": "--weight-dtype",
             "kv_cache_dtype": "--kv-cache-dtype", "perf_profile": "--perf-profile",
             "max_gpus_per_instance": "--max-gpus-per-instance", "timing_source": "--timing-source"}
    given = [flag for key, flag in flags.items() if key in (*extra, "tensor_parallel_size", "weight_dtype",
                                                            "kv_cache_dtype", "timing_source")
             and opts.get(key) is not None]
    if given:
        raise ConfigError(f"{given[0]} needs --model (without it every pool runs the paper's calibrated constants "
                          "per GPU); give --model or drop the option")


def _dtypes(opts: dict):
    """(weights: the option's, or None for the checkpoint's; KV cache)."""
    weights = opts.get("weight_dtype")
    return (None if weights is None else dtype(weights), dtype(KV_CACHE_DTYPES[opts.get("kv_cache_dtype") or "auto"]))


PERF_PROFILE_OPTION = perf_profile_option(
    help="Calibrated step-time profile, JSON or TOML (from `fleetplan perf calibrate`); needs "
    "--model naming the same model. simulate: the pools on its GPU run it; optimize/whatif: the placement of its "
    "GPU, parallelism and storage types runs it in both the analytic phase and the simulator.")


def _perf_profile(opts: dict, model):
    """The ``--perf-profile`` for ``model`` (None when not given); a profile of another model is refused."""
    if opts.get("perf_profile") is None:
        return None
    profile = load_perf_profile(opts["perf_profile"])
    if profile.model != model.name:
        raise ConfigError(f"--perf-profile was calibrated for {profile.model}, not {model.name}; "
                          "give the matching --model or recalibrate")
    return profile


def serving_setup(
    catalog: GpuCatalog, opts: dict
) -> tuple[tuple[GpuProfile, ...], tuple[tuple[str, int], ...], tuple[tuple[str, object], ...], tuple[str, ...]]:
    """(GPU types to sweep, GPUs per instance of each, step model of each, for both phases; one line per
    GPU type left out because it cannot hold the model, ``plan.placement.place_on_gpus``, timed with the
    ``--engine`` profile; with ``--topology pdd`` / ``afd`` and an MoE model also the roles' wide DP-attention
    + EP instances, ``plan.disagg.placements``); with
    ``--perf-profile`` the placement it was calibrated for runs it (``plan.placement.calibrate_placements``)."""
    from fleetplan.plan.optimize import resolve_gpus
    from fleetplan.plan.placement import calibrate_placements, place_on_gpus

    if opts.get("model") is None:
        _without_model(opts, ("perf_profile", "max_gpus_per_instance"))
        if opts.get("mtp"):
            raise ConfigError("--mtp needs --model naming a model that ships MTP heads (e.g. deepseek-v3); give "
                              "--model or drop --mtp")
        return resolve_gpus(catalog, opts["gpus"]), (), (), ()
    model = load_model(opts["model"])
    profile = _perf_profile(opts, model)
    names = opts["gpus"] or tuple(g.name for g in catalog if g.price_usd_per_h is not None)
    par = None if opts["tensor_parallel_size"] is None else Parallelism.vllm(
        tensor_parallel_size=opts["tensor_parallel_size"], enable_expert_parallel=model.is_moe)
    weights, kv = _dtypes(opts)
    max_gpus = opts.get("max_gpus_per_instance") or DEFAULT_MAX_GPUS_PER_INSTANCE
    search = place_on_gpus(model, [catalog.get(n) for n in names], parallelism=par, weight_dtype=weights,
                           kv_dtype=kv, max_gpus_per_instance=max_gpus, engine=plan_engine(opts),
                           engine_version=opts.get("engine_version"), timing_source=opts.get("timing_source"),
                           mtp_acceptance=opts["mtp_acceptance"] if opts.get("mtp") else None)
    placed = search.placements
    if par is None and {"pdd", "afd"} & set(opts.get("topologies") or ()):
        # disaggregated roles: wide DP-attention + EP decode instances over several nodes (MoE models only)
        from fleetplan.plan.disagg.placements import wide_ep_placements

        placed += wide_ep_placements(model, [catalog.get(n) for n in names], placed, weight_dtype=weights,
                                     kv_dtype=kv, max_gpus_per_instance=max_gpus, engine=plan_engine(opts),
                                     engine_version=opts.get("engine_version"),
                                     timing_source=opts.get("timing_source"))
    if profile is not None:
        placed = calibrate_placements(placed, profile)
    gpus = tuple(p.gpu for p in placed)
    return (gpus, tuple((p.gpu.name, p.gpus_per_instance) for p in placed),
            tuple((p.gpu.name, p.step_model) for p in placed), search.notes())


MAX_MODEL_LEN_OPTION = max_model_len_option(
    help="Longest prompt + output served (tokens), vLLM --max-model-len; default with --model: the model's "
    "max_position_embeddings, without: no limit. Longer requests are rejected as vLLM rejects them (an error, never "
    "served), counted and reported, never sized or simulated as served.")
ALLOW_LONG_OPTION = declare(
    "allow a long context limit", "--allow-long-max-model-len", "allow_long_max_model_len", is_flag=True,
    default=False,
    help="Let --max-model-len exceed the model's max_position_embeddings (vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, "
    "e.g. with rope scaling the config does not declare); refused otherwise.")()
CONTEXT_LIMIT_OPTIONS = [MAX_MODEL_LEN_OPTION, ALLOW_LONG_OPTION]


def context_limit(model_name: str | None, max_model_len: int | None, allow_long: bool,
                  flag: str = "--max-model-len") -> int | None:
    """The served context limit (``fleetplan.models.context``) with its errors in option names
    (``flag``: the option that gave ``max_model_len``)."""
    model = None if model_name is None else load_model(model_name)
    try:
        return served_context_limit(model, max_model_len, allow_long)
    except ContextLimitError as exc:
        window = exc.context_window_tokens
        if exc.rule is ContextLimitRule.EXCEEDS_WINDOW:
            raise ConfigError(
                f"{flag} {max_model_len:,} exceeds {exc.model}'s context window (max_position_embeddings "
                f"{window:,}); lower {flag} to at most {window:,}, or add --allow-long-max-model-len (vLLM's "
                "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1) if the model really serves longer contexts") from None
        if exc.rule is ContextLimitRule.WINDOW_UNKNOWN:
            raise ConfigError(f"--model {model_name}: its config.json gives no max_position_embeddings; give "
                              f"{flag} (tokens)") from None
        if exc.rule is ContextLimitRule.ALLOW_LONG_UNUSED:
            where = "" if window is None else f" (max_position_embeddings {window:,})"
            raise ConfigError(f"--allow-long-max-model-len needs --model and a {flag} above the model's context "
                              f"window{where}; drop the flag or raise {flag}") from None
        raise ConfigError(f"{flag} {max_model_len!r}: {exc}") from None


def limit_note(limit: int | None, model_name: str | None, explicit: bool) -> str:
    """One line saying which context limit applies and where it comes from."""
    if limit is None:
        return "context limit: none (no --model, no --max-model-len): every request fits some pool or is rejected by it"
    source = "--max-model-len" if explicit else f"{model_name}'s max_position_embeddings"
    return (f"max_model_len {limit:,} tokens ({source}): longer requests are rejected as vLLM rejects them, counted "
            "and left out of the latency percentiles")


SIM_MODEL_OPTIONS = [
    *MODEL_OPTIONS,
    perf_profile_option(help="Calibrated step-time profile (from `fleetplan perf calibrate`) for the pools on its GPU; "
                        "needs --model naming the same model."),
    ALLOW_LONG_OPTION,
]


def sim_model_options(func):
    """Add ``SIM_MODEL_OPTIONS`` (``--model``, ``-tp``, dtypes, ``--perf-profile``,
    ``--allow-long-max-model-len``) to a simulation command; the command receives
    ``SIM_MODEL_OPTION_NAMES`` and passes them to ``apply_model``."""
    for option in reversed(SIM_MODEL_OPTIONS):
        func = option(func)
    return func


SIM_MODEL_OPTION_NAMES = ("model", "tensor_parallel_size", "weight_dtype", "kv_cache_dtype", "timing_source",
                          "perf_profile", "allow_long_max_model_len")


def limits_line(spec: FleetSpec) -> str:
    """Each pool's vLLM limits as the simulator runs them (explicit or derived)."""
    parts = [f"{p.name} max_model_len {p.max_context_tokens:,}, max_num_seqs {p.limits.max_num_seqs:,}, "
             f"max_num_batched_tokens {p.limits.max_num_batched_tokens:,}, KV cache {p.limits.kv_blocks:,} blocks x "
             f"{p.limits.block_size_tokens} tokens" for p in spec.pools]
    return "limits: " + "; ".join(parts)


def model_serving(opts: dict) -> ModelServing | None:
    """The served model the options give (``--model``, ``-tp``, dtypes, ``--perf-profile``), or None."""
    from fleetplan.plan.model_fleet import ModelServing

    if opts.get("model") is None:
        _without_model(opts, ("perf_profile",))
        return None
    model = load_model(opts["model"])
    return ModelServing.vllm(model, opts["tensor_parallel_size"], *_dtypes(opts), _perf_profile(opts, model),
                             opts.get("timing_source"))


def apply_model(fleet: FleetFile, opts: dict, max_model_len_tokens: int | None) -> tuple[FleetSpec, str]:
    """``fleet`` as the library builds it for the options (``plan.model_fleet.fleet_for_serving``:
    every setting of the file kept), limited to ``max_model_len_tokens``; and the step-time note."""
    from fleetplan.plan.model_fleet import fleet_for_serving

    serving = model_serving(opts)
    served = fleet_for_serving(fleet, serving, max_model_len_tokens)
    if serving is None:
        return served.spec, "step time: the calibrated linear model (W + H·n) of each pool's GPU"
    notes = [f"{p.pool}: {p.placement.gpu.name} ({p.placement.parallelism.flags()}, "
             f"{'calibrated profile' if p.calibrated else 'roofline predictor'})" for p in served.pools]
    return served.spec, f"model {serving.model.name}: " + "; ".join(notes)
