"""Compile a fleet spec and a request stream into the kernels' flat arrays.

This is the one seam between the spec world and the numba kernels
(``fleetplan.sim._kernels``): the kernels see only the arrays built here.

Between-pool routing (core paper §3.4) is decided here, vectorised, except
``least_loaded`` which needs the live state and is left to the kernel
(``req_pool = POOL_LEAST_LOADED``):

* length: pools sorted by ``max_context_tokens``; a request goes to the smallest
  pool with ``max_context >= prompt + output``.  A request that fits no pool goes
  to the largest one, where the kernel rejects it (it is counted, never dropped).
* compress_and_route: a request whose total is in ``(B, gamma * B]`` for a pool of
  context ``B`` (not the largest) and whose output is below ``B`` has its prompt cut
  to ``B - output`` and goes to that pool (Chen et al., 2026; with more than two
  pools the rule applies at every boundary, the first that accepts wins).
* random / round_robin: uniform over pools / pool ``i mod P`` in arrival order.
* model_tag: a tag is drawn per request from ``tag_shares`` (routing stream);
  among the pools serving the tag the length rule applies.

Request-level service (core paper eqs. 4-5), with ``n = max_num_seqs``, the
prefill chunk ``chunk = max_num_batched_tokens - n`` (the budget a full batch of
decodes leaves; the whole budget when it is not above ``n``), ``k = ceil(L_in / chunk)``
and ``t_iter(n)`` evaluated for the request's own context L = L_in + L_out when the
step model scales per-sequence cost by context (W + H·(L/L_ref)·n, as the analytical
model's ``SeqCostScaling.REQUEST_LENGTH``):

    E[S]            = (k + L_out) / n * t_iter(n)      (eq. 4, per-GPU service)
    slot hold time  = (k + L_out) * t_iter(n) = n * E[S]
    first token     = (k + 1) * t_iter(n)               (eq. 5 without the queue)

Each instance has ``n`` slots (``inst_slots``), and a request holds one slot for
``n * E[S]``: an instance finishing ``n`` requests per ``(k + L_out) t_iter(n)`` is
exactly the paper's one server with mean service ``E[S]``, and TTFT <= E2E holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan import rng as fp_rng
from fleetplan import workload as fp_workload
from fleetplan.errors import ConfigError
from fleetplan.perf.linear import N_STEP_COEFS
from fleetplan.sim._kernels import codes
from fleetplan.sim.api_server import ApiStage, with_api_servers
from fleetplan.sim.features.arrays import CompiledFeatures, RequestExtras
from fleetplan.sim.features.compile import (
    compile_features,
    eager_launch_s,
    eager_step_coefficients,
    graph_kv_blocks_lost,
)
from fleetplan.sim.pool_routing import route_pools
from fleetplan.sim.spec import ArrivalProcess, FleetSpec, InstanceRouter

__all__ = ["CompiledFleet", "CompiledRequests", "CompiledRun", "compile_fleet", "compile_requests", "compile_run",
           "draw_requests", "route_pools", "request_level_times"]

_INSTANCE_ROUTER_CODE = {
    InstanceRouter.LEAST_OUTSTANDING: codes.ROUTE_LEAST_OUTSTANDING,
    InstanceRouter.ROUND_ROBIN: codes.ROUTE_ROUND_ROBIN,
    InstanceRouter.RANDOM: codes.ROUTE_RANDOM,
    InstanceRouter.POWER_OF_TWO: codes.ROUTE_POWER_OF_TWO,
    InstanceRouter.PREFIX_AFFINITY: codes.ROUTE_PREFIX_AFFINITY,
}


@dataclass(frozen=True, eq=False)
class CompiledFleet:
    """Per-pool and per-instance arrays (pool ``p`` owns instances
    ``pool_inst_start[p] .. pool_inst_start[p+1]-1``)."""

    pool_names: tuple[str, ...]
    pool_inst_start: np.ndarray  # i4[P+1]
    pool_router: np.ndarray  # i4[P] within-pool router codes
    pool_max_context: np.ndarray  # i8[P] tokens
    pool_max_num_seqs: np.ndarray  # i4[P]
    pool_max_batched_tokens: np.ndarray  # i4[P]
    pool_kv_blocks: np.ndarray  # i8[P]
    pool_block_tokens: np.ndarray  # i4[P]
    pool_step_code: np.ndarray  # i4[P]
    pool_step_coef: np.ndarray  # f8[P, N_STEP_COEFS]
    pool_t_full_base_s: np.ndarray  # f8[P] t_iter(max_num_seqs) without the context term, eq. 3
    pool_t_full_per_ctx_s: np.ndarray  # f8[P] context term of t_iter(max_num_seqs), per token of L
    pool_prefill_chunk: np.ndarray  # i8[P] request-level prefill chunk (tokens)
    inst_slots: np.ndarray  # i4[I] = the pool's max_num_seqs
    inst_pool: np.ndarray  # i4[I] pool index of each instance

    @property
    def n_instances(self) -> int:
        return int(self.pool_inst_start[-1])


@dataclass(frozen=True, eq=False)
class CompiledRequests:
    """Per-request arrays, sorted by arrival."""

    arrival_s: np.ndarray  # f8[N] non-decreasing
    prompt_tokens: np.ndarray  # i8[N] as served (after any compression)
    original_prompt_tokens: np.ndarray  # i8[N] as drawn
    output_tokens: np.ndarray  # i8[N]
    req_pool: np.ndarray  # i4[N] pool index, or codes.POOL_LEAST_LOADED
    route_u: np.ndarray  # f8[N, 2] uniforms in [0, 1) for within-pool routing

    @property
    def n_requests(self) -> int:
        return int(self.arrival_s.size)

    @property
    def total_tokens(self) -> np.ndarray:
        return self.prompt_tokens + self.output_tokens


@dataclass(frozen=True, eq=False)
class CompiledRun:
    """Everything one kernel call needs."""

    fleet: CompiledFleet
    requests: CompiledRequests
    horizon_s: float
    # instance failures (fleetplan.sim.failures), None when off: per instance alternating
    # down/up times, instance k's in fail_event_s[fail_lo[k]:fail_lo[k + 1]]
    fail_event_s: np.ndarray | None = None  # f8[E]
    fail_lo: np.ndarray | None = None  # i8[I+1]
    # runtime features (#5): per-pool arrays (None = all off) and per-request session/prefix
    # arrays (None = plain standalone requests); docs/runtime_features_contract.md
    features: CompiledFeatures | None = None
    extras: RequestExtras | None = None
    # closed-loop clients (vLLM bench serve's max concurrency): at most this many requests
    # outstanding, the next released when one completes; 0 = open loop (iteration_level.py)
    max_in_flight: int = 0
    # log inter-token gaps (SimResult.step_log): the featureless kernel's steps, the feature kernel's histogram
    log_steps: bool = False
    # the API server stage (fleetplan.sim.api_server): requests sorted by release, arrival_s = release;
    # None = requests as drawn (no modelled API server cost, closed loop or sessions)
    api_stage: ApiStage | None = None


def compile_fleet(spec: FleetSpec) -> CompiledFleet:
    """Flatten ``spec`` into per-pool and per-instance arrays."""
    pools = spec.pools
    n_inst = np.array([p.n_instances for p in pools], dtype=np.int64)
    start = np.zeros(len(pools) + 1, dtype=np.int32)
    start[1:] = np.cumsum(n_inst)
    coef = np.zeros((len(pools), N_STEP_COEFS), dtype=np.float64)
    step_code = np.zeros(len(pools), dtype=np.int32)
    kv_blocks = np.zeros(len(pools), dtype=np.int64)
    for i, pool in enumerate(pools):
        step_code[i], coef[i] = eager_step_coefficients(pool)  # + launch_s for a kernel-only predictor with a mode set
        kv_blocks[i] = pool.limits.kv_blocks - graph_kv_blocks_lost(pool)
        if kv_blocks[i] * pool.limits.block_size_tokens < pool.max_context_tokens:
            raise ConfigError(
                f"pool {pool.name!r}: CUDA-graph capture memory leaves {kv_blocks[i]} KV blocks, fewer than one "
                f"{pool.max_context_tokens}-token request needs; capture fewer sizes or lower max_context_tokens"
            )
    max_seqs = np.array([p.limits.max_num_seqs for p in pools], dtype=np.int32)
    # t_iter(n, L) = t_base + t_ctx * L (t_ctx = 0 when per-sequence cost is not context-scaled); t_base has
    # the eager launch of a kernel-only predictor with a cudagraph mode set, as the step coefficients
    t_base = np.array([float(p.step_model.t_iter_s(p.limits.max_num_seqs, 0.0)) + eager_launch_s(p) for p in pools])
    t_ctx = np.array([float(p.step_model.t_iter_s(p.limits.max_num_seqs, 1.0)) for p in pools]) - t_base
    budget = np.array([p.limits.max_num_batched_tokens for p in pools], dtype=np.int64)
    chunk = np.where(budget > max_seqs, budget - max_seqs, budget)
    inst_pool = np.repeat(np.arange(len(pools), dtype=np.int32), n_inst)
    return CompiledFleet(
        pool_names=spec.pool_names(),
        pool_inst_start=start,
        pool_router=np.array([_INSTANCE_ROUTER_CODE[p.router] for p in pools], dtype=np.int32),
        pool_max_context=np.array([p.max_context_tokens for p in pools], dtype=np.int64),
        pool_max_num_seqs=max_seqs,
        pool_max_batched_tokens=np.array([p.limits.max_num_batched_tokens for p in pools], dtype=np.int32),
        pool_kv_blocks=kv_blocks,
        pool_block_tokens=np.array([p.limits.block_size_tokens for p in pools], dtype=np.int32),
        pool_step_code=step_code,
        pool_step_coef=coef,
        pool_t_full_base_s=t_base,
        pool_t_full_per_ctx_s=t_ctx,
        pool_prefill_chunk=chunk.astype(np.int64),
        inst_slots=max_seqs[inst_pool].astype(np.int32),
        inst_pool=inst_pool,
    )


def request_level_times(
    fleet: CompiledFleet, req_pool: np.ndarray, prompt_tokens: np.ndarray, output_tokens: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Slot hold time and first-token offset (s) per request, eqs. 4-5 (see module doc).

    With ``least_loaded`` routing the pool is chosen inside the kernel, so all
    pools must share the same ``(t_iter(n), n, chunk)``; otherwise ``ConfigError``.
    """
    pool = np.asarray(req_pool, dtype=np.int64)
    if np.any(pool < 0):
        params = np.stack(
            [fleet.pool_t_full_base_s, fleet.pool_t_full_per_ctx_s, fleet.pool_prefill_chunk.astype(float)],
            axis=1,
        )
        if not np.all(params == params[0]):
            raise ConfigError(
                "pool_router least_loaded at level request needs pools with identical step time and "
                "chunk size (service is fixed before routing); use level iteration or pool_router length"
            )
        pool = np.where(pool < 0, 0, pool)
    chunk = fleet.pool_prefill_chunk[pool]
    total = np.asarray(prompt_tokens, dtype=np.float64) + np.asarray(output_tokens, dtype=np.float64)
    t_full_s = fleet.pool_t_full_base_s[pool] + fleet.pool_t_full_per_ctx_s[pool] * total
    prefill_iters = -(-np.asarray(prompt_tokens, dtype=np.int64) // chunk)
    hold_s = (prefill_iters + np.asarray(output_tokens, dtype=np.int64)) * t_full_s
    first_token_offset_s = (prefill_iters + 1) * t_full_s
    return hold_s.astype(np.float64), first_token_offset_s.astype(np.float64)


def compile_requests(
    spec: FleetSpec,
    arrival_s: np.ndarray,
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    routing_rng: np.random.Generator,
) -> CompiledRequests:
    """Validate a request stream and route it.  ``route_u`` is drawn first from
    ``routing_rng``, then any pool-choice uniforms, so streams stay reproducible."""
    arrival = np.ascontiguousarray(arrival_s, dtype=np.float64)
    prompt = np.ascontiguousarray(prompt_tokens, dtype=np.int64)
    output = np.ascontiguousarray(output_tokens, dtype=np.int64)
    n = arrival.size
    if prompt.shape != (n,) or output.shape != (n,):
        raise ConfigError(f"{n} arrivals but {prompt.size} prompts and {output.size} outputs; give one each")
    if n and (not np.all(np.isfinite(arrival)) or np.any(np.diff(arrival) < 0) or arrival[0] < 0):
        raise ConfigError("arrival times must be finite, >= 0 and non-decreasing; sort the trace")
    if np.any(prompt < 1) or np.any(output < 1):
        raise ConfigError("every request needs prompt_tokens >= 1 and output_tokens >= 1; fix the workload")
    route_u = routing_rng.random((n, 2))
    req_pool, served_prompt = route_pools(spec, prompt, output, routing_rng)
    return CompiledRequests(
        arrival_s=arrival,
        prompt_tokens=np.ascontiguousarray(served_prompt, dtype=np.int64),
        original_prompt_tokens=prompt,
        output_tokens=output,
        req_pool=np.ascontiguousarray(req_pool, dtype=np.int32),
        route_u=route_u,
    )


def draw_requests(
    workload,
    rate_per_s: float,
    n_requests: int,
    seed: int,
    arrival: ArrivalProcess | str = ArrivalProcess.POISSON,
    cv: float = 1.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(arrival_s, prompt_tokens, output_tokens)`` from the named streams
    ``"arrivals"`` and ``"lengths"`` of ``seed``.

    ``replay`` takes the first ``n_requests`` of the workload's trace (timestamps
    rescaled to ``rate_per_s``; lengths from the trace); it needs a trace.
    """
    process = ArrivalProcess.parse(arrival)
    if process is ArrivalProcess.REPLAY:
        trace = getattr(workload, "trace", None)
        if trace is None:
            raise ConfigError(
                f"arrival replay needs a trace but workload {getattr(workload, 'name', '?')!r} is a CDF; "
                "give a trace file or use arrival poisson"
            )
        arrival_s = np.asarray(fp_workload.replay_arrivals_s(trace, rate_per_s), dtype=np.float64)
        n = min(int(n_requests), arrival_s.size)
        return (
            arrival_s[:n],
            np.asarray(trace.prompt_tokens[:n], dtype=np.int64),
            np.asarray(trace.output_tokens[:n], dtype=np.int64),
        )
    arrivals_rng = fp_rng.stream(seed, "arrivals")
    if process is ArrivalProcess.GAMMA:
        arrival_s = fp_workload.gamma_arrivals_s(arrivals_rng, rate_per_s, cv, n_requests)
    else:
        arrival_s = fp_workload.poisson_arrivals_s(arrivals_rng, rate_per_s, n_requests)
    prompt, output = workload.sample(fp_rng.stream(seed, "lengths"), n_requests)
    return np.asarray(arrival_s, dtype=np.float64), prompt, output


def compile_run(
    spec: FleetSpec,
    workload,
    rate_per_s: float,
    n_requests: int,
    seed: int,
    arrival: ArrivalProcess | str = ArrivalProcess.POISSON,
    cv: float = 1.0,
    horizon_s: float | None = None,
) -> CompiledRun:
    """Spec + workload + rate + seed -> the arrays of one simulation run.

    ``horizon_s = None`` runs until every accepted request finishes.  ``features`` holds the
    pools' runtime features (``fleetplan.sim.features.compile``; acceptance draws from the stream
    ``acceptance`` of ``seed``); ``extras`` stays None (sessions set it).  Pools whose step model
    carries an API server cost put their requests through it (``fleetplan.sim.api_server.with_api_servers``).
    """
    arrival_s, prompt, output = draw_requests(workload, rate_per_s, n_requests, seed, arrival, cv)
    requests = compile_requests(spec, arrival_s, prompt, output, fp_rng.stream(seed, "routing"))
    horizon = float("inf") if horizon_s is None else float(horizon_s)
    return with_api_servers(spec, CompiledRun(fleet=compile_fleet(spec), requests=requests, horizon_s=horizon,
                                              features=compile_features(spec, seed)))
