"""``optimize``: the two-phase fleet planner (core paper §3.1).

Phase 1 (``plan.sweep``) ranks every candidate analytically.  Phase 2
(``plan.verify``) re-checks the top candidates with the discrete-event simulator
and searches each pool's GPU count in both directions (down when the analytic count
is more than needed, up when it fails); the recommendation is the cheapest
simulation-verified fleet (the simulator is authoritative).  With
verification off the recommendation is the cheapest analytic candidate.

Node availability (core paper §3.5): ``availability`` is a number A in (0, 1]
applied to every GPU type, or the string ``"catalog"`` for each GPU's own A from
its published failure rate and repair time (GPUs without one: A = 1, stated in
the result).  Default: A = 1 (no spares).

The verifications of the top candidates are independent tasks run through ``map_fn``
(``fleetplan.parallel.MapFn``; default in-process, ``fleetplan.exec`` supplies process-pool and
Ray executors).  Each verification's seeds derive from the run seed and the fleet's identity
(``plan.verify``), so results are the same for every executor and worker count.  A verification
that fails every attempt is kept as a failed ``Verification`` of its candidate (``passed`` False,
``reason`` "verification task failed: <error>") and the others still count.

Step-time margin: ``step_time_margin`` m sizes and verifies the fleet for steps 1 + m times as long
as the step models say (``plan.pools.pool_step_model``: the engine model, the paper's eqs. 3-5 and
the simulator all run the scaled steps); the verification settings must carry the same margin.
Co-located topologies only (the pdd/afd screen reads its own linear constants).

Headroom (``plan.headroom``, with ``headroom`` settings and verification): for a co-located
recommendation, the largest uniform step slowdown and the largest arrival-rate multiplier at which
it still passes verification's check, each found by bisection with the simulator.

Disaggregated topologies (``pdd``, ``afd``; ``plan.disagg.candidates``) need a TPOT target (``slo_tpot_s``).
Their candidates join the co-located ones in one ranking by annual cost; spend ratio and cost
efficiency against each family's all-premium baseline come from ``plan.disagg.economics`` and
disaggregated candidates below ``min_ce_gain`` are rejected there.  Phase 2 simulates the
``top_k`` cheapest feasible candidates overall plus the ``top_k`` cheapest of each requested
disaggregated topology (PDD and AFD through ``plan.disagg.verify``); then, as a bound, the next
``top_k`` co-located candidates whose analytic cost is at most the slack above the cheapest
verified fleet's (the largest share by which verification shrank a candidate so far, at most
``BOUND_SLACK`` = 10 %; or all
next ``top_k`` while none passed), again and again, up to ``extend_max`` more: a fleet the screen
put sixth cannot be cheaper than what verification made of the first five unnoticed.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from fleetplan.errors import ConfigError
from fleetplan.hardware import GpuCatalog, GpuProfile
from fleetplan.parallel import MapFn, TaskOutcome, in_input_order, serial_map
from fleetplan.perf.calibrate import CalibratedStepModel
from fleetplan.perf.engine_profile import ENGINE_NAMES, load_engine_profile
from fleetplan.perf.seam import StepModel
from fleetplan.plan.context_limit import RejectedTraffic, rejected_traffic
from fleetplan.plan.defaults import (  # light: shown in the help
    AVAILABILITY_FROM_CATALOG,
    DEFAULT_MAX_GPUS,
    DEFAULT_MIN_CE_GAIN,
    DEFAULT_RHO_MAX,
)
from fleetplan.plan.deployment_types import Deployment
from fleetplan.plan.disagg.candidates import DisaggCandidate, DisaggSettings, check_disagg_inputs, disagg_candidates
from fleetplan.plan.disagg.economics import (
    Economics,
    economics,
    premium_gpu,
    rank_with_baselines,
)
from fleetplan.plan.disagg.verify import verify_any
from fleetplan.plan.figure_types import CostLatencyPoint, PoolLatencyProfile, ProcurementLine
from fleetplan.plan.headroom import Headroom, HeadroomSettings, fleet_headroom
from fleetplan.plan.points import LengthPoints
from fleetplan.plan.pools import (
    SERVICE_ENGINE,
    PlanSettings,
    PoolPlan,
    check_step_time_margin,
    fleet_usd_per_h,
    size_one_pool,
    size_pools,
)
from fleetplan.plan.space import (
    DEFAULT_COMPRESS_GAMMA,
    DEFAULT_MAX_POOLS,
    DEFAULT_THRESHOLDS_TOKENS,
    DISAGGREGATED,
    SizingRouter,
    Topology,
    family,
    layouts,
)
from fleetplan.plan.sweep import Candidate, ProgressFn, pareto_frontier, sweep, sweep_pools
from fleetplan.plan.verify import (
    PLANNING_EVALUATIONS,
    PLANNING_LIFETIME_S,
    PLANNING_POOLS,
    Verification,
    VerifySettings,
    failed_verification,
    new_pool_searches,
    verified_cost_floor_usd_per_year,
    verify_colocated,
)
from fleetplan.units import H_PER_YEAR
from fleetplan.workload import Workload

#: Quadrature points used to integrate over the length distribution (§3.1 step 2):
#: per pool range for totals-only CDFs, and globally for prompt/output CDFs.
DEFAULT_POOL_POINTS = 512
DEFAULT_QUADRATURE_POINTS = 16384
#: Default GPU types swept: the three with the core paper's calibrated constants.
DEFAULT_GPUS = ("A10G", "A100-80GB", "H100-SXM")


@dataclass(frozen=True)
class OptimizeRequest:
    """Everything ``optimize`` needs; validated on construction (times in seconds)."""

    workload: Workload
    gpus: tuple[GpuProfile, ...]
    slo_ttft_s: float
    rate_per_s: float
    percentile: float = 99.0
    topologies: tuple[Topology, ...] = (Topology.HOMO, Topology.TWO_POOL, Topology.MULTI_POOL)
    thresholds_tokens: tuple[int, ...] = DEFAULT_THRESHOLDS_TOKENS
    routers: tuple[SizingRouter, ...] = (SizingRouter.LENGTH, SizingRouter.COMPRESS)
    compress_gamma: float = DEFAULT_COMPRESS_GAMMA
    max_pools: int = DEFAULT_MAX_POOLS
    availability: float | str = 1.0
    rho_max: float = DEFAULT_RHO_MAX
    max_gpus: int = DEFAULT_MAX_GPUS
    tail_model: str = "exp"
    ttft_model: str = "quantile"
    n_prefill_seqs: float | None = None
    min_spare_gpus: int = 0
    # With a served model: GPUs per serving instance of each GPU type (name -> TP/PP group size)
    gpus_per_instance: tuple[tuple[str, int], ...] = ()
    quadrature_points: int = DEFAULT_QUADRATURE_POINTS
    pool_points: int = DEFAULT_POOL_POINTS
    rate_source: str = "given"
    slo_tpot_s: float | None = None  # required by pdd / afd (decode sizing)
    min_ce_gain: float = DEFAULT_MIN_CE_GAIN
    disagg: DisaggSettings | None = None  # None: defaults for CALIBRATION_MODEL
    # "engine" (default): the simulator's step model and engine limits (fleetplan.queueing.engine);
    # "paper": the core paper's eqs. 3-5 (kept to reproduce its Table 1)
    service_model: str = SERVICE_ENGINE
    # Step model per GPU type (with a served model: the operator-level predictor); the simulator runs the same
    step_models: tuple[tuple[str, StepModel], ...] = ()
    arrival_cv2: float = 1.0  # Ca² of the arrival stream (1: Poisson)
    # The served model's context limit (fleetplan.models.context.served_context_limit); None: no limit.
    # Longer requests are rejected, never sized (plan.context_limit).
    max_model_len_tokens: int | None = None
    # Size (and verify) for steps this much slower than the step models say: 0.15 = 15 % (module docstring)
    step_time_margin: float = 0.0
    # vLLM engine limits of every co-located pool, in both phases (None: the pool's KV slots at its context
    # and, for a served model, the better of the derived chunk and vLLM's default budget; plan.pools)
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    # The serving engine whose profile timed the served model's placements (plan.placement, ``engine``) and
    # whose limits the recommendation names; recorded in the run's inputs
    engine: str = "vllm"
    # The engine release whose profile values timed them (``EngineProfile.options_for``; the caller passes the same
    # to ``plan.placement.place_on_gpus``); None becomes the profile's default version (its newest profiled release)
    engine_version: str | None = None

    def __post_init__(self) -> None:
        if self.engine not in ENGINE_NAMES:
            raise ConfigError(param="engine", value=self.engine,
                              rule=f"give an engine profile name: {', '.join(ENGINE_NAMES)}")
        profile = load_engine_profile(self.engine)
        profile.values_version(self.engine_version)  # a bad release string is one ConfigError
        if self.engine_version is None:
            object.__setattr__(self, "engine_version", profile.default_version)
        object.__setattr__(self, "step_time_margin", check_step_time_margin(self.step_time_margin))
        for name in ("max_num_seqs", "max_num_batched_tokens"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or int(value) != value or value < 1:
                raise ConfigError(param=name, value=value, rule="give a whole number >= 1")
            if self.service_model != SERVICE_ENGINE:
                raise ConfigError(f"`{name}` sets the engine the simulator runs; the paper's service model "
                                  "(eqs. 3-5) has no such limit: drop it or use the engine service model",
                                  param=name, value=value)
            if any(t in DISAGGREGATED for t in self.topologies):
                raise ConfigError(f"`{name}` applies to co-located fleets (homo, two-pool, multi-pool); the pdd/afd "
                                  "planner sizes its prefill and decode instances itself: drop pdd/afd from "
                                  f"`topologies` or drop `{name}`", param=name, value=value)
        if self.step_time_margin > 0 and any(t in DISAGGREGATED for t in self.topologies):
            raise ConfigError("`step_time_margin` applies to co-located fleets (homo, two-pool, multi-pool); the "
                              "pdd/afd screen does not take it yet: drop pdd/afd from `topologies` or drop the margin",
                              param="step_time_margin", value=self.step_time_margin)
        if not (math.isfinite(self.rate_per_s) and self.rate_per_s > 0):
            raise ConfigError(param="rate_per_s", value=self.rate_per_s,
                              rule="the arrival rate must be a finite number > 0 req/s")
        if not (math.isfinite(self.slo_ttft_s) and self.slo_ttft_s > 0):
            raise ConfigError(param="slo_ttft_s", value=self.slo_ttft_s, rule="the TTFT SLO must be > 0")
        if not 0 < self.percentile < 100:
            raise ConfigError(param="percentile", value=self.percentile, rule="give a percentile in (0, 100), e.g. 99")
        if not self.gpus:
            raise ConfigError("no GPU types to sweep: give `gpus` with at least one catalog name", param="gpus")
        if not self.topologies:
            raise ConfigError("no topology to sweep: give `topologies` homo,two-pool,multi-pool or a subset",
                              param="topologies")
        if not 0 < self.rho_max <= 1:
            raise ConfigError(param="rho_max", value=self.rho_max, rule="the utilisation cap must lie in (0, 1]")
        if int(self.max_gpus) != self.max_gpus or self.max_gpus < 1:
            raise ConfigError(param="max_gpus", value=self.max_gpus, rule="give a whole number >= 1")
        if self.compress_gamma <= 1:
            raise ConfigError(param="compress_gamma", value=self.compress_gamma, rule="the band factor must be > 1")
        if isinstance(self.availability, str):
            if self.availability != AVAILABILITY_FROM_CATALOG:
                raise ConfigError(param="availability", value=self.availability,
                                  rule="give a number in (0, 1] or 'catalog'")
        elif not 0 < self.availability <= 1:
            raise ConfigError(param="availability", value=self.availability,
                              rule="node availability must lie in (0, 1]")
        for g in self.gpus:
            g.require_serving()
            g.require_price_usd_per_h()
        self.rejected()  # every request above the limit: a ConfigError now, not an empty fleet later
        object.__setattr__(self, "disagg", check_disagg_inputs(self.topologies, self.slo_tpot_s, self.min_ce_gain,
                                                               self.disagg))

    def rejected(self) -> RejectedTraffic:
        """Share of requests and tokens above ``max_model_len_tokens`` (served by no pool)."""
        return rejected_traffic(self.workload, self.max_model_len_tokens)

    @property
    def engine_values_version(self) -> str:
        """The profiled release whose values ``engine_version`` runs (``EngineProfile.values_version``)."""
        return load_engine_profile(self.engine).values_version(self.engine_version)

    def calibrated_profiles(self) -> tuple[tuple[str, CalibratedStepModel], ...]:
        """(GPU type, profile) of every GPU type whose step model is a calibrated profile (``perf.calibrate``, a
        measured one), read through its wrappers (a data-parallel instance's rank step, an "MTP on" marker)."""
        out = []
        for name, m in self.step_models:
            while m is not None and not isinstance(m, CalibratedStepModel):
                m = getattr(m, "base", None)
            if m is not None:
                out.append((name, m))
        return tuple(out)

    def availability_of(self, gpu: GpuProfile) -> float:
        """A for ``gpu`` (see module docstring)."""
        if isinstance(self.availability, str):
            return gpu.availability if gpu.availability is not None else 1.0
        return float(self.availability)

    def settings(self) -> PlanSettings:
        return PlanSettings(
            rate_per_s=self.rate_per_s,
            slo_ttft_s=self.slo_ttft_s,
            percentile=self.percentile,
            rho_max=self.rho_max,
            max_gpus=int(self.max_gpus),
            tail_model=self.tail_model,
            ttft_model=self.ttft_model,
            compress_gamma=self.compress_gamma,
            n_prefill_seqs=self.n_prefill_seqs,
            min_spare_gpus=int(self.min_spare_gpus),
            gpus_per_instance=tuple(self.gpus_per_instance),
            service_model=self.service_model,
            slo_tpot_s=self.slo_tpot_s,
            step_models=tuple(self.step_models),
            arrival_cv2=float(self.arrival_cv2),
            step_time_margin=self.step_time_margin,
            max_num_seqs=None if self.max_num_seqs is None else int(self.max_num_seqs),
            max_num_batched_tokens=None if self.max_num_batched_tokens is None else int(self.max_num_batched_tokens),
        )


@dataclass(frozen=True)
class OptimizeResult:
    """Ranked candidates, the Pareto frontier and the recommendation."""

    request: OptimizeRequest
    candidates: tuple[Candidate, ...]
    pareto: tuple[Candidate, ...]
    recommendation: Candidate | None
    verification: tuple[Verification, ...] = field(default_factory=tuple)
    analytic_time_s: float = 0.0  # phase 1 wall time
    verify_time_s: float = 0.0  # phase 2 wall time (0 without verification)
    baselines: tuple[tuple[str, Candidate], ...] = ()  # (family, all-premium baseline)
    verification_settings: VerifySettings | None = None  # how phase 2 simulated (None without it)
    # The recommendation's step-time and rate headroom (with headroom settings, a verified co-located
    # recommendation; None otherwise)
    headroom: Headroom | None = None
    # What the reports show beyond the sweep (``plan.figures.with_report_figures``; empty until then)
    latency_profiles: tuple[PoolLatencyProfile, ...] = ()
    procurement: tuple[ProcurementLine, ...] = ()
    cost_latency: tuple[CostLatencyPoint, ...] = ()
    candidate_economics: Mapping[tuple, Economics] = field(default_factory=dict)  # by ``Candidate.key()``
    rejected_traffic: RejectedTraffic | None = None
    # The fleets ``fleetplan deploy`` exports, by ``Candidate.key()`` (``plan.deployment``; empty until then)
    deployments: Mapping[tuple, Deployment] = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        return self.recommendation is not None

    def economics_of(self, c: Candidate) -> Economics | None:
        """Spend ratio and CE of ``c`` against its family's all-premium baseline (None without one)."""
        return economics(c, dict(self.baselines).get(family(c.topology)), self.request.rho_max)


def resolve_gpus(catalog: GpuCatalog, names: Sequence[str] | None) -> tuple[GpuProfile, ...]:
    """Catalog profiles for ``names`` (default: the calibrated trio), duplicates removed."""
    out: dict[str, GpuProfile] = {}
    for name in names or DEFAULT_GPUS:
        g = catalog.get(name)
        out.setdefault(g.name, g)
    return tuple(out.values())


#: ``pool_map(fn, items)`` -> ``[fn(x) for x in items]``, computed however the caller likes (the command
#: line forks: ``fleetplan.exec.fork.fork_map``); results must be the serial map's.
PoolMapFn = Callable[[Callable, Sequence], list]


def _size_pool(points: LengthPoints, settings: PlanSettings, availability, key) -> PoolPlan:
    rng_, gpu, router = key
    return size_one_pool(points, rng_, gpu, router, settings, availability(gpu))


def analytical_phase_with_baselines(
    request: OptimizeRequest, progress: ProgressFn | None = None, pool_map: PoolMapFn | None = None,
) -> tuple[list[Candidate], dict[str, Candidate]]:
    """Phase 1: every candidate sized, CE-gated and ranked, and the per-family baselines.  The sweep's pools
    are sized first (``sweep_pools``): through ``pool_map`` when given, else here in lockstep
    (``pools.size_pools``); the same figures either way."""
    points = LengthPoints(request.workload, request.pool_points, request.quadrature_points,
                          request.max_model_len_tokens)
    lays = list(layouts(request.topologies, request.thresholds_tokens, points.max_tokens, request.max_pools))
    settings = request.settings()
    keys = sweep_pools(lays, request.gpus, request.routers)
    if pool_map is not None:
        plans = pool_map(functools.partial(_size_pool, points, settings, request.availability_of), keys)
    else:  # here, all of them in lockstep (``size_pools``: the same plans, 15 % less CPU in the README sweep)
        plans = size_pools([(points, r, g, router, settings, request.availability_of(g)) for r, g, router in keys])
    presized = {(r, g.name, router): plan for (r, g, router), plan in zip(keys, plans, strict=True)}
    ranked = sweep(points, lays, request.gpus, request.routers, settings, request.availability_of, progress,
                   presized)
    extra = [] if not any(t in DISAGGREGATED for t in request.topologies) else disagg_candidates(
        points, request.topologies, request.gpus, request.settings(), request.disagg, request.slo_tpot_s,
        request.availability_of)
    return rank_with_baselines(ranked, extra, premium_gpu(request.gpus), request.min_ce_gain, request.rho_max)


def analytical_phase(request: OptimizeRequest, progress: ProgressFn | None = None) -> list[Candidate]:
    """Phase 1: every candidate sized and ranked."""
    return analytical_phase_with_baselines(request, progress)[0]


def verified_fleet(candidate: Candidate) -> Candidate:
    """``candidate`` resized to the GPU counts its verification found (spares recomputed)."""
    v = candidate.verification
    if v is None:
        raise ValueError("candidate was not verified")
    pools = []
    for p, n, spares in zip(candidate.pools, v.verified_counts, v.verified_spares, strict=True):
        pools.append(replace(p, count=int(n), spares=int(spares)))
    sized = replace(candidate, pools=tuple(pools))
    total = sum(p.total_gpus for p in pools)
    cost = fleet_usd_per_h(pools) * H_PER_YEAR
    return replace(sized, total_gpus_needed=total, cost_usd_per_year=cost,
                   cost_usd_per_mtok=candidate.cost_usd_per_mtok * cost / candidate.cost_usd_per_year
                   if candidate.cost_usd_per_year > 0 else candidate.cost_usd_per_mtok)


def verification_requests(request: OptimizeRequest, verify: VerifySettings | None) -> int:
    """A rough count of the requests phase 2 simulates, known before phase 1 (for choosing an
    executor): ``top_k`` candidates per list x replications x ``PLANNING_EVALUATIONS`` counts per
    search x one run per candidate, a run being ``n_requests`` or the steady-state rule with a
    lifetime of ``PLANNING_LIFETIME_S`` and ``PLANNING_POOLS`` pools' minimum completions; 0 without verification."""
    if verify is None:
        return 0
    n_lists = 1 + sum(t in DISAGGREGATED for t in request.topologies)
    if verify.n_requests is not None:
        per_run = verify.n_requests
    else:
        lifetimes = verify.warmup_lifetimes + verify.measured_lifetimes
        per_run = max(math.ceil(request.rate_per_s * lifetimes * PLANNING_LIFETIME_S),
                      PLANNING_POOLS * verify.min_completions)
    return verify.top_k * n_lists * per_run * verify.n_replications * PLANNING_EVALUATIONS


#: Largest margin of analytic cost above the cheapest verified fleet's within which phase 2's bound
#: still verifies a candidate.  The margin used is the largest share by which verification has shrunk
#: a candidate so far (0 when it never did: ties only), capped here: verification moves a pool's count
#: by up to about 10 % (``benchmarks/bench_agreement.py`` measures the share of candidates within
#: max(1, 10 %)).
BOUND_SLACK = 0.10
#: A candidate within BOUND_SLACK of the bound is also verified when it needs at most this many pool
#: searches that no verified candidate has run and could still verify cheaper: its settled pools at
#: their verified counts plus the others' analytic counts shrunk by BOUND_SLACK cost no more than the
#: bound (``plan.verify.verified_cost_floor_usd_per_year``).  ``benchmarks/bench_regret.py``: 14 of
#: 14 scenarios, largest regret 0 % (with 1: 12 of 14, 1.0 %, once the MoE rows-per-expert ramp moved
#: Qwen3-30B-A3B's costs: agent_heavy's cheapest verified fleet was the screen's seventh, two new pool
#: searches away; with none: 12 of 14, 5.3 %); the README command still verifies 5 candidates.
CHEAP_NEW_SEARCHES = 2


def optimize(
    request: OptimizeRequest,
    verify: VerifySettings | None = None,
    progress: ProgressFn | None = None,
    map_fn: MapFn | None = None,
    headroom: HeadroomSettings | None = None,
    pool_map: PoolMapFn | None = None,
    on_recommendation: Callable[[Candidate], object] | None = None,
) -> OptimizeResult:
    """Phase 1 (analytic sweep) and, with ``verify``, phase 2 (simulation of the top candidates).

    With verification the recommendation is the cheapest fleet that passed the simulator
    (after its two-sided search), or None when none did; without it, the cheapest analytic one.
    ``map_fn`` runs the verifications (default: one after another in this process).  With
    ``headroom`` and verification, a co-located recommendation's headroom is searched
    (``plan.headroom``; ``OptimizeResult.headroom``).  ``pool_map`` sizes the analytic sweep's pools
    (``analytical_phase_with_baselines``; default: one after another here).  ``on_recommendation``
    is called with the verified recommendation, when there is one, before its headroom search (the
    command line starts the reports' own simulation of it there, beside the search).
    """
    if verify is not None and verify.step_time_margin != request.step_time_margin:
        raise ConfigError(f"verification's step_time_margin {verify.step_time_margin:g} differs from the request's "
                          f"{request.step_time_margin:g}: phase 2 must simulate the steps phase 1 sized for; give "
                          "both the same margin")
    if verify is not None and dict(verify.step_models) != dict(request.step_models):
        raise ConfigError("verification's step models differ from the request's: phase 2 must simulate the step "
                          "model phase 1 sized with (one physics); give both the same step_models")
    if verify is not None and verify.max_model_len_tokens != request.max_model_len_tokens:
        raise ConfigError(f"verification's max_model_len_tokens {verify.max_model_len_tokens} differs from the "
                          f"request's {request.max_model_len_tokens}: both phases must serve the same context "
                          "limit; give both the same value")
    t0 = time.perf_counter()
    ranked, base = analytical_phase_with_baselines(request, progress, pool_map)
    base_items = tuple(base.items())
    elapsed = time.perf_counter() - t0
    feasible = [c for c in ranked if c.feasible]
    if verify is None:
        return OptimizeResult(request, tuple(ranked), tuple(pareto_frontier(ranked)),
                              feasible[0] if feasible else None, (), elapsed, baselines=base_items)
    gpus = {g.name: g for g in request.gpus}
    top = feasible[: verify.top_k]
    for topo in (t for t in request.topologies if t in DISAGGREGATED):
        top += [c for c in feasible if c.topology is topo][: verify.top_k]
    top = sorted({c.rank: c for c in top}.values(), key=lambda c: c.rank)
    colocated = [c for c in top if not isinstance(c, DisaggCandidate)]
    disagg = [c for c in top if isinstance(c, DisaggCandidate)]
    n_top = len(top)
    if progress is not None:
        progress("verify", 0, n_top)
    checked: dict[int, Candidate] = {}
    if disagg:  # one task per PDD / AFD candidate (the PDD simulator runs the whole fleet)
        task = functools.partial(verify_any, gpus=gpus, workload=request.workload, s=verify,
                                 availability=request.availability_of)
        outcomes: list[TaskOutcome] = []
        for outcome in (map_fn or serial_map)(task, disagg):
            outcomes.append(outcome)
            if progress is not None:
                progress("verify", len(outcomes), n_top)
        for cand, outcome in zip(disagg, in_input_order(outcomes, len(disagg)), strict=True):
            v = outcome.value if outcome.ok else failed_verification(cand, outcome.error)
            checked[cand.rank] = replace(cand, verification=v)
    if colocated:  # pools searched on their own, every distinct pool once, replications as tasks
        def settled(done: int, _total: int) -> None:
            if progress is not None:
                progress("verify", len(disagg) + done, n_top)

        searches: dict = {}  # pool searches, shared with the bound's rounds below
        for cand, v in zip(colocated, verify_colocated(colocated, gpus, request.workload, verify,
                                                       request.availability_of, map_fn, settled, searches),
                           strict=True):
            checked[cand.rank] = replace(cand, verification=v)
        # The bound: while unverified co-located candidates cost (analytically) at most the slack more
        # than the cheapest fleet verified so far (verification may shrink them), or none passed yet,
        # verify the next top_k of them, up to extend_max.
        extra = 0
        while extra < verify.extend_max:
            done = [(c.cost_usd_per_year, verified_fleet(c).cost_usd_per_year) for c in checked.values()
                    if c.verification.passed and not isinstance(c, DisaggCandidate)]
            bound = min((v for _, v in done), default=math.inf)
            # slack: the most verification has shrunk a candidate so far (0 when it never did), at most
            # BOUND_SLACK: how much dearer an unverified candidate may be and still verify cheaper
            slack = min(max((1.0 - v / a for a, v in done if a > 0), default=0.0), BOUND_SLACK)
            # and, within BOUND_SLACK, candidates that need at most CHEAP_NEW_SEARCHES new pool searches
            # and could still verify cheaper: their settled pools at verified counts, the rest shrunk by
            # BOUND_SLACK, cost no more than the bound
            more = [c for c in feasible if c.rank not in checked and not isinstance(c, DisaggCandidate)
                    and (c.cost_usd_per_year <= bound * (1.0 + max(slack, 0.0) + 1e-9)
                         or (c.cost_usd_per_year <= bound * (1.0 + BOUND_SLACK + 1e-9)
                             and new_pool_searches(c, gpus, searches) <= CHEAP_NEW_SEARCHES
                             and verified_cost_floor_usd_per_year(c, gpus, searches, BOUND_SLACK)
                             <= bound * (1.0 + 1e-9)))]
            more = more[: min(verify.top_k, verify.extend_max - extra)]
            if not more:
                break
            extra += len(more)
            for cand, v in zip(more, verify_colocated(more, gpus, request.workload, verify, request.availability_of,
                                                      map_fn, None, searches), strict=True):
                checked[cand.rank] = replace(cand, verification=v)
    checked = dict(sorted(checked.items()))
    ranked = [checked.get(c.rank, c) for c in ranked]
    passed = [verified_fleet(c) for c in checked.values() if c.verification.passed]
    best = min(passed, key=lambda c: (c.cost_usd_per_year, c.verification.p99_ttft_s_sim)) if passed else None
    verify_time_s = time.perf_counter() - t0 - elapsed
    room = None
    if on_recommendation is not None and best is not None:
        on_recommendation(best)
    if headroom is not None and best is not None and not isinstance(best, DisaggCandidate):
        room = fleet_headroom(best, gpus, request.workload, verify, headroom, map_fn, progress)
    return OptimizeResult(request, tuple(ranked), tuple(pareto_frontier(ranked)), best,
                          tuple(c.verification for c in checked.values()), elapsed,
                          verify_time_s=verify_time_s, baselines=base_items,
                          verification_settings=verify, headroom=room)

