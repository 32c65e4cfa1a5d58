"""Independent replications of one simulation and the confidence interval of its P99s.

Replication r uses the seed ``task_seed(seed, "replication", r)`` (``fleetplan.rng``), so
the set of runs depends only on the run seed.  The mean of the per-replication P99 TTFT
(and TPOT) and its two-sided Student-t interval at ``confidence`` are reported; the
interval's upper end is what phase-2 verification compares with the SLO
(``fleetplan.plan.verify``).

Replications are independent tasks: ``map_fn`` (``fleetplan.parallel.MapFn``, e.g. an executor
from ``fleetplan.exec``) runs them in parallel; each carries its own seed, so the result is the
same for every executor and worker count.  A replication that fails every attempt raises
``TaskFailedError`` (an interval with a hole in it would be wrong, not approximate).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.metrics import DEFAULT_CONFIDENCE, student_t_interval
from fleetplan.parallel import MapFn, TaskFailedError, in_input_order, serial_map
from fleetplan.rng import task_seed
from fleetplan.sim.engine import DEFAULT_N_REQUESTS, simulate
from fleetplan.sim.result import SimSummary
from fleetplan.sim.spec import FleetSpec, Level

DEFAULT_N_REPLICATIONS = 5


@dataclass(frozen=True)
class ReplicatedResult:
    """Independent replications: P99 TTFT/TPOT (s) per replication, their mean
    and a two-sided Student-t interval at ``confidence``."""

    seeds: tuple[int, ...]
    confidence: float
    p99_ttft_s: tuple[float, ...]
    p99_tpot_s: tuple[float, ...]
    mean_p99_ttft_s: float
    p99_ttft_interval_s: tuple[float, float]
    mean_p99_tpot_s: float
    p99_tpot_interval_s: tuple[float, float]
    summaries: tuple[SimSummary, ...]

    @property
    def n_replications(self) -> int:
        return len(self.seeds)

    @property
    def upper_p99_ttft_s(self) -> float:
        """Upper end of the P99 TTFT interval: the value verification checks against the SLO."""
        return self.p99_ttft_interval_s[1]

    @property
    def upper_p99_tpot_s(self) -> float:
        """Upper end of the P99 TPOT interval."""
        return self.p99_tpot_interval_s[1]


def _replication_summary(spec, workload, rate_per_s, n_requests, level, seed, **simulate_kwargs) -> SimSummary:
    """One replication (a picklable task for ``map_fn``)."""
    return simulate(spec, workload, rate_per_s, n_requests, level, seed, **simulate_kwargs).summary


def replicate(
    spec: FleetSpec,
    workload,
    rate_per_s: float,
    n_requests: int = DEFAULT_N_REQUESTS,
    level: Level | str = Level.ITERATION,
    seed: int = 0,
    n_replications: int = DEFAULT_N_REPLICATIONS,
    confidence: float = DEFAULT_CONFIDENCE,
    progress: Callable[[int, int], None] | None = None,
    map_fn: MapFn | None = None,
    **simulate_kwargs,
) -> ReplicatedResult:
    """``n_replications`` runs of ``simulate`` with seeds ``task_seed(seed, "replication", r)``.

    ``simulate_kwargs`` are passed through (arrival, cv, horizon_s, warmup_fraction,
    SLOs).  ``progress(done, total)`` is called after each replication.  ``map_fn`` runs the
    replications (default: one after another in this process).
    """
    if isinstance(n_replications, bool) or not isinstance(n_replications, int) or n_replications < 1:
        raise ConfigError(f"n_replications = {n_replications!r} must be an integer >= 1 (5 is typical)")
    if not (isinstance(confidence, float) and 0 < confidence < 1):
        raise ConfigError(f"confidence = {confidence!r} must be in (0, 1), e.g. 0.95")
    seeds = tuple(task_seed(seed, "replication", r) for r in range(n_replications))
    one_run = functools.partial(_replication_summary, spec, workload, rate_per_s, n_requests, level,
                                **simulate_kwargs)
    outcomes = []
    for outcome in (map_fn or serial_map)(one_run, seeds):
        outcomes.append(outcome)
        if progress is not None:
            progress(len(outcomes), n_replications)
    summaries = []
    for r, outcome in enumerate(in_input_order(outcomes, n_replications)):
        if not outcome.ok:
            raise TaskFailedError(f"replication {r} (seed {seeds[r]}) failed: {outcome.error}; the other "
                                  "replications finished; fix the cause and rerun")
        summaries.append(outcome.value)
    ttft = np.array([s.overall.ttft.p99_s for s in summaries])
    tpot = np.array([s.overall.tpot.p99_s for s in summaries])
    ttft_mean, ttft_lo, ttft_hi = student_t_interval(ttft, confidence)
    tpot_mean, tpot_lo, tpot_hi = student_t_interval(tpot, confidence)
    return ReplicatedResult(
        seeds=seeds,
        confidence=confidence,
        p99_ttft_s=tuple(float(x) for x in ttft),
        p99_tpot_s=tuple(float(x) for x in tpot),
        mean_p99_ttft_s=ttft_mean,
        p99_ttft_interval_s=(ttft_lo, ttft_hi),
        mean_p99_tpot_s=tpot_mean,
        p99_tpot_interval_s=(tpot_lo, tpot_hi),
        summaries=tuple(summaries),
    )
