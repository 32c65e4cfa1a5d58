"""Runtime features of a pool (#5): CUDA graphs, speculative decoding / MTP, prefix caching,
scheduler policies (vLLM v1, SGLang, SPF, MLFQ, H2Q-BR), prefix-affinity routing and multi-round
sessions.  Semantics: docs/runtime_features_contract.md.

Pipeline (entry point of the specs: ``spec``; of a run: ``engine``):

* ``spec``: frozen, validated per-pool ``RuntimeFeatures`` (``CudaGraphConfig``, ``PolicyConfig``,
  ``PrefixCacheConfig``); ``speculative``: ``SpeculativeConfig``; ``toml``: the fleet TOML's
  ``[pools.features]`` table;
* ``compile``: ``RuntimeFeatures`` of a fleet -> ``arrays.CompiledFeatures`` (and ``RequestExtras``,
  the per-round session arrays, built by ``fleetplan.sim.sessions``);
* ``engine``: when the feature kernel runs and the per-pool figures it yields; ``run``: the
  kernel's Python wrapper (``fleetplan.sim._kernels.features``), imported on first use.

The names below were public as ``fleetplan.sim.features`` before it became a package.
"""

from __future__ import annotations

from fleetplan.sim.features.spec import (
    FRONTIER_CAPTURE_SIZES,
    POLICY_PARAM_KEYS,
    CudaGraphConfig,
    GraphMode,
    PolicyConfig,
    PrefixCacheConfig,
    RuntimeFeatures,
    SchedulerPolicy,
    SpeculativeConfig,
    policy_params_from_json,
    vllm_default_capture_sizes,
)

__all__ = [
    "CudaGraphConfig",
    "FRONTIER_CAPTURE_SIZES",
    "GraphMode",
    "POLICY_PARAM_KEYS",
    "PolicyConfig",
    "PrefixCacheConfig",
    "RuntimeFeatures",
    "SchedulerPolicy",
    "SpeculativeConfig",
    "policy_params_from_json",
    "vllm_default_capture_sizes",
]
