"""Runtime features of a pool: CUDA graphs, speculative decoding / MTP, prefix caching,
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

Its public names are ``spec.__all__``, as when ``fleetplan.sim.features`` was one module.
"""

from __future__ import annotations

from fleetplan.sim.features.spec import *  # noqa: F403
from fleetplan.sim.features.spec import __all__  # noqa: F401
