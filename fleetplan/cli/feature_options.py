"""Runtime-feature options (vLLM spelling) shared by ``simulate`` and ``sessions``.

Each option takes ``VALUE`` (every pool) or ``POOL=VALUE`` (one pool; repeatable); a pool's own
value wins over the all-pools one, and both override the fleet TOML's ``[pool.features]``.
``--enable-prefix-caching`` alone turns caching on everywhere; ``--enable-prefix-caching short``
on one pool.  ``--scheduler-config`` sets parameters of the pool's policy (the one
``--scheduler-policy`` chose, else the TOML's) by their TOML names; the ones it leaves out keep the
TOML's values while the policy is the TOML's, else their defaults.  A parameter of another policy is
refused.  Values are checked by the library (``fleetplan.sim.features``): a bad one is a one-line
error, exit 2.
"""

from __future__ import annotations

import dataclasses
import math

from rich.table import Table

from fleetplan.cli.model_options import apply_model, context_limit, limit_note, limits_line
from fleetplan.cli.options import declare
from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.perf.overheads import ExecutionMode
from fleetplan.sim.features import (
    CudaGraphConfig,
    GraphMode,
    PolicyConfig,
    PrefixCacheConfig,
    SchedulerPolicy,
    policy_params_from_json,
)
from fleetplan.sim.features.speculative import SpeculativeConfig
from fleetplan.sim.fleet_toml import FleetFile
from fleetplan.sim.result import SimResult
from fleetplan.sim.spec import FleetSpec, PoolSpec
from fleetplan.units import ms_to_s, s_to_ms


def features_on(spec: FleetSpec) -> bool:
    """``sim.features.compile.features_on``, imported on use (it loads the simulator's kernels)."""
    from fleetplan.sim.features.compile import features_on as on

    return on(spec)


__all__ = ["FEATURE_OPTION_NAMES", "apply_feature_options", "feature_table", "features_on",
           "policy_label", "runtime_feature_options", "serving_fleet"]

ALL_POOLS = "*"
_SWITCH_WORDS = {ALL_POOLS: True, "": True, "true": True, "on": True, "1": True,
                 "false": False, "off": False, "0": False}
FEATURE_OPTION_NAMES = ("cudagraph_mode", "cudagraph_capture_sizes", "speculative_config", "enable_prefix_caching",
                        "prefix_cache_entries", "scheduler_policy", "scheduler_config", "launch_overhead_ms")

_OPTIONS = [
    declare("CUDA graph mode", "--cudagraph-mode", "cudagraph_mode", multiple=True, metavar="[POOL=]MODE",
            help=f"CUDA graphs: {'|'.join(GraphMode.names())} (vLLM --cudagraph-mode); graphed batches are padded "
            "to the next capture size and run without launch overhead, none runs every step eagerly (with "
            "--model: the predictor plus the launch overhead). Not given: the step model's own timing (with "
            "--model: every step kernel-only, graphs without padding).")(),
    declare("CUDA graph capture sizes", "--cudagraph-capture-sizes", "cudagraph_capture_sizes", multiple=True,
            metavar="[POOL=]N,N,...",
            help="Capture sizes in tokens (default vLLM's ladder 1,2,4,8,...,512; Frontier's 1,2,4,8,16,32,64).")(),
    declare("speculative decoding", "--speculative-config", "speculative_config", multiple=True,
            metavar="[POOL=]JSON",
            help='vLLM JSON, e.g. \'{"method": "mtp", "num_speculative_tokens": 2, "acceptance_rate": 0.7}\' '
            "(methods mtp, draft_model, ngram; acceptance_rate, acceptance_rates or acceptance_table).")(),
    declare("prefix caching", "--enable-prefix-caching", "enable_prefix_caching", multiple=True, is_flag=False,
            flag_value=ALL_POOLS, metavar="[POOL]",
            help="Automatic prefix caching (per-instance LRU within the KV budget); alone: every pool.")(),
    declare("prefix-cache entries", "--prefix-cache-entries", "prefix_cache_entries", multiple=True,
            metavar="[POOL=]N", help="Prefix-cache entries per instance (default: the pool's KV blocks).")(),
    declare("scheduler policy", "--scheduler-policy", "scheduler_policy", multiple=True, metavar="[POOL=]NAME",
            help=f"Batch order: {'|'.join(SchedulerPolicy.names())} (parameters: --scheduler-config).")(),
    declare("scheduler parameters", "--scheduler-config", "scheduler_config", multiple=True, metavar="[POOL=]JSON",
            help="Parameters of the pool's scheduler policy, named as in [pool.features]: mlfq "
            "(mlfq_quantum0_ms, first-level quantum, default 50; mlfq_levels, default 8) and h2q_br "
            "(h2q_long_round_tokens L, default 8192; h2q_service_cap_tokens C, 16384; h2q_short_streak B, 8), "
            'e.g. \'{"mlfq_quantum0_ms": 20, "mlfq_levels": 6}\'.')(),
    declare("launch overhead", "--launch-overhead-ms", "launch_overhead_ms", multiple=True, metavar="[POOL=]MS",
            help="Eager kernel-launch time of one step that CUDA graphs remove, and that --cudagraph-mode none "
            "adds to every step of a --model pool (default: from --model).")(),
]


def runtime_feature_options(func):
    """Add the runtime-feature options; the command receives ``FEATURE_OPTION_NAMES`` as tuples of strings."""
    for option in reversed(_OPTIONS):
        func = option(func)
    return func


def _per_pool(spec: FleetSpec, values: tuple[str, ...]) -> dict[str, str]:
    """``{pool: raw value}`` from ``VALUE`` / ``POOL=VALUE`` items (a pool's own value wins)."""
    names = spec.pool_names()
    shared: str | None = None
    own: dict[str, str] = {}
    for item in values:
        item = str(item)
        eq, brace = item.find("="), item.find("{")
        if eq > 0 and (brace < 0 or eq < brace):
            pool, value = item[:eq].strip(), item[eq + 1:].strip()
            if pool not in names:
                raise UnknownNameError("pool", pool, names)
            own[pool] = value
        else:
            shared = item.strip()
    if not values:
        return {}
    return {name: own.get(name, shared) for name in names if name in own or shared is not None}


def _number(flag: str, pool: str, raw: str, kind: type) -> float | int:
    try:
        value = kind(raw)
    except ValueError:
        raise ConfigError(f"--{flag} {raw!r} for pool {pool!r} is not {'an integer' if kind is int else 'a number'}; "
                          f"give e.g. --{flag} {pool}=4") from None
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"--{flag} {raw!r} for pool {pool!r} must be a finite number >= 0")
    return value


def _sizes(pool: str, raw: str) -> tuple[int, ...]:
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts):
        raise ConfigError(f"--cudagraph-capture-sizes {raw!r} for pool {pool!r} must be comma-separated positive "
                          "integers, e.g. 1,2,4,8,16,32,64")
    return tuple(int(p) for p in parts)


def _prefix_on(pool: str, raw: str) -> bool:
    if raw in _SWITCH_WORDS:
        return _SWITCH_WORDS[raw]
    raise ConfigError(f"--enable-prefix-caching {raw!r} for pool {pool!r} must be true or false (or a pool name)")


def _scheduler_config(pool: str, policy: PolicyConfig, raw: str) -> PolicyConfig:
    """``policy`` with the ``--scheduler-config`` parameters set (the pool's other parameters kept)."""
    try:
        return policy.with_params(policy_params_from_json(raw))
    except ConfigError as exc:
        raise ConfigError(f"--scheduler-config for pool {pool!r}: {exc}") from None


def apply_feature_options(spec: FleetSpec, **kw) -> FleetSpec:
    """``spec`` with the runtime-feature options applied per pool (module docstring)."""
    unknown = sorted(set(kw) - set(FEATURE_OPTION_NAMES))
    if unknown:
        raise ConfigError(f"unknown runtime-feature option {unknown[0]!r}; valid are {', '.join(FEATURE_OPTION_NAMES)}")
    prefix_items = tuple(v if v in _SWITCH_WORDS or "=" in v else f"{v}=true"
                         for v in kw.get("enable_prefix_caching") or ())
    raw = {key: _per_pool(spec, tuple(kw.get(key) or ())) for key in FEATURE_OPTION_NAMES}
    raw["enable_prefix_caching"] = _per_pool(spec, prefix_items)
    pools = []
    for pool in spec.pools:
        f, name = pool.features, pool.name
        graph = f.cudagraph
        if name in raw["cudagraph_mode"]:
            mode = GraphMode.parse(raw["cudagraph_mode"][name])
            graph = CudaGraphConfig(mode, None if mode is GraphMode.NONE else graph.capture_sizes_tokens)
        if name in raw["cudagraph_capture_sizes"]:
            graph = CudaGraphConfig(graph.mode, _sizes(name, raw["cudagraph_capture_sizes"][name]))
        spec_cfg = f.speculative
        if name in raw["speculative_config"]:
            spec_cfg = SpeculativeConfig.from_json(raw["speculative_config"][name])
        prefix = f.prefix_cache
        if name in raw["enable_prefix_caching"]:
            on = _prefix_on(name, raw["enable_prefix_caching"][name])
            prefix = dataclasses.replace(prefix, enabled=on, entries_per_instance=prefix.entries_per_instance if on
                                         else None)
        if name in raw["prefix_cache_entries"]:
            entries = _number("prefix-cache-entries", name, raw["prefix_cache_entries"][name], int)
            prefix = PrefixCacheConfig(prefix.enabled, entries, prefix.affinity_slack_requests)
        policy = f.policy
        if name in raw["scheduler_policy"]:
            chosen = SchedulerPolicy.parse(raw["scheduler_policy"][name])
            policy = policy if policy.policy is chosen else PolicyConfig(chosen)
        if name in raw["scheduler_config"]:
            policy = _scheduler_config(name, policy, raw["scheduler_config"][name])
        launch_s = f.launch_overhead_s
        if name in raw["launch_overhead_ms"]:
            launch_s = ms_to_s(_number("launch-overhead-ms", name, raw["launch_overhead_ms"][name], float))
        feats = dataclasses.replace(f, cudagraph=graph, speculative=spec_cfg, prefix_cache=prefix, policy=policy,
                                    launch_overhead_s=launch_s)
        pools.append(dataclasses.replace(pool, features=feats))
    return dataclasses.replace(spec, pools=tuple(pools))


def serving_fleet(fleet: FleetFile, model_opts: dict, feature_opts: dict,
                  max_model_len: int | None = None, flag: str = "--max-model-len") -> tuple[FleetSpec, str]:
    """``fleet`` built (``apply_model``: on calibrated constants or serving ``--model``, the file's
    settings and runtime features kept) with the runtime-feature options on top
    (``apply_feature_options``), and the lines to print: step time, context limit, each pool's limits.
    ``max_model_len``: the explicit context limit given by option ``flag``."""
    model = model_opts.get("model")
    limit = context_limit(model, max_model_len, bool(model_opts.get("allow_long_max_model_len")), flag)
    spec, step_note = apply_model(fleet, model_opts, limit)
    spec = apply_feature_options(spec, **feature_opts)
    timing = [f"{pool.name} {text}" for pool in spec.pools if (text := _predictor_timing(pool))]
    step_note += "; step timing: " + "; ".join(timing) if timing else ""
    return spec, "\n".join((step_note, limit_note(limit, model, max_model_len is not None), limits_line(spec)))


def _predictor_timing(pool: PoolSpec) -> str | None:
    """How a ``--model`` predictor pool's steps are timed (docs/runtime_features_contract.md, CUDA graphs)."""
    from fleetplan.sim.features.compile import pool_predictor  # loads the kernels: on use, not for --help

    step, mode = pool_predictor(pool), pool.features.cudagraph.mode
    if step is None or step.options.execution is not ExecutionMode.CUDA_GRAPH:
        return None
    if mode is None:
        return "kernel-only (vLLM's default CUDA graphs without capture padding; --cudagraph-mode models them)"
    from fleetplan.sim.features.compile import graph_times_s  # loads the kernels: on use, not for --help

    launch_ms = s_to_ms(graph_times_s(pool)[0])
    if mode is GraphMode.NONE:
        return f"eager (--cudagraph-mode none: every step pays {launch_ms:.2f} ms of kernel launches)"
    return f"{mode.value} graphs (graphed steps kernel-only + replay, others eager with {launch_ms:.2f} ms of launches)"


def _fmt(value: float | None, percent: bool = False) -> str:
    if value is None:
        return "-"
    if math.isnan(value):
        return "n/a"
    return f"{100 * value:.1f}%" if percent else f"{value:.3g}"


def policy_label(policy: PolicyConfig) -> str:
    """The policy's name with the parameters it reads, e.g. ``mlfq (q0 50 ms, 8 levels)``."""
    if policy.policy is SchedulerPolicy.MLFQ:
        return f"mlfq (q0 {s_to_ms(policy.mlfq_quantum0_s):g} ms, {policy.mlfq_levels} levels)"
    if policy.policy is SchedulerPolicy.H2Q_BR:
        return (f"h2q_br (L {policy.h2q_long_round_tokens}, C {policy.h2q_service_cap_tokens}, "
                f"B {policy.h2q_short_streak})")
    return policy.policy.value


def feature_table(spec: FleetSpec, result: SimResult) -> Table:
    """Per-pool runtime-feature figures (padding inflation, acceptance, prefix hit ratio)."""
    table = Table(title="runtime features (whole run, warm-up included)")
    for col in ("pool", "policy", "graphs", "padding inflation", "graphed steps", "spec accept", "accepted/step",
                "accept by position", "prefix hit"):
        table.add_column(col, justify="left" if col in ("pool", "policy", "graphs", "accept by position") else "right")
    policies = {p.name: policy_label(p.features.policy) for p in spec.pools}
    modes = {p.name: "-" if p.features.cudagraph.mode is None else p.features.cudagraph.mode.value for p in spec.pools}
    for g in [*result.summary.pools, result.summary.overall]:
        by_pos = g.spec_acceptance_by_position
        table.add_row(g.name, policies.get(g.name, ""), modes.get(g.name, ""), _fmt(g.padding_inflation, True),
                      _fmt(g.graph_step_share, True), _fmt(g.spec_acceptance_rate, True),
                      _fmt(g.spec_mean_accepted_tokens), "-" if by_pos is None else " ".join(_fmt(x) for x in by_pos),
                      _fmt(g.prefix_hit_ratio, True))
    return table
