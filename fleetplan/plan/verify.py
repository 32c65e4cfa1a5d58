"""Phase 2: simulation verification of analytic candidates (the simulator is authoritative).

**What is simulated.**  A co-located candidate's pools sit behind a stateless router (``length``
or compress-and-route), so each pool receives an independent Poisson sub-stream
(``fleetplan.sim.steady``) and is simulated *on its own*, with its own requests, at iteration
level, with ``n_replications`` independent replications.  Pools are identified by the traffic
they receive (``PoolKey``: router, GPU and the thresholds that decide its stream), so a pool
shared by several of the top candidates is searched once.  Spares cover failed nodes, not load,
and are not simulated.

**Run length (steady state).**  A pool's run is set in simulated time, not in requests: with R the
pool's mean request lifetime (``PoolPlan.mean_residence_s`` from the analytic model when it is
finite; otherwise the mean time in service, first scheduled to last token, of a pilot run of one
replication at the analytic count lasting ``pilot_lifetimes`` x the analytic full-batch slot hold
time n_max·E[S]) and λ_p the pool's rate, each replication simulates

    n = ceil(λ_p · warmup_lifetimes · R) + max(ceil(λ_p · measured_lifetimes · R), min_completions)

requests, i.e. a warm-up allowance of ``warmup_lifetimes`` lifetimes plus a measured window of at
least ``measured_lifetimes`` lifetimes and at least ``min_completions`` completions.  The same n is
used at every count of the pool (and the same seeds: common random numbers, so P99 is compared
between counts on the same traffic).  ``VerifySettings.n_requests`` overrides n.

**Warm-up and drift.**  Warm-up is cut by MSER-5 on the TTFT series in arrival order (per
replication; ``fleetplan.sim.steady.mser5_truncation``), but never shorter than the warm-up
allowance of ``warmup_lifetimes`` lifetimes (MSER-5 cuts nothing from a series that only rises, as
a pool filling up towards overload produces), and reported.  The run is *drifting*
when the SLO-percentile TTFT of the second half of the measured requests exceeds the first half's
by more than ``drift_tolerance`` (relative) with the lower end of the 95 % Student-t interval of
the per-replication increase above 0, or when MSER-5's cut reached its limit (half the run) in a
majority of replications.  After the warm-up allowance a drifting pool is overloaded: its
queue grows, so its percentile is not a steady-state figure and grows with the run's length (a
short window can still show it within the SLO); it fails the check and is reported (JSON
``drifting``, ``~`` in the table).

**Pass rule.**  A pool passes at a count when its run is not drifting and the upper end of the
95 % Student-t interval (over replications) of its SLO-percentile TTFT is within the TTFT SLO, and
the same for TPOT when a TPOT SLO is set.  The fleet passes when every pool does within ``max_gpus``.

**Two-sided search.**  Per pool, from the analytic count n0, on the predicate "ratio of the
percentile's upper bound to the SLO (the larger of TTFT's and TPOT's) <= 1, not drifting": galloping (steps of
r, 2r, 4r, ... down from a passing n0 until a count fails, or up from a failing n0 until one
passes; up from a drifting, i.e. overloaded, count the step is at least the instances its offered
load needs beyond its completion rate, n (λ_p / completions per s - 1), and when such a jump passes
the search gallops down from it), then bisection of the bracket until it is at most r wide, with
the resolution r = max(1, floor(resolution · n)) (1 GPU below 100 / resolution instances).  The
answer is the smallest passing count found.  No step cap, only ``max_gpus``, except that growing
stops when a pool that is not drifting fails and its ratio fell by less than 2 % (``NO_GAIN``)
since the last failing count: more instances no longer help (the percentile is prefill-bound).
The analytic count was *too high* when the answer is below it, *too low* when above (per pool;
for the fleet: all pools the same way, else *mixed*).  The searches advance in rounds: every
unsettled pool proposes its next count and all their replications run as one batch of tasks
through ``map_fn`` (``fleetplan.parallel``), so pools and replications run in parallel.

**A replication that fails alone.**  With n replications and the 95 % Student-t interval, the upper
end mean + t_{k-1} s / sqrt(k) of any k <= n of them is at least their largest value whenever
t_{k-1} >= k - 1 (Samuelson's inequality: max - mean <= s (k - 1) / sqrt(k)), which holds for
k <= 4 (t_1 = 12.7, t_2 = 4.30, t_3 = 3.18; ``fails_alone_is_exact``); a non-finite percentile makes
the bound infinite.  So when one replication's SLO-percentile TTFT (or TPOT, with a TPOT SLO) is above
the SLO, or not finite, the pool fails at that count whatever the others show.  Where only the
verdict of a count is read (the search galloping down or bisecting below a passing count, not the
analytic count, whose figures are reported, nor a growing search, which compares failing ratios),
the count's check is the replications up to the first that fails alone (``decisive_runs``): the same
verdict, and the later replications are not simulated when that one finished first (a task skips
itself, ``_run_pool_task``; the replications of such counts are queued after every first
replication).  Which replications the check holds does not depend on the executor or on timing, so
neither do the figures; ``n_simulations`` counts the replications checks hold.

**Like for like.**  At the analytic counts every verification records the analytic and simulated
SLO-percentile TTFT and TPOT under one definition, fleet-wide over all requests (the simulated one
is the percentile of the mixture of the pools' distributions with their traffic shares, per
replication; ``fleetplan.sim.steady.mixture_quantile``) and per pool (``AtAnalytic``); simulated
figures are means over replications (the pass rule uses the upper bound).  A relative gap above
``disagreement_threshold`` between the analytic and simulated fleet-wide TTFT is flagged.

**Step models.**  Each pool runs ``plan.pools.pool_step_model`` (its GPU type's entry of
``step_models``, else the linear model of its serving constants), with every step 1 +
``step_time_margin`` times as long: the same steps the analytic phase sized for.

Stateful between-pool routing would couple the pools; the co-located routers are all stateless,
and a candidate whose fleet spec has another router is refused (``ConfigError``) rather than
verified on the wrong physics.  Seeds: ``task_seed(seed, "verify-pool", key.traffic(), replication)``
(the pool's traffic and GPU, not its engine limits, so one pool under other limits runs on the same
streams; the pilot runs replication 0's stream, which the later runs extend); the search is a
deterministic function of the simulated figures, so every executor gives identical numbers.

**Engine limits.**  Each pool is simulated with the engine limits it was sized with
(``PoolPlan.max_num_seqs`` / ``max_num_batched_tokens``), and the largest pool takes every request above
the others that its KV cache (or the served model's context) holds, also totals a workload's sampler
draws above the length CDF's last point, with its sized slots (``fleet_spec``).
"""

from __future__ import annotations

import itertools
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.hardware import GpuProfile, with_spares
from fleetplan.metrics import student_t_interval
from fleetplan.parallel import MapFn, in_input_order, serial_map
from fleetplan.perf.seam import StepModel
from fleetplan.plan.defaults import (  # light: shown in the help
    DEFAULT_MEASURED_LIFETIMES,
    DEFAULT_MIN_COMPLETIONS,
    DEFAULT_REPLICATIONS,
    DEFAULT_VERIFY_TOP,
    DEFAULT_WARMUP_LIFETIMES,
)
from fleetplan.plan.placement import with_mtp_features
from fleetplan.plan.pools import check_step_time_margin, fleet_usd_per_h, pool_step_model
from fleetplan.plan.space import SizingRouter
from fleetplan.plan.sweep import Candidate
from fleetplan.plan.verification import AtAnalytic, PoolFigures, SteadyState, Verification
from fleetplan.rng import task_seed
from fleetplan.sim import FleetSpec, PoolRouter, build_pool
from fleetplan.sim.spec import DEFAULT_COMPRESS_GAMMA
from fleetplan.sim.split import STATELESS_POOL_ROUTERS
from fleetplan.sim.steady import PoolRun, mixture_quantile, simulate_pool
from fleetplan.units import H_PER_YEAR, fmt_ms
from fleetplan.workload import Workload

#: Further co-located candidates phase 2 may verify beyond ``top_k`` while their analytic cost
#: undercuts the cheapest verified fleet (``plan.optimize``: the bound).
DEFAULT_VERIFY_EXTEND = 25
#: Requests per run for callers that simulate a fixed count (what-if, latency profiles).
DEFAULT_SIM_REQUESTS = 20_000
DEFAULT_DISAGREEMENT = 0.20
#: Run-length rule (module docstring).
DEFAULT_PILOT_LIFETIMES = 1.0
#: Search resolution as a share of the count (1 GPU below 100 instances).
DEFAULT_RESOLUTION = 0.01
DEFAULT_DRIFT_TOLERANCE = 0.50
#: Lifetime assumed only to estimate, before phase 1, how much phase 2 will simulate (executor choice).
PLANNING_LIFETIME_S = 10.0
PLANNING_EVALUATIONS = 3  # counts a search typically simulates (same purpose)
PLANNING_POOLS = 4  # pools per candidate (same purpose)
#: Growing stops when a stable pool's ratio to the SLO falls by less than 2 % with more instances.
NO_GAIN = 0.98

TOO_HIGH, TOO_LOW, EXACT, MIXED = "too_high", "too_low", "exact", "mixed"


@dataclass(frozen=True)
class VerifySettings:
    """How candidates are simulated (times in seconds; see the module docstring for the rules)."""

    slo_ttft_s: float
    slo_tpot_s: float | None
    rate_per_s: float
    max_gpus: int
    top_k: int = DEFAULT_VERIFY_TOP
    extend_max: int = DEFAULT_VERIFY_EXTEND  # candidates verified beyond top_k under the cost bound (0: none)
    n_requests: int | None = None  # per pool and replication; None: the steady-state run-length rule
    n_replications: int = DEFAULT_REPLICATIONS
    disagreement_threshold: float = DEFAULT_DISAGREEMENT
    seed: int = 0
    percentile: float = 99.0  # the SLO percentile; one the simulator summarises
    # Step model per GPU type for the simulator (with a served model: the operator-level predictor);
    # GPU types not listed run the linear model of their serving constants.
    step_models: tuple[tuple[str, StepModel], ...] = ()
    # The served model's limit (fleetplan.models.context); longer requests are rejected and reported.
    max_model_len_tokens: int | None = None
    # The arrival process simulated (fleetplan.sim.ArrivalProcess name) and, for gamma, the gaps' CV;
    # the default is Poisson (today's behaviour).
    arrival: str = "poisson"
    arrival_cv: float = 1.0
    warmup_lifetimes: float = DEFAULT_WARMUP_LIFETIMES
    measured_lifetimes: float = DEFAULT_MEASURED_LIFETIMES
    min_completions: int = DEFAULT_MIN_COMPLETIONS
    pilot_lifetimes: float = DEFAULT_PILOT_LIFETIMES
    resolution: float = DEFAULT_RESOLUTION
    drift_tolerance: float = DEFAULT_DRIFT_TOLERANCE
    # Steps this much slower than the step models say (``plan.pools.pool_step_model``); ``optimize``
    # requires the request's margin here, so that phase 2 simulates the steps phase 1 sized for.
    step_time_margin: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "step_time_margin", check_step_time_margin(self.step_time_margin))
        if self.percentile not in _STAT_OF_PERCENTILE:
            raise ConfigError(
                f"`percentile` {self.percentile:g} cannot be verified by simulation: the simulator reports "
                f"P{', P'.join(f'{p:g}' for p in _STAT_OF_PERCENTILE)}; use one of them or skip the simulation",
                param="percentile", value=self.percentile,
            )
        if self.n_requests is not None and (isinstance(self.n_requests, bool) or int(self.n_requests) < 100):
            raise ConfigError(param="n_requests", value=self.n_requests, rule="give at least 100 requests")
        if self.n_replications < 2:
            raise ConfigError(param="n_replications", value=self.n_replications,
                              rule="the confidence bound needs >= 2")
        for name in ("warmup_lifetimes", "measured_lifetimes", "pilot_lifetimes"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} = {getattr(self, name)!r} must be > 0 lifetimes")
        if not 0 <= self.resolution < 0.5:
            raise ConfigError(f"resolution = {self.resolution!r} must be in [0, 0.5), e.g. 0.01")

    def fixed_requests(self) -> int:
        """Requests per run for callers that simulate a fixed count (``n_requests`` or the default)."""
        return DEFAULT_SIM_REQUESTS if self.n_requests is None else int(self.n_requests)


#: Percentiles the simulator summarises (``fleetplan.sim.result.LatencyStats``).
_STAT_OF_PERCENTILE = {50.0: "p50_s", 90.0: "p90_s", 95.0: "p95_s", 99.0: "p99_s", 99.9: "p99_9_s"}


def fleet_spec(candidate: Candidate, gpus: dict[str, GpuProfile], counts: Sequence[int],
               step_models: Mapping[str, StepModel] | None = None,
               max_model_len_tokens: int | None = None, step_time_margin: float = 0.0) -> FleetSpec:
    """The simulator's fleet for ``candidate`` with ``counts`` instances per pool (each pool's
    step model ``plan.pools.pool_step_model``: ``step_models[gpu]`` where given, steps
    1 + ``step_time_margin`` times as long; ``max_model_len_tokens`` the served model's limit)."""
    models = step_models or {}
    live = [i for i, n in enumerate(counts) if n > 0]
    top = max(live, key=lambda i: candidate.pools[i].hi_tokens) if live else -1
    pools = []
    for i in live:
        p = candidate.pools[i]
        pool = build_pool(gpus[p.gpu], f"pool{i + 1}", int(counts[i]), int(p.hi_tokens),
                          max_num_seqs=p.max_num_seqs or None, max_num_batched_tokens=p.max_num_batched_tokens or None)
        if i == top:
            # The largest pool takes every request above the others, also those a workload's sampler draws
            # above the total-length CDF's last point (prompt and output drawn apart); it rejects only what
            # its KV cache, or the served model's context, cannot hold.  Its slots stay the sized ones.
            kv_tokens = pool.limits.kv_blocks * pool.limits.block_size_tokens
            cap = kv_tokens if max_model_len_tokens is None else min(kv_tokens, int(max_model_len_tokens))
            pool = replace(pool, max_context_tokens=max(int(p.hi_tokens), cap))
        pools.append(pool)
    pools = tuple(pools)
    pools = tuple(with_mtp_features(replace(pool, step_model=pool_step_model(gpus[pool.gpu], models, step_time_margin,
                                                                             pool.step_model)))
                  for pool in pools)  # an "MTP on" candidate runs MTP (plan.placement)
    router = PoolRouter.COMPRESS_AND_ROUTE if candidate.router is SizingRouter.COMPRESS else PoolRouter.LENGTH
    return FleetSpec(pools=pools, pool_router=router, max_model_len_tokens=max_model_len_tokens)


def percentile_bounds(summaries: Sequence, percentile: float) -> tuple[float, float, float]:
    """(mean, upper 95 % bound) of the fleet's TTFT at ``percentile`` and the upper bound of its TPOT,
    over replications (``SimSummary`` per replication; seconds)."""
    stat = _STAT_OF_PERCENTILE[percentile]
    ttft_mean, _, ttft_hi = student_t_interval([getattr(x.overall.ttft, stat) for x in summaries])
    _, _, tpot_hi = student_t_interval([getattr(x.overall.tpot, stat) for x in summaries])
    return ttft_mean, ttft_hi, tpot_hi


# --- one pool at one count -------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolCheck:
    """A pool simulated at one count: its replications and the pass rule's figures (s)."""

    count: int
    runs: tuple[PoolRun, ...]
    mean_ttft_s: float
    upper_ttft_s: float
    mean_tpot_s: float
    upper_tpot_s: float
    drifting: bool
    ratio: float  # the larger of upper TTFT / SLO and upper TPOT / SLO

    @property
    def passes(self) -> bool:
        return bool(self.ratio <= 1.0 and not self.drifting)  # a drifting run is not a steady-state figure


def pool_check(count: int, runs: Sequence[PoolRun], s: VerifySettings) -> PoolCheck:
    """The pass-rule figures of ``runs`` (module docstring)."""
    ttft_mean, _, ttft_hi = student_t_interval([r.p_ttft_s for r in runs])
    tpot = [r.p_tpot_s for r in runs]
    if all(math.isnan(x) for x in tpot):  # only one-token outputs: TPOT undefined
        tpot_mean = tpot_hi = float("nan")
    else:
        tpot_mean, _, tpot_hi = student_t_interval(tpot)
    first = np.array([r.p_ttft_first_half_s for r in runs])
    with np.errstate(invalid="ignore"):  # inf - inf: unfinished requests in both halves
        rise = np.array([r.p_ttft_second_half_s for r in runs]) - first
    if np.all(np.isfinite(rise)):
        rise_mean, rise_lo, _ = student_t_interval(rise)
        drifting = bool(rise_lo > 0 and rise_mean > s.drift_tolerance * float(np.mean(first)))
    else:
        drifting = bool(np.any(~np.isfinite(rise)))
    drifting = drifting or sum(r.warmup_at_limit for r in runs) * 2 > len(runs)
    ratio = ttft_hi / s.slo_ttft_s
    if s.slo_tpot_s is not None and not math.isnan(tpot_hi):
        ratio = max(ratio, tpot_hi / s.slo_tpot_s)
    return PoolCheck(int(count), tuple(runs), ttft_mean, ttft_hi, tpot_mean, tpot_hi, drifting, float(ratio))


def capacity_step(check: PoolCheck) -> int:
    """Instances to add to an overloaded pool to reach its offered load: n (λ_p / completion rate - 1),
    from the replications' figures (0 when they do not show an overload)."""
    ratios = [r.rate_per_s / r.throughput_per_s for r in check.runs
              if r.throughput_per_s > 0 and math.isfinite(r.throughput_per_s)]
    if not ratios or min(ratios) <= 1.0:
        return 0
    return int(math.ceil(check.count * (min(ratios) - 1.0)))


# --- pool identity and tasks -----------------------------------------------------------------------


@dataclass(frozen=True)
class PoolKey:
    """What decides a pool's traffic and service, so that pools with equal keys are one search: the
    router, the GPU (and with it the step model), the pool's context, whether it is the largest, and
    the lower contexts that take requests above the next lower one (``length``: that one only;
    compress-and-route: also every lower pool whose squeeze band, up to gamma x its context, reaches
    above it; ``fleetplan.sim.pool_routing``)."""

    router: str
    gpu: str
    gamma: float
    lower_tokens: tuple[int, ...]
    hi_tokens: int
    last: bool
    max_num_seqs: int = 0  # the engine limits (``PoolPlan``; 0: the simulator's defaults)
    max_num_batched_tokens: int = 0

    def traffic(self) -> str:
        """The key's traffic and GPU, without the engine limits: the replications' seeds, so that one pool
        under different limits is simulated on the same streams (common random numbers)."""
        return (f"PoolKey(router={self.router!r}, gpu={self.gpu!r}, gamma={self.gamma!r}, "
                f"lower_tokens={self.lower_tokens!r}, hi_tokens={self.hi_tokens!r}, last={self.last!r})")


def _existing(candidate: Candidate) -> list[int]:
    return [i for i, p in enumerate(candidate.pools) if p.count > 0]


def pool_key(candidate: Candidate, i: int, gamma: float = DEFAULT_COMPRESS_GAMMA) -> PoolKey:
    """The identity of pool ``i`` of ``candidate`` (which must have instances); ``gamma`` is the
    fleet's compress-and-route band (``FleetSpec.compress_gamma``)."""
    live = _existing(candidate)
    j = live.index(i)
    his = sorted(int(candidate.pools[k].hi_tokens) for k in live)
    own = int(candidate.pools[i].hi_tokens)
    below = [h for h in his if h < own]
    prev = below[-1] if below else 0
    if candidate.router is SizingRouter.COMPRESS:
        lower = tuple(h for h in below if gamma * h > prev)
        return PoolKey(candidate.router.value, candidate.pools[i].gpu, float(gamma), lower, own, j == len(live) - 1,
                       candidate.pools[i].max_num_seqs, candidate.pools[i].max_num_batched_tokens)
    return PoolKey(candidate.router.value, candidate.pools[i].gpu, 1.0, (prev,) if below else (), own,
                   j == len(live) - 1, candidate.pools[i].max_num_seqs, candidate.pools[i].max_num_batched_tokens)


@dataclass(frozen=True)
class _PoolTask:
    """One replication of one pool at one count (a picklable task for ``map_fn``)."""

    spec: FleetSpec
    index: int  # of the pool in ``spec``
    workload: Workload
    rate_per_s: float
    n_requests: int
    seed: int
    percentile: float
    min_warmup_s: float = 0.0
    arrival: str = "poisson"
    arrival_cv: float = 1.0
    # A replication of a count whose verdict alone is read (module docstring: fails alone): its group,
    # its replication index and the limits (s) above which one replication fails the count; 0 / None: run
    group: int = 0
    replication: int = 0
    fail_ttft_s: float | None = None
    fail_tpot_s: float | None = None


#: Relative margin above the limit for a replication to fail alone (the bound's floating-point rounding).
FAILS_ALONE_MARGIN = 1e-9
#: Group tokens: unique within the run (the counter) and across the processes a worker may serve (the prefix).
_GROUP_PREFIX = int.from_bytes(os.urandom(6), "little") << 32
_GROUPS = itertools.count(_GROUP_PREFIX + 1)
#: group -> the smallest replication found failing alone, in this process (``_run_pool_task``); bounded.
_FAILED_ALONE: OrderedDict[int, int] = OrderedDict()
_FAILED_ALONE_LOCK = threading.Lock()
FAILED_ALONE_ENTRIES = 4096


def fails_alone_is_exact(n_replications: int, confidence: float = 0.95) -> bool:
    """Whether one replication above the limit decides a failing count with ``n_replications`` (module
    docstring): the interval's t quantile t_{k-1} >= k - 1 for every k = 2..n."""
    from scipy.special import stdtrit

    return all(float(stdtrit(k - 1, 0.5 + confidence / 2.0)) >= k - 1 for k in range(2, int(n_replications) + 1))


def fails_alone(run: PoolRun, ttft_limit_s: float, tpot_limit_s: float | None) -> bool:
    """The replication's SLO-percentile TTFT (or TPOT, with a TPOT limit) is above the limit or not finite:
    the count fails with any set of replications that holds it (module docstring)."""
    if not math.isfinite(run.p_ttft_s) or run.p_ttft_s > ttft_limit_s * (1.0 + FAILS_ALONE_MARGIN):
        return True
    return tpot_limit_s is not None and not math.isnan(run.p_tpot_s) and \
        run.p_tpot_s > tpot_limit_s * (1.0 + FAILS_ALONE_MARGIN)


def decisive_runs(outcomes: Sequence, ttft_limit_s: float, tpot_limit_s: float | None) -> list:
    """The outcomes of one count's replications (in replication order) up to the first whose run fails
    alone (all of them when none does): every one of these ran (a replication skips itself only after an
    earlier one failed alone, ``_run_pool_task``)."""
    out = []
    for o in outcomes:
        out.append(o)
        if o.ok and o.value is not None and fails_alone(o.value, ttft_limit_s, tpot_limit_s):
            break
    return out


def run_length_requests(pool_rate_per_s: float, lifetime_s: float, s: VerifySettings) -> int:
    """Requests per replication of a pool of rate λ_p and mean request lifetime R (module docstring):
    ceil(λ_p · warmup_lifetimes · R) + max(ceil(λ_p · measured_lifetimes · R), min_completions)."""
    measured = max(math.ceil(pool_rate_per_s * s.measured_lifetimes * lifetime_s), s.min_completions)
    return int(math.ceil(pool_rate_per_s * s.warmup_lifetimes * lifetime_s) + measured)


def pool_tasks(candidate: Candidate, i: int, gpus: Mapping[str, GpuProfile], workload: Workload,
               s: VerifySettings, n_requests: int, min_warmup_s: float,
               fail_limits_s: tuple[float, float | None] | None = None,
               replications: Sequence[int] | None = None) -> list[_PoolTask]:
    """The replications of pool ``i`` of ``candidate`` at its own count, simulated under ``s`` (rate,
    step models, margin) with verification's seeds for the pool (common random numbers: the streams
    the search ran), ``n_requests`` each and a warm-up floor of ``min_warmup_s``.  ``fail_limits_s``
    (TTFT, TPOT limits): only the verdict is read, so replications after one that fails alone may skip
    (``decisive_runs``); ``replications``: these replication indices only (default: all)."""
    counts = [p.count for p in candidate.pools]
    spec = fleet_spec(candidate, dict(gpus), counts, dict(s.step_models), s.max_model_len_tokens,
                      s.step_time_margin)
    key = pool_key(candidate, i, spec.compress_gamma)
    j = _existing(candidate).index(i)
    seeds = _pool_seeds(s, key)
    group = next(_GROUPS) if fail_limits_s is not None else 0
    ttft, tpot = fail_limits_s if fail_limits_s is not None else (None, None)
    return [_PoolTask(spec, j, workload, s.rate_per_s, int(n_requests), seeds[r], s.percentile, min_warmup_s,
                      s.arrival, s.arrival_cv, group, r, ttft, tpot)
            for r in (range(len(seeds)) if replications is None else replications)]


def run_pool_tasks(tasks: list[_PoolTask], map_fn: MapFn | None = None) -> list:
    """``TaskOutcome`` of each task (a ``PoolRun`` when ok; None for a replication that skipped itself,
    ``_run_pool_task``), in input order, run through ``map_fn``."""
    return _run_round(tasks, map_fn or serial_map)


def _run_pool_task(task: _PoolTask) -> PoolRun | None:
    """One replication; None, without simulating, when an earlier replication of its group failed alone in
    this process (module docstring), so its figures cannot be read."""
    early = task.fail_ttft_s is not None
    if early and task.replication > 0:
        with _FAILED_ALONE_LOCK:
            first = _FAILED_ALONE.get(task.group)
        if first is not None and first < task.replication:
            return None
    run = simulate_pool(task.spec, task.index, task.workload, task.rate_per_s, task.n_requests, task.seed,
                        task.percentile, task.min_warmup_s, arrival=task.arrival, cv=task.arrival_cv)
    if early and fails_alone(run, task.fail_ttft_s, task.fail_tpot_s):
        with _FAILED_ALONE_LOCK:
            _FAILED_ALONE[task.group] = min(_FAILED_ALONE.get(task.group, task.replication), task.replication)
            while len(_FAILED_ALONE) > FAILED_ALONE_ENTRIES:
                _FAILED_ALONE.popitem(last=False)
    return run


class _PoolSearch:
    """Galloping then bisection of one pool's count (module docstring); ``next_count`` proposes
    the count to simulate, ``record`` takes its check.  Deterministic given the checks."""

    def __init__(self, key: PoolKey, candidate: Candidate, i: int, gpus: Mapping[str, GpuProfile],
                 s: VerifySettings) -> None:
        p = candidate.pools[i]
        self.key, self.candidate, self.i, self.s = key, candidate, i, s
        self.gpus = gpus
        self.n0 = int(p.count)
        self.share = float(p.traffic_share)
        self.per_instance = int(p.gpus_per_instance)
        self.limit = max(1, int(s.max_gpus) // max(1, self.per_instance))
        self.checks: dict[int, PoolCheck] = {}
        # largest count known to fail (0 never passes); counts below the sizing rules' floor (the
        # utilisation cap, spares above the offered load) are out of bounds, as in phase 1
        self.lo = max(0, int(getattr(p, "floor_count", 0)) - 1)
        self.hi: int | None = None  # smallest count known to pass
        self.step = 0
        self.phase = "start"  # start -> down (galloping down) or up (galloping up) -> bisect
        self.jumped = False  # the last step up was a capacity jump
        self.saturated = False  # growing stopped: the percentile no longer falls with more instances
        self.done = False
        self.error: str | None = None
        self.n_requests: int | None = None
        self.lifetime_s = float("nan")
        self.lifetime_source = "fixed"
        self.pilot: PoolRun | None = None
        if s.n_requests is not None:
            self.n_requests = int(s.n_requests)
        elif math.isfinite(p.mean_residence_s) and p.mean_residence_s > 0:
            self._set_length(float(p.mean_residence_s), "analytic")

    # -- run length
    def _set_length(self, lifetime_s: float, source: str) -> None:
        self.lifetime_s, self.lifetime_source = lifetime_s, source
        self.n_requests = run_length_requests(self.s.rate_per_s * self.share, lifetime_s, self.s)

    def pilot_requests(self) -> int:
        p = self.candidate.pools[self.i]
        hold_s = p.n_max * p.mean_service_s if p.n_max > 0 and p.mean_service_s > 0 else PLANNING_LIFETIME_S
        lam = self.s.rate_per_s * self.share
        return int(max(self.s.min_completions, math.ceil(lam * self.s.pilot_lifetimes * hold_s)))

    def record_pilot(self, run: PoolRun) -> None:
        self.pilot = run
        lifetime = run.mean_service_s if math.isfinite(run.mean_service_s) and run.mean_service_s > 0 else \
            PLANNING_LIFETIME_S
        self._set_length(lifetime, "pilot")

    # -- tasks
    def spec_at(self, count: int) -> tuple[FleetSpec, int]:
        counts = [p.count for p in self.candidate.pools]
        counts[self.i] = count
        spec = fleet_spec(self.candidate, dict(self.gpus), counts, dict(self.s.step_models),
                          self.s.max_model_len_tokens, self.s.step_time_margin)
        return spec, _existing(self.candidate).index(self.i)

    def tasks(self, count: int, workload: Workload, n_requests: int, seeds: Sequence[int],
              verdict_only: bool = False) -> list[_PoolTask]:
        """The replications at ``count``; ``verdict_only``: may stop at one that fails alone (module docstring)."""
        spec, j = self.spec_at(count)
        floor_s = 0.0 if not math.isfinite(self.lifetime_s) or self.lifetime_source == "fixed" else \
            self.s.warmup_lifetimes * self.lifetime_s
        group = next(_GROUPS) if verdict_only else 0
        ttft, tpot = (self.s.slo_ttft_s, self.s.slo_tpot_s) if verdict_only else (None, None)
        return [_PoolTask(spec, j, workload, self.s.rate_per_s, n_requests, seed, self.s.percentile, floor_s,
                          self.s.arrival, self.s.arrival_cv, group, r, ttft, tpot)
                for r, seed in enumerate(seeds)]

    def verdict_only(self, count: int) -> bool:
        """Only the pass/fail of ``count`` is read (module docstring): galloping down or bisecting, not the
        analytic count."""
        return self.phase in ("down", "bisect") and count != self.n0

    def resolution(self, n: int) -> int:
        return max(1, int(math.floor(self.s.resolution * n)))

    # -- the search
    def next_count(self) -> int | None:
        if self.done:
            return None
        if not self.checks:
            return self.n0
        if self.phase == "up":
            if self.lo >= self.limit:
                self.done = True  # no passing count within max_gpus
                return None
            return min(self.lo + self.step, self.limit)
        if self.phase == "down":
            nxt = self.hi - self.step
            if nxt > self.lo:
                return nxt
            self.phase = "bisect"  # galloped to a known failing count (0 always fails)
        if self.hi - self.lo <= self.resolution(self.hi):
            self.done = True
            return None
        return (self.lo + self.hi) // 2

    def record(self, check: PoolCheck) -> None:
        n = check.count
        previous = self.checks.get(self.lo) if self.phase == "up" else None
        self.checks[n] = check
        if (previous is not None and not check.passes and not check.drifting and not previous.drifting
                and check.ratio >= NO_GAIN * previous.ratio):
            self.done, self.saturated = True, True  # more instances no longer lower the percentile
        if check.passes:
            self.hi = n if self.hi is None else min(self.hi, n)
        else:
            self.lo = max(self.lo, n)
        if self.phase == "start":
            self.phase, self.step = ("down" if check.passes else "up"), self.resolution(n)
        elif self.phase == "down":
            if check.passes:
                self.step *= 2
            else:
                self.phase = "bisect"
        elif self.phase == "up":
            if check.passes and self.jumped:
                # a capacity jump passed: the answer is just below it, so gallop down from there
                self.phase, self.step = "down", self.resolution(n)
            elif check.passes:
                self.phase = "bisect"
            else:
                self.step *= 2
        self.jumped = False
        if self.phase == "up" and check.drifting:
            # overloaded: completions run at capacity, so n x arrival rate / completion rate instances keep up
            jump = capacity_step(check)
            if jump > self.step:
                self.step, self.jumped = jump, True

    @property
    def found(self) -> int | None:
        return self.hi


def failed_verification(candidate: Candidate, error: str) -> Verification:
    """The record kept for a candidate whose verification task failed on every attempt."""
    nan = float("nan")
    return Verification(
        rank=candidate.rank,
        analytic_counts=tuple(p.count for p in candidate.pools),
        verified_counts=tuple(p.count for p in candidate.pools),
        verified_spares=tuple(p.spares for p in candidate.pools),
        passed=False,
        p99_ttft_s_sim=nan,
        p99_tpot_s_sim=nan,
        p99_ttft_s_analytic=candidate.ttft_p_s,
        disagreement=nan,
        flagged=False,
        total_gpus=candidate.total_gpus_needed,
        cost_usd_per_year=candidate.cost_usd_per_year,
        reason=f"verification task failed: {error}",
        reason_code="verification-failed",
    )


# --- verification of a set of candidates -----------------------------------------------------------


def _pool_seeds(s: VerifySettings, key: PoolKey) -> list[int]:
    return [task_seed(s.seed, "verify-pool", key.traffic(), r) for r in range(s.n_replications)]


def check_pool(candidate: Candidate, i: int, count: int, gpus: Mapping[str, GpuProfile], workload: Workload,
               s: VerifySettings, n_requests: int | None = None) -> PoolCheck:
    """Pool ``i`` of ``candidate`` simulated at ``count`` instances exactly as the search does (same
    streams and seeds, ``n_requests`` per replication: default ``s.n_requests``), replications in
    this process: the pass rule's figures for one count (for brute-force checks of the search)."""
    key = pool_key(candidate, i, fleet_spec(candidate, dict(gpus), [p.count for p in candidate.pools]).compress_gamma)
    sr = _PoolSearch(key, candidate, i, gpus, s)
    n = n_requests if n_requests is not None else sr.n_requests
    if n is None:
        raise ConfigError("check_pool needs n_requests when the run length comes from a pilot run")
    runs = [_run_pool_task(t) for t in sr.tasks(count, workload, int(n), _pool_seeds(s, key))]
    return pool_check(count, runs, s)


def _run_round(tasks: list[_PoolTask], map_fn: MapFn) -> list:
    """Outcomes of ``tasks`` in input order.  The tasks go to ``map_fn`` longest first (most requests;
    a request costs the kernel about the same at any pool size): a round's runs differ in length by
    pool, and with more runs than workers, starting the long ones first keeps a worker from being left
    with one long run at the end (longest-processing-time-first).  Every run has its own seed, so the
    order changes no figure."""
    if not tasks:
        return []
    # stable: equal runs keep their order; replications that may skip themselves after the first (module
    # docstring) go after every other task, so that the first has finished when they start
    order = sorted(range(len(tasks)), key=lambda i: (tasks[i].fail_ttft_s is not None and tasks[i].replication > 0,
                                                     -tasks[i].n_requests))
    outcomes = in_input_order(list(map_fn(_run_pool_task, [tasks[i] for i in order])), len(tasks))
    out: list = [None] * len(tasks)
    for j, outcome in zip(order, outcomes, strict=True):
        out[j] = replace(outcome, index=j)
    return out


def _check_router(candidate: Candidate, gpus: Mapping[str, GpuProfile], s: VerifySettings) -> None:
    spec = fleet_spec(candidate, dict(gpus), [p.count for p in candidate.pools], dict(s.step_models),
                      s.max_model_len_tokens)
    if spec.pool_router not in STATELESS_POOL_ROUTERS:
        raise ConfigError(f"candidate {candidate.rank}: pool router {spec.pool_router.value!r} couples the pools; "
                          "verification simulates pools on their own and needs a stateless router")


def _search_keys(candidate: Candidate, gpus: Mapping[str, GpuProfile]) -> list[tuple[int, tuple[PoolKey, int]]]:
    """``(pool index, search key)`` of every pool with instances: one search per pool and starting count."""
    gamma = fleet_spec(candidate, dict(gpus), [p.count for p in candidate.pools]).compress_gamma
    return [(i, (pool_key(candidate, i, gamma), int(candidate.pools[i].count))) for i in _existing(candidate)]


def new_pool_searches(candidate: Candidate, gpus: Mapping[str, GpuProfile], searches: dict) -> int:
    """How many of ``candidate``'s pools ``verify_colocated`` would search anew given the settled
    ``searches`` (0: its verification reuses every pool's search and simulates nothing new)."""
    return sum(one not in searches for _, one in _search_keys(candidate, gpus))


def verified_cost_floor_usd_per_year(candidate: Candidate, gpus: Mapping[str, GpuProfile], searches: dict,
                                     shrink: float) -> float:
    """A lower bound on ``candidate``'s verified cost (USD/year, spares left out): settled pools at their
    verified counts, pools not yet searched at their analytic counts shrunk by ``shrink``; inf when a
    settled pool found no passing count."""
    usd_per_h = 0.0
    for i, one in _search_keys(candidate, gpus):
        p = candidate.pools[i]
        sr = searches.get(one)
        if sr is not None and sr.done:
            if sr.error is not None or sr.found is None:
                return math.inf
            n = float(sr.found)
        else:
            n = p.count * (1.0 - shrink)
        usd_per_h += n * p.gpus_per_instance * p.price_usd_per_h
    return usd_per_h * H_PER_YEAR


def verify_colocated(candidates: Sequence[Candidate], gpus: Mapping[str, GpuProfile], workload: Workload,
                     s: VerifySettings, availability: Callable[[GpuProfile], float],
                     map_fn: MapFn | None = None,
                     progress: Callable[[int, int], None] | None = None,
                     searches: dict | None = None) -> list[Verification]:
    """Verify co-located ``candidates`` (module docstring): every distinct pool searched once, the
    replications of every pool simulated in a round run together through ``map_fn``.
    ``progress(done, total)`` counts candidates whose pools are all settled.  ``searches`` (a dict
    kept by the caller) carries settled pool searches from one call to the next."""
    run = map_fn or serial_map
    searches = {} if searches is None else searches
    members: list[list[tuple[int, tuple[PoolKey, int]]]] = []
    for c in candidates:
        _check_router(c, gpus, s)
        mine = _search_keys(c, gpus)
        for i, one in mine:
            searches.setdefault(one, _PoolSearch(one[0], c, i, gpus, s))
        members.append(mine)
    order = list(searches)  # insertion order: deterministic
    n_sims = dict.fromkeys(order, 0)
    early = fails_alone_is_exact(s.n_replications)

    def report() -> None:
        if progress is not None:
            progress(sum(all(searches[k].done for _, k in m) for m in members), len(candidates))

    report()
    # pilot round: one replication at the analytic count where the lifetime is unknown
    pilots = [k for k in order if searches[k].n_requests is None]
    tasks = []
    for k in pilots:
        sr = searches[k]
        tasks += sr.tasks(sr.n0, workload, sr.pilot_requests(), _pool_seeds(s, sr.key)[:1])
    for k, outcome in zip(pilots, _run_round(tasks, run), strict=True):
        n_sims[k] += 1
        if outcome.ok:
            searches[k].record_pilot(outcome.value)
        else:
            searches[k].done, searches[k].error = True, outcome.error
    while True:
        proposals = [(k, searches[k].next_count()) for k in order if not searches[k].done]
        proposals = [(k, n) for k, n in proposals if n is not None]
        if not proposals:
            break
        tasks = []
        verdicts = []
        for k, n in proposals:
            sr = searches[k]
            verdicts.append(early and sr.verdict_only(n))
            tasks += sr.tasks(n, workload, int(sr.n_requests), _pool_seeds(s, sr.key), verdicts[-1])
        outcomes = _run_round(tasks, run)
        r = s.n_replications
        for j, (k, n) in enumerate(proposals):
            mine = outcomes[j * r:(j + 1) * r]
            if verdicts[j]:
                mine = decisive_runs(mine, s.slo_ttft_s, s.slo_tpot_s)
            n_sims[k] += len(mine)
            failed = [o for o in mine if not o.ok]
            if failed:
                searches[k].done, searches[k].error = True, failed[0].error
                continue
            searches[k].record(pool_check(n, [o.value for o in mine], s))
        report()
    report()  # searches learn they are settled when asked for their next count
    return [_assemble(c, m, searches, n_sims, gpus, s, availability) for c, m in zip(candidates, members,
                                                                                      strict=True)]


def verify_candidate(candidate: Candidate, gpus: Mapping[str, GpuProfile], workload: Workload,
                     s: VerifySettings, availability: Callable[[GpuProfile], float],
                     map_fn: MapFn | None = None) -> Verification:
    """Verify one co-located candidate (``verify_colocated`` of one)."""
    return verify_colocated([candidate], gpus, workload, s, availability, map_fn)[0]


def _fleet_bounds(checks: Sequence[PoolCheck], shares: Sequence[float], s: VerifySettings
                  ) -> tuple[float, float, float, float]:
    """Fleet-wide (mean, upper) TTFT and TPOT at the SLO percentile: per replication the mixture
    of the pools' distributions with the simulated shares, then the Student-t interval."""
    q = s.percentile / 100.0
    ttft, tpot = [], []
    for r in range(s.n_replications):
        runs = [c.runs[r] for c in checks]
        w = [run.share for run in runs] if all(run.share > 0 for run in runs) else list(shares)
        ttft.append(mixture_quantile([np.array(run.ttft_grid_s) for run in runs], w, q))
        tg = [(np.array(run.tpot_grid_s), wi) for run, wi in zip(runs, w, strict=True)
              if not np.all(np.isnan(run.tpot_grid_s))]
        tpot.append(mixture_quantile([g for g, _ in tg], [wi for _, wi in tg], q) if tg else float("nan"))
    t_mean, _, t_hi = student_t_interval(ttft)
    p_mean, _, p_hi = (float("nan"),) * 3 if any(math.isnan(x) for x in tpot) else student_t_interval(tpot)
    return t_mean, t_hi, p_mean, p_hi


def _too_long(checks: Mapping[int, PoolCheck], shares: Sequence[float], tokens: bool) -> float:
    """Share of the fleet's requests (or tokens) above the served model's limit in the runs at the
    analytic counts (the longest pool's sub-stream carries them; rejected, out of the percentiles)."""
    num = den = 0.0
    for i, ch in checks.items():
        if ch is None or not ch.runs:
            continue
        runs = ch.runs
        if tokens:
            part = sum(r.too_long_tokens for r in runs) / max(sum(r.total_tokens for r in runs), 1)
            weight = shares[i] * sum(r.total_tokens for r in runs) / max(sum(r.n_requests for r in runs), 1)
        else:
            part = sum(r.n_too_long for r in runs) / max(sum(r.n_requests for r in runs), 1)
            weight = shares[i]
        num += weight * part
        den += weight
    return num / den if den > 0 else 0.0


def _direction(analytic: int, verified: int) -> str:
    return EXACT if verified == analytic else (TOO_HIGH if verified < analytic else TOO_LOW)


def fleet_direction(pool_direction: Sequence[str]) -> str:
    """The fleet's direction from its pools' (module docstring)."""
    moved = {d for d in pool_direction if d != EXACT}
    return EXACT if not moved else (moved.pop() if len(moved) == 1 else MIXED)


def _steady(sr: _PoolSearch, check: PoolCheck) -> SteadyState:
    runs = check.runs
    warm = float(np.mean([r.warmup_s for r in runs]))
    measured = float(np.mean([r.duration_s - r.warmup_s for r in runs]))
    lifetime = sr.lifetime_s if math.isfinite(sr.lifetime_s) else float(np.mean([r.mean_service_s for r in runs]))
    return SteadyState(
        n_requests=int(runs[0].n_requests), lifetime_s=lifetime, lifetime_source=sr.lifetime_source,
        warmup_s=warm, n_warmup=int(round(np.mean([r.n_warmup for r in runs]))), measured_s=measured,
        measured_lifetimes=measured / lifetime if lifetime > 0 else float("nan"),
        n_measured=int(round(np.mean([r.n_measured for r in runs]))), drifting=check.drifting)


def _assemble(c: Candidate, members: list[tuple[int, tuple[PoolKey, int]]],
              searches: dict[tuple[PoolKey, int], _PoolSearch], n_sims: dict[tuple[PoolKey, int], int],
              gpus: Mapping[str, GpuProfile], s: VerifySettings,
              availability: Callable[[GpuProfile], float]) -> Verification:
    analytic = tuple(int(p.count) for p in c.pools)
    errors = [searches[k].error for _, k in members if searches[k].error]
    if errors:
        return failed_verification(c, errors[0])
    counts = list(analytic)
    reason = reason_code = None
    for i, k in members:
        sr = searches[k]
        if sr.found is None:
            worst = sr.checks[max(sr.checks)]
            reason = reason or (
                f"pool {i + 1} ({c.pools[i].lo_tokens + 1}-{c.pools[i].hi_tokens} tokens, {c.pools[i].gpu}): "
                f"simulated P{s.percentile:g} fails the SLO (ratio {worst.ratio:.2f}, TTFT up to "
                f"{fmt_ms(worst.upper_ttft_s, '.0f')}" + (", drifting" if worst.drifting else "")
                + f") even at {worst.count} instances"
                + (": more instances no longer lower it (prefill-bound)" if sr.saturated else " (max-gpus)"))
            reason_code = reason_code or ("prefill-bound" if sr.saturated else "max-gpus")
        else:
            counts[i] = int(sr.found)
    at_checks = {i: searches[k].checks[analytic[i]] for i, k in members}
    shares = [c.pools[i].traffic_share for i, _ in members]
    t_mean, t_hi, p_mean, p_hi = _fleet_bounds([at_checks[i] for i, _ in members], shares, s)
    pools = []
    for i, p in enumerate(c.pools):
        ch = at_checks.get(i)
        pools.append(None if ch is None else PoolFigures(p.ttft_p_s, ch.mean_ttft_s, p.tpot_p_s, ch.mean_tpot_s,
                                                         ch.drifting))
    at = AtAnalytic(c.ttft_p_s, t_mean, c.tpot_p_s, p_mean, tuple(pools))
    passed = reason is None
    final_checks = [searches[k].checks[counts[i]] for i, k in members] if passed else None
    if passed:
        f_mean, f_hi, _, fp_hi = _fleet_bounds(final_checks, shares, s)
    else:
        f_mean, f_hi, fp_hi = float("nan"), t_hi, p_hi
    spares = [with_spares(n, availability(gpus[p.gpu])) - n if n > 0 else 0 for p, n in zip(c.pools, counts,
                                                                                          strict=True)]
    per = [p.gpus_per_instance for p in c.pools]
    total = sum((n + sp) * g for n, sp, g in zip(counts, spares, per, strict=True))
    if passed and total > s.max_gpus:
        passed, reason = False, f"the verified fleet needs {total} GPUs, more than max_gpus {s.max_gpus}"
    cost = fleet_usd_per_h(c.pools, counts, spares)
    a = c.ttft_p_s
    disagreement = (t_mean - a) / a if a > 0 else float("inf")
    pool_dir = tuple(_direction(a_n, v_n) for a_n, v_n in zip(analytic, counts, strict=True))
    steady = [None] * len(c.pools)
    for i, k in members:
        sr = searches[k]
        steady[i] = _steady(sr, sr.checks[counts[i]] if counts[i] in sr.checks else at_checks[i])
    return Verification(
        rank=c.rank,
        analytic_counts=analytic,
        verified_counts=tuple(counts),
        verified_spares=tuple(int(x) for x in spares),
        passed=passed,
        p99_ttft_s_sim=f_hi,
        p99_tpot_s_sim=fp_hi,
        p99_ttft_s_analytic=a,
        disagreement=disagreement,
        flagged=abs(disagreement) > s.disagreement_threshold,
        total_gpus=total,
        cost_usd_per_year=cost * H_PER_YEAR,
        reason=reason,
        too_long_share_sim=_too_long(at_checks, [p.traffic_share for p in c.pools], tokens=False),
        too_long_token_share_sim=_too_long(at_checks, [p.traffic_share for p in c.pools], tokens=True),
        at_analytic=at,
        pool_direction=pool_dir,
        direction=fleet_direction(pool_dir),
        steady=tuple(steady),
        n_simulations=sum(n_sims[k] for k in {k for _, k in members}),
        drifting_pools=tuple(i + 1 for i, _ in members if at_checks[i].drifting),
        reason_code=reason_code,
        p99_ttft_s_sim_mean=f_mean,
    )
