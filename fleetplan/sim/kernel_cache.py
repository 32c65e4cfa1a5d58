"""Whether the simulator kernels a run needs are already in numba's on-disk cache.

Numba compiles a kernel on its first call and, with ``cache=True`` (``_kernels/jit.py``), stores
the machine code next to the source (``__pycache__/*.nbi`` index + ``*.nbc`` data) or under
``NUMBA_CACHE_DIR``.  A fresh install therefore spends its first run compiling; the CLI says so
before it starts (``uncached_kernels`` + ``compile_estimate_s``), without compiling or running
anything: the check reads each kernel's small index file, exactly as numba does when it looks for a
cached entry (a missing, foreign-version or stale index counts as cold).

Only the top-level kernel of each engine is checked: its cache entry holds the helpers it calls.
Importing a kernel module defines its dispatchers but compiles nothing.
"""

from __future__ import annotations

import importlib
from enum import Enum

__all__ = ["COMPILE_ESTIMATE_S", "Kernel", "compile_estimate_s", "load_iteration_kernel", "uncached_kernels"]


class Kernel(Enum):
    """Top-level simulator kernels (one per engine)."""

    ITERATION = "iteration"  # featureless iteration level (optimize's verification, simulate)
    FAILURES = "failures"  # iteration level with instance failures (instance failures, reliability)
    FEATURES = "features"  # runtime features and sessions
    REQUEST = "request"  # request level (Level.REQUEST, validate queueing)
    PDD = "pdd"  # prefill-decode disaggregation (simulate pdd, optimize's pdd/afd topologies)


_WHERE = {
    Kernel.ITERATION: ("fleetplan.sim._kernels.iteration_level", "run_iteration_level"),
    Kernel.FAILURES: ("fleetplan.sim._kernels.iteration_level", "run_iteration_level_failures"),
    Kernel.FEATURES: ("fleetplan.sim._kernels.features.level", "run_iteration_features"),
    Kernel.REQUEST: ("fleetplan.sim._kernels.request_level", "run_request_level"),
    Kernel.PDD: ("fleetplan.sim._kernels.pdd.kernel", "run_pdd"),
}

#: Cold compile time of each kernel, seconds, on a 2-core machine (numba 0.68; helpers compiled as
#: deferred IR, ``sim/_kernels/jit.py``): first-call timings with an empty cache while another job kept
#: the cores busy (load 3.5), so on the high side.  Only an order of magnitude for the notice.
COMPILE_ESTIMATE_S = {
    Kernel.ITERATION: 6.0,
    Kernel.FAILURES: 10.0,
    Kernel.FEATURES: 17.0,
    Kernel.REQUEST: 2.0,
    Kernel.PDD: 10.0,
}


def _is_cached(module: str, name: str) -> bool:
    dispatcher = getattr(importlib.import_module(module), name)
    try:
        index = dispatcher._cache._cache_file._load_index()  # numba internals: read-only use
    except (AttributeError, OSError, ValueError, EOFError, ImportError):
        return True  # a numba without these internals: say nothing rather than guess
    return bool(index)


def uncached_kernels(kernels: tuple[Kernel, ...] | list[Kernel]) -> tuple[Kernel, ...]:
    """Those of ``kernels`` (deduplicated, in order) that have no usable entry in numba's cache.

    Always empty under ``NUMBA_DISABLE_JIT=1`` (nothing is compiled)."""
    from numba.core import config

    if config.DISABLE_JIT:
        return ()
    out: list[Kernel] = []
    for k in kernels:
        if k not in out and not _is_cached(*_WHERE[k]):
            out.append(k)
    return tuple(out)


def compile_estimate_s(kernels: tuple[Kernel, ...] | list[Kernel]) -> float:
    """Rough seconds to compile ``kernels`` on an idle 2-core machine."""
    return float(sum(COMPILE_ESTIMATE_S[k] for k in set(kernels)))


def load_iteration_kernel() -> None:
    """Call the featureless iteration kernel once on two tiny requests, so that numba loads it from
    its cache (or compiles it) now rather than on the first real run; the call has the argument types
    every run has (``sim.compile``'s arrays).  A head start only: a failure here surfaces, with its own
    context, when the kernel is next called."""
    import numpy as np

    from fleetplan.perf.linear import LinearStepModel
    from fleetplan.sim.compile import CompiledRun, compile_fleet, compile_requests
    from fleetplan.sim.engine import _run_kernel
    from fleetplan.sim.spec import FleetSpec, Level, PoolSpec, SchedulerLimits

    pool = PoolSpec(name="p", gpu="warm-up", n_instances=1, max_context_tokens=64,
                    step_model=LinearStepModel(1e-3, 1e-4, 0.0, 64.0),
                    limits=SchedulerLimits(max_num_seqs=2, max_num_batched_tokens=64, kv_blocks=16))
    spec = FleetSpec((pool,))
    requests = compile_requests(spec, np.array([0.0, 0.5]), np.array([8, 8]), np.array([2, 2]),
                                np.random.default_rng(0))
    _run_kernel(CompiledRun(fleet=compile_fleet(spec), requests=requests, horizon_s=float("inf")), Level.ITERATION)
