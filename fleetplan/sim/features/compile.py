"""Compile the pools' ``RuntimeFeatures`` into ``CompiledFeatures`` (docs/runtime_features_contract.md).

CUDA-graph timing triple per pool, ``(launch_s, replay_s, piecewise_eager_s)``:

    launch_s          = (KERNELS_PER_LAYER * n_layers + KERNELS_PER_STEP) * launch_per_kernel_s
                        (fleetplan.perf.overheads), or the pool's explicit ``launch_overhead_s``
    replay_s          = launch_per_kernel_s: a captured graph is submitted by one cudaGraphLaunch
    piecewise_eager_s = launch_s * PIECEWISE_LAUNCHES_PER_LAYER / KERNELS_PER_LAYER: piecewise
                        graphs leave attention eager, one attention launch plus one graph-piece
                        launch per layer (vLLM docs/design/cuda_graphs.md)

``launch_per_kernel_s`` is the predictor's ``options.launch_overhead_s`` (else
``DEFAULT_LAUNCH_OVERHEAD_S``).  A pool whose step model does not know its model (the paper's
linear constants) needs ``launch_overhead_s``: no default is invented.

The step model is the EAGER time whenever a cudagraph mode is set (``none`` included).  A
``StepTimePredictor`` in ``cuda_graph`` execution (a served model's default) is kernel-only: with a
mode set, ``launch_s`` is added to its constant term (``eager_step_coefficients``), which is the
predictor's own eager execution (``ExecutionMode.EAGER``, up to float rounding) when
``launch_overhead_s`` is not given.  With no mode set, it runs as it is: every step kernel-only, i.e.
vLLM's default graphs without capture padding or replay cost (the timing ``optimize`` of a served model
sweeps).  Linear constants, calibrated profiles and eager predictors are eager time already.
``launch_overhead_s`` given where nothing reads it (graphs off, and no kernel-only predictor with
mode ``none``) is refused rather than ignored.

Capture memory: vLLM logs about ``CUDAGRAPH_BYTES_PER_CAPTURE`` = 26 MiB per captured size
("Graph capturing for 464 input tokens finished in 0.057 secs, took 26.00 MiB", vllm PR #22897),
so a ladder of S sizes takes S x 26 MiB per GPU.  ``fleetplan.perf.kv_budget`` already reserves
``DEFAULT_CUDAGRAPH_POOL_BYTES`` (1 GiB) for a placed model's graphs, so a predictor pool with
graphs on loses ``ceil(max(0, S x 26 MiB - 1 GiB) / kv_bytes_per_block)`` blocks per GPU (times
attention DP ranks).  The paper's calibrated constants were measured on vLLM with its default
graphs captured, so their KV blocks are kept.

Draft pass (one per speculative position): ``mtp`` on an operator-level ``StepTimePredictor`` pool
without ``draft_cost_fraction`` = ``StepTimePredictor.mtp_draft_coefficients`` (one decoder layer,
``eh_proj`` and the LM head; ``fleetplan.perf.speculative``, the analytic engine's draft too), kernel-only
under graphs (vLLM's EAGLE/MTP proposer captures its own CUDA graphs) and with one layer's eager launches,
``(KERNELS_PER_LAYER + KERNELS_PER_STEP) launch_per_kernel_s``, added when the pool runs eager
(``cudagraph_mode`` none on a kernel-only predictor); otherwise the pool's step coefficients times the draft
fraction (cost terms only; the roofline's tile, wave ratio and MoE miss exponent are shapes, not
costs); the fraction defaults to one MTP layer plus the LM head over the model's active
parameters, ``(P_layer + V h) / P_active`` with ``P_layer = (P_active - P_embedding) / n_layers``.
``draft_model`` = the operator-level predictor of the bundled draft model on the pool's GPU (TP =
``draft_tensor_parallel_size``, else the pool's).  ``ngram`` costs nothing (CPU lookup).
"""

from __future__ import annotations

import math

import numpy as np

from fleetplan import rng as fp_rng
from fleetplan.errors import ConfigError
from fleetplan.models import AttentionKind, ModelConfig, load_model
from fleetplan.perf.calibrate import CalibratedStepModel
from fleetplan.perf.kv_budget import DEFAULT_CUDAGRAPH_POOL_BYTES
from fleetplan.perf.linear import N_STEP_COEFS, ROOFLINE_SHAPE_COEFS, STEP_MODEL_LINEAR, STEP_MODEL_ROOFLINE
from fleetplan.perf.overheads import DEFAULT_LAUNCH_OVERHEAD_S, KERNELS_PER_LAYER, KERNELS_PER_STEP, ExecutionMode
from fleetplan.perf.parallelism import Parallelism, pp_stage_layers
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.sim._kernels import codes
from fleetplan.sim.features.arrays import SPEC_K_MAX, CompiledFeatures
from fleetplan.sim.features.spec import GraphMode, RuntimeFeatures, SchedulerPolicy
from fleetplan.sim.spec import FleetSpec, InstanceRouter, PoolSpec
from fleetplan.units import fmt_ms

__all__ = ["compile_features", "draft_cost_fraction", "eager_launch_s", "eager_step_coefficients", "features_on",
           "graph_kv_blocks_lost", "graph_times_s", "no_features", "pool_model"]

CUDAGRAPH_BYTES_PER_CAPTURE = 26 * 2**20  # vllm PR #22897 capture log, see module docstring
DEFAULT_MAX_PREFIX_ENTRIES = 8192  # distinct cached prefixes per instance when prefix_cache_entries is not given
PIECEWISE_LAUNCHES_PER_LAYER = 2  # eager attention + the next graph piece
_POLICY_CODE = {SchedulerPolicy.VLLM_V1: codes.SCHED_VLLM_V1, SchedulerPolicy.SGLANG: codes.SCHED_SGLANG,
                SchedulerPolicy.SPF: codes.SCHED_SPF, SchedulerPolicy.MLFQ: codes.SCHED_MLFQ,
                SchedulerPolicy.H2Q_BR: codes.SCHED_H2Q_BR}
_GRAPH_CODE = {None: codes.GRAPH_NONE, GraphMode.NONE: codes.GRAPH_NONE,
               GraphMode.FULL_DECODE_ONLY: codes.GRAPH_FULL_DECODE_ONLY, GraphMode.PIECEWISE: codes.GRAPH_PIECEWISE}


def _features(pool: PoolSpec) -> RuntimeFeatures:
    return getattr(pool, "features", None) or RuntimeFeatures()


def pool_model(pool: PoolSpec) -> ModelConfig | None:
    """The model a pool's step model was built for, or None (the paper's linear constants)."""
    step = pool.step_model
    if isinstance(step, StepTimePredictor):
        return step.model
    if isinstance(step, CalibratedStepModel):
        return load_model(step.model)
    return None


def _launch_per_kernel_s(pool: PoolSpec) -> float:
    step = pool.step_model
    return step.options.launch_overhead_s if isinstance(step, StepTimePredictor) else DEFAULT_LAUNCH_OVERHEAD_S


def graph_times_s(pool: PoolSpec) -> tuple[float, float, float]:
    """``(launch_s, replay_s, piecewise_eager_s)`` of a pool with graphs on (module docstring)."""
    feats = _features(pool)
    per_kernel_s = _launch_per_kernel_s(pool)
    if feats.launch_overhead_s is not None:
        launch_s = feats.launch_overhead_s
    else:
        model = pool_model(pool)
        if model is None:
            raise ConfigError(f"pool {pool.name!r}: cudagraph mode {feats.cudagraph.mode.value} needs the eager launch "
                              "overhead, but the step model does not know its model; give `model` or "
                              "`launch_overhead_ms` (in [pool.features])")
        launch_s = (KERNELS_PER_LAYER * model.n_layers + KERNELS_PER_STEP) * per_kernel_s
    return launch_s, min(per_kernel_s, launch_s), launch_s * PIECEWISE_LAUNCHES_PER_LAYER / KERNELS_PER_LAYER


def _kernel_only(pool: PoolSpec) -> bool:
    step = pool.step_model
    return isinstance(step, StepTimePredictor) and step.options.execution is ExecutionMode.CUDA_GRAPH


def eager_launch_s(pool: PoolSpec) -> float:
    """Seconds added to every step of the pool's step model to make it the eager time: ``launch_s`` for a
    kernel-only predictor with a cudagraph mode set, else 0 (module docstring).  A launch overhead that
    nothing reads is a ``ConfigError``."""
    feats = _features(pool)
    added = feats.cudagraph.mode is not None and _kernel_only(pool)
    if feats.launch_overhead_s is not None and not (feats.cudagraph.on or added):
        raise ConfigError(
            f"pool {pool.name!r}: launch overhead {fmt_ms(feats.launch_overhead_s, '.3g')} is given but no step reads "
            "it: it is taken out of graphed steps (`cudagraph_mode` full_decode_only|piecewise) or added to every "
            "step of a `model` pool with `cudagraph_mode` none; set the mode or drop `launch_overhead_ms`")
    return graph_times_s(pool)[0] if added else 0.0


def eager_step_coefficients(pool: PoolSpec) -> tuple[int, np.ndarray]:
    """The pool's ``(code, coef)`` with ``eager_launch_s`` added to the constant term: eager time when a
    cudagraph mode is set, the step model as given when none is (module docstring)."""
    code, coef = pool.step_model.kernel_coefficients()
    coef = np.array(coef, dtype=np.float64)
    launch_s = eager_launch_s(pool)
    if launch_s:
        coef[0] += launch_s
    return int(code), coef


def graph_kv_blocks_lost(pool: PoolSpec) -> int:
    """KV blocks a predictor pool gives up for capture memory beyond kv_budget's reserve (module docstring)."""
    feats, step = _features(pool), pool.step_model
    if not feats.cudagraph.on or not isinstance(step, StepTimePredictor):
        return 0
    n_sizes = len(feats.cudagraph.sizes_for(pool.limits.max_num_seqs))
    extra_bytes = n_sizes * CUDAGRAPH_BYTES_PER_CAPTURE - DEFAULT_CUDAGRAPH_POOL_BYTES
    if extra_bytes <= 0:
        return 0
    model, par = step.model, step.parallelism
    per_layer = model.kv_bytes_per_token_per_layer(step.kv_dtype)
    if model.attention is AttentionKind.GQA:
        per_layer *= par.kv_heads_per_gpu(model) / model.n_kv_heads
    block_bytes = math.ceil(max(pp_stage_layers(model.n_layers, par.pp)) * per_layer) * pool.limits.block_size_tokens
    return math.ceil(extra_bytes / block_bytes) * par.attn_dp


def draft_cost_fraction(model: ModelConfig) -> float:
    """One MTP layer plus the LM head over the model's active parameters (module docstring)."""
    head, active = model.vocab_size * model.hidden_size, model.n_active_params()
    layer = (active - model.embedding_params()) / model.n_layers
    return min(1.0, (layer + head) / active)


def _draft(pool: PoolSpec, code: int, coef: np.ndarray) -> tuple[int, np.ndarray]:
    spec = _features(pool).speculative
    if spec is None or spec.method == "ngram":
        return STEP_MODEL_LINEAR, np.zeros(N_STEP_COEFS)
    if spec.method == "mtp":
        frac = spec.draft_cost_fraction
        if frac is None and isinstance(pool.step_model, StepTimePredictor):
            draft_code, draft_coef = pool.step_model.mtp_draft_coefficients()
            if eager_launch_s(pool) and not _features(pool).cudagraph.on:  # enforce-eager: the draft launches too
                draft_coef[0] += (KERNELS_PER_LAYER + KERNELS_PER_STEP) * _launch_per_kernel_s(pool)
            return draft_code, draft_coef
        if frac is None:
            model = pool_model(pool)
            if model is None:
                raise ConfigError(f"pool {pool.name!r}: speculative method mtp needs the draft cost, but the step "
                                  "model does not know its model; give `model` or \"draft_cost_fraction\" in the JSON")
            frac = draft_cost_fraction(model)
        scaled = coef * frac
        if code == STEP_MODEL_ROOFLINE:
            for i in ROOFLINE_SHAPE_COEFS:
                scaled[i] = coef[i]
        return code, scaled
    step = pool.step_model
    if not isinstance(step, StepTimePredictor):
        raise ConfigError(f"pool {pool.name!r}: draft model {spec.draft_model!r} needs the pool's GPU and dtypes from "
                          "the operator-level predictor; give `model` (without `perf_profile`)")
    draft = load_model(spec.draft_model)
    tp = spec.draft_tensor_parallel_size or step.parallelism.tp
    predictor = StepTimePredictor(draft, step.gpu, Parallelism.vllm(tensor_parallel_size=tp),
                                  step.weight_dtype, step.kv_dtype, step.options)
    return predictor.kernel_coefficients()


def compile_features(spec: FleetSpec, seed: int) -> CompiledFeatures:
    """Per-pool feature arrays of ``spec``; acceptance draws seeded from stream ``acceptance`` of ``seed``."""
    pools = spec.pools
    n = len(pools)
    feats = [_features(p) for p in pools]
    sizes = [f.cudagraph.sizes_for(p.limits.max_num_seqs) for f, p in zip(feats, pools, strict=True)]
    graph_sizes = np.zeros((n, max([len(s) for s in sizes] + [1])), dtype=np.int64)
    graph_time = np.zeros((n, 3))
    spec_accept = np.zeros((n, SPEC_K_MAX))
    draft_code = np.zeros(n, dtype=np.int32)
    draft_coef = np.zeros((n, N_STEP_COEFS))
    for i, (pool, f) in enumerate(zip(pools, feats, strict=True)):
        graph_sizes[i, :len(sizes[i])] = sizes[i]
        if f.cudagraph.on:
            graph_time[i] = graph_times_s(pool)
            fixed_s = eager_step_coefficients(pool)[1][0]
            if graph_time[i, 0] >= fixed_s:
                raise ConfigError(
                    f"pool {pool.name!r}: launch overhead {fmt_ms(graph_time[i, 0], '.3g')} is not below the step "
                    f"model's fixed cost per step {fmt_ms(fixed_s, '.3g')}, so a graphed step would take no time; "
                    "the constants look like CUDA-graph measurements: give a smaller `launch_overhead_ms` or `model`")
        if f.speculative is not None:
            spec_accept[i, :f.speculative.num_speculative_tokens] = f.speculative.acceptance
            draft_code[i], draft_coef[i] = _draft(pool, *eager_step_coefficients(pool))
        entries = f.prefix_cache.entries_per_instance or default_prefix_entries(pool)
        if f.prefix_cache.enabled and entries > np.iinfo(np.int32).max:
            raise ConfigError(f"pool {pool.name!r}: prefix cache entries {entries} exceed 2**31 - 1; "
                              "give prefix_cache_entries")
    return CompiledFeatures(
        policy=np.array([_POLICY_CODE[f.policy.policy] for f in feats], dtype=np.int32),
        policy_param=np.array([f.policy.params() for f in feats], dtype=np.float64).reshape(n, 4),
        graph_mode=np.array([_GRAPH_CODE[f.cudagraph.mode] for f in feats], dtype=np.int32),
        graph_sizes=graph_sizes,
        graph_n=np.array([len(s) for s in sizes], dtype=np.int32),
        graph_time_s=graph_time,
        spec_k=np.array([0 if f.speculative is None else f.speculative.num_speculative_tokens for f in feats],
                        dtype=np.int32),
        spec_accept=spec_accept,
        draft_code=draft_code,
        draft_coef=draft_coef,
        prefix_on=np.array([int(f.prefix_cache.enabled) for f in feats], dtype=np.int32),
        prefix_entries=np.array([(f.prefix_cache.entries_per_instance or default_prefix_entries(p))
                                 if f.prefix_cache.enabled else 0 for f, p in zip(feats, pools, strict=True)],
                                dtype=np.int32),
        affinity_slack=np.array([f.prefix_cache.affinity_slack_requests for f in feats], dtype=np.int64),
        spec_seed=fp_rng.task_seed(int(seed), "acceptance"),
    )


def default_prefix_entries(pool: PoolSpec) -> int:
    """Prefix-cache entries per instance when none are given: one per KV block, at most
    ``DEFAULT_MAX_PREFIX_ENTRIES`` (an entry holds a whole prefix of >= 1 block, so the cap bounds
    memory, ~70 B per entry, without bounding the cached blocks)."""
    return min(pool.limits.kv_blocks, DEFAULT_MAX_PREFIX_ENTRIES)


def no_features(n_pools: int) -> CompiledFeatures:
    """All-off arrays for ``n_pools`` pools (a run with session extras but no pool features)."""
    return CompiledFeatures(
        policy=np.zeros(n_pools, dtype=np.int32), policy_param=np.zeros((n_pools, 4)),
        graph_mode=np.zeros(n_pools, dtype=np.int32), graph_sizes=np.zeros((n_pools, 1), dtype=np.int64),
        graph_n=np.zeros(n_pools, dtype=np.int32), graph_time_s=np.zeros((n_pools, 3)),
        spec_k=np.zeros(n_pools, dtype=np.int32), spec_accept=np.zeros((n_pools, SPEC_K_MAX)),
        draft_code=np.zeros(n_pools, dtype=np.int32), draft_coef=np.zeros((n_pools, N_STEP_COEFS)),
        prefix_on=np.zeros(n_pools, dtype=np.int32), prefix_entries=np.zeros(n_pools, dtype=np.int32),
        affinity_slack=np.full(n_pools, 0, dtype=np.int64), spec_seed=0,
    )


def features_on(spec: FleetSpec) -> bool:
    """True when some pool has a runtime feature on or uses the prefix-affinity router."""
    return any(_features(p).any_on or p.router is InstanceRouter.PREFIX_AFFINITY for p in spec.pools)

