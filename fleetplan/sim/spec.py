"""Fleet specification for the simulator: frozen, validated, no I/O.

A ``FleetSpec`` is a tuple of ``PoolSpec`` plus the rule that sends each request
to a pool (``PoolRouter``).  A pool is ``n_instances`` identical serving
instances (one vLLM/SGLang engine each) of one GPU type, limited to prompts +
outputs of at most ``max_context_tokens``, with a step-time model
(``fleetplan.perf.linear.LinearStepModel``, eq. 3 of the core paper) and vLLM
scheduler limits (``SchedulerLimits``).  Specs never see a GPU profile or a file:
``fleetplan.sim.builders`` derives them from calibrated constants and
``fleetplan.sim.fleet_toml`` reads them from TOML.

Routing policies follow inference-fleet-sim §3.4 (LengthRouter, CompressAndRoute,
RandomRouter, ModelRouter) plus round-robin and least-loaded baselines.
Compress-and-Route (Chen et al., 2026; core paper §2.1) squeezes requests whose
total is in ``(B, gamma * B]`` down to ``B``; ``DEFAULT_COMPRESS_GAMMA = 1.5``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fleetplan.errors import ConfigError
from fleetplan.names import NameRegistry
from fleetplan.perf.seam import StepModel
from fleetplan.sim.features import RuntimeFeatures

__all__ = [
    "ArrivalProcess",
    "DEFAULT_BLOCK_SIZE_TOKENS",
    "DEFAULT_COMPRESS_GAMMA",
    "DEFAULT_MODEL_TAG",
    "FleetSpec",
    "InstanceRouter",
    "Level",
    "PoolRouter",
    "PoolSpec",
    "SchedulerLimits",
]

DEFAULT_BLOCK_SIZE_TOKENS = 16  # vLLM's default PagedAttention block size
DEFAULT_COMPRESS_GAMMA = 1.5  # borderline band (B, 1.5 B] as in the core paper's examples
DEFAULT_MODEL_TAG = "default"


class InstanceRouter(NameRegistry):
    """How a pool picks one of its instances for an arriving request."""

    LEAST_OUTSTANDING = "least_outstanding"
    ROUND_ROBIN = "round_robin"
    RANDOM = "random"
    POWER_OF_TWO = "power_of_two"
    PREFIX_AFFINITY = "prefix_affinity"  # runtime features (#5): feature kernel only

    @classmethod
    def kind(cls) -> str:
        return "instance router"


class PoolRouter(NameRegistry):
    """How the gateway picks a pool for a request (core paper §3.4).

    * ``length``: smallest pool whose ``max_context_tokens`` >= prompt + output.
    * ``compress_and_route``: a request goes to the first pool, in order of context ``B``,
      that holds it, or (not for the largest pool) whose band ``(B, gamma*B]`` holds its
      total while its output alone is below ``B``; those are squeezed to ``B`` by
      shortening the prompt (``fleetplan.sim.pool_routing``).
    * ``random`` / ``round_robin``: uniform over pools / in arrival order.
    * ``least_loaded``: at arrival, the fitting pool with least outstanding tokens
      per instance (decided inside the simulator).
    * ``model_tag``: requests carry a model tag drawn from ``FleetSpec.tag_shares``
      (all requests share one tag when none are given); among the pools serving a
      tag, the ``length`` rule picks one.
    """

    LENGTH = "length"
    COMPRESS_AND_ROUTE = "compress_and_route"
    RANDOM = "random"
    ROUND_ROBIN = "round_robin"
    LEAST_LOADED = "least_loaded"
    MODEL_TAG = "model_tag"

    @classmethod
    def kind(cls) -> str:
        return "pool router"


class ArrivalProcess(NameRegistry):
    """How arrival times are drawn: ``poisson`` (exponential gaps), ``gamma``
    (gamma gaps with coefficient of variation ``cv``; cv = 1 is Poisson) or
    ``replay`` (the workload trace's own timestamps, optionally rescaled to a rate)."""

    POISSON = "poisson"
    GAMMA = "gamma"
    REPLAY = "replay"

    @classmethod
    def kind(cls) -> str:
        return "arrival process"


class Level(NameRegistry):
    """Simulator fidelity: ``request`` (two events per request, eq. 4-5 service
    times, the core paper's DES) or ``iteration`` (vLLM-v1 continuous batching,
    one event per engine step)."""

    REQUEST = "request"
    ITERATION = "iteration"

    @classmethod
    def kind(cls) -> str:
        return "simulation level"


def _positive_int(owner: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{owner}: {name} = {value!r} must be an integer >= 1; give a whole number")


def _is_finite_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


@dataclass(frozen=True)
class SchedulerLimits:
    """vLLM scheduler limits of one instance.

    Parameters
    ----------
    max_num_seqs : int
        Most sequences running at once (vLLM ``max_num_seqs``).
    max_num_batched_tokens : int
        Token budget of one engine step (vLLM ``max_num_batched_tokens``); prefill is
        chunked to fit it.
    kv_blocks : int
        PagedAttention blocks in the instance's KV cache.
    block_size_tokens : int
        Tokens per block (vLLM ``block_size``, default 16).
    """

    max_num_seqs: int
    max_num_batched_tokens: int
    kv_blocks: int
    block_size_tokens: int = DEFAULT_BLOCK_SIZE_TOKENS

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "max_num_batched_tokens", "kv_blocks", "block_size_tokens"):
            _positive_int("scheduler limits", name, getattr(self, name))

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens the KV cache holds (``kv_blocks * block_size_tokens``)."""
        return self.kv_blocks * self.block_size_tokens


@dataclass(frozen=True)
class PoolSpec:
    """One pool: ``n_instances`` identical instances of GPU ``gpu``.

    ``price_usd_per_h`` is per instance (None when no price is known: costs are
    then NaN, never a made-up number); ``model_tag`` names the model the pool
    serves (read only by ``PoolRouter.MODEL_TAG``); ``features`` are the pool's runtime
    features (``fleetplan.sim.features``: CUDA graphs, speculative decoding, prefix caching,
    scheduler policy; all off by default); ``n_api_servers`` the API server processes in front of
    each instance (vLLM's ``api_server_count``; ``fleetplan.sim.api_server``, read only when the step
    model carries an API server cost).
    """

    name: str
    gpu: str
    n_instances: int
    max_context_tokens: int
    step_model: StepModel
    limits: SchedulerLimits
    router: InstanceRouter = InstanceRouter.LEAST_OUTSTANDING
    price_usd_per_h: float | None = None
    model_tag: str = DEFAULT_MODEL_TAG
    features: RuntimeFeatures = RuntimeFeatures()
    n_api_servers: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"pool name {self.name!r} must be a non-empty string; name each pool")
        owner = f"pool {self.name!r}"
        n = self.n_api_servers
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"{owner}: n_api_servers = {n!r} must be an integer >= 1 (vLLM's api_server_count)",
                              param="n_api_servers", value=n)
        if not isinstance(self.gpu, str) or not self.gpu.strip():
            raise ConfigError(f"{owner}: gpu {self.gpu!r} must be a GPU name such as 'a100'")
        _positive_int(owner, "n_instances", self.n_instances)
        _positive_int(owner, "max_context_tokens", self.max_context_tokens)
        if not isinstance(self.step_model, StepModel):
            got = type(self.step_model).__name__
            raise ConfigError(
                f"{owner}: step_model must provide kernel_coefficients() and t_iter_s() "
                f"(LinearStepModel, StepTimePredictor, CalibratedStepModel), got {got}"
            )
        if not isinstance(self.limits, SchedulerLimits):
            raise ConfigError(f"{owner}: limits must be SchedulerLimits, got {type(self.limits).__name__}")
        object.__setattr__(self, "router", InstanceRouter.parse(self.router))
        if self.limits.kv_capacity_tokens < self.max_context_tokens:
            raise ConfigError(
                f"{owner}: max_context_tokens = {self.max_context_tokens} exceeds the KV cache "
                f"({self.limits.kv_blocks} blocks x {self.limits.block_size_tokens} tokens); "
                "lower max_context_tokens or raise kv_blocks"
            )
        price = self.price_usd_per_h
        if price is not None and not (_is_finite_number(price) and price >= 0):
            raise ConfigError(
                f"{owner}: price_usd_per_h = {price!r} must be a finite number >= 0, or None if unknown"
            )
        if not isinstance(self.model_tag, str) or not self.model_tag.strip():
            raise ConfigError(f"{owner}: model_tag {self.model_tag!r} must be a non-empty string")
        if not isinstance(self.features, RuntimeFeatures):
            raise ConfigError(f"{owner}: features must be RuntimeFeatures, got {type(self.features).__name__}")

    @property
    def cost_usd_per_h(self) -> float:
        """Hourly cost of the whole pool (NaN when the price is unknown)."""
        if self.price_usd_per_h is None:
            return float("nan")
        return self.n_instances * float(self.price_usd_per_h)


@dataclass(frozen=True)
class FleetSpec:
    """Pools plus the between-pool router.

    Parameters
    ----------
    pools : tuple of PoolSpec
        Unique names; order is kept for reporting.
    pool_router : PoolRouter
        Between-pool policy (default ``length``).
    compress_gamma : float
        Compress-and-Route band factor gamma >= 1: totals in ``(B, gamma*B]`` are
        squeezed to ``B`` (default 1.5; read only by ``compress_and_route``).
    tag_shares : tuple of (tag, share)
        Fraction of requests carrying each model tag, summing to 1 (read only by
        ``model_tag``); empty means every request carries the one tag all pools share.
    max_model_len_tokens : int, optional
        The served model's context limit (vLLM ``max_model_len``,
        ``fleetplan.models.context``); no pool's ``max_context_tokens`` may exceed it.  A request
        whose prompt + output exceeds it is rejected as vLLM rejects it (never squeezed by
        ``compress_and_route``), counted per pool as ``n_too_long`` and left out of the
        latency percentiles (``fleetplan.sim.result``).  None: no model limit.
    """

    pools: tuple[PoolSpec, ...]
    pool_router: PoolRouter = PoolRouter.LENGTH
    compress_gamma: float = DEFAULT_COMPRESS_GAMMA
    tag_shares: tuple[tuple[str, float], ...] = ()
    max_model_len_tokens: int | None = None

    def __post_init__(self) -> None:
        pools = tuple(self.pools)
        object.__setattr__(self, "pools", pools)
        if not pools:
            raise ConfigError("fleet has no pools; give at least one pool")
        for pool in pools:
            if not isinstance(pool, PoolSpec):
                raise ConfigError(f"fleet pools must be PoolSpec, got {type(pool).__name__}")
        names = [p.name for p in pools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"pool names {dupes} are repeated; give every pool a unique name")
        object.__setattr__(self, "pool_router", PoolRouter.parse(self.pool_router))
        gamma = self.compress_gamma
        if not (_is_finite_number(gamma) and gamma >= 1):
            raise ConfigError(f"compress_gamma = {gamma!r} must be a finite number >= 1 (1.5 is typical)")
        shares = tuple((str(tag), float(share)) for tag, share in self.tag_shares)
        object.__setattr__(self, "tag_shares", shares)
        self._check_tags()
        self._check_model_len()

    def _check_model_len(self) -> None:
        limit = self.max_model_len_tokens
        if limit is None:
            return
        _positive_int("fleet", "max_model_len_tokens", limit)
        for pool in self.pools:
            if pool.max_context_tokens > limit:
                raise ConfigError(
                    f"pool {pool.name!r}: max_context_tokens = {pool.max_context_tokens:,} exceeds the served "
                    f"model's max_model_len {limit:,}; lower the pool's max_context_tokens to at most {limit:,}"
                )

    def _check_tags(self) -> None:
        if self.pool_router is not PoolRouter.MODEL_TAG:
            return
        pool_tags = {p.model_tag for p in self.pools}
        if not self.tag_shares:
            if len(pool_tags) != 1:
                raise ConfigError(
                    f"pool_router model_tag: pools serve tags {sorted(pool_tags)} but no tag_shares "
                    "are given; give tag_shares (fraction of requests per tag)"
                )
            return
        for tag, share in self.tag_shares:
            if not math.isfinite(share) or share < 0:
                raise ConfigError(f"tag share {tag!r} = {share} must be a finite number >= 0")
            if tag not in pool_tags:
                raise ConfigError(
                    f"tag {tag!r} in tag_shares is served by no pool; pools serve {sorted(pool_tags)}"
                )
        total = sum(share for _, share in self.tag_shares)
        if abs(total - 1.0) > 1e-9:
            raise ConfigError(f"tag_shares sum to {total:g}; they must sum to 1")

    @property
    def n_instances(self) -> int:
        """Instances over all pools."""
        return sum(p.n_instances for p in self.pools)

    @property
    def cost_usd_per_h(self) -> float:
        """Hourly cost of the fleet (NaN when any pool's price is unknown)."""
        return sum(p.cost_usd_per_h for p in self.pools)

    def pool_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.pools)
