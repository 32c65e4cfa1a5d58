"""Serving a chosen model on each catalog GPU: parallelism, constants, step model.

For a model (HuggingFace ``config.json``) and a GPU, ``place_model`` lists the shardings of one
serving instance that hold the model's weights, activations and at least one 8K-token sequence
of KV cache (``fleetplan.perf.kv_budget``, ``fleetplan.perf.derive``), unless the user fixed the
parallelism.  The planner sweeps them as if they were GPU types ("H100-SXM tp2",
"H100-SXM tp8 pp2", "H200 tp1 dp8"), because a larger instance costs more GPUs but holds far
more KV cache, and which is cheaper per request depends on the workload.

Instance sizes (GPUs per instance, at most ``max_gpus_per_instance``):

* within one node (the GPU profile's ``gpus_per_node``, 8 for every catalog GPU: HGX/DGX boards and
  8-GPU cloud instances): every tensor-parallel size the heads allow (``valid_tensor_parallel_sizes``),
  each one placement when it fits;
* across nodes, only when no size within a node fits: ``gpus_per_node x 2, x 4, ...``, the
  smallest that fits (and the next ``EXTRA_MULTI_NODE_SIZES`` larger, 0 by default: each size
  is one more GPU type for the sweep, whose time grows with them).  DeepSeek-V3 in FP8 (625 GiB
  of weights) needs 16 H100s: two nodes.

Shardings of an instance of ``G`` GPUs (``Parallelism`` in perf's vocabulary):

* tensor parallel within a node, pipeline stages across nodes: ``tp`` the largest valid size up to
  ``min(G, gpus_per_node)`` dividing ``G`` (``min(G, 8)`` on the catalog's GPUs), ``pp = G / tp``;
  an MoE model spreads its experts over each stage's TP group (vLLM's ``enable_expert_parallel``,
  ``ep = tp``);
* for an MoE model, also data-parallel attention with expert parallelism over the whole
  instance, ``Parallelism(tp=1, dp=G, ep=G)`` (SGLang's ``enable_dp_attention``, vLLM's
  ``data_parallel_size = G`` with ``enable_expert_parallel``): each GPU runs attention for its own
  batch with its own KV cache and holds ``E / G`` experts.  Offered for whole nodes
  (``G >= gpus_per_node``, as deployed) where it wins most clearly: MLA models (TP replicates the latent KV
  on every GPU; DeepSeek's own serving runs DP attention) and instances spanning nodes (the
  alternative is pipelining).  A GQA model within one node keeps TP + EP only: each placement
  is one more GPU type for the sweep, whose time grows with them (Qwen3-235B on the 10 priced
  GPU types: 14 placements; with DP attention at 8 GPUs too, 19 and 2.9x the sweep's CPU time).

A data-parallel-attention instance is one engine to the sweep and the simulator: its step model is
the predictor (one rank's batch) at the instance's batch split evenly over the ranks
(``perf.dp_instance.DataParallelInstance``, ``ModelPlacement.step_model``), and its chunked-prefill
budget one rank's chunk (``chunk_tokens_for`` of the rank's predictor): a prompt is prefilled by one
rank, in ``p / chunk`` steps, as vLLM and SGLang run it (``perf.dp_instance`` gives the measurement).

A GPU type that holds the model in no allowed instance is left out (``PlacementSearch.left_out``,
one line each, rendered by the CLI); only when every GPU type is left out is it an error.

Everything else as before:

* the analytical phase uses ``ServingConstants`` derived from the roofline predictor
  (``fleetplan.perf.derive``: W, H at 8K context, KV blocks of the replica, chunk), in place
  of the core paper's three hand-calibrated Llama-3-70B profiles;
* the simulator runs the operator-level ``StepTimePredictor`` itself for that GPU.

Both take the serving engine's profile (``engine``, vLLM by default: ``perf.engine_profile``,
``options_for(gpu, weights)``): its fitted efficiencies and per-step overheads, the MoE layer latency
(``moe_layer_overhead_s``) and the block-FP8 GEMM and weight-streaming efficiencies.

Where NVIDIA ``aiconfigurator-core`` is installed and its measured tables cover the placement (GPU, model,
parallelism, dtypes; vLLM's tables), the measured step model (``fleetplan.perf.measured``) is its step model
in both phases, W and H re-derived from it as below; its ``source`` names the tables.  ``timing_source``
(``perf.measured.source.TimingChoice``: ``auto``, ``roofline``, ``measured``; None: the environment's,
else auto) chooses: ``measured`` without the package is an error before anything is placed, and a
placement its tables do not cover does not fit (a GPU type with none covered is left out with the reason).

A calibrated profile (``perf.calibrate``) replaces the predictor of the placement
it was calibrated for (same GPU, parallelism and storage types; ``calibrate_placements``): its
step model in both phases, and W, H of its serving constants re-derived from the profile by
``perf.derive.linear_constants`` (what the paper's eqs. 3-5 and the pdd/afd screen read).

Costs count every GPU of an instance (``PoolPlan.gpus_per_instance``).  Weights default to the
checkpoint's storage type (``ModelConfig.default_weight_dtype``: FP8 for DeepSeek-V3), and a
block-scaled FP8 checkpoint (``weight_block_size``, DeepSeek-V3 and Qwen3-*-FP8) is timed with the
block-scaled GEMMs (``perf.quant``; ``checkpoint_fp8_scaling``) in both phases: the predictor the
simulator runs and W, H and the chunk of the serving constants.  FP8 chosen for a BF16 checkpoint is
vLLM's online per-tensor quantization.
Multi-token prediction (MTP, ``mtp_acceptance``): for a model that ships MTP heads
(``ModelConfig.n_mtp_layers``, ``num_nextn_predict_layers``: DeepSeek-V3/R1, GLM-4.5/4.6, MiMo) each
roofline placement gets an "MTP on" twin ("H200 tp8 mtp1"): its step model is
``perf.speculative.MtpStepModel`` over the placement's (the analytic engine model adds the verify and
draft passes through ``queueing.speculative.with_speculation``, the simulator from the pool's
``speculative_config``, ``MtpStepModel.speculative_json``), its KV cache gives up the MTP module's weights
(``kv_budget(n_mtp_layers=...)``), and the CLI spells it for the engine (``cli.model_options.mtp_launch_flags``).  The
acceptance is the caller's (``perf.speculative.DEEPSEEK_V3_MTP_ACCEPTANCE`` = 0.85 is DeepSeek's published
figure); None (the default) searches MTP off only.  A placement timed by measured tables (or a calibrated
profile) gets its twin too: the verify step is the measured step model at the verify width, the draft pass the
measured step's share of one MTP layer and the LM head (``perf.speculative``, "Measured pools"); its timing
source says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from fleetplan.errors import ConfigError, FleetplanError
from fleetplan.hardware import GpuProfile, ServingConstants
from fleetplan.models import Dtype, ModelConfig
from fleetplan.models.config import AttentionKind
from fleetplan.perf.calibrate import CalibratedStepModel
from fleetplan.perf.derive import chunk_tokens_for, derive_serving_constants, linear_constants
from fleetplan.perf.dp_instance import DataParallelInstance
from fleetplan.perf.engine_profile import load_engine_profile
from fleetplan.perf.kv_budget import DEFAULT_MAX_NUM_SEQS, kv_budget
from fleetplan.perf.measured import measured_step_model
from fleetplan.perf.measured.coverage import Fp8Scheme
from fleetplan.perf.measured.source import TimingChoice, require_measured
from fleetplan.perf.parallelism import Parallelism, valid_tensor_parallel_sizes
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.perf.quant import checkpoint_fp8_scaling
from fleetplan.perf.seam import StepModel
from fleetplan.perf.speculative import MtpStepModel, check_mtp_setting, mtp_of
from fleetplan.plan.defaults import DEFAULT_MAX_GPUS_PER_INSTANCE, GPUS_PER_NODE

__all__ = ["DEFAULT_MAX_GPUS_PER_INSTANCE", "GPUS_PER_NODE", "LeftOut", "ModelPlacement", "PlacementSearch",
           "calibrate_placements", "instance_shardings", "mtp_of", "place_model", "place_on_gpus",
           "variant_name", "with_mtp_features"]

#: Multi-node sizes kept beyond the smallest that fits (each costs the sweep one more GPU type).
EXTRA_MULTI_NODE_SIZES = 0


@dataclass(frozen=True)
class ModelPlacement:
    """``model`` served on ``gpu`` (whose ``serving`` constants are the derived ones)."""

    model: ModelConfig
    gpu: GpuProfile
    parallelism: Parallelism
    predictor: StepTimePredictor
    calibrated: CalibratedStepModel | None = None  # a profile fitted to this placement's measured steps
    mtp: MtpStepModel | None = None  # "MTP on": drafts and acceptance (module docstring); None: off

    @property
    def gpus_per_instance(self) -> int:
        return self.parallelism.gpus_per_replica

    @property
    def nodes_per_instance(self) -> int:
        """Nodes of ``gpu.gpus_per_node`` GPUs one instance spans."""
        return math.ceil(self.gpus_per_instance / self.gpu.gpus_per_node)

    @property
    def step_model(self) -> StepModel:
        """The calibrated profile when there is one, else the operator-level predictor, over the whole
        instance: with attention data parallelism the instance's batch split over its ranks
        (``perf.dp_instance``; the predictor, a measured profile and a ``perf calibrate`` profile of the
        parallelism each time one rank's batch); an "MTP on" placement's marker over it."""
        if self.mtp is not None:  # "MTP on": the marker over the placement's own step model (measured or not)
            return self.mtp
        return _instance_step_model(self.calibrated or self.predictor, self.parallelism)

    def matches(self, profile: CalibratedStepModel) -> bool:
        """``profile`` was calibrated for this model on this GPU, parallelism and storage types."""
        p = self.predictor
        return (profile.model == self.model.name and profile.gpu == p.gpu.name
                and profile.parallelism == self.parallelism.flags() and profile.weight_dtype == p.weight_dtype.value
                and profile.kv_dtype == p.kv_dtype.value)


def variant_name(gpu: GpuProfile, par: Parallelism, mtp_tokens: int = 0) -> str:
    """Name of a GPU type serving one replica at ``par``: ``"H100-SXM tp4"`` (``pp``, ``dp`` too; ``mtp1``
    with one MTP draft per step)."""
    extra = "".join(f" {k}{v}" for k, v in (("pp", par.pp), ("dp", par.dp), ("mtp", mtp_tokens)) if v > 1
                    or (k == "mtp" and v))
    return f"{gpu.name} tp{par.tp}{extra}"


def _mtp_twin(placement: ModelPlacement, base_gpu: GpuProfile, acceptance: float, num_speculative_tokens: int,
              gpu_memory_utilization: float | None, engine: str = "vllm",
              engine_version: str | None = None) -> ModelPlacement | None:
    """``placement`` with MTP on (module docstring), or None where it cannot be (no heads, no KV left beside the
    MTP module).  A measured placement's marker wraps its measured step model (the draft: its share,
    ``perf.speculative.MtpStepModel.draft_coefficients``)."""
    p = placement.predictor
    if not p.model.n_mtp_layers:
        return None
    mtp = MtpStepModel(placement.step_model, acceptance, num_speculative_tokens,
                       roofline=p if placement.calibrated is not None else None)
    try:
        budget = kv_budget(p.model, base_gpu, placement.parallelism, weight_dtype=p.weight_dtype,
                           kv_dtype=p.kv_dtype, gpu_memory_utilization=gpu_memory_utilization,
                           n_mtp_layers=p.model.n_mtp_layers, engine=engine, engine_version=engine_version)
    except FleetplanError:
        return None
    serving = placement.gpu.require_serving()
    blocks = min(serving.kv_blocks, int(budget.kv_blocks_per_replica))
    sources = {**placement.gpu.sources, "serving": placement.gpu.sources["serving"] +
               f", MTP {num_speculative_tokens} draft(s) at acceptance {acceptance:g}"}
    gpu = replace(placement.gpu, name=variant_name(base_gpu, placement.parallelism, num_speculative_tokens),
                  serving=replace(serving, kv_blocks=blocks), sources=sources)
    return replace(placement, gpu=gpu, mtp=mtp)


def _eq3_constants(serving: ServingConstants, step_model: StepModel) -> tuple[float, float]:
    """(W, H) of eq. 3 from ``step_model`` at the serving constants' reference context and operating batch."""
    ref = int(serving.ref_context_tokens)
    n_ref = max(1, min(int(serving.n_max(ref)), DEFAULT_MAX_NUM_SEQS))
    return linear_constants(step_model, n_ref, ref)


def _instance_step_model(rank_step: StepModel, par: Parallelism) -> StepModel:
    """A step model of one attention rank's batch (the predictor, a measured or calibrated profile) as the step
    model of the whole instance."""
    return rank_step if par.attn_dp == 1 else DataParallelInstance(rank_step, par.attn_dp)


def _place(model: ModelConfig, gpu: GpuProfile, par: Parallelism, weight_dtype: Dtype, kv_dtype: Dtype,
           gpu_memory_utilization: float | None, engine: str, timing: TimingChoice | None = None,
           engine_version: str | None = None) -> ModelPlacement:
    # the engine's efficiencies on this GPU at that release
    options = load_engine_profile(engine).options_for(gpu, weight_dtype, engine_version)
    serving = derive_serving_constants(model, gpu, par, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                                       options=options, gpu_memory_utilization=gpu_memory_utilization,
                                       engine=engine, engine_version=engine_version)
    predictor = StepTimePredictor(model, gpu, par, weight_dtype, kv_dtype, options,
                                  fp8_scaling=checkpoint_fp8_scaling(model, weight_dtype))
    if predictor.block_fp8 or par.attn_dp > 1:
        # derive times per-tensor FP8 and one DP rank's batch: W, H and the chunk again from the instance's steps
        step = _instance_step_model(predictor, par)
        w_s, h_s = _eq3_constants(serving, step)
        # one rank's chunk per instance step (perf.dp_instance: a prompt is prefilled by one rank)
        chunk = chunk_tokens_for(predictor)
        serving = replace(serving, iter_base_s=w_s, iter_per_seq_s=h_s, chunk_tokens=chunk)
    scaled = (" with block-scaled FP8 GEMMs" if predictor.block_fp8 else "") + \
        (f", the batch split over {par.attn_dp} attention ranks" if par.attn_dp > 1 else "")
    sources = {**gpu.sources,
               "serving": f"derived by fleetplan.perf.derive for {model.name} at {par.flags()}{scaled}"}
    placed = replace(gpu, name=variant_name(gpu, par), aliases=(), serving=serving, sources=sources)
    placement = ModelPlacement(model, placed, par, predictor)
    # aiconfigurator-core's tables of the same engine and FP8 scaling, where they cover the pool
    measured = measured_step_model(predictor, engine, Fp8Scheme.BLOCK if predictor.block_fp8 else Fp8Scheme.PER_TENSOR,
                                   timing)
    return placement if measured is None else calibrate_placements((placement,), measured)[0]


def _dp_attention_helps(model: ModelConfig, n_gpus: int, gpus_per_node: int) -> bool:
    """Data-parallel attention is offered (module docstring)."""
    return n_gpus >= gpus_per_node and (model.attention is AttentionKind.MLA or n_gpus > gpus_per_node)


def instance_shardings(model: ModelConfig, n_gpus: int, *, gpus_per_node: int) -> tuple[Parallelism, ...]:
    """Shardings of one ``n_gpus``-GPU instance of ``model`` on nodes of ``gpus_per_node`` GPUs that pass
    ``Parallelism.check_model``, in preference order (module docstring): TP within a node and PP across
    nodes; for an MoE model also data-parallel attention with expert parallelism over the instance."""
    if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int) or gpus_per_node < 1:
        raise ConfigError(param="gpus_per_node", value=gpus_per_node,
                          rule="give the GPUs of one node as a whole number >= 1, e.g. 8 (an HGX board)")
    out: list[Parallelism] = []
    tp = max((t for t in valid_tensor_parallel_sizes(model) if t <= min(n_gpus, gpus_per_node) and n_gpus % t == 0),
             default=0)
    if tp:
        out.append(Parallelism.vllm(tensor_parallel_size=tp, pipeline_parallel_size=n_gpus // tp,
                                    enable_expert_parallel=model.is_moe and tp > 1))
    if model.is_moe and n_gpus > 1 and _dp_attention_helps(model, n_gpus, gpus_per_node):
        out.append(Parallelism(tp=1, dp=n_gpus, ep=n_gpus))
    valid = []
    for par in out:
        try:
            par.check_model(model)
        except ConfigError:
            continue
        valid.append(par)
    return tuple(valid)


def _sizes(model: ModelConfig, max_gpus_per_instance: int,
           gpus_per_node: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(sizes within one node, sizes across nodes), each ascending and at most ``max_gpus_per_instance``."""
    one_node = tuple(t for t in valid_tensor_parallel_sizes(model) if t <= min(gpus_per_node, max_gpus_per_instance))
    multi, n = [], 2 * gpus_per_node
    while n <= max_gpus_per_instance:
        multi.append(n)
        n *= 2
    return one_node, tuple(multi)


def _check_max(max_gpus_per_instance: int) -> None:
    if isinstance(max_gpus_per_instance, bool) or not isinstance(max_gpus_per_instance, int) \
            or max_gpus_per_instance < 1:
        raise ConfigError(param="max_gpus_per_instance", value=max_gpus_per_instance,
                          rule="give a whole number of GPUs >= 1, e.g. 64 (eight 8-GPU nodes)")


def place_model(
    model: ModelConfig,
    gpu: GpuProfile,
    *,
    parallelism: Parallelism | None = None,
    weight_dtype: Dtype | None = None,
    kv_dtype: Dtype = Dtype.BF16,
    gpu_memory_utilization: float | None = None,
    max_gpus_per_instance: int = DEFAULT_MAX_GPUS_PER_INSTANCE,
    engine: str = "vllm",
    timing_source: TimingChoice | str | None = None,
    mtp_acceptance: float | None = None,
    num_speculative_tokens: int = 1,
    engine_version: str | None = None,
) -> tuple[ModelPlacement, ...]:
    """Every placement of ``model`` on ``gpu`` (module docstring), smallest instance first.

    ``weight_dtype`` None: the checkpoint's (``ModelConfig.default_weight_dtype``).  ``engine``: the
    engine profile (``perf.engine_profile``, ``engine_profiles/<engine>.toml``) whose options the
    predictor and the serving constants use (``options_for(gpu, weights)``: its per-GPU overrides) and
    whose measured tables the measured source reads; vLLM by default, the engine most deployments run.
    ``timing_source``: which source times the placements (module docstring).  ``mtp_acceptance`` (None:
    MTP off only): each placement of a model with MTP heads also with ``num_speculative_tokens`` MTP drafts
    per step accepted at that rate (module docstring), right after it.  ``engine_version``: the engine release
    whose profile values time the placements (``EngineProfile.options_for``; None: the profile's default version).
    ``gpu_memory_utilization``: the memory fraction in ``engine``'s meaning (``perf.kv_budget``; None: the engine's
    default, vLLM's 0.9 or the ``mem_fraction_static`` SGLang derives).

    Raises
    ------
    ConfigError
        The model fits in no allowed instance on ``gpu`` (the message gives the reason), ``engine_version``
        is not a release number,
        ``parallelism`` breaks a rule of the model, or ``timing_source`` is ``measured`` without the package.
    """
    _check_max(max_gpus_per_instance)
    # an unknown engine or a bad release is its own error, not a reason the model fits nowhere
    load_engine_profile(engine).values_version(engine_version)
    timing = require_measured(timing_source)
    weights = weight_dtype or model.default_weight_dtype
    if mtp_acceptance is not None:  # validated once, whatever the model (one without MTP heads gets no twins)
        check_mtp_setting(mtp_acceptance, num_speculative_tokens)

    def with_twins(places: list[ModelPlacement]) -> tuple[ModelPlacement, ...]:
        if mtp_acceptance is None:
            return tuple(places)
        out = []
        for p in places:
            twin = _mtp_twin(p, gpu, mtp_acceptance, num_speculative_tokens, gpu_memory_utilization, engine,
                             engine_version)
            out.extend((p,) if twin is None else (p, twin))
        return tuple(out)

    if parallelism is not None:
        parallelism.check_model(model)
        return with_twins([_place(model, gpu, parallelism, weights, kv_dtype, gpu_memory_utilization, engine,
                                  timing, engine_version)])
    one_node, multi_node = _sizes(model, max_gpus_per_instance, gpu.gpus_per_node)
    found: list[ModelPlacement] = []
    last: FleetplanError | None = None

    def fit(n_gpus: int) -> bool:
        nonlocal last
        hit = False
        for i, par in enumerate(instance_shardings(model, n_gpus, gpus_per_node=gpu.gpus_per_node)):
            try:
                found.append(_place(model, gpu, par, weights, kv_dtype, gpu_memory_utilization, engine, timing,
                                    engine_version))
                hit = True
            except FleetplanError as exc:  # does not fit at this size; the reason is the preferred sharding's
                last = exc if i == 0 else last
        return hit

    for n in one_node:
        fit(n)
    extra = -1
    for n in multi_node if not found else ():
        if extra >= EXTRA_MULTI_NODE_SIZES:
            break
        if fit(n) or extra >= 0:
            extra += 1
    if not found:
        largest = max((*one_node, *multi_node), default=0)
        raise ConfigError(
            f"{model.name} in {weights.value} {_no_fit(gpu, largest, last, model, weights)}; {_FIT_FIX}",
            param="max_gpus_per_instance", value=max_gpus_per_instance)
    return with_twins(found)


_FIT_FIX = "use GPUs with more memory, quantized weights (`weight_dtype` fp8/int4) or a larger `max_gpus_per_instance`"


def _no_fit(gpu: GpuProfile, largest: int, exc: FleetplanError | None, model: ModelConfig, weights: Dtype) -> str:
    nodes = math.ceil(largest / gpu.gpus_per_node)
    return (f"fits no instance of up to {largest} {gpu.name} GPUs ({nodes} node{'s' if nodes > 1 else ''} of "
            f"{gpu.gpus_per_node}): {_reason(exc, model, weights)}")


def _reason(exc: FleetplanError | None, model: ModelConfig, weights: Dtype) -> str:
    """The binding numbers of a fit failure, without the model's name or the failure's own fix."""
    if exc is None:
        return "no sharding of the model is valid at these sizes"
    text = str(exc).removeprefix(f"{model.name} in {weights.value} ").removeprefix(f"{model.name} ")
    return text.split(": use ")[0].split("; raise ")[0].rstrip(".")


@dataclass(frozen=True)
class LeftOut:
    """A GPU type that holds the model in no allowed instance, and why (``place_model``'s reason)."""

    gpu: str
    reason: str

    def line(self) -> str:
        """One line: the GPU type, the reason and the fix."""
        return f"{self.gpu} left out: {self.reason}; {_FIT_FIX}"


@dataclass(frozen=True)
class PlacementSearch:
    """Placements of a model on several GPU types (``place_on_gpus``) and the GPU types left out."""

    model: ModelConfig
    placements: tuple[ModelPlacement, ...]
    left_out: tuple[LeftOut, ...] = ()

    def notes(self) -> tuple[str, ...]:
        """One line per GPU type left out."""
        return tuple(x.line() for x in self.left_out)


def place_on_gpus(
    model: ModelConfig,
    gpus: Sequence[GpuProfile],
    *,
    engine: str = "vllm",
    parallelism: Parallelism | None = None,
    weight_dtype: Dtype | None = None,
    kv_dtype: Dtype = Dtype.BF16,
    gpu_memory_utilization: float | None = None,
    max_gpus_per_instance: int = DEFAULT_MAX_GPUS_PER_INSTANCE,
    timing_source: TimingChoice | str | None = None,
    mtp_acceptance: float | None = None,
    num_speculative_tokens: int = 1,
    engine_version: str | None = None,
) -> PlacementSearch:
    """``place_model`` on each of ``gpus`` (with ``engine``'s profile at ``engine_version``, timed by
    ``timing_source``, MTP twins at ``mtp_acceptance``); a GPU type where the model fits nowhere is left out with
    its reason.

    Raises
    ------
    ConfigError
        Every GPU type is left out (the message gives each one's reason), ``parallelism``
        breaks a rule of the model (whatever the GPU), or ``timing_source`` is ``measured`` without the package.
    """
    _check_max(max_gpus_per_instance)
    load_engine_profile(engine).values_version(engine_version)  # an unknown engine or bad release fails once
    timing = require_measured(timing_source)
    if parallelism is not None:
        parallelism.check_model(model)
    placed: list[ModelPlacement] = []
    left: list[LeftOut] = []
    for gpu in {g.name: g for g in gpus}.values():
        try:
            placed.extend(place_model(model, gpu, parallelism=parallelism, weight_dtype=weight_dtype,
                                      kv_dtype=kv_dtype, gpu_memory_utilization=gpu_memory_utilization,
                                      max_gpus_per_instance=max_gpus_per_instance, engine=engine,
                                      timing_source=timing, mtp_acceptance=mtp_acceptance,
                                      num_speculative_tokens=num_speculative_tokens, engine_version=engine_version))
        except FleetplanError as exc:
            left.append(LeftOut(gpu.name, str(exc).removesuffix(f"; {_FIT_FIX}")))
    if not placed:
        weights = (weight_dtype or model.default_weight_dtype).value
        where = "; ".join(f"{x.gpu}: {x.reason.removeprefix(f'{model.name} in {weights} ')}" for x in left)
        raise ConfigError(f"{model.name} in {weights} fits on no GPU type given ({where}); {_FIT_FIX}",
                          param="max_gpus_per_instance", value=max_gpus_per_instance)
    return PlacementSearch(model, tuple(placed), tuple(left))


def calibrate_placements(placements: Sequence[ModelPlacement],
                         profile: CalibratedStepModel) -> tuple[ModelPlacement, ...]:
    """``placements`` with ``profile`` as the step model of those it matches (``ModelPlacement.matches``)
    and their W, H re-derived from it (module docstring); ``ConfigError`` when it matches none."""
    out, hit = [], False
    for p in placements:
        if not p.matches(profile):
            out.append(p)
            continue
        hit = True
        serving = p.gpu.require_serving()
        w_s, h_s = _eq3_constants(serving, _instance_step_model(profile, p.parallelism))
        if not (w_s >= 0 and h_s >= 0):
            raise ConfigError(f"`perf_profile` for {profile.gpu} gives a negative eq. 3 constant (W {w_s:.3g} s, H "
                              f"{h_s:.3g} s) from its decode steps; recalibrate with more decode-only rows",
                              param="perf_profile")
        sources = {**p.gpu.sources, "serving": f"W, H from the calibrated profile of {profile.source}"}
        gpu = replace(p.gpu, serving=replace(serving, iter_base_s=w_s, iter_per_seq_s=h_s), sources=sources)
        # an "MTP on" twin keeps MTP over the profile (its draft the profile step's share, perf.speculative)
        mtp = None if p.mtp is None else replace(p.mtp, base=_instance_step_model(profile, p.parallelism),
                                                 roofline=p.predictor)
        out.append(replace(p, gpu=gpu, calibrated=profile, mtp=mtp))
    if not hit:
        swept = ", ".join(f"{p.gpu.name} ({p.predictor.weight_dtype.value}/{p.predictor.kv_dtype.value})"
                          for p in placements) or "none"
        raise ConfigError(
            f"`perf_profile` was calibrated for {profile.model} on {profile.gpu} at {profile.parallelism} with "
            f"{profile.weight_dtype} weights and {profile.kv_dtype} KV cache; no swept placement matches (swept: "
            f"{swept}); add its GPU to `gpus`, give its `tensor_parallel_size` and storage types, or recalibrate",
            param="perf_profile")
    return tuple(out)


def with_mtp_features(pool):
    """``pool`` (a ``sim.PoolSpec``) running MTP in the simulator where its step model is an "MTP on"
    candidate's (``mtp_of``): vLLM's ``speculative_config`` of the marker (the verifier's hook)."""
    from fleetplan.sim.features.speculative import SpeculativeConfig

    mtp = mtp_of(pool.step_model)
    if mtp is None:
        return pool
    spec = SpeculativeConfig.from_json(mtp.speculative_json())
    return replace(pool, features=replace(pool.features, speculative=spec))
