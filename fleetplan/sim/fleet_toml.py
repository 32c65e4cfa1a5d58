"""Read a fleet description from TOML into a ``FleetSpec``.

Format (every key is checked; unknown keys, unknown GPUs and bad numbers raise
``DataFormatError`` naming the file and the key)::

    pool_router = "length"        # optional: length (default), compress_and_route,
                                  #   random, round_robin, least_loaded, model_tag
    compress_gamma = 1.5          # optional, compress_and_route band (B, gamma*B]

    [tag_shares]                  # optional, model_tag only: share of requests per tag
    llama-70b = 1.0

    [[pool]]
    name = "short"                # unique
    gpu = "a100"                  # catalog name or alias; needs calibrated serving constants
    instances = 3                 # serving instances (engines) in the pool
    max_context_tokens = 4096     # longest prompt + output the pool accepts
    router = "least_outstanding"  # optional: least_outstanding (default), round_robin,
                                  #   random, power_of_two, prefix_affinity
    max_num_seqs = 256            # optional vLLM-spelled overrides; defaults from the
    max_num_batched_tokens = 512  #   GPU profile (n_max at max_context, chunk size)
    kv_blocks = 65536             # optional
    block_size = 16               # optional (vLLM block_size)
    price_usd_per_h = 2.21        # optional, default the GPU profile's price
    model_tag = "llama-70b"       # optional, model_tag routing only
    tensor_parallel_size = 2      # optional, with a served model only: the instance's
    pipeline_parallel_size = 1    #   parallelism in vLLM spelling (default: the smallest tensor-
    data_parallel_size = 1        #   parallel group that fits); ``enable_expert_parallel = true``
    [pool.features]               # optional runtime features of this pool (CUDA graphs,
    cudagraph_mode = "piecewise"  #   speculative decoding, prefix caching, scheduler policy;
                                  #   keys in fleetplan.sim.features.toml)

Reading and building are two steps: ``read_fleet_toml`` / ``parse_fleet_file`` check the file
and keep each pool's settings as given (``PoolEntry``: the explicit vLLM limits stay marked as
explicit), ``build_fleet`` derives the rest from the GPU's calibrated constants
(``fleetplan.sim.builders.build_pool``); ``fleetplan.plan.model_fleet`` derives it from a served
model instead, keeping every explicit setting.  ``load_fleet_toml`` / ``parse_fleet`` do both
steps.  ``fleet_document`` writes a built ``FleetSpec`` back as such a document, every derived
setting explicit, so the file rebuilds the same pools (``fleetplan deploy`` writes it).  The same
format is documented for users in ``examples/README.md``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fleetplan.errors import ConfigError, DataFormatError, FleetplanError
from fleetplan.sim.builders import build_pool
from fleetplan.sim.features import RuntimeFeatures
from fleetplan.sim.features.toml import features_table, parse_features_table
from fleetplan.sim.spec import (
    DEFAULT_BLOCK_SIZE_TOKENS,
    DEFAULT_COMPRESS_GAMMA,
    DEFAULT_MODEL_TAG,
    FleetSpec,
    InstanceRouter,
    PoolRouter,
    PoolSpec,
)

__all__ = ["PARALLELISM_KEYS", "FleetFile", "PoolEntry", "build_entry", "build_fleet", "fleet_document",
           "fleet_spec_of", "load_fleet_toml", "parse_fleet", "parse_fleet_file", "read_fleet_toml"]


@dataclass(frozen=True)
class PoolEntry:
    """One ``[[pool]]`` as the file gives it: ``build_pool`` keywords only for keys present.

    ``limits`` holds the explicit vLLM limits (``max_num_seqs``, ``max_num_batched_tokens``,
    ``kv_blocks``, ``block_size_tokens``) as ``(keyword, value)`` pairs; ``price_usd_per_h`` is
    None when the file gives none (the GPU's price then applies); ``parallelism`` the explicit
    ``Parallelism.vllm`` keywords (``PARALLELISM_KEYS``) as pairs, read only with a served model.
    """

    name: str
    gpu: Any  # hardware.GpuProfile (the simulator spec never sees it; the builders do)
    n_instances: int
    max_context_tokens: int
    limits: tuple[tuple[str, int], ...] = ()
    router: str | None = None
    price_usd_per_h: float | None = None
    model_tag: str = DEFAULT_MODEL_TAG
    features: RuntimeFeatures | None = None
    parallelism: tuple[tuple[str, int | bool], ...] = ()

    def build_kwargs(self) -> dict[str, Any]:
        """``build_pool`` keywords of the explicit settings (router, limits, price, tag)."""
        kwargs: dict[str, Any] = dict(self.limits)
        if self.router is not None:
            kwargs["router"] = self.router
        if self.price_usd_per_h is not None:
            kwargs["price_usd_per_h"] = self.price_usd_per_h
        kwargs["model_tag"] = self.model_tag
        return kwargs


@dataclass(frozen=True)
class FleetFile:
    """A checked fleet file before its pools are built (``path`` labels errors)."""

    path: str
    pools: tuple[PoolEntry, ...]
    pool_router: PoolRouter
    compress_gamma: float
    tag_shares: tuple[tuple[str, float], ...]

_TOP_KEYS = {"pool_router", "compress_gamma", "tag_shares", "pool"}
_REQUIRED_POOL_KEYS = ("name", "gpu", "instances", "max_context_tokens")
_OPTIONAL_POOL_INTS = {
    "max_num_seqs": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "kv_blocks": "kv_blocks",
    "block_size": "block_size_tokens",
}
#: A served model's parallelism per pool, vLLM spelling (``perf.parallelism.Parallelism.vllm`` keywords).
PARALLELISM_KEYS = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "enable_expert_parallel")
_POOL_KEYS = set(_REQUIRED_POOL_KEYS) | set(_OPTIONAL_POOL_INTS) | set(PARALLELISM_KEYS) | {
    "router", "price_usd_per_h", "model_tag", "features",
}


def _int(path: str, where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DataFormatError(path, where, f"{value!r} must be an integer >= 1", "give a whole number")
    return value


def _number(path: str, where: str, value: Any, lo: float, rule: str) -> float:
    finite = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
    if not finite or value < lo:
        raise DataFormatError(path, where, f"{value!r} must be a finite number {rule}")
    return float(value)


def _string(path: str, where: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataFormatError(path, where, f"{value!r} must be a non-empty string")
    return value


def _unknown_keys(path: str, where: str, table: dict, allowed: set[str]) -> None:
    extra = sorted(set(table) - allowed)
    if extra:
        raise DataFormatError(
            path, where, f"unknown key {extra[0]!r}", f"valid keys are {', '.join(sorted(allowed))}"
        )


def _pool(path: str, index: int, table: Any, catalog: Any) -> PoolEntry:
    where = f"pool[{index}]"
    if not isinstance(table, dict):
        raise DataFormatError(path, where, "each [[pool]] must be a table")
    if isinstance(table.get("name"), str) and table["name"].strip():
        where = f"pool {table['name']!r}"
    _unknown_keys(path, where, table, _POOL_KEYS)
    for key in _REQUIRED_POOL_KEYS:
        if key not in table:
            fix = f"every pool needs {', '.join(_REQUIRED_POOL_KEYS)}"
            raise DataFormatError(path, where, f"missing key {key!r}", fix)
    name = _string(path, f"{where}.name", table["name"])
    where = f"pool {name!r}"
    gpu_name = _string(path, f"{where}.gpu", table["gpu"])
    try:
        profile = catalog.get(gpu_name)
    except FleetplanError as exc:
        raise DataFormatError(path, f"{where}.gpu", str(exc)) from exc
    limits = tuple((kwarg, _int(path, f"{where}.{key}", table[key]))
                   for key, kwarg in _OPTIONAL_POOL_INTS.items() if key in table)
    parallelism: list[tuple[str, int | bool]] = []
    for key in PARALLELISM_KEYS:
        if key not in table:
            continue
        value = table[key]
        if key == "enable_expert_parallel":
            if not isinstance(value, bool):
                raise DataFormatError(path, f"{where}.{key}", f"{value!r} must be true or false")
            parallelism.append((key, value))
        else:
            parallelism.append((key, _int(path, f"{where}.{key}", value)))
    price = None
    if "price_usd_per_h" in table:
        price = _number(path, f"{where}.price_usd_per_h", table["price_usd_per_h"], 0, ">= 0")
    return PoolEntry(
        name=name, gpu=profile,
        n_instances=_int(path, f"{where}.instances", table["instances"]),
        max_context_tokens=_int(path, f"{where}.max_context_tokens", table["max_context_tokens"]),
        limits=limits,
        router=_string(path, f"{where}.router", table["router"]) if "router" in table else None,
        price_usd_per_h=price,
        model_tag=_string(path, f"{where}.model_tag", table.get("model_tag", DEFAULT_MODEL_TAG)),
        features=parse_features_table(path, where, table["features"]) if "features" in table else None,
        parallelism=tuple(parallelism),
    )


def build_entry(fleet: FleetFile, entry: PoolEntry, build: Callable[[PoolEntry], PoolSpec]) -> PoolSpec:
    """``build(entry)`` with the file's runtime features, errors naming the file and the pool."""
    where = f"pool {entry.name!r}"
    try:
        pool = build(entry)
        return pool if entry.features is None else dataclasses.replace(pool, features=entry.features)
    except DataFormatError:
        raise
    except FleetplanError as exc:
        message = str(exc).removeprefix(f"{where}: ")  # the location is already named
        raise DataFormatError(fleet.path, where, message) from exc


def fleet_spec_of(fleet: FleetFile, pools: tuple[PoolSpec, ...], max_model_len_tokens: int | None = None) -> FleetSpec:
    """The ``FleetSpec`` of ``fleet``'s routing with built ``pools`` (errors name the file)."""
    try:
        return FleetSpec(pools=pools, pool_router=fleet.pool_router, compress_gamma=fleet.compress_gamma,
                         tag_shares=fleet.tag_shares, max_model_len_tokens=max_model_len_tokens)
    except FleetplanError as exc:
        raise DataFormatError(fleet.path, None, str(exc)) from exc


def build_fleet(fleet: FleetFile, max_model_len_tokens: int | None = None) -> FleetSpec:
    """``fleet`` on its GPUs' calibrated serving constants (explicit settings win), limited to
    ``max_model_len_tokens`` (``FleetSpec``; None: no model limit)."""
    def build(e: PoolEntry) -> PoolSpec:
        if e.parallelism:
            raise ConfigError(f"pool {e.name!r}: {e.parallelism[0][0]} sets a served model's parallelism; without a "
                              "served model each instance runs its GPU's calibrated constants: give the model or "
                              "drop the key", param="parallelism")
        return build_pool(e.gpu, e.name, e.n_instances, e.max_context_tokens, **e.build_kwargs())

    return fleet_spec_of(fleet, tuple(build_entry(fleet, e, build) for e in fleet.pools), max_model_len_tokens)


def parse_fleet_file(doc: dict, path: str = "<fleet>", catalog: Any = None) -> FleetFile:
    """Check a parsed TOML document into a ``FleetFile`` (``path`` labels errors; ``catalog``
    defaults to ``fleetplan.hardware.load_catalog()``)."""
    if catalog is None:
        from fleetplan.hardware import load_catalog

        catalog = load_catalog()
    _unknown_keys(path, None, doc, _TOP_KEYS)
    pools_raw = doc.get("pool")
    if not isinstance(pools_raw, list) or not pools_raw:
        raise DataFormatError(path, "pool", "no [[pool]] tables", "add at least one [[pool]] with name, gpu, "
                              "instances and max_context_tokens")
    pools = tuple(_pool(path, i, t, catalog) for i, t in enumerate(pools_raw))
    try:
        router_name = _string(path, "pool_router", doc.get("pool_router", PoolRouter.LENGTH.value))
        router = PoolRouter.parse(router_name)
    except FleetplanError as exc:
        raise DataFormatError(path, "pool_router", str(exc)) from exc
    gamma = _number(path, "compress_gamma", doc.get("compress_gamma", DEFAULT_COMPRESS_GAMMA), 1, ">= 1")
    shares_raw = doc.get("tag_shares", {})
    if not isinstance(shares_raw, dict):
        raise DataFormatError(path, "tag_shares", "must be a table of tag = share")
    shares = tuple(
        (tag, _number(path, f"tag_shares.{tag}", share, 0, ">= 0")) for tag, share in shares_raw.items()
    )
    return FleetFile(path, pools, router, gamma, shares)


def parse_fleet(doc: dict, path: str = "<fleet>", catalog: Any = None) -> FleetSpec:
    """Build a ``FleetSpec`` from a parsed TOML document (``path`` labels errors).

    ``catalog`` defaults to ``fleetplan.hardware.load_catalog()``.
    """
    return build_fleet(parse_fleet_file(doc, path, catalog))


def read_fleet_toml(path: str | os.PathLike, catalog: Any = None) -> FleetFile:
    """Read and check the fleet TOML at ``path`` without building its pools (module docstring)."""
    path_str = str(path)
    try:
        with open(path_str, "rb") as handle:
            doc = tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise DataFormatError(path_str, None, f"not valid TOML ({exc})", "fix the syntax") from exc
    return parse_fleet_file(doc, path_str, catalog)


def load_fleet_toml(path: str | os.PathLike, catalog: Any = None) -> FleetSpec:
    """Read and validate the fleet TOML at ``path`` (see the module docstring)."""
    return build_fleet(read_fleet_toml(path, catalog))


def fleet_document(spec: FleetSpec, gpu_names: dict[str, str] | None = None,
                   parallelism: dict[str, dict[str, int | bool]] | None = None) -> dict[str, Any]:
    """The fleet-file document (module docstring) that rebuilds ``spec``: every pool's limits, KV
    blocks, router and price written out, so neither the GPU's constants nor a placement re-derive them.

    ``gpu_names`` maps a pool to its catalog GPU name where ``PoolSpec.gpu`` names a placement
    (``"H100-SXM tp2"``); ``parallelism`` maps a pool to its ``PARALLELISM_KEYS`` values (served
    model only).  The document is TOML-ready (no None values)."""
    names, pars = gpu_names or {}, parallelism or {}
    doc: dict[str, Any] = {"pool_router": spec.pool_router.value}
    if spec.pool_router is PoolRouter.COMPRESS_AND_ROUTE:
        doc["compress_gamma"] = spec.compress_gamma
    if spec.tag_shares:
        doc["tag_shares"] = dict(spec.tag_shares)
    pools = []
    for p in spec.pools:
        table: dict[str, Any] = {
            "name": p.name, "gpu": names.get(p.name, p.gpu), "instances": p.n_instances,
            "max_context_tokens": p.max_context_tokens, "max_num_seqs": p.limits.max_num_seqs,
            "max_num_batched_tokens": p.limits.max_num_batched_tokens, "kv_blocks": p.limits.kv_blocks,
        }
        if p.limits.block_size_tokens != DEFAULT_BLOCK_SIZE_TOKENS:
            table["block_size"] = p.limits.block_size_tokens
        if p.router is not InstanceRouter.LEAST_OUTSTANDING:
            table["router"] = p.router.value
        if p.price_usd_per_h is not None:
            table["price_usd_per_h"] = float(p.price_usd_per_h)
        if p.model_tag != DEFAULT_MODEL_TAG:
            table["model_tag"] = p.model_tag
        table.update({k: v for k, v in pars.get(p.name, {}).items() if k in PARALLELISM_KEYS})
        features = features_table(p.features)
        if features:
            table["features"] = features
        pools.append(table)
    doc["pool"] = pools
    return doc
