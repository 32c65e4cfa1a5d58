"""Runtime features of one pool (#5): CUDA graphs, speculative decoding, prefix caching, scheduler policy.

Frozen, validated specs; ``fleetplan.sim.features.compile.compile_features`` turns a fleet's
features into ``CompiledFeatures`` (semantics: docs/runtime_features_contract.md).  The
default ``RuntimeFeatures()`` has everything off and leaves a run bit-identical to the
featureless simulator.

* ``CudaGraphConfig(mode, capture_sizes_tokens)``: vLLM's ``cudagraph_mode`` (``none``,
  ``full_decode_only``, ``piecewise``) and ``cudagraph_capture_sizes``.  ``mode = None`` (not
  set, the default) times steps as the step model gives them; ``none`` times every step eagerly, so
  a served model's predictor (kernel-only, CUDA-graph execution) gets the launch overhead added to
  every step (``fleetplan.sim.features.compile.eager_step_coefficients``).  ``None`` sizes mean
  vLLM's default ladder (``vllm/config/compilation.py``): ``max = min(2 * max_num_seqs, 512)``,
  ``[1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16)``; ``FRONTIER_CAPTURE_SIZES`` is the
  Frontier paper's decode bins {1, 2, 4, 8, 16, 32, 64} (Feng et al. 2026, arXiv:2605.21312, §2, with Table 2's
  padding inflation).
* ``SpeculativeConfig`` (``fleetplan.sim.features.speculative``): vLLM's ``speculative_config``.
* ``PrefixCacheConfig(enabled, entries_per_instance)``: vLLM's ``enable_prefix_caching``;
  ``entries_per_instance = None`` means one per KV block, at most 8192 (an entry holds at least one block).
  ``affinity_slack_requests`` is read by the ``prefix_affinity`` router: the sgl-router
  cache-aware policy's default ``balance_abs_threshold = 32`` (sgl-router README).
* ``PolicyConfig(policy, ...)``: ``SchedulerPolicy`` ``vllm_v1`` (running first, then waiting
  FCFS), ``sglang`` (prefill first), ``spf`` (shortest remaining prompt first), ``mlfq``
  (FastServe skip-join MLFQ, Wu et al. 2023: level quantum ``q0 * 2**l``; ``q0 = 50 ms`` and
  8 levels are estimates, not from the paper) and ``h2q_br`` (Frontier appendix B.3,
  Feng et al. 2026, arXiv:2605.21312: long-round threshold L = 8192 tokens, service cap
  C = 16384 tokens, short streak B = 8).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fleetplan.errors import ConfigError
from fleetplan.names import NameRegistry
from fleetplan.sim.features.speculative import SpeculativeConfig
from fleetplan.units import ms_to_s, s_to_ms

__all__ = [
    "CudaGraphConfig",
    "FRONTIER_CAPTURE_SIZES",
    "GraphMode",
    "POLICY_PARAM_KEYS",
    "PolicyConfig",
    "PrefixCacheConfig",
    "RuntimeFeatures",
    "SchedulerPolicy",
    "SpeculativeConfig",
    "policy_params_from_json",
    "vllm_default_capture_sizes",
]

FRONTIER_CAPTURE_SIZES = (1, 2, 4, 8, 16, 32, 64)  # Frontier (arXiv:2605.21312 §2) decode bins
VLLM_MAX_CAPTURE_SIZE = 512  # vLLM: max_cudagraph_capture_size = min(2 * max_num_seqs, 512)
DEFAULT_MLFQ_QUANTUM0_S = 0.05  # estimate: the order of one short prefill step
DEFAULT_MLFQ_LEVELS = 8  # estimate: 50 ms * 2**7 = 6.4 s covers long prefills
H2Q_LONG_ROUND_TOKENS = 8192  # Frontier B.3, L
H2Q_SERVICE_CAP_TOKENS = 16384  # Frontier B.3, C
H2Q_SHORT_STREAK = 8  # Frontier B.3, B
DEFAULT_AFFINITY_SLACK_REQUESTS = 32  # sgl-router cache-aware balance_abs_threshold default


class GraphMode(NameRegistry):
    """vLLM's ``cudagraph_mode`` values the simulator models."""

    NONE = "none"
    FULL_DECODE_ONLY = "full_decode_only"
    PIECEWISE = "piecewise"

    @classmethod
    def kind(cls) -> str:
        return "cudagraph mode"


class SchedulerPolicy(NameRegistry):
    """Per-pool batch-ordering policy (docs/runtime_features_contract.md)."""

    VLLM_V1 = "vllm_v1"
    SGLANG = "sglang"
    SPF = "spf"
    MLFQ = "mlfq"
    H2Q_BR = "h2q_br"

    @classmethod
    def kind(cls) -> str:
        return "scheduler policy"


def _int_at_least(owner: str, name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{owner}: {name} = {value!r} must be an integer >= {low}; give a whole number")


def vllm_default_capture_sizes(max_num_seqs: int) -> tuple[int, ...]:
    """vLLM's default capture ladder for a pool running at most ``max_num_seqs`` sequences."""
    top = min(2 * int(max_num_seqs), VLLM_MAX_CAPTURE_SIZE)
    ladder = [1, 2, 4, *range(8, 256, 8), *range(256, top + 1, 16)]
    return tuple(s for s in ladder if s <= top)


@dataclass(frozen=True)
class CudaGraphConfig:
    """CUDA-graph mode (``None`` = not set: the step model's own timing) and capture sizes (tokens per
    captured batch; ``None`` = vLLM's ladder)."""

    mode: GraphMode | None = None
    capture_sizes_tokens: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.mode is not None:
            object.__setattr__(self, "mode", GraphMode.parse(self.mode))
        sizes = self.capture_sizes_tokens
        if sizes is None:
            return
        if not self.on:
            raise ConfigError(f"cudagraph capture sizes {list(sizes)} are given but the mode is "
                              f"{'not set' if self.mode is None else 'none'}; set `cudagraph_mode` "
                              "full_decode_only or piecewise, or drop the sizes")
        sizes = tuple(sizes)
        if not sizes:
            raise ConfigError("cudagraph capture sizes are empty; give sizes such as 1,2,4,8,16,32,64 or omit them")
        for s in sizes:
            _int_at_least("cudagraph", "capture size", s, 1)
        if len(set(sizes)) != len(sizes):
            raise ConfigError(f"cudagraph capture sizes {list(sizes)} repeat a size; give each size once")
        object.__setattr__(self, "capture_sizes_tokens", tuple(sorted(sizes)))

    @property
    def on(self) -> bool:
        """True when batches are replayed from captured graphs (``full_decode_only``, ``piecewise``)."""
        return self.mode is not None and self.mode is not GraphMode.NONE

    def sizes_for(self, max_num_seqs: int) -> tuple[int, ...]:
        """Capture sizes of a pool with ``max_num_seqs`` (the given ones, else vLLM's ladder)."""
        if not self.on:
            return ()
        return self.capture_sizes_tokens or vllm_default_capture_sizes(max_num_seqs)


@dataclass(frozen=True)
class PrefixCacheConfig:
    """Automatic prefix caching per instance (LRU over unpinned cached blocks)."""

    enabled: bool = False
    entries_per_instance: int | None = None
    affinity_slack_requests: int = DEFAULT_AFFINITY_SLACK_REQUESTS

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise ConfigError(f"prefix caching enabled = {self.enabled!r} must be true or false")
        if self.entries_per_instance is not None:
            if not self.enabled:
                raise ConfigError(f"prefix_cache_entries = {self.entries_per_instance} is given but prefix caching "
                                  "is off; add `enable_prefix_caching` or drop the entries")
            _int_at_least("prefix cache", "entries_per_instance", self.entries_per_instance, 1)
        _int_at_least("prefix cache", "affinity_slack_requests", self.affinity_slack_requests, 0)


#: Scheduler parameters as the fleet TOML and ``--scheduler-config`` name them (milliseconds at the edge):
#: key -> (the policy that reads it, ``PolicyConfig`` field); ``*_ms`` keys are converted to seconds.
POLICY_PARAM_KEYS: dict[str, tuple[SchedulerPolicy, str]] = {
    "mlfq_quantum0_ms": (SchedulerPolicy.MLFQ, "mlfq_quantum0_s"),
    "mlfq_levels": (SchedulerPolicy.MLFQ, "mlfq_levels"),
    "h2q_long_round_tokens": (SchedulerPolicy.H2Q_BR, "h2q_long_round_tokens"),
    "h2q_service_cap_tokens": (SchedulerPolicy.H2Q_BR, "h2q_service_cap_tokens"),
    "h2q_short_streak": (SchedulerPolicy.H2Q_BR, "h2q_short_streak"),
}
_PARAM_EXAMPLE = '{"mlfq_quantum0_ms": 20, "mlfq_levels": 6}'


def _valid_param_keys() -> str:
    return ", ".join(f"{key} ({owner.value})" for key, (owner, _) in POLICY_PARAM_KEYS.items())


def policy_params_from_json(text: str) -> dict[str, Any]:
    """The object of vLLM's ``scheduler_config`` JSON text (keys checked by ``PolicyConfig.with_params``)."""
    try:
        params = json.loads(text)
    except (json.JSONDecodeError, TypeError) as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise ConfigError(f"scheduler config {str(text)[:60]!r} is not valid JSON ({why}); write e.g. "
                          f"'{_PARAM_EXAMPLE}'") from exc
    if not isinstance(params, dict):
        raise ConfigError(f"scheduler config {str(text)[:60]!r} must be a JSON object of parameters, e.g. "
                          f"'{_PARAM_EXAMPLE}'")
    return params


@dataclass(frozen=True)
class PolicyConfig:
    """A ``SchedulerPolicy`` and its parameters (read only by the policy they belong to; another
    policy's parameters must keep their defaults, so that none is set and silently unread).
    ``with_params`` sets them by their edge names (``POLICY_PARAM_KEYS``)."""

    policy: SchedulerPolicy = SchedulerPolicy.VLLM_V1
    mlfq_quantum0_s: float = DEFAULT_MLFQ_QUANTUM0_S
    mlfq_levels: int = DEFAULT_MLFQ_LEVELS
    h2q_long_round_tokens: int = H2Q_LONG_ROUND_TOKENS
    h2q_service_cap_tokens: int = H2Q_SERVICE_CAP_TOKENS
    h2q_short_streak: int = H2Q_SHORT_STREAK

    def __post_init__(self) -> None:
        object.__setattr__(self, "policy", SchedulerPolicy.parse(self.policy))
        q0 = self.mlfq_quantum0_s
        if isinstance(q0, bool) or not isinstance(q0, int | float) or not math.isfinite(q0) or q0 <= 0:
            raise ConfigError(f"mlfq quantum0 = {q0!r} s must be a finite number > 0; give e.g. quantum0_ms = 50")
        object.__setattr__(self, "mlfq_quantum0_s", float(q0))
        _int_at_least("scheduler policy mlfq", "levels", self.mlfq_levels, 1)
        for name in ("h2q_long_round_tokens", "h2q_service_cap_tokens", "h2q_short_streak"):
            _int_at_least("scheduler policy h2q_br", name.removeprefix("h2q_"), getattr(self, name), 1)
        for key, (owner, name) in POLICY_PARAM_KEYS.items():
            value = getattr(self, name)
            if owner is not self.policy and value != type(self).__dataclass_fields__[name].default:
                shown = s_to_ms(value) if key.endswith("_ms") else value
                raise ConfigError(f"scheduler policy {self.policy.value} does not read {key} = {shown:g} "
                                  f"(a parameter of {owner.value}); set the policy to {owner.value} or drop {key}")

    def with_params(self, params: Mapping[str, Any]) -> PolicyConfig:
        """This policy with the parameters in ``params`` (keys of ``POLICY_PARAM_KEYS``, e.g.
        ``{"mlfq_quantum0_ms": 20}``) set; an unknown key, a bad value or a parameter of another
        policy is a ``ConfigError`` naming the key."""
        changes: dict[str, Any] = {}
        for key, value in params.items():
            if key not in POLICY_PARAM_KEYS:
                raise ConfigError(f"unknown scheduler parameter {key!r}; valid are {_valid_param_keys()}")
            owner, name = POLICY_PARAM_KEYS[key]
            if owner is not self.policy:
                raise ConfigError(f"{key} is a parameter of scheduler policy {owner.value}, not of "
                                  f"{self.policy.value}; set the policy to {owner.value} or drop {key}")
            if key.endswith("_ms"):
                ok = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
                if not ok or value <= 0:
                    raise ConfigError(f"{key} = {value!r} must be a number of milliseconds > 0, e.g. 50")
                changes[name] = ms_to_s(float(value))
            else:
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ConfigError(f"{key} = {value!r} must be an integer >= 1")
                changes[name] = value
        return replace(self, **changes)

    def params(self) -> tuple[float, float, float, float]:
        """The kernel's ``policy_param`` row: MLFQ (q0_s, levels, 0, 0); H2Q-BR (L, C, B, 0); else zeros."""
        if self.policy is SchedulerPolicy.MLFQ:
            return self.mlfq_quantum0_s, float(self.mlfq_levels), 0.0, 0.0
        if self.policy is SchedulerPolicy.H2Q_BR:
            return (float(self.h2q_long_round_tokens), float(self.h2q_service_cap_tokens),
                    float(self.h2q_short_streak), 0.0)
        return 0.0, 0.0, 0.0, 0.0


@dataclass(frozen=True)
class RuntimeFeatures:
    """Every runtime feature of one pool; the default is all off.

    ``launch_overhead_s`` is the eager kernel-launch time of one step (seconds) that CUDA
    graphs remove (and that ``cudagraph`` mode ``none`` adds to a kernel-only predictor);
    ``None`` derives it from the pool's model (``fleetplan.perf.overheads``).
    """

    cudagraph: CudaGraphConfig = field(default_factory=CudaGraphConfig)
    speculative: SpeculativeConfig | None = None
    prefix_cache: PrefixCacheConfig = field(default_factory=PrefixCacheConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    launch_overhead_s: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.policy, str):
            object.__setattr__(self, "policy", PolicyConfig(self.policy))
        checks = (("cudagraph", CudaGraphConfig), ("prefix_cache", PrefixCacheConfig), ("policy", PolicyConfig))
        for name, kind in checks:
            if not isinstance(getattr(self, name), kind):
                raise ConfigError(f"runtime features: {name} must be a {kind.__name__}, "
                                  f"got {type(getattr(self, name)).__name__}")
        if self.speculative is not None and not isinstance(self.speculative, SpeculativeConfig):
            raise ConfigError(f"runtime features: speculative must be a SpeculativeConfig or None, "
                              f"got {type(self.speculative).__name__}; use SpeculativeConfig.from_json")
        lo = self.launch_overhead_s
        if lo is not None:
            if isinstance(lo, bool) or not isinstance(lo, int | float) or not math.isfinite(lo) or lo < 0:
                raise ConfigError(f"launch overhead = {lo!r} s must be a finite number >= 0; "
                                  "give the eager launch time of one step, e.g. `launch_overhead_ms` 2")
            object.__setattr__(self, "launch_overhead_s", float(lo))

    @property
    def any_on(self) -> bool:
        """True when some feature differs from the featureless simulator."""
        return (self.cudagraph.on or self.speculative is not None or self.prefix_cache.enabled
                or self.policy.policy is not SchedulerPolicy.VLLM_V1)
