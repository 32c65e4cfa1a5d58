"""One large simulation split into independent per-pool tasks, with an exact merge.

When the between-pool router is stateless (``length``, ``compress_and_route``, ``random``,
``round_robin``, ``model_tag``) every request's pool is decided before the kernel runs
(``fleetplan.sim.pool_routing``), and nothing in the kernels couples two pools: each instance has
its own queue, KV blocks and step clock, within-pool routing reads only the pool's own instances
and the request's pre-drawn ``route_u``, and events of different pools never reorder each other's
work.  So, given the routed request stream, the pools are independent simulations.

``simulate_pools_parallel`` compiles the stream once (the same arrays as ``simulate``: same
seed streams ``arrivals``, ``lengths``, ``routing``), gives each pool its requests and its slice of
the fleet as one task for ``map_fn``, and merges the kernels' raw outputs back into full-size
arrays (instance indices shifted by the pool's first instance) before building the per-request
table and summary exactly as ``simulate`` does.  The result therefore equals ``simulate``'s,
number for number; ``PoolSplitResult.split_note`` says so.  ``least_loaded`` picks pools from live
load inside the kernel and is refused with a ``ConfigError``.  Instance failures
(``simulate(..., failures=...)``) are not offered here: use ``simulate``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.parallel import MapFn, ProgressFn, TaskFailedError, in_input_order, serial_map
from fleetplan.sim._kernels import codes
from fleetplan.sim.compile import CompiledFleet, CompiledRequests, CompiledRun, compile_run
from fleetplan.sim.engine import (  # the engine's own steps, so the merge cannot drift from simulate
    DEFAULT_N_REQUESTS,
    RunOptions,
    _instance_stats,
    _request_frame,
    _run_kernel,
    _validate,
)
from fleetplan.sim.features.compile import features_on
from fleetplan.sim.result import SimResult, summarise
from fleetplan.sim.spec import FleetSpec, Level, PoolRouter

__all__ = ["SPLIT_NOTE", "STATELESS_POOL_ROUTERS", "PoolSplitResult", "simulate_pools_parallel"]

STATELESS_POOL_ROUTERS = tuple(r for r in PoolRouter if r is not PoolRouter.LEAST_LOADED)
SPLIT_NOTE = ("pools simulated as independent tasks (stateless pool router) and merged; "
              "every number equals a single simulate() run with the same seed")
_REQUEST_OUTPUTS = ("first_sched_s", "first_token_s", "done_s", "preemptions", "failures", "status")
_REQUEST_FILL = {"first_sched_s": np.inf, "first_token_s": np.inf, "done_s": np.inf,
                 "status": codes.STATUS_UNFINISHED}
_INSTANCE_OUTPUTS = ("busy_s", "seq_s", "steps", "tokens", "busy_slot_s")


@dataclass(frozen=True, eq=False)
class PoolSplitResult(SimResult):
    """A ``SimResult`` built from per-pool tasks; ``n_pool_tasks`` pools had requests to run."""

    n_pool_tasks: int = 0
    split_note: str = SPLIT_NOTE


def _pool_run(run: CompiledRun, p: int) -> CompiledRun:
    """Pool ``p`` alone: its slice of the fleet arrays and its requests (in arrival order)."""
    f, r = run.fleet, run.requests
    lo, hi = int(f.pool_inst_start[p]), int(f.pool_inst_start[p + 1])
    one = slice(p, p + 1)
    fleet = CompiledFleet(
        pool_names=(f.pool_names[p],),
        pool_inst_start=np.array([0, hi - lo], dtype=np.int32),
        pool_router=f.pool_router[one].copy(),
        pool_max_context=f.pool_max_context[one].copy(),
        pool_max_num_seqs=f.pool_max_num_seqs[one].copy(),
        pool_max_batched_tokens=f.pool_max_batched_tokens[one].copy(),
        pool_kv_blocks=f.pool_kv_blocks[one].copy(),
        pool_block_tokens=f.pool_block_tokens[one].copy(),
        pool_step_code=f.pool_step_code[one].copy(),
        pool_step_coef=np.ascontiguousarray(f.pool_step_coef[one]),
        pool_t_full_base_s=f.pool_t_full_base_s[one].copy(),
        pool_t_full_per_ctx_s=f.pool_t_full_per_ctx_s[one].copy(),
        pool_prefill_chunk=f.pool_prefill_chunk[one].copy(),
        inst_slots=f.inst_slots[lo:hi].copy(),
        inst_pool=np.zeros(hi - lo, dtype=np.int32),
    )
    mine = r.req_pool == p
    requests = CompiledRequests(
        arrival_s=r.arrival_s[mine],
        prompt_tokens=r.prompt_tokens[mine],
        original_prompt_tokens=r.original_prompt_tokens[mine],
        output_tokens=r.output_tokens[mine],
        req_pool=np.zeros(int(mine.sum()), dtype=np.int32),
        route_u=np.ascontiguousarray(r.route_u[mine]),
    )
    return CompiledRun(fleet=fleet, requests=requests, horizon_s=run.horizon_s)


def _run_pool_task(task: tuple[CompiledRun, Level]) -> dict[str, np.ndarray]:
    """One pool's kernel outputs (a picklable task for ``map_fn``)."""
    sub_run, level = task
    return _run_kernel(sub_run, level)


def _merge(run: CompiledRun, pools: list[int], outputs: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Per-pool kernel outputs scattered back into arrays of the whole run (the same keys, dtypes
    and fill values as the engine's own allocation)."""
    n, n_inst = run.requests.n_requests, run.fleet.n_instances
    first = outputs[0]
    out = {"inst": np.full(n, -1, dtype=np.int32)}
    for key in _REQUEST_OUTPUTS:
        if key in first:
            out[key] = np.full(n, _REQUEST_FILL.get(key, 0), dtype=first[key].dtype)
    for key in _INSTANCE_OUTPUTS:
        if key in first:
            out[key] = np.zeros(n_inst, dtype=first[key].dtype)
    start = run.fleet.pool_inst_start
    for p, sub in zip(pools, outputs, strict=True):
        rows = np.flatnonzero(run.requests.req_pool == p)
        lo, hi = int(start[p]), int(start[p + 1])
        out["inst"][rows] = np.where(sub["inst"] >= 0, sub["inst"] + lo, -1)
        for key in _REQUEST_OUTPUTS:
            if key in out:
                out[key][rows] = sub[key]
        for key in _INSTANCE_OUTPUTS:
            if key in out:
                out[key][lo:hi] = sub[key]
    return out


def simulate_pools_parallel(
    spec: FleetSpec,
    workload,
    rate_per_s: float,
    n_requests: int = DEFAULT_N_REQUESTS,
    level: Level | str = Level.ITERATION,
    seed: int = 0,
    map_fn: MapFn | None = None,
    progress: ProgressFn | None = None,
    **options,
) -> PoolSplitResult:
    """``simulate`` (same arguments, same result) with each pool run as a task through ``map_fn``;
    ``options`` are ``simulate``'s keyword options (``RunOptions``: arrival, cv, horizon_s,
    warmup_fraction, slo_ttft_s, slo_tpot_s).

    ``progress(done, total)`` counts finished pools.  Raises ``ConfigError`` for the
    ``least_loaded`` pool router and ``TaskFailedError`` when a pool's task fails every attempt.
    """
    if spec.pool_router not in STATELESS_POOL_ROUTERS:
        raise ConfigError(
            f"pool router {spec.pool_router.value!r} decides pools from live load inside the simulation, so pools "
            f"cannot run as independent tasks; use simulate() or a stateless router "
            f"({', '.join(r.value for r in STATELESS_POOL_ROUTERS)})"
        )
    if features_on(spec):
        raise ConfigError("pools with runtime features (CUDA graphs, speculative decoding, prefix caching, a "
                          "scheduler policy other than vllm_v1) run in the feature kernel as one task; use simulate()")
    o = RunOptions.of(options)
    _validate(rate_per_s, n_requests, o.warmup_fraction, o.cv, o.horizon_s, o.slo_ttft_s, o.slo_tpot_s, seed)
    level = Level.parse(level)
    run = compile_run(spec, workload, float(rate_per_s), int(n_requests), int(seed), o.arrival, o.cv, o.horizon_s)
    counts = np.bincount(run.requests.req_pool, minlength=len(spec.pools))
    pools = [p for p in range(len(spec.pools)) if counts[p] > 0]  # a pool with no requests stays idle
    tasks = [(_pool_run(run, p), level) for p in pools]
    outcomes = []
    for outcome in (map_fn or serial_map)(_run_pool_task, tasks):
        outcomes.append(outcome)
        if progress is not None:
            progress(len(outcomes), len(tasks))
    outputs = []
    for p, outcome in zip(pools, in_input_order(outcomes, len(tasks)), strict=True):
        if not outcome.ok:
            raise TaskFailedError(f"pool {spec.pools[p].name!r} simulation failed: {outcome.error}; fix the cause "
                                  "and rerun")
        outputs.append(outcome.value)
    out = _merge(run, pools, outputs)  # every request has a pool: outputs is never empty
    n = run.requests.n_requests
    frame = _request_frame(run, out, min(int(math.floor(o.warmup_fraction * n)), n - 1))
    util, batch = _instance_stats(run, out, level)
    summary = summarise(
        frame, pool_names=run.fleet.pool_names, pool_gpus=tuple(p.gpu for p in spec.pools),
        inst_pool=run.fleet.inst_pool, inst_utilisation=util, inst_mean_batch=batch, level=level.value,
        rate_per_s=float(rate_per_s), warmup_fraction=o.warmup_fraction, slo_ttft_s=o.slo_ttft_s,
        slo_tpot_s=o.slo_tpot_s, horizon_s=run.horizon_s, max_model_len_tokens=spec.max_model_len_tokens,
    )
    return PoolSplitResult(requests=frame, summary=summary, n_pool_tasks=len(tasks))
