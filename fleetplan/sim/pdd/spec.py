"""Specification of a prefill-decode disaggregated (PDD) fleet: frozen, validated, no I/O.

A ``PddSpec`` is a prefill pool and a decode pool (each a ``fleetplan.sim.spec.PoolSpec``:
its own GPU, ``StepModel`` and vLLM ``SchedulerLimits``), a KV-transfer model, the
decode-instance assignment policy, the binding moment and the decode model.  The prefill
pool's ``router`` (``round_robin`` or ``least_outstanding``) picks prefill instances; the
decode pool's ``router`` is not used (``policy`` assigns decode instances).

KV transfer (the Vidur x NS-3 co-simulation's first-order model; inference-fleet-sim §4.7):
``time = latency_s + prompt_tokens * kv_bytes_per_token / bandwidth_bytes_per_s``; with
``layerwise`` the first ``n_layers - 1`` layers' share streams while prefill runs and only
the last layer's share (plus the latency) remains after it (see ``fleetplan.sim._kernels.pdd``).
With ``network`` (a ``FabricSpec``) the transfers are flows sharing a leaf-spine fabric
max-min fairly instead (``fleetplan.sim.pdd.fabric``); ``None`` keeps the formula above.

Processor-sharing decode (SIBYL appendix I, eq. 15): ``TPS(n) = a n^2 + b n + c`` tokens/s
for ``n`` running tasks; default the paper's H20 fit (a = -0.423, b = 44.766, c = -7.753).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fleetplan.errors import ConfigError
from fleetplan.names import NameRegistry
from fleetplan.sim.pdd.fabric import FabricSpec
from fleetplan.sim.spec import InstanceRouter, PoolSpec

__all__ = [
    "AssignPolicy", "Binding", "DecodeModel", "FabricSpec", "KvTransferSpec", "PddSpec", "PsThroughputCurve",
    "SibylParams", "SibylPressure",
]

SIBYL_H20_CURVE = (-0.423, 44.766, -7.753)  # SIBYL appendix I, Figure 14 fit on an NVIDIA H20
DEFAULT_BUCKET_TOKENS = 256  # SIBYL's bucket step Delta (value not given in the paper)
DEFAULT_EMA_ALPHA = 0.99  # SIBYL's smoothing factor alpha in (0, 1) (value not given in the paper)


class AssignPolicy(NameRegistry):
    """Decode-instance assignment: ``round_robin``; ``ils`` (fewest decode tokens, prompt +
    generated, at the binding moment); ``ils_requests`` (fewest requests in decode: the SIBYL
    paper's ILS, "least outstanding requests"); ``sibyl`` (projected load at the handoff moment,
    SIBYL §4, with ``SibylParams.pressure``); ``oracle`` (binds at prefill end to the least-loaded);
    ``req_level`` (fewest requests bound and not finished, those still in prefill or transfer
    included: the SIBYL paper's REQ LEVEL variant, appendix J)."""

    ROUND_ROBIN = "round_robin"
    ILS = "ils"
    ILS_REQUESTS = "ils_requests"
    SIBYL = "sibyl"
    ORACLE = "oracle"
    REQ_LEVEL = "req_level"

    @classmethod
    def kind(cls) -> str:
        return "assignment policy"


class SibylAblation(NameRegistry):
    """A SIBYL term switched off (the paper's sensitivity variants, §5.3 and appendix J):
    ``type1`` / ``type2`` / ``type3`` drop that term (``w/o Type k``); ``prob`` sets the survival
    weights of eqs. 6-7 to 1 (``PROB @ 1``)."""

    TYPE1 = "type1"
    TYPE2 = "type2"
    TYPE3 = "type3"
    PROB = "prob"

    @classmethod
    def kind(cls) -> str:
        return "SIBYL ablation"


class SibylPressure(NameRegistry):
    """SIBYL's physical pressure ``M`` of a task (§4.2, "its hardware cost"): ``tokens`` = its
    token occupancy, prompt + generated (eq. 2; right where a decode step's cost grows with the
    KV it reads); ``tasks`` = one per task (right where speed depends on the number of tasks
    alone, as in the paper's own processor-sharing simulator, appendix I).  Survival weights and
    the Type 1/2/3 projection are the same for both (``fleetplan.sim._kernels.pdd.assign``)."""

    TOKENS = "tokens"
    TASKS = "tasks"

    @classmethod
    def kind(cls) -> str:
        return "SIBYL pressure"


class Binding(NameRegistry):
    """When the decode instance is chosen: ``early`` (prefill start, as XPYD proxies) or
    ``late`` (prefill end)."""

    EARLY = "early"
    LATE = "late"

    @classmethod
    def kind(cls) -> str:
        return "binding"


class DecodeModel(NameRegistry):
    """``steps`` (vLLM-style decode steps with KV blocks and preemption) or
    ``processor_sharing`` (SIBYL appendix I's decode model)."""

    STEPS = "steps"
    PROCESSOR_SHARING = "processor_sharing"

    @classmethod
    def kind(cls) -> str:
        return "decode model"


def _finite_ge0(owner: str, name: str, value: object) -> None:
    ok = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value) and value >= 0
    if not ok:
        raise ConfigError(f"{owner}: {name} = {value!r} must be a finite number >= 0")


@dataclass(frozen=True)
class KvTransferSpec:
    """Prefill-to-decode KV transfer: ``latency_s + bytes / bandwidth_bytes_per_s``,
    ``bytes = prompt_tokens * kv_bytes_per_token`` (``ModelConfig.kv_bytes_per_token()``;
    use ``from_model``).  ``n_layers`` is read only with ``layerwise``."""

    latency_s: float = 0.0
    bandwidth_bytes_per_s: float = math.inf
    kv_bytes_per_token: float = 0.0
    layerwise: bool = False
    n_layers: int = 1

    def __post_init__(self) -> None:
        _finite_ge0("kv transfer", "latency_s", self.latency_s)
        _finite_ge0("kv transfer", "kv_bytes_per_token", self.kv_bytes_per_token)
        bw = self.bandwidth_bytes_per_s
        if isinstance(bw, bool) or not isinstance(bw, int | float) or math.isnan(bw) or bw <= 0:
            raise ConfigError(f"kv transfer: bandwidth_bytes_per_s = {bw!r} must be > 0 (inf for free)")
        if not isinstance(self.layerwise, bool):
            raise ConfigError(f"kv transfer: layerwise = {self.layerwise!r} must be true or false")
        if isinstance(self.n_layers, bool) or not isinstance(self.n_layers, int) or self.n_layers < 1:
            raise ConfigError(f"kv transfer: n_layers = {self.n_layers!r} must be an integer >= 1")

    @classmethod
    def from_model(cls, model, latency_s: float, bandwidth_bytes_per_s: float, layerwise: bool = False,
                   tp: int = 1) -> KvTransferSpec:
        """KV bytes per token of ``model`` (a ``ModelConfig``, BF16 KV) split over ``tp`` ranks
        that send in parallel (bytes per rank link)."""
        return cls(latency_s, bandwidth_bytes_per_s, model.kv_bytes_per_token() / tp, layerwise, model.n_layers)


@dataclass(frozen=True)
class PsThroughputCurve:
    """``TPS(n) = a n^2 + b n + c`` total decode tokens/s of one instance with ``n`` tasks."""

    a: float = SIBYL_H20_CURVE[0]
    b: float = SIBYL_H20_CURVE[1]
    c: float = SIBYL_H20_CURVE[2]

    def tokens_per_s(self, n: int) -> float:
        return self.a * n * n + self.b * n + self.c


@dataclass(frozen=True)
class SibylParams:
    """SIBYL's estimator: bucket step ``bucket_tokens`` (Delta), EMA ``ema_alpha`` (eq. 4), the
    system decode rate assumed before the first completion (None: derived by compile), the
    physical pressure of a task (``SibylPressure``; the paper's eq. 2 is ``tokens``) and the terms
    switched off (``SibylAblation``; none in SIBYL itself)."""

    bucket_tokens: int = DEFAULT_BUCKET_TOKENS
    ema_alpha: float = DEFAULT_EMA_ALPHA
    prior_rate_tokens_per_s: float | None = None
    pressure: SibylPressure = SibylPressure.TOKENS
    ablate: tuple[SibylAblation, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "pressure", SibylPressure.parse(self.pressure))
        if isinstance(self.ablate, str) or not isinstance(self.ablate, tuple | list | frozenset | set):
            raise ConfigError(f"sibyl: ablate = {self.ablate!r} must be a tuple of "
                              f"{', '.join(SibylAblation.names())}, e.g. ('type3',)")
        ablate = tuple(SibylAblation.parse(a) for a in self.ablate)
        if len(set(ablate)) != len(ablate):
            raise ConfigError(f"sibyl: ablate = {self.ablate!r} names a term twice; give each once")
        object.__setattr__(self, "ablate", ablate)
        if isinstance(self.bucket_tokens, bool) or not isinstance(self.bucket_tokens, int) or self.bucket_tokens < 1:
            raise ConfigError(f"sibyl: bucket_tokens = {self.bucket_tokens!r} must be an integer >= 1")
        if not (isinstance(self.ema_alpha, int | float) and 0 < self.ema_alpha < 1):
            raise ConfigError(f"sibyl: ema_alpha = {self.ema_alpha!r} must be in (0, 1); 0.99 is typical")
        prior = self.prior_rate_tokens_per_s
        if prior is not None and not (isinstance(prior, int | float) and math.isfinite(prior) and prior > 0):
            raise ConfigError(f"sibyl: prior_rate_tokens_per_s = {prior!r} must be > 0 or None")


@dataclass(frozen=True)
class PddSpec:
    """Prefill pool -> KV transfer -> decode pool (module docstring)."""

    prefill: PoolSpec
    decode: PoolSpec
    transfer: KvTransferSpec = field(default_factory=KvTransferSpec)
    policy: AssignPolicy = AssignPolicy.ROUND_ROBIN
    binding: Binding = Binding.EARLY
    decode_model: DecodeModel = DecodeModel.STEPS
    ps_curve: PsThroughputCurve = field(default_factory=PsThroughputCurve)
    sibyl: SibylParams = field(default_factory=SibylParams)
    network: FabricSpec | None = None
    # The served model's limit (vLLM max_model_len; fleetplan.models.context): both pools' contexts are
    # at most it; longer requests are rejected, counted as too long and left out of the percentiles.
    max_model_len_tokens: int | None = None

    def __post_init__(self) -> None:
        limit = self.max_model_len_tokens
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ConfigError(f"max_model_len_tokens = {limit!r} must be an integer >= 1, or None for no limit")
            for pool in (self.prefill, self.decode):
                if pool.max_context_tokens > limit:
                    raise ConfigError(f"{pool.name} pool: max_context_tokens = {pool.max_context_tokens:,} exceeds "
                                      f"the served model's max_model_len {limit:,}; lower it to at most {limit:,}")
        for name in ("prefill", "decode"):
            if not isinstance(getattr(self, name), PoolSpec):
                raise ConfigError(f"pdd {name} must be a PoolSpec, got {type(getattr(self, name)).__name__}")
        if self.prefill.router not in (InstanceRouter.ROUND_ROBIN, InstanceRouter.LEAST_OUTSTANDING):
            raise ConfigError(f"pdd prefill router {self.prefill.router.value!r} is not supported; "
                              "use round_robin or least_outstanding")
        if not isinstance(self.transfer, KvTransferSpec):
            raise ConfigError("pdd transfer must be a KvTransferSpec")
        for name, enum in (("policy", AssignPolicy), ("binding", Binding), ("decode_model", DecodeModel)):
            object.__setattr__(self, name, enum.parse(getattr(self, name)))
        if self.policy is AssignPolicy.ORACLE and self.binding is not Binding.LATE:
            raise ConfigError("policy oracle binds at prefill end; set binding = late")
        if self.network is not None:
            if not isinstance(self.network, FabricSpec):
                raise ConfigError(f"pdd network must be a FabricSpec or None, got {type(self.network).__name__}")
            self.network.hosts(self.prefill.n_instances, self.decode.n_instances)
            if not self.transfer.kv_bytes_per_token > 0:
                raise ConfigError("kv transfer: kv_bytes_per_token = 0 sends no flow over the network; "
                                  "give the model's KV bytes per token (KvTransferSpec.from_model)")
        if self.decode_model is DecodeModel.PROCESSOR_SHARING:
            for n in range(1, self.decode.limits.max_num_seqs + 1):
                if not self.ps_curve.tokens_per_s(n) > 0:
                    raise ConfigError(
                        f"processor-sharing curve gives TPS({n}) = {self.ps_curve.tokens_per_s(n):.3g} <= 0 "
                        f"within max_num_seqs = {self.decode.limits.max_num_seqs}; lower the decode max_num_seqs "
                        f"to {n - 1} or less (`decode_max_num_seqs`)"
                    )

    @property
    def cost_usd_per_h(self) -> float:
        return self.prefill.cost_usd_per_h + self.decode.cost_usd_per_h
