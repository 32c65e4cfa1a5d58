"""A pool's ``[pool.features]`` table in the fleet TOML, both ways.

    [[pool]]
    name = "short"
    ...
    [pool.features]                       # every key optional; absent = off / default
    cudagraph_mode = "full_decode_only"   # none | full_decode_only | piecewise (absent: the step model's timing;
                                          # none: every step eager, a served model's predictor pays the launch overhead)
    cudagraph_capture_sizes = [1, 2, 4, 8, 16, 32, 64]   # default: vLLM's ladder
    launch_overhead_ms = 2.0              # eager launch time per step (default: from the served model)
    speculative_config = { method = "mtp", num_speculative_tokens = 2, acceptance_rate = 0.7 }
                                          # or the same as a JSON string (vLLM speculative_config)
    enable_prefix_caching = true
    prefix_cache_entries = 4096           # default: the pool's KV blocks
    prefix_affinity_slack = 32            # prefix_affinity router: outstanding-request slack
    scheduler_policy = "mlfq"             # vllm_v1 | sglang | spf | mlfq | h2q_br
    mlfq_quantum0_ms = 50.0               # mlfq: first-level quantum; mlfq_levels = 8
    h2q_long_round_tokens = 8192          # h2q_br: L; h2q_service_cap_tokens = 16384 (C); h2q_short_streak = 8 (B)

``features_table`` writes the table back (a parse of it gives equal ``RuntimeFeatures``).
"""

from __future__ import annotations

import json
from typing import Any

from fleetplan.errors import DataFormatError, FleetplanError
from fleetplan.sim.features.spec import (
    POLICY_PARAM_KEYS,
    CudaGraphConfig,
    PolicyConfig,
    PrefixCacheConfig,
    RuntimeFeatures,
)
from fleetplan.sim.features.speculative import SpeculativeConfig
from fleetplan.units import MS_PER_S

__all__ = ["FEATURE_KEYS", "features_table", "parse_features_table"]

FEATURE_KEYS = frozenset({"cudagraph_mode", "cudagraph_capture_sizes", "launch_overhead_ms", "speculative_config",
                          "enable_prefix_caching", "prefix_cache_entries", "prefix_affinity_slack",
                          "scheduler_policy", *POLICY_PARAM_KEYS})


def _ms_to_s(path: str, where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DataFormatError(path, f"{where}.{key}", f"{value!r} must be a number of milliseconds")
    return float(value) / MS_PER_S


def parse_features_table(path: str, where: str, table: Any) -> RuntimeFeatures:
    """``RuntimeFeatures`` of a ``[pool.features]`` table (``where`` names the pool in errors)."""
    where = f"{where}.features"
    if not isinstance(table, dict):
        raise DataFormatError(path, where, "must be a table ([pool.features])")
    extra = sorted(set(table) - FEATURE_KEYS)
    if extra:
        valid = ", ".join(sorted(FEATURE_KEYS))
        raise DataFormatError(path, where, f"unknown key {extra[0]!r}", f"valid keys are {valid}")
    try:
        spec = table.get("speculative_config")
        if isinstance(spec, str):
            spec = SpeculativeConfig.from_json(spec)
        elif spec is not None:
            spec = SpeculativeConfig.from_dict(dict(spec))
        sizes = table.get("cudagraph_capture_sizes")
        if sizes is not None and not isinstance(sizes, list):
            raise DataFormatError(path, f"{where}.cudagraph_capture_sizes", f"{sizes!r} must be a list of integers")
        policy = PolicyConfig(table.get("scheduler_policy", "vllm_v1"))
        policy = policy.with_params({key: table[key] for key in POLICY_PARAM_KEYS if key in table})
        prefix_kw = {}
        if "prefix_affinity_slack" in table:
            prefix_kw["affinity_slack_requests"] = table["prefix_affinity_slack"]
        launch = table.get("launch_overhead_ms")
        return RuntimeFeatures(
            cudagraph=CudaGraphConfig(table.get("cudagraph_mode"), None if sizes is None else tuple(sizes)),
            speculative=spec,
            prefix_cache=PrefixCacheConfig(table.get("enable_prefix_caching", False),
                                           table.get("prefix_cache_entries"), **prefix_kw),
            policy=policy,
            launch_overhead_s=None if launch is None else _ms_to_s(path, where, "launch_overhead_ms", launch),
        )
    except DataFormatError:
        raise
    except FleetplanError as exc:
        raise DataFormatError(path, where, str(exc)) from exc


def _speculative_table(spec: SpeculativeConfig) -> dict:
    out: dict[str, Any] = {"method": spec.method, "num_speculative_tokens": spec.num_speculative_tokens,
                           "acceptance_rates": list(spec.acceptance)}
    for key, value in (("model", spec.draft_model), ("draft_tensor_parallel_size", spec.draft_tensor_parallel_size),
                       ("draft_cost_fraction", spec.draft_cost_fraction)):
        if value is not None:
            out[key] = value
    return out


def features_table(features: RuntimeFeatures) -> dict:
    """The ``[pool.features]`` keys of ``features`` that differ from the defaults."""
    default, out = RuntimeFeatures(), {}
    f = features
    if f.cudagraph.mode is not None:
        out["cudagraph_mode"] = f.cudagraph.mode.value
        if f.cudagraph.capture_sizes_tokens is not None:
            out["cudagraph_capture_sizes"] = list(f.cudagraph.capture_sizes_tokens)
    if f.launch_overhead_s is not None:
        out["launch_overhead_ms"] = f.launch_overhead_s * MS_PER_S
    if f.speculative is not None:
        out["speculative_config"] = json.dumps(_speculative_table(f.speculative))
    if f.prefix_cache.enabled:
        out["enable_prefix_caching"] = True
        if f.prefix_cache.entries_per_instance is not None:
            out["prefix_cache_entries"] = f.prefix_cache.entries_per_instance
    if f.prefix_cache.affinity_slack_requests != default.prefix_cache.affinity_slack_requests:
        out["prefix_affinity_slack"] = f.prefix_cache.affinity_slack_requests
    if f.policy != default.policy:
        out["scheduler_policy"] = f.policy.policy.value
        for key, (_, name) in POLICY_PARAM_KEYS.items():
            value = getattr(f.policy, name)
            if value != getattr(default.policy, name):
                out[key] = value * MS_PER_S if key.endswith("_ms") else value
    return out
