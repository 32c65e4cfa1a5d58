"""Compile and simulate multi-round sessions and RL-rollout bursts.

Frontier paper §3.2 "Agentic Reasoning" (Feng et al. 2026, arXiv:2605.21312): each
intermediate round "runs as an ordinary prefill->decode cycle; on completion it emits a
ThinkingRequeue event that re-admits the request after the tool-execution delay, with session
affinity to the same replica so that the KV cache populated in the previous round can be
served as a prefix-cache hit."  ``compile_session_run`` turns a ``SessionTable``
(``fleetplan.workload.session_table``) into the kernel's request rows plus ``RequestExtras``
(docs/runtime_features_contract.md, "Sessions" and "Prefix caching"):

* row i = round i of the table (session-major, sessions by arrival); ``arrival_s`` = the
  session's arrival for every row (non-decreasing); round k > 0 has ``prev_req = i - 1`` and
  ``delay_s`` = its tool-call delay, and is released by the kernel at ``done(prev) + delay``;
* ``prompt_tokens`` = the full context (system + all earlier rounds' new prompt and output
  tokens + this round's new tokens); ``new_tokens`` = prompt - the previous round's context
  (the whole prompt for first rounds, as H2Q-BR's ``l_r`` with ``T_last = 0``);
* every round of a session goes to one pool: the pool router's rule applied to the session's
  largest round (prompt + output, i.e. its final context); ``compress_and_route`` is refused
  (cutting one round's prompt would break the context chain);
* prefix keys: ``key0`` = the system prompt's id (-1 = none), ``key1`` = ``n_system + session``
  (disjoint ranges, so no session key equals a system-prompt key or another session's);
  ``prefix_tokens = (system tokens, previous context tokens)``: round k + 1 hits the blocks
  round k left (its prompt and output) under ``key1``;
* the pools' runtime features (``fleetplan.sim.features.compile``) when any is on.

``simulate_sessions`` samples (stream ``"sessions"`` of the seed; routing from ``"routing"``),
runs the iteration-level feature kernel through ``run_compiled`` and adds ``SessionMetrics``
(``fleetplan.sim.session_metrics``).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from fleetplan import rng as fp_rng
from fleetplan.errors import ConfigError
from fleetplan.sim.compile import CompiledRequests, CompiledRun, compile_fleet
from fleetplan.sim.engine import DEFAULT_WARMUP_FRACTION, run_compiled
from fleetplan.sim.features.arrays import RequestExtras
from fleetplan.sim.features.compile import compile_features, features_on
from fleetplan.sim.pool_routing import route_pools
from fleetplan.sim.result import SimResult
from fleetplan.sim.session_metrics import SessionMetrics, release_times, round_frame, session_metrics
from fleetplan.sim.spec import FleetSpec, Level, PoolRouter
from fleetplan.workload.rollouts import RlRollout
from fleetplan.workload.session_table import SessionTable
from fleetplan.workload.sessions import SessionWorkload

__all__ = ["SessionResult", "compile_session_run", "session_table", "simulate_sessions"]

@dataclasses.dataclass(frozen=True, eq=False)
class SessionResult:
    """The per-round simulation result, its session metrics and the table that was run."""

    sim: SimResult
    metrics: SessionMetrics
    table: SessionTable

    def to_json_dict(self) -> dict:
        """``{"sessions": metrics, "requests": the per-round summary}``; inf/NaN as ``None``."""
        return {"sessions": self.metrics.to_json_dict(), "requests": self.sim.to_json_dict()}

    def round_table(self):
        """One row per round (``ROUND_CSV_COLUMNS``, seconds; ``inf`` where never reached): the export
        table ``fleetplan.report.sim_export.write_rounds_csv`` writes."""
        return round_frame(self.sim.requests, self.table)


def _session_pools(spec: FleetSpec, prompt: np.ndarray, output: np.ndarray, table: SessionTable,
                   routing_rng: np.random.Generator) -> np.ndarray:
    """Pool of every row: the router's rule on each session's largest round."""
    if spec.pool_router is PoolRouter.COMPRESS_AND_ROUTE:
        raise ConfigError("pool_router compress_and_route cuts prompts, which breaks a session's cumulative context; "
                          "use pool_router length for sessions")
    total = prompt + output
    order = np.lexsort((total, table.session))  # within each session ascending total: last row = largest
    last_of_session = np.append(np.flatnonzero(np.diff(table.session[order])), order.size - 1)
    biggest = order[last_of_session]
    pool_s, _ = route_pools(spec, prompt[biggest], output[biggest], routing_rng)
    return np.ascontiguousarray(np.asarray(pool_s, dtype=np.int32)[table.session])


def compile_session_run(spec: FleetSpec, table: SessionTable, seed: int, horizon_s: float | None = None) -> CompiledRun:
    """Spec + session table -> the arrays of one run with ``RequestExtras`` (module docstring)."""
    if not isinstance(table, SessionTable) or table.n_rows == 0:
        raise ConfigError("compile_session_run needs a non-empty SessionTable; sample a workload first")
    prompt, previous = table.context_tokens()
    output = table.output_tokens
    routing_rng = fp_rng.stream(int(seed), "routing")
    route_u = routing_rng.random((table.n_rows, 2))
    req_pool = _session_pools(spec, prompt, output, table, routing_rng)
    requests = CompiledRequests(
        arrival_s=np.ascontiguousarray(table.session_arrival_s, dtype=np.float64),
        prompt_tokens=np.ascontiguousarray(prompt, dtype=np.int64),
        original_prompt_tokens=np.ascontiguousarray(prompt, dtype=np.int64),
        output_tokens=np.ascontiguousarray(output, dtype=np.int64),
        req_pool=req_pool,
        route_u=route_u,
    )
    n_system = int(table.system_prompt_id.max()) + 1 if table.n_rows else 0
    first = table.round_index == 0
    keys = np.stack([table.system_prompt_id, n_system + table.session], axis=1).astype(np.int64)
    extras = RequestExtras(
        prev_req=np.where(first, -1, np.arange(table.n_rows) - 1).astype(np.int64),
        delay_s=np.ascontiguousarray(table.delay_s, dtype=np.float64),
        session=np.ascontiguousarray(table.session, dtype=np.int64),
        n_sessions=table.n_sessions,
        new_tokens=np.where(first, prompt, prompt - previous).astype(np.int64),
        prefix_key=np.ascontiguousarray(keys),
        prefix_tokens=np.ascontiguousarray(np.stack([table.system_tokens, previous], axis=1), dtype=np.int64),
    )
    horizon = math.inf if horizon_s is None else float(horizon_s)
    features = compile_features(spec, int(seed)) if features_on(spec) else None
    return CompiledRun(fleet=compile_fleet(spec), requests=requests, horizon_s=horizon, features=features,
                       extras=extras)


def session_table(
    source: SessionWorkload | RlRollout | SessionTable, rate_per_s: float | None, n_sessions: int | None, seed: int
) -> SessionTable:
    """The table of ``source``: sampled from stream ``"sessions"`` of ``seed``, or ``source`` itself."""
    if isinstance(source, SessionTable):
        return source
    rng = fp_rng.stream(int(seed), "sessions")
    if isinstance(source, RlRollout):
        return source.sample(rng)
    if isinstance(source, SessionWorkload):
        if rate_per_s is None or n_sessions is None:
            raise ConfigError("a session workload needs rate_per_s (sessions/s) and n_sessions; give both")
        return source.sample(rng, n_sessions, rate_per_s)
    raise ConfigError(f"sessions source is a {type(source).__name__}; give a SessionWorkload, RlRollout or "
                      "SessionTable")


def _check_session_order(table: SessionTable, sim: SimResult) -> None:
    """A later round scheduled before its previous round finished means the engine ran the featureless
    kernel, which ignores ``RequestExtras``: a bug, never a user error."""
    sched = sim.requests["first_sched_s"].to_numpy()
    release = release_times(table, sim.requests["done_s"].to_numpy())
    if np.any(np.isfinite(sched) & (sched < release - 1e-9)):
        raise RuntimeError("run_compiled ignored the session extras (a round was scheduled before its release); "
                           "the engine must dispatch runs with extras to the feature kernel")


def simulate_sessions(
    spec: FleetSpec,
    source: SessionWorkload | RlRollout | SessionTable,
    rate_per_s: float | None = None,
    n_sessions: int | None = None,
    seed: int = 0,
    warmup_fraction: float = DEFAULT_WARMUP_FRACTION,
    horizon_s: float | None = None,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
) -> SessionResult:
    """Simulate sessions on ``spec`` (iteration level, feature kernel).

    Parameters
    ----------
    source : SessionWorkload, RlRollout or SessionTable
        A workload is sampled (``n_sessions`` sessions at ``rate_per_s`` sessions/s); a rollout
        releases its bursts; a table is run as given.
    warmup_fraction : float
        Share of the earliest sessions left out of the session statistics (RL bursts excepted);
        the per-round ``sim`` summary trims the same share of rows.
    slo_ttft_s, slo_tpot_s : float, optional
        Per-round SLOs for the ``sim`` summary's attainment and goodput.
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ConfigError(f"seed = {seed!r} must be an integer >= 0")
    wf = warmup_fraction
    if isinstance(wf, bool) or not isinstance(wf, int | float) or not 0 <= wf < 1:
        raise ConfigError(f"warmup_fraction = {wf!r} must be in [0, 1); 0.1 trims the first 10% of sessions")
    if horizon_s is not None and not (isinstance(horizon_s, int | float) and horizon_s > 0):
        raise ConfigError(f"horizon_s = {horizon_s!r} must be a number > 0 seconds, or None to run to the end")
    table = session_table(source, rate_per_s, n_sessions, int(seed))
    run = compile_session_run(spec, table, int(seed), horizon_s)
    span_s = float(table.session_arrival_s[-1])
    request_rate = table.n_rows / span_s if span_s > 0 else float("nan")
    sim = run_compiled(spec, run, Level.ITERATION, request_rate, float(wf), slo_ttft_s, slo_tpot_s)
    _check_session_order(table, sim)
    return SessionResult(sim=sim, metrics=session_metrics(sim.requests, table, float(wf)), table=table)
