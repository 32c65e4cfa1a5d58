"""The API server stage in front of each pool: FCFS over the pool's processes, before the engine.

The cost model is ``fleetplan.perf.api_server`` (the analytic side: ``fleetplan.queueing.api_server``).  A
pool of G instances with ``n`` API server processes each (vLLM's ``api_server_count``) has G n processes
behind its load balancer; requests take the first free process in arrival order, hold it for
``t_api = s_per_request + s_per_token (prompt + output)`` and reach the engine once the process has
tokenised their prompt:

    start_j   = max(arrival_j, earliest free process)        (FCFS, c = G n servers)
    release_j = start_j + s_per_token prompt_j                (the engine's arrival)
    free      = start_j + t_api,j                             (the process's next free time)

So the pool cannot take requests faster than G n / E[t_api] (its queue grows without bound above it)
and a request's TTFT gains ``release_j - arrival_j``.  Requests the fleet sends to the least-loaded pool
(``req_pool`` = ``POOL_LEAST_LOADED``, chosen inside the kernel) and pools whose step model has no API
server cost pass unchanged.

Wiring (the lead's, ``fleetplan.sim.compile.compile_run`` and ``fleetplan.sim.engine``): after
``compile_requests``, ``release = pool_release_s(spec, requests)``; run the kernel on the requests
sorted by ``release`` (stable) with ``release`` as their arrival, and measure TTFT / E2E / queue wait from
the drawn arrival (``+ release - arrival`` on each row, rows back in drawn order).
"""

from __future__ import annotations

import heapq

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.perf.api_server import ApiServerCost

__all__ = ["api_server_release_s", "pool_release_s"]


def api_server_release_s(arrival_s, busy_s, tokenize_s, n_servers: int) -> np.ndarray:
    """Release times of requests through ``n_servers`` FCFS processes (module docstring); ``arrival_s``
    non-decreasing, ``busy_s`` / ``tokenize_s`` per request (seconds, tokenize <= busy)."""
    arrival = np.asarray(arrival_s, dtype=np.float64)
    busy = np.asarray(busy_s, dtype=np.float64)
    tok = np.asarray(tokenize_s, dtype=np.float64)
    if isinstance(n_servers, bool) or not isinstance(n_servers, int | np.integer) or n_servers < 1:
        raise ConfigError(f"n_servers={n_servers!r} must be an integer >= 1", param="n_servers", value=n_servers)
    if busy.shape != arrival.shape or tok.shape != arrival.shape:
        raise ConfigError(f"{arrival.size} arrivals but {busy.size} busy and {tok.size} tokenize times; give one each")
    if arrival.size and np.any(np.diff(arrival) < 0):
        raise ConfigError("arrival times must be non-decreasing; sort the requests")
    release = np.empty_like(arrival)
    free = [0.0] * int(n_servers)  # min-heap of the processes' next free times
    for j in range(arrival.size):
        start = max(arrival[j], free[0])
        heapq.heapreplace(free, start + busy[j])
        release[j] = start + tok[j]
    return release


def pool_release_s(spec, requests, n_servers: int = 1) -> np.ndarray:
    """Each request's release time into the engine: the API server stage of its pool (module
    docstring; ``spec`` a ``FleetSpec``, ``requests`` its ``CompiledRequests``, ``n_servers`` per instance)."""
    release = np.array(requests.arrival_s, dtype=np.float64)
    for p, pool in enumerate(spec.pools):
        cost = ApiServerCost.of_step_model(pool.step_model, n_servers)
        mine = np.flatnonzero(requests.req_pool == p)  # never POOL_LEAST_LOADED (< 0): chosen in the kernel
        if not cost.modelled or mine.size == 0:
            continue
        prompt, output = requests.prompt_tokens[mine], requests.output_tokens[mine]
        release[mine] = api_server_release_s(requests.arrival_s[mine], cost.busy_s(prompt, output),
                                             cost.tokenize_s(prompt), pool.n_instances * n_servers)
    return release
