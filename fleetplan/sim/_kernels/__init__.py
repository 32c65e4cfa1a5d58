"""Numba kernels of the discrete-event simulator (numpy + numba only).

Two kernels, each with a pure-Python twin in ``tests/reference/``:

* ``run_request_level`` — every instance an FCFS queue with ``inst_slots`` servers;
* ``run_iteration_level`` — continuous batching with chunked prefill, KV blocks and
  recompute preemption (vLLM v1 style).

Integer codes shared with the Python side live in ``codes``; all jit options in ``jit``; the named
tuples that carry the kernels' arguments and state in ``groups``.  The feature kernel (runtime
features, sessions) is the package ``features/``.
"""

from fleetplan.sim._kernels.codes import (
    EV_ARRIVAL,
    EV_STEP_END,
    N_ROUTERS,
    N_STEP_COEFS,
    POOL_LEAST_LOADED,
    ROUTE_LEAST_OUTSTANDING,
    ROUTE_POWER_OF_TWO,
    ROUTE_RANDOM,
    ROUTE_ROUND_ROBIN,
    STATUS_DONE,
    STATUS_REJECTED,
    STATUS_UNFINISHED,
    STEP_MODEL_LINEAR,
)

__all__ = [
    "EV_ARRIVAL", "EV_STEP_END", "N_ROUTERS", "N_STEP_COEFS", "POOL_LEAST_LOADED",
    "ROUTE_LEAST_OUTSTANDING", "ROUTE_POWER_OF_TWO", "ROUTE_RANDOM", "ROUTE_ROUND_ROBIN",
    "STATUS_DONE", "STATUS_REJECTED", "STATUS_UNFINISHED", "STEP_MODEL_LINEAR",
    "run_iteration_level", "run_request_level",
]

#: The kernels, loaded on first use (PEP 562): a module that needs only the integer codes (the flow
#: network's path policies, the PDD command's options) imports the package without numba.
def __getattr__(name: str):
    if name == "run_iteration_level":
        from fleetplan.sim._kernels.iteration_level import run_iteration_level as value
    elif name == "run_request_level":
        from fleetplan.sim._kernels.request_level import run_request_level as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
