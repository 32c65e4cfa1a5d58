"""One serving instance from vLLM engine arguments: the simulator's ``FleetSpec``.

``EngineArgs`` carries the ``vllm serve`` flags ``bench serve`` models (vLLM's names, seconds
and tokens inside) and ``serving_fleet`` turns them into a one-pool ``FleetSpec``:

* step model: the operator-level ``StepTimePredictor`` of the model on the GPU at
  ``tensor_parallel_size`` (MoE models with expert parallelism over the TP group), with the
  engine profile's efficiencies and overheads (``fleetplan.perf.engine_profile``), or a
  calibrated ``perf_profile`` (``fleetplan perf calibrate``);
* KV blocks: ``fleetplan.perf.kv_budget`` at ``gpu_memory_utilization`` (vLLM's accounting);
* limits: ``max_num_seqs`` and ``max_num_batched_tokens`` default to vLLM's API-server
  defaults (``fleetplan.perf.kv_budget.vllm_batch_defaults``; ``EngineArgs.get_batch_defaults`` in
  vllm-project/vllm ``vllm/engine/arg_utils.py``):
  1024 sequences / 8192 tokens on GPUs with at least 70 GiB that are not A100s, else 256 /
  2048; ``enable_chunked_prefill false`` raises the token budget to ``max_model_len``
  (a whole prompt per step, vLLM's rule without chunking);
* ``max_model_len`` defaults to the KV capacity of the instance, capped at
  ``DEFAULT_MAX_MODEL_LEN_TOKENS``;
* runtime features: ``cudagraph_capture_sizes`` (graphs on, ``piecewise`` mode; without
  it, every step kernel-only, vLLM's default graphs without padding), ``speculative_config``,
  ``enable_prefix_caching`` (``fleetplan.sim.features``).

``instances N`` puts N identical instances behind a least-outstanding-requests router.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetplan.errors import ConfigError
from fleetplan.hardware import GpuProfile
from fleetplan.models import Dtype, ModelConfig
from fleetplan.perf.calibrate import CalibratedStepModel
from fleetplan.perf.kv_budget import kv_budget, vllm_batch_defaults
from fleetplan.perf.overheads import PredictorOptions
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.sim.features import CudaGraphConfig, GraphMode, PrefixCacheConfig, RuntimeFeatures
from fleetplan.sim.features.speculative import SpeculativeConfig
from fleetplan.sim.spec import DEFAULT_BLOCK_SIZE_TOKENS, FleetSpec, InstanceRouter, PoolSpec, SchedulerLimits

__all__ = ["DEFAULT_MAX_MODEL_LEN_TOKENS", "EngineArgs", "serving_fleet"]

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
    gpu_memory_utilization: float = 0.9
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = False
    speculative: SpeculativeConfig | None = None
    cudagraph_capture_sizes: tuple[int, ...] | None = None
    options: PredictorOptions = PredictorOptions()
    perf_profile: CalibratedStepModel | None = None
    instances: int = 1
    api_server_count: int = 1  # API server processes per instance (fleetplan.sim.api_server)

    def __post_init__(self) -> None:
        for name in ("tensor_parallel_size", "instances"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"`{name}` {value!r} must be an integer >= 1", param=name, value=value)
        for name in ("max_num_seqs", "max_num_batched_tokens", "max_model_len"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"`{name}` {value!r} must be an integer >= 1", param=name, value=value)
        u = self.gpu_memory_utilization
        if isinstance(u, bool) or not isinstance(u, int | float) or not 0 < u <= 1:
            raise ConfigError(f"`gpu_memory_utilization` {u!r} must be in (0, 1], e.g. 0.9",
                              param="gpu_memory_utilization", value=u)
        if self.perf_profile is not None and self.perf_profile.model != self.model.name:
            raise ConfigError(f"`perf_profile` was calibrated for {self.perf_profile.model}, not {self.model.name}; "
                              "give the matching `model` or recalibrate", param="perf_profile")

    @property
    def parallelism(self) -> Parallelism:
        return Parallelism.vllm(tensor_parallel_size=self.tensor_parallel_size,
                                enable_expert_parallel=self.model.is_moe and self.tensor_parallel_size > 1)

    def predictor(self) -> StepTimePredictor:
        return StepTimePredictor(self.model, self.gpu, self.parallelism, self.weight_dtype, self.kv_cache_dtype,
                                 self.options)


def serving_fleet(args: EngineArgs) -> FleetSpec:
    """The one-pool ``FleetSpec`` of ``args.instances`` instances (module docstring)."""
    seqs_default, tokens_default = vllm_batch_defaults(args.gpu)
    max_seqs = args.max_num_seqs or seqs_default
    budget = kv_budget(args.model, args.gpu, args.parallelism, weight_dtype=args.weight_dtype,
                       kv_dtype=args.kv_cache_dtype, gpu_memory_utilization=args.gpu_memory_utilization,
                       block_size_tokens=DEFAULT_BLOCK_SIZE_TOKENS, max_num_seqs=max_seqs,
                       max_num_batched_tokens=args.max_num_batched_tokens or tokens_default)
    capacity = budget.kv_blocks_per_replica * DEFAULT_BLOCK_SIZE_TOKENS
    max_len = args.max_model_len or min(capacity, DEFAULT_MAX_MODEL_LEN_TOKENS)
    if max_len > capacity:
        raise ConfigError(f"`max_model_len` {max_len} exceeds the KV cache of one instance ({capacity} tokens at "
                          f"`gpu_memory_utilization` {args.gpu_memory_utilization}); lower it, raise "
                          "`tensor_parallel_size` or use `kv_cache_dtype` fp8", param="max_model_len", value=max_len)
    tokens = args.max_num_batched_tokens or tokens_default
    if not args.enable_chunked_prefill:
        tokens = max(tokens, max_len)
    graph = CudaGraphConfig()
    if args.cudagraph_capture_sizes is not None:
        graph = CudaGraphConfig(GraphMode.PIECEWISE, tuple(args.cudagraph_capture_sizes))
    features = RuntimeFeatures(cudagraph=graph, speculative=args.speculative,
                               prefix_cache=PrefixCacheConfig(enabled=bool(args.enable_prefix_caching)))
    step = args.perf_profile if args.perf_profile is not None else args.predictor()
    pool = PoolSpec(
        name=POOL_NAME, gpu=args.gpu.name, n_instances=args.instances, max_context_tokens=int(max_len),
        step_model=step,
        limits=SchedulerLimits(max_num_seqs=int(max_seqs), max_num_batched_tokens=int(tokens),
                               kv_blocks=int(budget.kv_blocks_per_replica)),
        router=InstanceRouter.LEAST_OUTSTANDING, features=features, n_api_servers=args.api_server_count,
    )
    return FleetSpec(pools=(pool,))
