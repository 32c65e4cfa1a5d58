"""Analytical sizing of one pool: traffic slice -> service moments -> GPU count.

For a pool range (lo, hi] on one GPU type:

1. its request points are the workload quadrature points with lo' < L <= hi'
   (``length`` router: lo' = lo, hi' = hi; ``compress``: lo' = gamma*lo,
   hi' = gamma*hi with L clipped to hi by shortening the prompt, except above the
   last pool), its arrival rate λ_pool = λ · (weight of those points) (core paper
   §3.1 step 1; sub-streams are treated as Poisson, §3.3);
2. n_max = floor(kv_blocks / ceil(hi / block)) KV slots per GPU at the pool's
   maximum context (§2.1); E[S], Cs² and the zero-wait TTFT from
   ``fleetplan.queueing.pool_service_moments`` (eqs. 3-5);
3. the minimum GPU count meeting the percentile TTFT SLO and the ρ cap from
   ``fleetplan.queueing.size_pool``; spares = ceil(n / A) - n for node
   availability A (§3.5, eq. 6).

Step model of a pool (``pool_step_model``, the one place both phases take it from): the GPU
type's entry of ``PlanSettings.step_models`` (with a served model: the operator-level predictor or a
calibrated profile), else the linear model of its serving constants (``sim.build_pool``'s
default), every step times 1 + ``step_time_margin`` (``fleetplan.perf.scaled``: all cost
coefficients scaled, exact up to rounding).  The engine model (``engine_of``) and the simulator
(``plan.verify.fleet_spec``) run that model; the paper's eqs. 3-5 read W and H of the serving
constants, both times 1 + margin (the same scaling of eq. 3).
"""

from __future__ import annotations

import math
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.hardware import GpuProfile, with_spares
from fleetplan.memo import IdentityMemo
from fleetplan.perf.kv_budget import vllm_batch_defaults
from fleetplan.perf.linear import LinearStepModel
from fleetplan.perf.scaled import slowed
from fleetplan.perf.seam import StepModel
from fleetplan.plan.defaults import MAX_STEP_TIME_MARGIN  # light: shown in the help
from fleetplan.plan.points import LengthPoints, pool_points
from fleetplan.plan.space import PoolRange, SizingRouter
from fleetplan.queueing import (
    InfeasibleReason,
    ServiceModel,
    pool_service_moments,
    size_pool,
)
from fleetplan.queueing.engine import (
    Deferred,
    EngineLimits,
    EngineModel,
    EngineProfile,
    LoadRequest,
    PoolLoad,
    SurvivalTable,
    peek,
    run_serial,
    sizing_steps,
)
from fleetplan.queueing.lockstep import run_lockstep
from fleetplan.queueing.sizing import min_gpus_for_cap
from fleetplan.queueing.speculative import with_speculation
from fleetplan.queueing.ttft import ttft_model, zero_wait_ttft_quantile_s
from fleetplan.units import fmt_ms

SERVICE_ENGINE = "engine"
SERVICE_PAPER = "paper"
SERVICE_MODELS = (SERVICE_ENGINE, SERVICE_PAPER)


def check_step_time_margin(margin: float) -> float:
    """``margin`` as a float in [0, ``MAX_STEP_TIME_MARGIN``), else ``ConfigError``."""
    m = float(margin)
    if not (math.isfinite(m) and 0.0 <= m < MAX_STEP_TIME_MARGIN):
        raise ConfigError(param="step_time_margin", value=margin,
                          rule=f"give a slowdown in [0 %, {MAX_STEP_TIME_MARGIN:.0%}), e.g. 15% or 0.15")
    return m


@dataclass(frozen=True)
class PlanSettings:
    """Sizing targets and model choices shared by every pool of a sweep."""

    rate_per_s: float
    slo_ttft_s: float
    percentile: float  # e.g. 99.0
    rho_max: float
    max_gpus: int
    tail_model: str
    ttft_model: str
    compress_gamma: float
    n_prefill_seqs: float | None
    min_spare_gpus: int = 0  # extra GPUs above the offered load (fleet-sim's search starts at +1)
    # GPUs per serving instance of a GPU type (a tensor-parallel group for a served model); absent = 1
    gpus_per_instance: tuple[tuple[str, int], ...] = ()
    # "engine": the simulator's step model and limits (queueing.engine); "paper": eqs. 3-5
    service_model: str = SERVICE_ENGINE
    slo_tpot_s: float | None = None  # prunes pools in phase 1 (engine model)
    # Step model per GPU type (with a served model: the operator-level predictor the simulator runs);
    # GPU types not listed run the linear model of their serving constants, as in the simulator.
    step_models: tuple[tuple[str, StepModel], ...] = ()
    arrival_cv2: float = 1.0  # Ca² of the arrival stream (1: Poisson)
    # Size for steps this much slower than the step model says (0.15: every step 15 % longer)
    step_time_margin: float = 0.0
    # vLLM engine limits for every pool (None: ``sim.build_pool``'s defaults at the pool's context; for a
    # served model's pools the sweep then also tries vLLM's own token budget, ``token_budget_choices``)
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.service_model not in SERVICE_MODELS:
            raise ConfigError(f"service model {self.service_model!r} is unknown: use one of "
                              f"{', '.join(SERVICE_MODELS)}")
        object.__setattr__(self, "step_time_margin", check_step_time_margin(self.step_time_margin))


@dataclass(frozen=True)
class PoolPlan:
    """One sized pool.  Times in seconds; ``count`` excludes ``spares``."""

    gpu: str
    lo_tokens: int
    hi_tokens: int
    n_max: int
    traffic_share: float
    lam_per_s: float
    count: int
    spares: int
    rho: float
    ttft_p_s: float
    wait_p_s: float
    mean_service_s: float
    cs2: float
    price_usd_per_h: float
    feasible: bool
    reason: str | None
    gpus_per_instance: int = 1  # GPUs of one serving instance (its TP/PP group); count is in instances
    # analytic TPOT at the SLO percentile (nan: not modelled); with the engine model built on first read
    # (``queueing.engine.LatencyTail``: only the candidates shown, verified or written need it)
    tpot_p_s: float = Deferred(float("nan"))
    mean_residence_s: float = float("nan")  # mean request lifetime in the pool, arrival to last token
    decode_batch: float = float("nan")  # the engine's operating decode batch n* (engine model)
    mean_step_s: float = float("nan")  # mean engine step at n* (engine model)
    binding: str = ""  # what set the count: rho | ttft | tpot (engine model)
    # The smallest count the sizing rules allow before any latency target (the utilisation cap,
    # stability, spares above the offered load): verification never goes below it
    floor_count: int = 0
    # TTFT and TPOT survival tables at ``count`` (engine model), for fleet-wide percentiles (TPOT: on first read)
    ttft_table: SurvivalTable | None = field(default=None, compare=False, repr=False)
    tpot_table: SurvivalTable | None = field(default=Deferred(None), compare=False, repr=False)
    # Why the pool is infeasible, as a code of ``fleetplan.errors.REASONS`` (None when feasible)
    reason_code: str | None = None
    # The engine limits both phases serve the pool with (vLLM --max-num-seqs, --max-num-batched-tokens);
    # 0: the simulator's defaults for the pool (``sim.build_pool``; the paper's service model)
    max_num_seqs: int = 0
    max_num_batched_tokens: int = 0

    @property
    def total_instances(self) -> int:
        return self.count + self.spares

    @property
    def total_gpus(self) -> int:
        return (self.count + self.spares) * self.gpus_per_instance


def fleet_usd_per_h(pools: Sequence[PoolPlan], counts: Sequence[int] | None = None,
                    spares: Sequence[int] | None = None) -> float:
    """Σ GPUs (with spares) x price per GPU-hour of ``pools``: at their own counts, or at ``counts`` and
    ``spares`` (instances per pool, e.g. phase 2's verified ones).  The one fleet-cost rule of the planner
    (annual: x ``units.H_PER_YEAR``)."""
    if counts is None:
        return sum(p.total_gpus * p.price_usd_per_h for p in pools)
    return sum((n + sp) * p.gpus_per_instance * p.price_usd_per_h
               for p, n, sp in zip(pools, counts, spares, strict=True))


def size_one_pool(*job) -> PoolPlan:
    """Size one pool of ``gpu`` for the requests in ``rng_`` (see module docstring): ``job`` is
    ``size_one_pool_steps``' arguments (points, rng_, gpu, router, settings, availability), its load requests
    each evaluated alone (``queueing.engine.run_serial``)."""
    return run_serial(size_one_pool_steps(*job))


def size_pools(jobs: Sequence[tuple[LengthPoints, PoolRange, GpuProfile, SizingRouter, PlanSettings, float]],
               ) -> list[PoolPlan]:
    """``[size_one_pool(*job) for job in jobs]``, the engine model's count searches of all the pools in
    lockstep: each round's load requests evaluated in one pass (``fleetplan.queueing.lockstep``; the same
    counts, figures within rounding)."""
    return run_lockstep([size_one_pool_steps(*job) for job in jobs])


def size_one_pool_steps(
    points: LengthPoints,
    rng_: PoolRange,
    gpu: GpuProfile,
    router: SizingRouter,
    settings: PlanSettings,
    availability: float,
) -> Generator[LoadRequest, PoolLoad, PoolPlan]:
    """``size_one_pool`` as a generator: the engine model's load requests pass through
    (``queueing.engine.sizing_steps``)."""
    serving = gpu.require_serving()
    price = gpu.require_price_usd_per_h()
    sub = pool_points(points, rng_, router, settings.compress_gamma)
    share = float(sub.weight.sum())
    n_max = int(serving.n_max(rng_.hi_tokens))
    lam = settings.rate_per_s * share

    def plan(
        count: int, spares: int, rho: float, ttft: float, wait: float, es: float, cs2: float, reason: str | None,
        **more,
    ) -> PoolPlan:
        """The pool's plan (``more``: its other fields, as ``replace`` of the plan would set them, ``n_max``
        included)."""
        return PoolPlan(
            gpu.name,
            rng_.lo_tokens,
            rng_.hi_tokens,
            more.pop("n_max", n_max),
            share,
            lam,
            count,
            spares,
            rho,
            ttft,
            wait,
            es,
            cs2,
            price,
            reason is None,
            reason,
            dict(settings.gpus_per_instance).get(gpu.name, 1),
            **more,
        )

    if share <= 0.0:
        return plan(0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, None)
    if n_max < 1:
        return replace(plan(0, 0, float("inf"), float("inf"), float("inf"), 0.0, 0.0,
                            f"context {rng_.hi_tokens} tokens does not fit one request in {gpu.name}'s KV cache"),
                       reason_code="other")
    if settings.service_model == SERVICE_ENGINE:
        return (yield from _size_engine(sub, rng_, gpu, settings, availability, plan, lam))
    model = ServiceModel(
        step=slowed(LinearStepModel(serving.iter_base_s, serving.iter_per_seq_s), 1.0 + settings.step_time_margin),
        n_slots=n_max,
        chunk_tokens=serving.chunk_tokens,
        n_prefill_seqs=None if settings.n_prefill_seqs is None else min(settings.n_prefill_seqs, n_max),
        ref_context_tokens=serving.ref_context_tokens,
    )
    moments = pool_service_moments(sub.prompt_tokens, sub.output_tokens, sub.weight, model)
    sized = size_pool(
        lam,
        moments,
        settings.slo_ttft_s,
        settings.percentile / 100.0,
        rho_max=settings.rho_max,
        max_gpus=settings.max_gpus,
        min_spare_gpus=settings.min_spare_gpus,
        tail_model=settings.tail_model,
        ttft_model=settings.ttft_model,
    )
    ttft_reported = sized.ttft_p_s
    if sized.reason is InfeasibleReason.PREFILL_EXCEEDS_SLO:
        ttft_reported = zero_wait_ttft_quantile_s(
            moments.zero_wait, settings.percentile / 100.0, ttft_model(settings.ttft_model)
        )
    reason = None if sized.feasible else _reason_text(sized.reason, ttft_reported, settings)
    spares = with_spares(sized.n_gpus, availability) - sized.n_gpus if sized.feasible else 0
    out = plan(
        sized.n_gpus, spares, sized.rho, sized.ttft_p_s, sized.wait_p_s, moments.mean_gpu_s, moments.cs2, reason
    )
    if not sized.feasible:
        return replace(out, reason_code=REASON_CODE[sized.reason])
    floor = min_gpus_for_cap(lam * moments.mean_gpu_s, settings.rho_max, settings.min_spare_gpus)
    return replace(out, floor_count=min(floor, sized.n_gpus))


#: The reason code (``fleetplan.errors.REASONS``) of each way sizing fails.
REASON_CODE = {
    InfeasibleReason.PREFILL_EXCEEDS_SLO: "prefill-alone",
    InfeasibleReason.DECODE_EXCEEDS_TPOT_SLO: "decode",
    InfeasibleReason.EXCEEDS_MAX_GPUS: "max-gpus",
    InfeasibleReason.UNSTABLE: "unstable",
    None: "other",
}


def _reason_text(reason: InfeasibleReason | None, ttft_s: float, settings: PlanSettings,
                 tpot_s: float = float("nan")) -> str:
    if reason is InfeasibleReason.PREFILL_EXCEEDS_SLO:
        return (
            f"prefill alone exceeds the SLO (P{settings.percentile:g} TTFT with no queue "
            f"{fmt_ms(ttft_s, '.0f')} > {fmt_ms(settings.slo_ttft_s, '.0f')})"
        )
    if reason is InfeasibleReason.EXCEEDS_MAX_GPUS:
        return f"needs more than max_gpus {settings.max_gpus} GPUs"
    if reason is InfeasibleReason.DECODE_EXCEEDS_TPOT_SLO:
        return (f"decode alone exceeds the TPOT SLO (a lone request's decode step {fmt_ms(tpot_s, '.3g')} > "
                f"{fmt_ms(settings.slo_tpot_s)})")
    return "unstable (utilisation >= 1)"


def pool_step_model(gpu: GpuProfile, step_models: Mapping[str, StepModel], step_time_margin: float = 0.0,
                    default: StepModel | None = None) -> StepModel:
    """The step model a pool of ``gpu`` runs in both phases (module docstring): ``step_models[gpu.name]``,
    else ``default`` (a built pool's own), else the linear model of ``gpu``'s serving constants, with
    every step 1 + ``step_time_margin`` times as long."""
    step = step_models.get(gpu.name, default)
    if step is None:
        step = LinearStepModel.from_serving(gpu.require_serving())
    return slowed(step, 1.0 + check_step_time_margin(step_time_margin))


def engine_of(gpu: GpuProfile, max_context_tokens: int, step_models: Mapping[str, StepModel],
              step_time_margin: float = 0.0, max_num_seqs: int | None = None,
              max_num_batched_tokens: int | None = None) -> EngineModel:
    """The serving instance the simulator would run for a pool of ``gpu`` holding requests of up to
    ``max_context_tokens`` (``sim.build_pool``'s limits, or the ``max_num_seqs`` /
    ``max_num_batched_tokens`` given; the step model the verifier gives it, ``pool_step_model``)."""
    from fleetplan.sim import build_pool  # plan sits above sim; imported here to keep sweeps light

    pool = build_pool(gpu, "pool", 1, int(max_context_tokens), max_num_seqs=max_num_seqs,
                      max_num_batched_tokens=max_num_batched_tokens)
    step = pool_step_model(gpu, step_models, step_time_margin, pool.step_model)
    lim = pool.limits
    engine = EngineModel.of(step, EngineLimits(lim.max_num_seqs, lim.max_num_batched_tokens, lim.kv_blocks,
                                               lim.block_size_tokens), pool.n_api_servers)
    return with_speculation(engine, step)  # an "MTP on" candidate (plan.placement): verify + draft passes


#: Engines ``_engine_for`` keeps (a sweep serves one GPU type at one context bound in many pools).  The
#: 70B sweep (33 GPU/TP choices, 11 context bounds, two token budgets) meets 633 different engines: at 256
#: the cache was cleared 22 times and 3,054 of its 7,324 look-ups rebuilt an engine (3 % of its CPU).  An
#: engine is a few hundred bytes.
ENGINE_CACHE = 4096
_ENGINES = IdentityMemo(ENGINE_CACHE)
# The same engines keyed by the identity of the GPU profile and step models: hashing a profile and its
# step models field by field took 7 % of a 70B sweep's CPU, and a sweep passes the very same objects for
# every pool.
_ENGINES_BY_ID = IdentityMemo(ENGINE_CACHE)


def _engine_for(gpu: GpuProfile, max_context_tokens: int, settings: PlanSettings,
                max_num_batched_tokens: int | None) -> EngineModel:
    """``engine_of`` for a pool of ``settings``, built once per process for equal inputs (the engine
    model is immutable; inputs that do not hash or compare are built afresh)."""
    models = settings.step_models
    fast = (int(max_context_tokens), settings.step_time_margin, settings.max_num_seqs, max_num_batched_tokens)
    engine = _ENGINES_BY_ID.get((gpu, models), fast)
    if engine is not None:
        return engine
    args = (gpu, int(max_context_tokens), dict(models), settings.step_time_margin,
            settings.max_num_seqs, max_num_batched_tokens)
    key = (gpu, int(max_context_tokens), models, settings.step_time_margin, settings.max_num_seqs,
           max_num_batched_tokens)
    try:
        engine = _ENGINES.get((), key)
    except (TypeError, ValueError):  # a step model that does not hash (or compare)
        return engine_of(*args)
    if engine is None:
        engine = _ENGINES.put((), key, engine_of(*args))
    return _ENGINES_BY_ID.put((gpu, models), fast, engine)


def token_budget_choices(gpu: GpuProfile, settings: PlanSettings) -> tuple[int | None, ...]:
    """The batched-token budgets a pool of ``gpu`` may be sized with: the one given
    (``settings.max_num_batched_tokens``); else the simulator's default (None: the pool's slots plus its
    chunk) and, for a served model's pool (a step model for ``gpu``), vLLM's own default for the GPU
    (``perf.kv_budget.vllm_batch_defaults``: 8192 on GPUs of at least 70 GiB that are not A100s, else
    2048) when it is larger: a long prompt's prefill takes fewer, fuller steps."""
    if settings.max_num_batched_tokens is not None:
        return (int(settings.max_num_batched_tokens),)
    if gpu.name not in dict(settings.step_models):
        return (None,)
    return (None, vllm_batch_defaults(gpu)[1])


def _size_engine(sub, rng_: PoolRange, gpu: GpuProfile, settings: PlanSettings, availability: float, plan,
                 lam: float) -> Generator[LoadRequest, PoolLoad, PoolPlan]:
    """Engine-model sizing of one pool (``fleetplan.queueing.engine``): at each token budget of
    ``token_budget_choices`` (the second only when the first leaves the pool bound by its TTFT), the
    fewest instances win, the first budget on a tie."""
    best = None
    for budget in token_budget_choices(gpu, settings):
        engine = _engine_for(gpu, rng_.hi_tokens, settings, budget)
        if best is not None and engine.limits.max_num_batched_tokens <= best[1].engine.limits.max_num_batched_tokens:
            continue
        profile = EngineProfile(engine, np.maximum(sub.prompt_tokens, 1.0), np.maximum(sub.output_tokens, 1.0),
                                sub.weight)
        sized, _ = yield from sizing_steps(
            profile, lam, settings.slo_ttft_s, settings.percentile / 100.0, slo_tpot_s=settings.slo_tpot_s,
            rho_max=settings.rho_max, max_instances=settings.max_gpus, min_spare_instances=settings.min_spare_gpus,
            arrival_cv2=settings.arrival_cv2,
        )
        if best is None or (sized.feasible and (not best[0].feasible or sized.n_instances < best[0].n_instances)):
            best = (sized, profile)
        if best[0].feasible and best[0].binding != "ttft":
            break  # the budget only shortens prefills: a pool not bound by its TTFT keeps the first
    sized, profile = best
    reason = None if sized.feasible else _reason_text(
        sized.reason, sized.ttft_p_s, settings,
        sized.tpot_p_s if sized.reason is InfeasibleReason.DECODE_EXCEEDS_TPOT_SLO else float("nan"))
    if sized.reason is InfeasibleReason.PREFILL_EXCEEDS_SLO:
        # what the pool lacks, in the fleet's terms: the requests no count can serve within the SLO
        missed = profile.zero_load_violation(settings.slo_ttft_s) * float(sub.weight.sum())
        reason += (f"; its prompts whose prefill alone misses it are {missed:.2%} of all requests, and every "
                   f"pool meets P{settings.percentile:g} on its own requests")
    spares = with_spares(sized.n_instances, availability) - sized.n_instances if sized.feasible else 0
    # GPU-seconds of the binding resource per request, so that λ · mean_service_s / count = ρ
    per_request_s = sized.rho * sized.n_instances / lam if lam > 0 else 0.0
    lim = profile.engine.limits
    return plan(sized.n_instances, spares, sized.rho, sized.ttft_p_s, float("nan"), per_request_s, 0.0, reason,
                tpot_p_s=peek(sized, "tpot_p_s"), mean_residence_s=sized.mean_residence_s,
                decode_batch=sized.decode_batch, mean_step_s=sized.mean_step_s, binding=sized.binding,
                floor_count=sized.floor_instances if sized.feasible else 0,
                ttft_table=sized.ttft_table, tpot_table=peek(sized, "tpot_table"),
                reason_code=None if sized.feasible else REASON_CODE[sized.reason],
                max_num_seqs=int(lim.max_num_seqs), max_num_batched_tokens=int(lim.max_num_batched_tokens),
                n_max=int(profile.n_cap))
