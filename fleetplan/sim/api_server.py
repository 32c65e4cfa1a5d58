"""The API server stage in front of each pool: FCFS over the pool's processes, before the engine.

The cost model is ``fleetplan.perf.api_server`` (the analytic side: ``fleetplan.queueing.api_server``).  A
pool of G instances with ``n`` API server processes each (vLLM's ``api_server_count``) has G n processes
behind its load balancer; requests take the first free process in arrival order, hold it for
``t_api = s_per_request + s_per_token (prompt + output) + s_per_output_chunk ceil(output / stream_interval)``
and reach the engine once the process has
tokenised their prompt:

    start_j   = max(arrival_j, earliest free process)        (FCFS, c = G n servers)
    release_j = start_j + s_per_token prompt_j                (the engine's arrival)
    free      = start_j + t_api,j                             (the process's next free time)

So the pool cannot take requests faster than G n / E[t_api] (its queue grows without bound above it)
and a request's TTFT gains ``release_j - arrival_j``.  Requests the fleet sends to the least-loaded pool
(``req_pool`` = ``POOL_LEAST_LOADED``, chosen inside the kernel) and pools whose step model has no API
server cost pass unchanged.

Wiring (``with_api_servers``, called by ``fleetplan.sim.compile.compile_run`` and ``bench serve``): after
``compile_requests``, ``release = pool_release_s(spec, requests)``; the kernel runs on the requests sorted
by ``release`` (stable) with ``release`` as their arrival (``CompiledRun.api_stage`` keeps the order and
the drawn arrivals), and ``fleetplan.sim.engine`` measures TTFT / E2E / queue wait from the drawn arrival
and puts the rows back in drawn order (``release_s`` is then the drawn arrival, where the latencies
start).  A fleet without a modelled API server cost is left exactly as compiled (byte-identical
results).  Closed-loop clients (``max_in_flight``) and sessions (``extras``) release requests inside the
kernel, after completions, so the stage cannot be computed before it: their runs are left without it
(not modelled there).
"""

from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.perf.api_server import ApiServerCost

__all__ = ["ApiStage", "api_server_release_s", "pool_release_s", "through_api_servers", "with_api_servers"]


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


def pool_release_s(spec, requests) -> np.ndarray:
    """Each request's release time into the engine: the API server stage of its pool (module
    docstring; ``spec`` a ``FleetSpec``, ``requests`` its ``CompiledRequests``; each pool has
    ``pool.n_api_servers`` processes per instance)."""
    release = np.array(requests.arrival_s, dtype=np.float64)
    for p, pool in enumerate(spec.pools):
        cost = ApiServerCost.of_step_model(pool.step_model, pool.n_api_servers)
        mine = np.flatnonzero(requests.req_pool == p)  # never POOL_LEAST_LOADED (< 0): chosen in the kernel
        if not cost.modelled or mine.size == 0:
            continue
        prompt, output = requests.prompt_tokens[mine], requests.output_tokens[mine]
        release[mine] = api_server_release_s(requests.arrival_s[mine], cost.busy_s(prompt, output),
                                             cost.tokenize_s(prompt), pool.n_instances * pool.n_api_servers)
    return release


@dataclass(frozen=True, eq=False)
class ApiStage:
    """How a run's requests went through the API servers: kernel row ``k`` is drawn request
    ``order[k]``, which arrived at ``arrival_s[k]`` (kernel order; its kernel arrival is its release)."""

    order: np.ndarray  # i8[N]
    arrival_s: np.ndarray  # f8[N]

    def drawn_rows(self) -> np.ndarray:
        """The kernel row of each drawn request (``rows[order] = arange``): ``column[rows]`` is in drawn order."""
        rows = np.empty_like(self.order)
        rows[self.order] = np.arange(self.order.size)
        return rows


def through_api_servers(spec, requests):
    """``(requests as the engine sees them, ApiStage)``: sorted by release (stable), released at
    ``arrival_s``; ``(requests, None)`` unchanged when no pool of ``spec`` has a modelled cost."""
    if not any(ApiServerCost.of_step_model(pool.step_model).modelled for pool in spec.pools):
        return requests, None
    release = pool_release_s(spec, requests)
    order = np.argsort(release, kind="stable")
    permuted = {f.name: np.ascontiguousarray(getattr(requests, f.name)[order])
                for f in dataclasses.fields(requests) if f.name != "arrival_s"}
    engine_requests = dataclasses.replace(requests, arrival_s=np.ascontiguousarray(release[order]), **permuted)
    stage = ApiStage(order=order.astype(np.int64), arrival_s=np.ascontiguousarray(requests.arrival_s[order]))
    return engine_requests, stage


def with_api_servers(spec, run):
    """``run`` (a ``CompiledRun`` of ``spec``) with its requests through the API server stage (module
    docstring); unchanged without a modelled cost, for closed-loop clients and sessions, or when
    already staged."""
    if run.api_stage is not None or run.max_in_flight or run.extras is not None:
        return run
    requests, stage = through_api_servers(spec, run.requests)
    return run if stage is None else dataclasses.replace(run, requests=requests, api_stage=stage)
