"""Run the discrete-event simulator: validate, compile, call a kernel, wrap results.

``simulate`` is the public wrapper around the numba kernels in
``fleetplan.sim._kernels`` (stumpy-style kernel/wrapper split): it validates its
arguments, compiles the spec and request stream into flat arrays
(``fleetplan.sim.compile``), allocates the outputs, runs one kernel and builds a
``SimResult``.  Two fidelities (``Level``):

* ``request``: the core paper's DES (inference-fleet-sim §3.1): each instance has
  ``max_num_seqs`` slots with FCFS queueing; service per eqs. (4)-(5).
* ``iteration``: vLLM-v1 continuous batching, one event per engine step.

``failures=FailureSpec(...)`` (iteration level only) injects instance failures
(``fleetplan.sim.failures``): each instance's down/up times are drawn from the stream
``"failures"`` before the run and passed to ``run_iteration_level_failures``; without it the
failure-free kernel runs (failures off and MTTR = 0 give bit-identical results).

Runtime features (``fleetplan.sim.features``) run the feature kernel (``features.engine``); a
round's TTFT/E2E are measured from its ``release_s``.

``replicate`` repeats ``simulate`` over independent seeds
(``fleetplan.rng.task_seed(seed, "replication", r)``) and reports the mean P99
TTFT/TPOT with a Student-t confidence interval; ``upper_p99_ttft_s`` (the upper
end of the interval) is what verification compares with the SLO.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fleetplan import rng as fp_rng
from fleetplan.errors import ConfigError
from fleetplan.sim._kernels import codes
from fleetplan.sim._kernels.groups import FailureInputs, FleetInputs, IterationOutputs, RequestInputs, StepLog
from fleetplan.sim._kernels.iteration_level import (
    run_iteration_level,
    run_iteration_level_failures,
    run_iteration_level_logged,
)
from fleetplan.sim._kernels.request_level import run_request_level
from fleetplan.sim.compile import CompiledRun, compile_run, request_level_times
from fleetplan.sim.defaults import DEFAULT_N_REQUESTS, DEFAULT_WARMUP_FRACTION
from fleetplan.sim.failures import FailureSpec, draw_failure_schedule, summarise_failures
from fleetplan.sim.features.engine import pool_feature_figures, run_feature_kernel, uses_feature_kernel
from fleetplan.sim.result import STATUS_NAMES, SimResult, summarise
from fleetplan.sim.shared_prefix import SharedPrefix
from fleetplan.sim.spec import ArrivalProcess, FleetSpec, Level

if TYPE_CHECKING:
    import pandas as pd  # imported where a table is built (start-up time)

__all__ = ["run_compiled", "simulate", "uses_feature_kernel", "with_failures"]

NO_POOL = "(none)"  # a rejected request that no pool could take (least_loaded routing)


def _check_positive(name: str, value: float | None, fix: str, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if not ok:
        raise ConfigError(f"{name} = {value!r} must be a finite number > 0; {fix}")


def _validate(rate_per_s, n_requests, warmup_fraction, cv, horizon_s, slo_ttft_s, slo_tpot_s, seed) -> None:
    _check_positive("rate_per_s", rate_per_s, "give the arrival rate in requests/s", allow_none=False)
    if isinstance(n_requests, bool) or not isinstance(n_requests, int | np.integer) or n_requests < 1:
        raise ConfigError(f"n_requests = {n_requests!r} must be an integer >= 1; give how many to simulate")
    wf = warmup_fraction
    if isinstance(wf, bool) or not isinstance(wf, int | float) or not (0 <= wf < 1):
        raise ConfigError(f"warmup_fraction = {wf!r} must be in [0, 1); 0.1 trims the first 10% of arrivals")
    _check_positive("cv", cv, "1.0 is Poisson", allow_none=False)
    _check_positive("horizon_s", horizon_s, "give seconds, or None to run until all requests finish")
    _check_positive("slo_ttft_s", slo_ttft_s, "give the TTFT SLO in seconds")
    _check_positive("slo_tpot_s", slo_tpot_s, "give the TPOT SLO in seconds")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ConfigError(f"seed = {seed!r} must be an integer >= 0")


def _run_kernel(run: CompiledRun, level: Level) -> dict[str, np.ndarray]:
    """Allocate outputs, call the level's kernel, return the raw output arrays."""
    if run.max_in_flight and (level is not Level.ITERATION or run.fail_event_s is not None):
        raise ConfigError(f"a closed-loop client (max_in_flight = {run.max_in_flight}) needs level iteration without "
                          "failures; drop `max_in_flight` or `failures`")
    if uses_feature_kernel(run):
        return run_feature_kernel(run, level)
    f, r = run.fleet, run.requests
    n, n_inst = r.n_requests, f.n_instances
    out = {
        "inst": np.full(n, -1, dtype=np.int32),
        "first_sched_s": np.full(n, np.inf),
        "first_token_s": np.full(n, np.inf),
        "done_s": np.full(n, np.inf),
        "preemptions": np.zeros(n, dtype=np.int32),
        "failures": np.zeros(n, dtype=np.int32),
        "status": np.full(n, codes.STATUS_UNFINISHED, dtype=np.int8),
    }
    if level is Level.REQUEST:
        hold_s, first_token_offset_s = request_level_times(f, r.req_pool, r.prompt_tokens, r.output_tokens)
        out["busy_slot_s"] = np.zeros(n_inst)
        run_request_level(
            r.arrival_s, hold_s, first_token_offset_s, r.total_tokens, r.req_pool, r.route_u,
            f.pool_inst_start, f.pool_router, f.pool_max_context, f.inst_slots, float(run.horizon_s),
            out["inst"], out["first_sched_s"], out["first_token_s"], out["done_s"], out["status"],
            out["busy_slot_s"],
        )
    else:
        for key, dtype in (("busy_s", np.float64), ("seq_s", np.float64), ("steps", np.int64), ("tokens", np.int64)):
            out[key] = np.zeros(n_inst, dtype=dtype)
        arrival_s = r.arrival_s.copy() if run.max_in_flight else r.arrival_s  # the kernel writes releases
        requests = RequestInputs(arrival_s=arrival_s, prompt_tokens=r.prompt_tokens, output_tokens=r.output_tokens,
                                 req_pool=r.req_pool, route_u=r.route_u)
        fleet = FleetInputs(**{name: getattr(f, name) for name in FleetInputs._fields})
        outputs = IterationOutputs(**{name: out[name] for name in IterationOutputs._fields})
        horizon_s = float(run.horizon_s)
        if run.log_steps and run.fail_event_s is None:
            # a step schedules >= 1 token; recomputation after preemption can add more: 2x plus slack
            cap = 2 * int(r.prompt_tokens.sum() + r.output_tokens.sum()) + 1024
            log = StepLog(log_dt_s=np.zeros(cap), log_n=np.zeros(cap, dtype=np.int64),
                          log_len=np.zeros(2, dtype=np.int64))
            run_iteration_level_logged(requests, fleet, outputs, horizon_s, int(run.max_in_flight), log)
            if log.log_len[1] == 0:
                out["step_log_dt_s"], out["step_log_n"] = log.log_dt_s[:log.log_len[0]], log.log_n[:log.log_len[0]]
            if run.max_in_flight:
                out["release_s"] = arrival_s
        elif run.max_in_flight:
            run_iteration_level(requests, fleet, outputs, horizon_s, int(run.max_in_flight))
            out["release_s"] = arrival_s
        elif run.fail_event_s is None:
            run_iteration_level(requests, fleet, outputs, horizon_s)
        else:
            run_iteration_level_failures(requests, fleet, FailureInputs(run.fail_event_s, run.fail_lo), outputs,
                                         out["failures"], horizon_s)
    return out


def _request_frame(run: CompiledRun, out: dict[str, np.ndarray], n_warmup: int) -> pd.DataFrame:
    import pandas as pd

    columns = request_columns(run, out, n_warmup)
    return pd.DataFrame({"request_id": np.arange(run.requests.n_requests, dtype=np.int64), **columns})


def request_columns(run: CompiledRun, out: dict[str, np.ndarray], n_warmup: int) -> dict[str, np.ndarray]:
    """The per-request table's columns (``SimResult.requests`` but ``request_id``) as arrays, in its row
    order: for callers that read a few columns without building the table (pandas loads in ~0.3 s)."""
    f, r = run.fleet, run.requests
    n = r.n_requests
    status = out["status"].astype(np.int64)
    done = status == codes.STATUS_DONE
    inst = out["inst"].astype(np.int64)
    pool_idx = np.where(inst >= 0, f.inst_pool[np.maximum(inst, 0)], r.req_pool)
    names = np.array(list(f.pool_names) + [NO_POOL], dtype=object)
    pool_label = names[np.where(pool_idx >= 0, pool_idx, len(f.pool_names))]
    zeros = np.zeros(n, dtype=np.int64)
    stage = run.api_stage  # through the API servers: measured from the drawn arrival, rows back in drawn order
    arrival = r.arrival_s if stage is None else stage.arrival_s
    # sessions and closed loops: a request starts at its release (never staged, with_api_servers)
    release = arrival if stage is not None or "release_s" not in out else out["release_s"]
    done_s = np.where(done, out["done_s"], np.inf)
    multi = r.output_tokens > 1
    with np.errstate(invalid="ignore", divide="ignore"):  # inf - inf of never-released session rounds
        ttft = np.where(done, out["first_token_s"] - release, np.inf)
        e2e = np.where(done, done_s - release, np.inf)
        tpot = np.where(done, (e2e - ttft) / np.maximum(r.output_tokens - 1, 1), np.inf)
        queue_wait = np.where(np.isfinite(release), out["first_sched_s"] - release, np.inf)
    tpot = np.where(multi, tpot, np.nan)
    columns = {
        "pool": pool_label,
        "instance": inst,
        "arrival_s": arrival,
        "prompt_tokens": r.prompt_tokens,
        "original_prompt_tokens": r.original_prompt_tokens,
        "output_tokens": r.output_tokens,
        "first_sched_s": out["first_sched_s"],
        "first_token_s": out["first_token_s"],
        "done_s": done_s,
        "ttft_s": ttft,
        "tpot_s": tpot,
        "e2e_s": e2e,
        "queue_wait_s": queue_wait,
        "preemptions": out["preemptions"],
        # split.py merges per-pool outputs without failures (they need the whole fleet's state)
        "failures": out["failures"] if "failures" in out else np.zeros(n, dtype=np.int32),
        "status": np.array(STATUS_NAMES, dtype=object)[status],
        "warmup": None,
        "release_s": release,
        "cached_tokens": out.get("cached_tokens", zeros),
        "drafted": out.get("drafted", zeros),
        "accepted": out.get("accepted", zeros),
    }
    if stage is not None:
        rows = stage.drawn_rows()
        columns = {name: None if col is None else np.asarray(col)[rows] for name, col in columns.items()}
    columns["warmup"] = np.arange(n) < n_warmup
    return columns


def _instance_stats(
    run: CompiledRun, out: dict[str, np.ndarray], level: Level
) -> tuple[np.ndarray, np.ndarray]:
    """Per-instance utilisation (busy fraction) and mean batch over ``[0, end]``,
    ``end`` = last completion, or the horizon when something is unfinished."""
    finite_done = out["done_s"][np.isfinite(out["done_s"])]
    end_s = float(finite_done.max()) if finite_done.size else 0.0
    if np.any(out["status"] == codes.STATUS_UNFINISHED) and math.isfinite(run.horizon_s):
        end_s = max(end_s, float(run.horizon_s))
    if end_s <= 0:
        zeros = np.zeros(run.fleet.n_instances)
        return zeros, zeros.copy()
    if level is Level.REQUEST:
        # slots busy on average / slots; mean batch = time-average occupied slots
        busy_slot_s = out["busy_slot_s"]
        return busy_slot_s / (run.fleet.inst_slots * end_s), busy_slot_s / end_s
    busy_s = out["busy_s"]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_batch = np.where(busy_s > 0, out["seq_s"] / np.where(busy_s > 0, busy_s, 1.0), 0.0)
    return busy_s / end_s, mean_batch


def run_compiled(
    spec: FleetSpec,
    run: CompiledRun,
    level: Level | str,
    rate_per_s: float,
    warmup_fraction: float = DEFAULT_WARMUP_FRACTION,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    failures: FailureSpec | None = None,
) -> SimResult:
    """Simulate an already compiled run (``spec`` supplies pool labels only; ``failures`` the
    MTBF/MTTR reported when ``run`` carries a failure schedule)."""
    level = Level.parse(level)
    out = _run_kernel(run, level)
    n = run.requests.n_requests
    n_warmup = min(int(math.floor(warmup_fraction * n)), n - 1)
    frame = _request_frame(run, out, n_warmup)
    util, batch = _instance_stats(run, out, level)
    summary = summarise(
        frame,
        pool_names=run.fleet.pool_names,
        pool_gpus=tuple(p.gpu for p in spec.pools),
        inst_pool=run.fleet.inst_pool,
        inst_utilisation=util,
        inst_mean_batch=batch,
        level=level.value,
        rate_per_s=rate_per_s,
        warmup_fraction=warmup_fraction,
        slo_ttft_s=slo_ttft_s,
        slo_tpot_s=slo_tpot_s,
        horizon_s=run.horizon_s,
        feature_figures=pool_feature_figures(run, out),
        max_model_len_tokens=spec.max_model_len_tokens,
    )
    if failures is not None and run.fail_event_s is not None:
        end_s = float(np.max(out["done_s"], initial=0.0, where=np.isfinite(out["done_s"])))
        if np.any(out["status"] == codes.STATUS_UNFINISHED) and math.isfinite(run.horizon_s):
            end_s = max(end_s, float(run.horizon_s))
        fails = summarise_failures(failures, run.fail_event_s, run.fail_lo, end_s, out["failures"],
                                   len(run.fleet.pool_names))
        summary = dataclasses.replace(summary, failures=fails)
    step_log = (out["step_log_dt_s"], out["step_log_n"]) if "step_log_dt_s" in out else None
    return SimResult(requests=frame, summary=summary, step_log=step_log)


@dataclass(frozen=True)
class RunOptions:
    """``simulate``'s keyword options, for the entry points that pass them through
    (``split.simulate_pools_parallel``); ``of`` refuses a name ``simulate`` does not take."""

    arrival: ArrivalProcess | str = ArrivalProcess.POISSON
    cv: float = 1.0
    horizon_s: float | None = None
    warmup_fraction: float = DEFAULT_WARMUP_FRACTION
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None

    @classmethod
    def of(cls, options: dict) -> RunOptions:
        unknown = sorted(set(options) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ConfigError(f"unknown simulation option(s) {', '.join(unknown)}: valid options are "
                              f"{', '.join(f.name for f in dataclasses.fields(cls))}")
        return cls(**options)


def simulate(
    spec: FleetSpec,
    workload,
    rate_per_s: float,
    n_requests: int = DEFAULT_N_REQUESTS,
    level: Level | str = Level.ITERATION,
    seed: int = 0,
    arrival: ArrivalProcess | str = ArrivalProcess.POISSON,
    cv: float = 1.0,
    horizon_s: float | None = None,
    warmup_fraction: float = DEFAULT_WARMUP_FRACTION,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    failures: FailureSpec | None = None,
    shared_prefix: SharedPrefix | None = None,
) -> SimResult:
    """Simulate ``n_requests`` requests of ``workload`` arriving at ``rate_per_s`` on ``spec``.

    Parameters
    ----------
    workload : fleetplan.workload.Workload
        Anything with ``sample(rng, n) -> (prompt_tokens, output_tokens)``; a
        ``trace`` is needed for ``arrival="replay"``.
    rate_per_s : float
        Arrival rate (requests/s); with ``replay`` the trace is rescaled to it.
    level : Level
        ``iteration`` (default, vLLM continuous batching) or ``request`` (eqs. 4-5).
    seed : int
        One seed; streams ``arrivals``, ``lengths`` and ``routing`` derive from it.
    arrival, cv : ArrivalProcess, float
        Arrival process and, for ``gamma``, the inter-arrival coefficient of variation.
    horizon_s : float, optional
        Stop time (s); requests not finished by then are ``unfinished``.  ``None``
        runs until every accepted request finishes.
    warmup_fraction : float
        Share of the earliest arrivals excluded from statistics (default 0.1).
    slo_ttft_s, slo_tpot_s : float, optional
        SLOs (s) for attainment and goodput.
    failures : FailureSpec, optional
        Instance failures and repairs (iteration level only; stream ``failures`` of ``seed``).
    shared_prefix : SharedPrefix, optional
        System prompts shared by the requests (prefix-cache identities, stream ``prefix`` of
        ``seed``; ``fleetplan.sim.shared_prefix``); runs the feature kernel.
    """
    _validate(rate_per_s, n_requests, warmup_fraction, cv, horizon_s, slo_ttft_s, slo_tpot_s, seed)
    level = Level.parse(level)
    run = compile_run(spec, workload, float(rate_per_s), int(n_requests), int(seed), arrival, cv, horizon_s)
    if failures is not None:
        run = with_failures(run, failures, int(seed), level)
    if shared_prefix is not None:
        if not isinstance(shared_prefix, SharedPrefix):
            raise ConfigError(f"shared_prefix must be a SharedPrefix or None, got {type(shared_prefix).__name__}")
        run = dataclasses.replace(
            run, extras=shared_prefix.extras(run.requests.prompt_tokens, fp_rng.stream(int(seed), "prefix")))
    return run_compiled(spec, run, level, float(rate_per_s), warmup_fraction, slo_ttft_s, slo_tpot_s, failures)


def with_failures(run: CompiledRun, failures: FailureSpec, seed: int, level: Level) -> CompiledRun:
    """``run`` plus its failure schedule drawn from the stream ``failures`` of ``seed``."""
    if not isinstance(failures, FailureSpec):
        raise ConfigError(f"failures must be a FailureSpec or None, got {type(failures).__name__}")
    if level is not Level.ITERATION:
        raise ConfigError("failures need level iteration (the request-level model has no engine state to lose); "
                          "use level iteration")
    if failures.window_s is not None:
        window_s = float(failures.window_s)
    elif math.isfinite(run.horizon_s):
        window_s = float(run.horizon_s)
    else:
        window_s = float(run.requests.arrival_s[-1]) if run.requests.n_requests else 0.0
    event_s, lo = draw_failure_schedule(failures, run.fleet.inst_pool, window_s, seed)
    return dataclasses.replace(run, fail_event_s=event_s, fail_lo=lo)
