"""A fleet file's pools serving a chosen model (the CLI's ``simulate`` and ``simulate sessions`` with a model).

Each pool's instance becomes a tensor-parallel group of its GPU (``plan.placement``): the one
the pool's ``tensor_parallel_size`` (and the other vLLM parallelism keys of the file) or the serving
gives, else the smallest whose KV cache holds one request of the pool's ``max_context_tokens``.
The placement supplies what the file leaves out: KV blocks from the model's KV bytes per token,
``max_num_seqs`` at the pool's context and the batched-token budget (``sim.builders.build_pool``
defaults), and the per-instance price (GPU price x GPUs per instance).  Every setting the file
gives (``max_num_seqs``, ``max_num_batched_tokens``, ``kv_blocks``, ``block_size``, router,
``price_usd_per_h``, model tag, runtime features) is kept as given.  Placement derives the
serving constants from the model, so a GPU without calibrated constants (H200, B200, ...) serves
it too.  The step model is the placement's (``ModelPlacement.step_model``: the operator-level
predictor, over a data-parallel-attention instance's ranks when it has them), or a calibrated
profile for pools on the profile's GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fleetplan.errors import ConfigError
from fleetplan.models import Dtype, ModelConfig
from fleetplan.perf.calibrate import CalibratedStepModel
from fleetplan.perf.measured.source import TimingChoice, timing_choice
from fleetplan.perf.parallelism import Parallelism
from fleetplan.plan.placement import ModelPlacement, place_model
from fleetplan.sim.builders import build_pool
from fleetplan.sim.fleet_toml import FleetFile, PoolEntry, build_entry, build_fleet, fleet_spec_of
from fleetplan.sim.spec import FleetSpec, PoolSpec

__all__ = ["ModelFleet", "ModelServing", "PoolServing", "fleet_for_serving", "serve_model"]


@dataclass(frozen=True)
class ModelServing:
    """How the model is served: fixed parallelism (None: smallest fitting per pool), storage types
    (weights None: the checkpoint's, ``ModelConfig.default_weight_dtype``), an optional
    calibrated step-time profile (used for the pools on its GPU) and the timing source of the others
    (``plan.placement``: auto, roofline, measured; None: the environment's, else auto)."""

    model: ModelConfig
    parallelism: Parallelism | None = None
    weight_dtype: Dtype | None = None
    kv_dtype: Dtype = Dtype.BF16
    perf_profile: CalibratedStepModel | None = None
    timing_source: TimingChoice | None = None

    def __post_init__(self) -> None:
        if self.timing_source is not None:
            object.__setattr__(self, "timing_source", timing_choice(self.timing_source))
        if self.perf_profile is not None and self.perf_profile.model != self.model.name:
            raise ConfigError(f"`perf_profile` was calibrated for {self.perf_profile.model}, not "
                              f"{self.model.name}; give the matching `model` or recalibrate", param="perf_profile")

    @classmethod
    def vllm(cls, model: ModelConfig, tensor_parallel_size: int | None = None, weight_dtype: Dtype | None = None,
             kv_dtype: Dtype = Dtype.BF16, perf_profile: CalibratedStepModel | None = None,
             timing_source: TimingChoice | str | None = None) -> ModelServing:
        """Serving as ``vllm serve`` would at ``tensor_parallel_size`` (None: the smallest that fits each
        pool), with expert parallelism over the TP group for an MoE model."""
        par = None if tensor_parallel_size is None else Parallelism.vllm(
            tensor_parallel_size=tensor_parallel_size, enable_expert_parallel=model.is_moe)
        return cls(model, par, weight_dtype, kv_dtype, perf_profile, timing_source)


@dataclass(frozen=True)
class PoolServing:
    """How one pool serves the model: its placement and whether the calibrated profile times it."""

    pool: str
    placement: ModelPlacement
    calibrated: bool


@dataclass(frozen=True)
class ModelFleet:
    """The fleet serving the model and each pool's placement (pool order)."""

    spec: FleetSpec
    pools: tuple[PoolServing, ...]


def _parallelism(entry: PoolEntry, serving: ModelServing) -> Parallelism | None:
    """The pool's parallelism: the file's (``tensor_parallel_size``, ... on the pool), else the serving's
    (None: the smallest fitting); both given and different is a ``ConfigError``."""
    if not entry.parallelism:
        return serving.parallelism
    given = dict(entry.parallelism)
    given.setdefault("enable_expert_parallel", serving.model.is_moe and given.get("tensor_parallel_size", 1) > 1)
    par = Parallelism.vllm(**given)
    if serving.parallelism is not None and serving.parallelism != par:
        raise ConfigError(f"pool {entry.name!r}: the file serves it at {par.flags()}, the serving at "
                          f"{serving.parallelism.flags()}; drop one of them", param="parallelism")
    return par


def _place(entry: PoolEntry, serving: ModelServing) -> ModelPlacement:
    places = place_model(serving.model, entry.gpu, parallelism=_parallelism(entry, serving),
                         weight_dtype=serving.weight_dtype, kv_dtype=serving.kv_dtype,
                         timing_source=serving.timing_source)
    if "kv_blocks" in dict(entry.limits):
        return places[0]  # the file sets the KV cache itself
    fitting = [p for p in places if p.gpu.serving.n_max(entry.max_context_tokens) >= 1]
    if not fitting:
        raise ConfigError(
            f"pool {entry.name!r}: no {entry.gpu.name} placement of {serving.model.name} holds a "
            f"{entry.max_context_tokens:,}-token request in its KV cache (largest tried: {places[-1].gpu.name}); "
            "lower max_context_tokens or use more GPUs per instance"
        )
    return fitting[0]


def serve_model(fleet: FleetFile, serving: ModelServing, max_model_len_tokens: int | None = None) -> ModelFleet:
    """``fleet`` serving ``serving.model`` (module docstring), limited to ``max_model_len_tokens``
    (the served context limit, ``fleetplan.models.context.served_context_limit``)."""
    placed: list[PoolServing] = []

    def build(entry: PoolEntry) -> PoolSpec:
        place = _place(entry, serving)
        kwargs = entry.build_kwargs()
        if "price_usd_per_h" not in kwargs and entry.gpu.price_usd_per_h is not None:
            kwargs["price_usd_per_h"] = entry.gpu.price_usd_per_h * place.gpus_per_instance
        pool = build_pool(place.gpu, entry.name, entry.n_instances, entry.max_context_tokens, **kwargs)
        profile = serving.perf_profile
        calibrated = profile is not None and profile.gpu == entry.gpu.name
        placed.append(PoolServing(entry.name, place, calibrated))
        return replace(pool, step_model=profile if calibrated else place.step_model)

    pools = tuple(build_entry(fleet, e, build) for e in fleet.pools)
    return ModelFleet(fleet_spec_of(fleet, pools, max_model_len_tokens), tuple(placed))


def fleet_for_serving(fleet: FleetFile, serving: ModelServing | None,
                      max_model_len_tokens: int | None = None) -> ModelFleet:
    """The simulator's fleet of a fleet file, every setting the file gives kept as given.

    ``serving`` None: each pool runs its GPU's calibrated serving constants
    (``fleetplan.sim.fleet_toml.build_fleet``; ``pools`` is empty).  Otherwise every pool serves
    ``serving.model`` (``serve_model``; ``pools`` holds each pool's placement).
    """
    if serving is None:
        return ModelFleet(build_fleet(fleet, max_model_len_tokens), ())
    return serve_model(fleet, serving, max_model_len_tokens)
