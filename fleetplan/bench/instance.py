"""One serving instance from vLLM engine arguments: the simulator's ``FleetSpec``.

``EngineArgs`` carries the ``vllm serve`` flags ``bench serve`` models (vLLM's names, seconds
and tokens inside) and ``serving_fleet`` turns them into a one-pool ``FleetSpec``:

* step model: the operator-level ``StepTimePredictor`` of the model on the GPU under
  ``parallelism_spec`` (a ``fleetplan.perf.parallelism.Parallelism``; ``None`` = tensor parallelism
  over ``tensor_parallel_size`` GPUs, MoE models with expert parallelism over the TP group), with
  the engine profile's efficiencies and overheads (``fleetplan.perf.engine_profile``), or a
  calibrated ``perf_profile`` (``fleetplan perf calibrate``).  ``engine_parallelism`` reads the
  parallelism flags in each engine's own meaning (below);
* attention data parallelism: the step model times one data-parallel rank's batch (its experts
  see ``attn_dp`` times its tokens, ``fleetplan.perf.predictor``), so each of the ``attn_dp``
  ranks of an instance is simulated as its own scheduler with its own KV cache
  (``kv_blocks_per_replica / attn_dp`` blocks) and ``max_num_seqs``, the ranks of all instances
  behind the least-outstanding-requests router (vLLM's data-parallel load balancer and SGLang's
  DP controller both send a request to a lightly loaded rank);
* KV blocks: ``fleetplan.perf.kv_budget`` at ``gpu_memory_utilization`` in the engine's meaning (vLLM's
  fraction less the profiled activations and graphs; SGLang's ``mem_fraction_static``, the weights' and KV pool's
  share, its derived default when not given: ``fleetplan.perf.sglang_memory``) in blocks of
  ``block_size_tokens`` tokens (vLLM's ``block_size``, 16 by default; a sequence holds whole blocks);
* limits: ``max_num_seqs`` and ``max_num_batched_tokens`` default to vLLM's API-server
  defaults (``fleetplan.perf.kv_budget.vllm_batch_defaults``; ``EngineArgs.get_batch_defaults`` in
  vllm-project/vllm ``vllm/engine/arg_utils.py``):
  1024 sequences / 8192 tokens on GPUs with at least 70 GiB that are not A100s, else 256 /
  2048; ``enable_chunked_prefill false`` raises the token budget to ``max_model_len``
  (a whole prompt per step, vLLM's rule without chunking);
* ``max_model_len`` defaults to the KV capacity of the instance, capped at
  ``DEFAULT_MAX_MODEL_LEN_TOKENS``;
* ``async_scheduling`` (vLLM's engine argument; vllm-project/vllm PR #19970, "Implement Async Scheduling": the
  scheduler works one step ahead so that scheduling and output processing overlap the model's execution): the
  step pays no per-step host time (the profile's ``cpu_overhead_s``, and under measured tables their fitted
  ``overhead_step_s``, the engine's time outside the kernels), since a GPU step outlasts it (1.7 ms against steps of
  several ms); a step shorter than the host work would be under-predicted.  GPUStack's paired runs of vLLM 0.11 with
  and without it (held out) differ by 1-12 %, the async ones faster;
* runtime features: ``cudagraph_capture_sizes`` (graphs on, ``piecewise`` mode; without
  it, every step kernel-only, vLLM's default graphs without padding), ``speculative_config``,
  ``enable_prefix_caching`` (``fleetplan.sim.features``);
* ``engine``: the engine profile's name; what it implies is ``ENGINE_DEFAULTS[engine]``, one named field per
  meaning (``EngineDefaults``: ``prefix_caching``, ``scheduler`` -- its batch policy --, ``token_budget`` -- the
  default per-step token budget's rule --, ``measured_tables`` -- whose aiconfigurator-core tables time it -- and
  ``async_scheduling_switch`` -- whether it takes vLLM's ``async_scheduling``); nothing compares the name itself:

  - prefix caching (``enable_prefix_caching None``): on for vLLM (v1 turns
    ``enable_prefix_caching`` on by default) and SGLang (its radix cache, off only with its
    ``disable_radix_cache``); off for LMDeploy (v0.1 has none) and TensorRT-LLM (its default
    capacity scheduler, ``GUARANTEED_NO_EVICT``, never preempts, and random prompts share no
    prefix, so block reuse changes nothing there).  Random-dataset prompts share no prefix, so
    caching acts only through preemption: a preempted request's computed blocks are hits when it
    is admitted again (``fleetplan.sim._kernels.features.state.own_segment``);
  - SGLang batches (``SchedulerPolicy.SGLANG``): a prefill batch whenever the waiting head fits,
    running decodes left out of it, else a decode batch (sgl-project/sglang
    ``python/sglang/srt/managers/scheduler.py`` ``get_next_batch_to_run`` / ``get_new_batch_prefill``);
    ``enable_mixed_chunk`` (SGLang's server argument of that name) mixes the running decodes into the prefill
    batch (``mix_with_running``), as vLLM's scheduler does (``SchedulerPolicy.VLLM_V1``).  The token
    budget of a batch defaults to SGLang's ``chunked_prefill_size``, set by the GPU's memory and divided
    among the ranks of data-parallel attention (``sglang_chunked_prefill_tokens``).  Not modelled:
    SGLang's admission against the running requests' reserved future tokens (``new_token_ratio``,
    ``PrefillAdder``) and its retraction of decodes; ``max_num_seqs`` (SGLang's ``max_running_requests``)
    keeps vLLM's default unless given.

``instances N`` puts N identical instances behind a least-outstanding-requests router.

Parallelism flags in each engine's meaning (``engine_parallelism``):

* vLLM (``vllm serve``; also used for the trtllm profile): ``tensor_parallel_size`` (TP),
  ``pipeline_parallel_size`` (PP), ``data_parallel_size`` (DP ranks, each TP GPUs with its own
  batch and KV cache), ``enable_expert_parallel`` (routed experts over all TP x DP GPUs, else
  each expert split over them): ``Parallelism.vllm``;
* SGLang (``python -m sglang.launch_server``, sgl-project/sglang ``python/sglang/srt/server_args.py``):
  ``tp_size`` is the GPUs of one server; ``ep_size`` spreads the routed experts over ``ep_size``
  of them (each split ``tp_size / ep_size`` ways); ``enable_dp_attention`` with ``dp_size`` D
  splits attention into D ranks of ``tp_size / D`` GPUs each (Frontier domains
  ``tp_attn = tp_size / D, dp_attn = D, tp_ffn = tp_size / ep_size, ep_ffn = ep_size``); without
  ``enable_dp_attention``, ``dp_size`` D launches D copies of the server (D instances);
  ``pp_size`` pipeline stages.
* ``nnodes``: nodes one instance spans; the step model places an instance on
  ``ceil(gpus / GPUS_PER_NODE)`` nodes (``fleetplan.perf.comm``), so any other count is refused.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.hardware import GpuProfile
from fleetplan.models import Dtype, ModelConfig
from fleetplan.perf.calibrate import CalibratedStepModel
from fleetplan.perf.comm import GPUS_PER_NODE
from fleetplan.perf.kv_budget import kv_budget, resolved_memory_fraction, vllm_batch_defaults
from fleetplan.perf.measured import measured_step_model
from fleetplan.perf.measured.coverage import Fp8Scheme
from fleetplan.perf.measured.source import TimingChoice, timing_choice
from fleetplan.perf.overheads import PredictorOptions
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.perf.quant import fp8_scaling_of
from fleetplan.perf.seam import StepModel
from fleetplan.perf.sglang_memory import sglang_chunked_prefill_tokens
from fleetplan.sim.features import CudaGraphConfig, GraphMode, PrefixCacheConfig, RuntimeFeatures
from fleetplan.sim.features.spec import PolicyConfig, SchedulerPolicy
from fleetplan.sim.features.speculative import SpeculativeConfig
from fleetplan.sim.spec import DEFAULT_BLOCK_SIZE_TOKENS, FleetSpec, InstanceRouter, PoolSpec, SchedulerLimits

__all__ = ["DEFAULT_MAX_MODEL_LEN_TOKENS", "ENGINE_DEFAULTS", "EngineArgs", "EngineDefaults", "TokenBudgetRule",
           "engine_parallelism", "serving_fleet", "sglang_chunked_prefill_tokens"]

DEFAULT_MAX_MODEL_LEN_TOKENS = 131_072  # Llama-3.1's context; longer only when asked
POOL_NAME = "instance"


@dataclass(frozen=True)
class EngineArgs:
    """The engine flags of one serving instance (vLLM names; ``None`` = vLLM's default)."""

    model: ModelConfig
    gpu: GpuProfile
    tensor_parallel_size: int = 1
    weight_dtype: Dtype = Dtype.BF16
    kv_cache_dtype: Dtype = Dtype.BF16
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None  # the engine's meaning (SGLang: mem_fraction_static); None: default
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool | None = None  # None: the engine's default (ENGINE_DEFAULTS)
    speculative: SpeculativeConfig | None = None
    cudagraph_capture_sizes: tuple[int, ...] | None = None
    options: PredictorOptions = PredictorOptions()
    perf_profile: CalibratedStepModel | None = None
    instances: int = 1
    parallelism_spec: Parallelism | None = None
    api_server_count: int = 1  # API server processes per instance (fleetplan.sim.api_server)
    engine: str = "vllm"  # the engine profile's name; its behaviour: ENGINE_DEFAULTS[engine] (``defaults``)
    engine_version: str | None = None  # release (e.g. "0.10.2"): picks vLLM's MXFP4 loader (perf.kv_budget)
    enable_mixed_chunk: bool = False  # SGLang's enable_mixed_chunk
    async_scheduling: bool = False  # vLLM's async_scheduling: the step's host time overlaps the GPU (docstring)
    timing_source: TimingChoice | str | None = TimingChoice.ROOFLINE  # auto / measured / roofline (docstring)
    block_size_tokens: int = DEFAULT_BLOCK_SIZE_TOKENS  # vLLM's block_size: tokens per KV-cache block

    def __post_init__(self) -> None:
        if self.engine not in ENGINE_DEFAULTS:
            raise UnknownNameError("engine", str(self.engine), sorted(ENGINE_DEFAULTS))
        if self.enable_mixed_chunk and self.defaults.scheduler is not SchedulerPolicy.SGLANG:
            raise ConfigError(f"`enable_mixed_chunk` is SGLang's flag; under the {self.engine} engine prefill chunks "
                              "and decodes share a step already (drop it, or use the sglang engine)",
                              param="enable_mixed_chunk", value=True)
        if self.async_scheduling and not self.defaults.async_scheduling_switch:
            raise ConfigError(f"`async_scheduling` is vLLM's engine argument; the {self.engine} engine has no such "
                              "switch (SGLang overlaps its scheduler with the GPU by default, its profile's per-step "
                              "host time says so); drop it or use the vllm engine", param="async_scheduling",
                              value=True)
        if self.enable_prefix_caching is not None and not isinstance(self.enable_prefix_caching, bool):
            raise ConfigError(f"`enable_prefix_caching` {self.enable_prefix_caching!r} must be true, false or None "
                              "(the engine's default)", param="enable_prefix_caching", value=self.enable_prefix_caching)
        for name in ("tensor_parallel_size", "instances", "block_size_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"`{name}` {value!r} must be an integer >= 1", param=name, value=value)
        for name in ("max_num_seqs", "max_num_batched_tokens", "max_model_len"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"`{name}` {value!r} must be an integer >= 1", param=name, value=value)
        u = self.gpu_memory_utilization
        if u is not None and (isinstance(u, bool) or not isinstance(u, int | float) or not 0 < u <= 1):
            raise ConfigError(f"`gpu_memory_utilization` {u!r} must be in (0, 1], e.g. 0.9, or None for the engine's "
                              "default", param="gpu_memory_utilization", value=u)
        if self.timing_source is not None:
            timing_choice(self.timing_source)  # an unknown choice: one line listing the three
        par = self.parallelism_spec
        if par is not None:
            if par.tp != self.tensor_parallel_size:
                raise ConfigError(f"`tensor_parallel_size` {self.tensor_parallel_size} differs from the parallelism's "
                                  f"tp={par.tp} ({par.flags()}); give the same TP in both or leave `parallelism_spec` "
                                  "unset", param="tensor_parallel_size", value=self.tensor_parallel_size)
            par.check_model(self.model)
        if self.perf_profile is not None and self.perf_profile.model != self.model.name:
            raise ConfigError(f"`perf_profile` was calibrated for {self.perf_profile.model}, not {self.model.name}; "
                              "give the matching `model` or recalibrate", param="perf_profile")

    @property
    def defaults(self) -> EngineDefaults:
        """What the engine does unless told otherwise (``ENGINE_DEFAULTS``)."""
        return ENGINE_DEFAULTS[self.engine]

    @property
    def prefix_caching(self) -> bool:
        """``enable_prefix_caching``, or the engine's default when it is None."""
        if self.enable_prefix_caching is None:
            return self.defaults.prefix_caching
        return self.enable_prefix_caching

    @property
    def scheduler_policy(self) -> SchedulerPolicy:
        """The engine's batch policy (SGLang's prefill-first batches) unless ``enable_mixed_chunk`` mixes the
        decodes in, as vLLM's steps do."""
        if self.enable_mixed_chunk:
            return SchedulerPolicy.VLLM_V1
        return self.defaults.scheduler

    @property
    def token_budget(self) -> int:
        """Tokens one scheduler (one data-parallel attention rank) may schedule a step, before the
        no-chunking rule: ``max_num_batched_tokens``, else the engine's default (module docstring)."""
        if self.max_num_batched_tokens is not None:
            return self.max_num_batched_tokens
        if self.defaults.token_budget is TokenBudgetRule.SGLANG:
            return sglang_chunked_prefill_tokens(self.gpu, self.parallelism.attn_dp)
        return vllm_batch_defaults(self.gpu)[1]

    @property
    def memory_fraction(self) -> float:
        """The memory fraction the KV budget applies, in the engine's meaning: ``gpu_memory_utilization``, else
        the engine's default (``perf.kv_budget.resolved_memory_fraction``: SGLang derives its
        ``mem_fraction_static`` from the GPU, the server's chunk and the parallel sizes; vLLM's 0.9)."""
        given = self.max_num_batched_tokens
        return resolved_memory_fraction(self.gpu, self.parallelism, self.gpu_memory_utilization, engine=self.engine,
                                        engine_version=self.engine_version,
                                        server_chunked_prefill_tokens=None if given is None
                                        else given * self.parallelism.attn_dp)

    @property
    def parallelism(self) -> Parallelism:
        """``parallelism_spec``, or TP over ``tensor_parallel_size`` GPUs with the MoE experts spread over them."""
        if self.parallelism_spec is not None:
            return self.parallelism_spec
        return Parallelism.vllm(tensor_parallel_size=self.tensor_parallel_size,
                                enable_expert_parallel=self.model.is_moe and self.tensor_parallel_size > 1)

    def step_model(self) -> StepModel:
        """``perf_profile``, else the measured tables where ``timing_source`` lets them time the instance
        (``measured`` without them: a ``ConfigError``), else ``predictor``."""
        if self.perf_profile is not None:
            return self.perf_profile
        p = self.predictor()
        scheme = Fp8Scheme.BLOCK if p.block_fp8 else Fp8Scheme.PER_TENSOR
        tables = self.defaults.measured_tables
        if tables is None:
            if self.timing_source is not None and timing_choice(self.timing_source) is TimingChoice.MEASURED:
                raise ConfigError(f"`timing_source` measured: the {self.engine} engine has no measured tables; use "
                                  "`timing_source` auto or roofline", param="timing_source", value="measured")
            return p
        return measured_step_model(p, tables, scheme, self.timing_source, host_overlapped=self.async_scheduling) or p

    def predictor(self) -> StepTimePredictor:
        """The step model; FP8 weights are block-scaled when the checkpoint's ``quantization_config`` gives a
        ``weight_block_size`` (``fleetplan.perf.quant.fp8_scaling_of``), else per-tensor."""
        options = dataclasses.replace(self.options, cpu_overhead_s=0.0) if self.async_scheduling else self.options
        return StepTimePredictor(self.model, self.gpu, self.parallelism, self.weight_dtype, self.kv_cache_dtype,
                                 options, fp8_scaling_of(self.model.weight_block_size))


class TokenBudgetRule(enum.Enum):
    """How an engine picks its per-step token budget when none is given (module docstring)."""

    VLLM = "vllm"  # vllm_batch_defaults: 8192 / 2048 tokens by GPU
    SGLANG = "sglang"  # chunked_prefill_size by GPU memory (sglang_chunked_prefill_tokens)


@dataclass(frozen=True)
class EngineDefaults:
    """What an engine does unless told otherwise (module docstring), one field per meaning of its name."""

    prefix_caching: bool
    scheduler: SchedulerPolicy = SchedulerPolicy.VLLM_V1  # batch policy (enable_mixed_chunk: VLLM_V1)
    token_budget: TokenBudgetRule = TokenBudgetRule.VLLM
    measured_tables: str | None = None  # aiconfigurator-core backend of its measured tables (None: none)
    async_scheduling_switch: bool = False  # takes vLLM's async_scheduling engine argument


ENGINE_DEFAULTS = {
    "vllm": EngineDefaults(prefix_caching=True, measured_tables="vllm", async_scheduling_switch=True),
    "sglang": EngineDefaults(prefix_caching=True, scheduler=SchedulerPolicy.SGLANG,
                             token_budget=TokenBudgetRule.SGLANG, measured_tables="sglang"),
    "trtllm": EngineDefaults(prefix_caching=False, measured_tables="trtllm"),
    "lmdeploy": EngineDefaults(prefix_caching=False),  # LMDeploy 0.1: no measured tables
}


def engine_parallelism(engine: str, model: ModelConfig, tensor_parallel_size: int = 1, pipeline_parallel_size: int = 1,
                       data_parallel_size: int = 1, enable_expert_parallel: bool = False, expert_parallel_size: int = 1,
                       enable_dp_attention: bool = False, nnodes: int | None = None) -> tuple[Parallelism, int]:
    """The ``Parallelism`` of one instance and the number of copies the flags launch, each flag read in
    ``engine``'s own meaning (module docstring); ``ConfigError`` when a flag does not belong to the engine or
    the model cannot take the sharding (``Parallelism.check_model``).

    Parameters
    ----------
    engine : str
        ``"sglang"`` for SGLang's meanings; any other engine profile (vllm, trtllm) reads vLLM's.
    tensor_parallel_size, pipeline_parallel_size, data_parallel_size : int
        vLLM's ``tensor_parallel_size``, ``pipeline_parallel_size``, ``data_parallel_size``; SGLang's
        ``tp_size``, ``pp_size``, ``dp_size``.
    enable_expert_parallel : bool
        vLLM only.
    expert_parallel_size, enable_dp_attention :
        SGLang only (its ``ep_size``, ``enable_dp_attention``).
    nnodes : int or None
        Nodes one instance spans (``None``: not stated).
    """
    tp, pp, dp, ep = tensor_parallel_size, pipeline_parallel_size, data_parallel_size, expert_parallel_size
    for name, value in (("tensor_parallel_size", tp), ("pipeline_parallel_size", pp), ("data_parallel_size", dp),
                        ("expert_parallel_size", ep)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"`{name}` {value!r} must be an integer >= 1", param=name, value=value)
    copies = 1
    if engine == "sglang":
        if enable_expert_parallel:
            raise ConfigError("`enable_expert_parallel` is vLLM's flag; under the sglang engine give the expert "
                              "parallel size as `expert_parallel_size`", param="enable_expert_parallel", value=True)
        if tp % ep:
            raise ConfigError(f"`expert_parallel_size` {ep} must divide `tensor_parallel_size` {tp} (SGLang splits "
                              f"each expert tp/ep ways over the server's tp GPUs); use an ep dividing {tp}",
                              param="expert_parallel_size", value=ep)
        if enable_dp_attention:
            if tp % dp:
                raise ConfigError(f"`data_parallel_size` {dp} must divide `tensor_parallel_size` {tp} with "
                                  f"`enable_dp_attention` (SGLang's attention ranks are tp/dp GPUs each); use a dp "
                                  f"dividing {tp}", param="data_parallel_size", value=dp)
            par = Parallelism(tp=tp, pp=pp, tp_attn=tp // dp, dp_attn=dp, tp_ffn=tp // ep, ep_ffn=ep)
        else:
            par, copies = Parallelism(tp=tp, pp=pp, ep=ep), dp
    else:
        if ep != 1 or enable_dp_attention:
            flag = "expert_parallel_size" if ep != 1 else "enable_dp_attention"
            raise ConfigError(f"`{flag}` is SGLang's flag; under vLLM give `enable_expert_parallel` (experts over "
                              "all TP x DP GPUs) and `data_parallel_size`, or use the sglang engine",
                              param=flag, value=ep if ep != 1 else True)
        par = Parallelism.vllm(tp, pp, dp, enable_expert_parallel)
    par.check_model(model)
    if nnodes is not None:
        need = math.ceil(par.gpus_per_replica / GPUS_PER_NODE)
        if isinstance(nnodes, bool) or not isinstance(nnodes, int) or nnodes != need:
            raise ConfigError(f"`nnodes` {nnodes!r} does not match the instance's {par.gpus_per_replica} GPUs "
                              f"({par.flags()}): the step model places it on ceil({par.gpus_per_replica} / "
                              f"{GPUS_PER_NODE}) = {need} node(s) of {GPUS_PER_NODE} GPUs; give `nnodes` {need} or "
                              "change the parallel sizes", param="nnodes", value=nnodes)
    return par, copies


def serving_fleet(args: EngineArgs) -> FleetSpec:
    """The one-pool ``FleetSpec`` of ``args.instances`` instances, each simulated as its ``attn_dp``
    data-parallel ranks (module docstring)."""
    par = args.parallelism
    ranks = par.attn_dp
    max_seqs = args.max_num_seqs or vllm_batch_defaults(args.gpu)[0]
    budget = kv_budget(args.model, args.gpu, par, weight_dtype=args.weight_dtype,
                       kv_dtype=args.kv_cache_dtype, gpu_memory_utilization=args.memory_fraction,
                       block_size_tokens=args.block_size_tokens, max_num_seqs=max_seqs,
                       max_num_batched_tokens=args.token_budget, engine=args.engine,
                       engine_version=args.engine_version)
    rank_blocks = budget.kv_blocks_per_replica // ranks
    capacity = rank_blocks * args.block_size_tokens
    max_len = args.max_model_len or min(capacity, DEFAULT_MAX_MODEL_LEN_TOKENS)
    if max_len > capacity:
        where = "one instance" if ranks == 1 else f"one of the instance's {ranks} data-parallel ranks"
        raise ConfigError(f"`max_model_len` {max_len} exceeds the KV cache of {where} ({capacity} tokens at "
                          f"`gpu_memory_utilization` {budget.gpu_memory_utilization:g}); lower it, raise "
                          "`tensor_parallel_size` or use `kv_cache_dtype` fp8", param="max_model_len", value=max_len)
    tokens = args.token_budget
    if not args.enable_chunked_prefill:
        tokens = max(tokens, max_len)
    graph = CudaGraphConfig()
    if args.cudagraph_capture_sizes is not None:
        graph = CudaGraphConfig(GraphMode.PIECEWISE, tuple(args.cudagraph_capture_sizes))
    features = RuntimeFeatures(cudagraph=graph, speculative=args.speculative,
                               prefix_cache=PrefixCacheConfig(enabled=args.prefix_caching),
                               policy=PolicyConfig(args.scheduler_policy))
    step = args.step_model()
    pool = PoolSpec(
        name=POOL_NAME, gpu=args.gpu.name, n_instances=args.instances * ranks, max_context_tokens=int(max_len),
        step_model=step,
        limits=SchedulerLimits(max_num_seqs=int(max_seqs), max_num_batched_tokens=int(tokens),
                               kv_blocks=int(rank_blocks), block_size_tokens=args.block_size_tokens),
        router=InstanceRouter.LEAST_OUTSTANDING, features=features, n_api_servers=args.api_server_count,
    )
    return FleetSpec(pools=(pool,))
