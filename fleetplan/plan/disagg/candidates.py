"""The disaggregated planner: PDD and AFD candidates, each role sized by ``queueing.disagg``.

PDD: one prefill pool of GPU type g_p and one decode pool of g_d, every (g_p, g_d) of the swept
types (with a served model every placement: each role its own GPU and TP/EP, "H100-SXM tp4").  AFD: a
prefill pool of g_p and D decode units of ``a`` attention GPUs of g_a and ``f`` FFN GPUs of g_f, every
(g_p, g_a, g_f) and A:F ratio.  Each role is a ``PoolPlan`` (count in instances, spares for node
availability as co-located pools, the engine limits both phases run it with), so costs, tables and
exports treat a disaggregated fleet like any other; ``DisaggCandidate`` adds the roles, the decode batch
cap, the analytic P-quantile TPOT, the AFD unit and the xPyD group.

One physics with the PDD simulator (``verify.pdd_spec`` builds the same instances): the step model each role
runs in the simulator (``plan.pools.pool_step_model``) and its limits, prefill: vLLM's ``max_num_seqs`` and the
better of the GPU's chunk and vLLM's default token budget (``prefill_limits``); decode: the largest batch within
the TPOT target (``DecodeRole.batch_cap``; a DP-attention instance's: a whole batch per rank within one rank's
KV cache). The decode role is sized first (the fewest instances whose slot load is within ρ_max, whose D b slots
are all held with probability at most ``SLOT_FULL_SHARE`` (1 - p), and whose P-quantile TPOT meets the target), then
the prefill role with the transfer, the mean slot wait and the first decode step after each prompt (the fewest
instances whose ρ_p is within ρ_max and whose P-quantile TTFT meets the SLO); the slot's hold before the handoff
is the prompt's own prefill time at the prefill count, so with that count known decode and then prefill are sized
once more (``_sized_roles``). With ``DisaggSettings.pd_ratios``
each role is then rounded up to whole xPyD groups.  Each role's ``floor_count`` is its utilisation cap's count (the
fewest instances within ρ_max), which verification does not go below (``plan.disagg.verify``).

A pair whose role cannot hold the workload's longest request in its KV cache (prefill: the prompt;
decode: prompt + output) is left out; a requested topology with no pair left is a ``ConfigError``.

KV transfer: bytes per token from the served model (in its KV dtype) or, without it, from the model the
GPU profiles' serving constants were calibrated on (``CALIBRATION_MODEL``), split over min(TP_p, TP_d)
rank pairs sending in parallel; bandwidth the slower of the two GPUs' per-GPU network (``network_gbps``)
unless given, or NVLink when the whole fleet fits one node (``GPUS_PER_NODE`` GPUs of one type).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.hardware import GpuProfile, with_spares
from fleetplan.perf.dp_instance import attention_dp_ranks
from fleetplan.perf.kv_budget import vllm_batch_defaults
from fleetplan.perf.linear import LinearStepModel
from fleetplan.perf.speculative import mtp_of
from fleetplan.plan.defaults import (  # light: shown in the help
    CALIBRATION_MODEL,
    DEFAULT_AF_RATIOS,
    DEFAULT_KV_LATENCY_S,
    DEFAULT_MICRO_BATCHES,
    GBPS,
    GPUS_PER_NODE,
)
from fleetplan.plan.disagg.screen import AfdUnit, DecodeLoad, ModelShape, decode_load, linear_fit
from fleetplan.plan.pools import REASON_CODE, PlanSettings, PoolPlan, fleet_usd_per_h, pool_step_model
from fleetplan.plan.space import DISAGGREGATED, SizingRouter, Topology
from fleetplan.plan.sweep import Candidate
from fleetplan.queueing import InfeasibleReason
from fleetplan.queueing.disagg import DecodeRole, DecodeState, PrefillRole, PrefillState, kv_transfer_s
from fleetplan.queueing.engine import EngineLimits, EngineModel
from fleetplan.units import H_PER_YEAR, S_PER_H, fmt_ms

DEFAULT_AFD_LINK_LATENCY_S = 0.0
#: Largest probability that a decode role's D b slots are all held (the assignment pools them), as a share of the
#: tail 1 - p the SLO percentile leaves (``queueing.disagg`` module docstring: runs that hit the cap queue every grant).
SLOT_FULL_SHARE = 0.1
BITS_PER_BYTE = 8.0

#: How phase 2 checked a disaggregated candidate (reports' ``verified_by``; co-located: iteration level).
VERIFIED_BY = {Topology.PDD: "simulated (PDD simulator)",
               Topology.AFD: "simulated (PDD simulator, AFD step linearised)"}


@dataclass(frozen=True)
class DisaggSettings:
    """KV transfer, AFD shape and the model figures of the disaggregated screen."""

    model: ModelShape
    kv_latency_s: float = DEFAULT_KV_LATENCY_S
    kv_bandwidth_bytes_per_s: float | None = None  # None: min of the two GPUs' network_gbps / 8
    af_ratios: tuple[tuple[int, int], ...] = DEFAULT_AF_RATIOS
    n_micro_batches: int = DEFAULT_MICRO_BATCHES
    afd_link_latency_s: float = DEFAULT_AFD_LINK_LATENCY_S
    # xPyD: prefill:decode instance ratios a PDD fleet is deployed in (x prefill per y decode instances, both
    # rounded up to whole groups); () sizes each role on its own (any ratio)
    pd_ratios: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        if not (math.isfinite(self.kv_latency_s) and self.kv_latency_s >= 0):
            raise ConfigError(param="kv_latency_s", value=self.kv_latency_s, rule="give a latency >= 0")
        bw = self.kv_bandwidth_bytes_per_s
        if bw is not None and not (math.isfinite(bw) and bw > 0):
            raise ConfigError(param="kv_bandwidth_bytes_per_s", value=bw, rule="give a bandwidth > 0")
        _check_ratios("af_ratios", self.af_ratios, ("attention", "FFN"), "1:1,2:1", allow_none=False)
        _check_ratios("pd_ratios", self.pd_ratios, ("prefill", "decode"), "1:1,1:2,1:4", allow_none=True)
        if int(self.n_micro_batches) != self.n_micro_batches or self.n_micro_batches < 1:
            raise ConfigError(param="n_micro_batches", value=self.n_micro_batches, rule="give an integer >= 1")

    def bandwidth(self, *gpus: GpuProfile) -> float:
        if self.kv_bandwidth_bytes_per_s is not None:
            return self.kv_bandwidth_bytes_per_s
        return min(g.network_gbps for g in gpus) * GBPS / BITS_PER_BYTE


def _check_ratios(param: str, ratios, roles: tuple[str, str], example: str, allow_none: bool) -> None:
    """Integer pairs >= 1: a 0 leaves a role empty (one line naming the pair, the rule and the fix)."""
    if not ratios and not allow_none:
        raise ConfigError(param=param, value="", rule=f"give at least one {roles[0]}:{roles[1]} ratio",
                          fix=f"e.g. {example}")
    for a, b in ratios:
        if int(a) != a or int(b) != b or a < 1 or b < 1:
            empty = roles[0] if not a >= 1 else roles[1]
            raise ConfigError(param=param, value=f"{a}:{b}",
                              rule=f"{roles[0]}:{roles[1]} ratios need whole numbers >= 1; this one leaves the "
                                   f"{empty} role empty",
                              fix=f"give {roles[0]}:{roles[1]} instance counts >= 1, e.g. {example}")


def check_disagg_inputs(topologies: Sequence[Topology], slo_tpot_s: float | None, min_ce_gain: float,
                        disagg: DisaggSettings | None) -> DisaggSettings | None:
    """Validate the TPOT target and CE gate; the settings (defaults for ``CALIBRATION_MODEL`` when
    a disaggregated topology is swept without them)."""
    if slo_tpot_s is not None and not (math.isfinite(slo_tpot_s) and slo_tpot_s > 0):
        raise ConfigError(param="slo_tpot_s", value=slo_tpot_s, rule="the TPOT SLO must be > 0")
    if not (math.isfinite(min_ce_gain) and min_ce_gain >= 0):
        raise ConfigError(param="min_ce_gain", value=min_ce_gain, rule="give a ratio >= 0 (1.08 = 8% more "
                          "tokens per dollar than the all-premium baseline)")
    names = [t.value for t in topologies if t in DISAGGREGATED]
    if names and slo_tpot_s is None:
        raise ConfigError(f"`topologies` {','.join(names)} needs `slo_tpot_s`: the decode pool is sized by the "
                          "largest batch within the TPOT target", param="slo_tpot_s",
                          fix="give a TPOT target (`slo_tpot_s`), e.g. 50 ms")
    if names and disagg is None:
        from fleetplan.models.catalog import load_model

        return DisaggSettings(ModelShape.of(load_model(CALIBRATION_MODEL)))
    return disagg


@dataclass(frozen=True)
class DisaggCandidate(Candidate):
    """A PDD or AFD fleet: ``pools`` are its roles (``roles`` names them), times in seconds."""

    roles: tuple[str, ...] = ()
    unit: tuple[int, int] = (1, 1)  # AFD attention:FFN GPUs per decode unit (PDD: 1 instance)
    decode_batch: int = 0
    decode_step_s: float = math.nan  # t_dec(n) or t_afd(n): the analytic TPOT (upper bound)
    mean_context_tokens: float = math.nan
    p_transfer_s: float = math.nan  # KV transfer of the p-quantile prompt
    binding: str = ""
    decode_fit: tuple[float, float] = (math.nan, math.nan)  # simulator step: base_s + slope * Σ context
    kv_link: tuple[float, float, float] = (0.0, math.inf, 0.0)  # KV bytes per token, bandwidth B/s, latency s
    pd_ratio: tuple[int, int] | None = None  # xPyD group (x prefill : y decode instances); None: any
    decode_elasticity: float = 0.0  # g = n t'(n) / t(n) of the decode step at n* (``queueing.disagg``)
    # the KV link's bandwidth (B/s) over the scale-out network and within one NVLink node (nan: no NVLink path:
    # two GPU types, a bandwidth given, or AFD); verification picks one from the counts it simulates
    kv_paths: tuple[float, float] = (math.nan, math.nan)

    def kv_bandwidth_at(self, counts) -> float:
        """The KV link's bandwidth (B/s) of this fleet at ``counts`` instances per role: NVLink when every
        instance fits one node of ``GPUS_PER_NODE`` GPUs of one type, else the scale-out network (the transfer
        path of the placement verification simulates, not only of the analytic size)."""
        network, nvlink = self.kv_paths
        if not math.isfinite(network):
            return self.kv_link[1]
        gpus = sum(int(n) * p.gpus_per_instance for n, p in zip(counts, self.pools, strict=True))
        return nvlink if math.isfinite(nvlink) and gpus <= GPUS_PER_NODE else network

    @property
    def thresholds_tokens(self) -> tuple[int, ...]:
        return ()

    @property
    def decode_units(self) -> int:
        """D: decode instances (PDD) or AFD units."""
        return self.pools[1].count // self.unit[0]

    def __post_init__(self) -> None:
        # Candidate.tpot_p_s is a field; a disaggregated fleet's analytic TPOT is its decode step
        object.__setattr__(self, "tpot_p_s", self.decode_step_s)

    def key(self) -> tuple:
        ratio = () if self.pd_ratio is None else (f"{self.pd_ratio[0]}P{self.pd_ratio[1]}D",)
        return (self.topology.value, f"{self.unit[0]}:{self.unit[1]}", ratio, tuple(p.gpu for p in self.pools))


@dataclass
class _Context:
    """Per-sweep inputs shared by every disaggregated candidate."""

    prompt: np.ndarray
    output: np.ndarray
    weight: np.ndarray
    load: DecodeLoad
    settings: PlanSettings
    disagg: DisaggSettings
    slo_tpot_s: float
    availability: Callable[[GpuProfile], float]
    mean_tokens: float
    max_tokens: int
    served_share: float = 1.0  # share of arrivals within max_model_len (longer ones are rejected, never served)
    cache: dict = field(default_factory=dict)

    @property
    def rate_per_s(self) -> float:
        """λ the roles serve: the arrivals within the served model's context limit (the simulator rejects
        longer requests at arrival, as vLLM does)."""
        return self.settings.rate_per_s * self.served_share

    def per_instance(self, gpu: GpuProfile) -> int:
        return dict(self.settings.gpus_per_instance).get(gpu.name, 1)

    @property
    def max_prompt_tokens(self) -> int:
        return int(np.max(self.prompt, initial=1))

    @property
    def max_total_tokens(self) -> int:
        return int(np.max(self.prompt + self.output, initial=1))


def _role(ctx: _Context, gpu: GpuProfile, count: int, n_slots: int, rho: float, ttft_s: float, wait_s: float,
          mean_s: float, cs2: float, reason: str | None, gpus_per_instance: int,
          reason_code: str | None = None, **extra) -> PoolPlan:
    spares = with_spares(count, ctx.availability(gpu)) - count if reason is None else 0
    return PoolPlan(gpu.name, 0, ctx.max_tokens, n_slots, 1.0, ctx.settings.rate_per_s, count, spares, rho, ttft_s,
                    wait_s, mean_s, cs2, gpu.require_price_usd_per_h(), reason is None, reason, gpus_per_instance,
                    reason_code=None if reason is None else reason_code or "other", **extra)


def _engine(ctx: _Context, gpu: GpuProfile, max_num_seqs: int, budget_tokens: int, step=None,
            kv_blocks: int | None = None) -> EngineModel:
    """The instance the PDD simulator runs for a role of ``gpu`` (``verify.pdd_spec``): its limits and the
    step model the verifier gives it (``plan.pools.pool_step_model``), or ``step``."""
    sv = gpu.require_serving()
    model = step if step is not None else pool_step_model(gpu, dict(ctx.settings.step_models))
    return EngineModel.of(model, EngineLimits(int(max_num_seqs), int(budget_tokens),
                                              int(sv.kv_blocks if kv_blocks is None else kv_blocks),
                                              int(sv.block_size_tokens)))


def prefill_limits(gpu: GpuProfile, step_models) -> tuple[tuple[int, int], ...]:
    """(max_num_seqs, token budget) a prefill role of ``gpu`` may run: vLLM's default sequences with the
    GPU's chunk and, for a served model's GPU, vLLM's own default budget when it is larger
    (``perf.kv_budget.vllm_batch_defaults``; ``plan.pools.token_budget_choices`` for co-located pools)."""
    seqs, budget = vllm_batch_defaults(gpu)
    chunk = int(gpu.require_serving().chunk_tokens)
    out = [(seqs, chunk)]
    if gpu.name in dict(step_models) and budget > chunk:
        out.append((seqs, budget))
    return tuple(out)


def _holds(ctx: _Context, gpu: GpuProfile, tokens: int, kv_blocks: int | None = None) -> bool:
    sv = gpu.require_serving()
    blocks = sv.kv_blocks if kv_blocks is None else kv_blocks
    return math.ceil(tokens / sv.block_size_tokens) <= blocks


def _link(ctx: _Context, g_p: GpuProfile, g_d: GpuProfile, nvlink: bool = False) -> tuple[float, float]:
    """(KV bytes per token per link, link bandwidth B/s): min(TP_p, TP_d) rank pairs send in parallel
    (each rank holds 1/TP of every layer's KV heads) over the scale-out network (``network_gbps``) or, with
    ``nvlink``, within a node over NVLink (half the catalog's bidirectional ``nvlink_gb_per_s`` per
    direction, as ``perf.comm``); a bandwidth given in ``DisaggSettings`` overrides both.  TP here is the
    GPUs holding one request's KV: an attention-DP instance keeps a request's KV on one rank
    (``perf.dp_instance``), so its GPUs over its ranks (one pair between two DP-attention instances)."""
    d = ctx.disagg
    ranks = max(1, min(_kv_shards(ctx, g_p), _kv_shards(ctx, g_d)))
    if nvlink and d.kv_bandwidth_bytes_per_s is None:
        return d.model.kv_bytes_per_token / ranks, min(g_p.nvlink_gb_per_s, g_d.nvlink_gb_per_s) / 2.0 * GBPS
    return d.model.kv_bytes_per_token / ranks, d.bandwidth(g_p, g_d)


def _kv_shards(ctx: _Context, gpu: GpuProfile) -> int:
    """GPUs of an instance of ``gpu`` that hold one request's KV: its GPUs over its attention-DP ranks."""
    ranks = attention_dp_ranks(pool_step_model(gpu, dict(ctx.settings.step_models)))
    return max(1, ctx.per_instance(gpu) // ranks)


def _base_gpu(gpu: GpuProfile) -> str:
    """The catalog GPU a placement variant runs on (``plan.placement.variant_name``: "H100-SXM tp4")."""
    return gpu.name.split(" tp")[0]


def _one_node(ctx: _Context, c: DisaggCandidate) -> bool:
    """Every instance of ``c`` fits one node of ``GPUS_PER_NODE`` NVLink-connected GPUs of one type."""
    return (c.feasible and len({p.gpu.split(" tp")[0] for p in c.pools}) == 1
            and sum(p.count * p.gpus_per_instance for p in c.pools) <= GPUS_PER_NODE)


@dataclass(frozen=True)
class _DecodeSized:
    role: DecodeRole
    state: DecodeState | None
    reason: str | None
    floor: int = 0  # the fewest instances (units) whose slot load is within ρ_max (``PoolPlan.floor_count``)


def _size_decode(ctx: _Context, role: DecodeRole, pre_decode_s: float) -> _DecodeSized:
    """D: the fewest instances (units) whose slot load is within ρ_max and whose P-quantile TPOT meets the
    target (``queueing.disagg.DecodeRole.state``)."""
    s = ctx.settings
    p = s.percentile / 100.0
    key = ("decode", id(role), round(pre_decode_s, 9))
    if key in ctx.cache:
        return ctx.cache[key]
    # the slot load falls as 1 / D: its smallest count first; the TPOT target's, which no h_pre moves, once per role
    lo = max(1, math.ceil(role.slot_load(ctx.rate_per_s, 1, pre_decode_s) / s.rho_max - 1e-9))
    tkey = ("decode-tpot", id(role))
    if tkey not in ctx.cache:  # from the slot load's count with no h_pre, below every h_pre's
        least = max(1, math.ceil(role.slot_load(ctx.rate_per_s, 1, 0.0) / s.rho_max - 1e-9))
        ctx.cache[tkey] = _first_passing(
            lambda d: d if role.tpot_p_s(ctx.rate_per_s, d, p) <= ctx.slo_tpot_s * (1 + 1e-9) else None,
            least, s.max_gpus)[0]

    def ok(d: int) -> DecodeState | None:
        st = role.state(ctx.rate_per_s, d, p, pre_decode_s)
        good = (st.stable and st.slot_load <= s.rho_max * (1 + 1e-12) and st.tpot_p_s <= ctx.slo_tpot_s * (1 + 1e-9)
                and st.slot_full <= SLOT_FULL_SHARE * (1.0 - p))
        return st if good else None

    count, found = _first_passing(ok, max(lo, ctx.cache[tkey]), s.max_gpus)
    if found is None:
        out = _DecodeSized(role, role.state(ctx.rate_per_s, count, p, pre_decode_s),
                           f"decode needs more than max_gpus {s.max_gpus} instances for its TPOT target", lo)
        ctx.cache[key] = out
        return out
    out = _DecodeSized(role, found, None, lo)
    ctx.cache[key] = out
    return out


def _first_passing(ok: Callable[[int], object | None], lo: int, max_count: int) -> tuple[int, object | None]:
    """The smallest count in [lo, max_count] where ``ok`` returns a state (galloping up, then bisection;
    ``ok`` is monotone), and that state; (max_count, None) when none passes."""
    hi, found, fail = lo, None, lo - 1
    while hi <= max_count:
        found = ok(hi)
        if found is not None or hi == max_count:
            break
        fail, hi = hi, min(hi * 2, max_count)
    if found is None:
        return max_count, None
    while hi - fail > 1:
        mid = (fail + hi) // 2
        st = ok(mid)
        if st is None:
            fail = mid
        else:
            hi, found = mid, st
    return hi, found


def _prefill_role(ctx: _Context, gpu: GpuProfile, max_num_seqs: int, budget_tokens: int) -> PrefillRole:
    """The prefill role of ``gpu`` at these limits, one per run (its per-count states are kept, ``PrefillRole``)."""
    key = ("prefill-role", gpu.name, int(max_num_seqs), int(budget_tokens))
    if key not in ctx.cache:
        ctx.cache[key] = PrefillRole.of(_engine(ctx, gpu, max_num_seqs, budget_tokens), ctx.prompt, ctx.weight)
    return ctx.cache[key]


def _prefill(ctx: _Context, gpu: GpuProfile, after_s: np.ndarray, key: tuple) -> tuple[PoolPlan, PrefillRole]:
    """The prefill role of ``gpu`` (``queueing.disagg.PrefillRole``) at each of its engine limits
    (``prefill_limits``): the fewest instances whose ρ_p <= ρ_max and P-quantile TTFT <= the SLO win, then
    the lower TTFT."""
    if key in ctx.cache:
        return ctx.cache[key]
    s = ctx.settings
    p = s.percentile / 100.0
    best = None
    for seqs, budget in prefill_limits(gpu, s.step_models):
        role = _prefill_role(ctx, gpu, seqs, budget)
        least = float(role.weight @ role.service_at(ctx.rate_per_s))  # X is least at one instance's rate
        lo = max(1, math.ceil(ctx.rate_per_s * least / s.rho_max - 1e-9))
        reason = None
        if role.zero_wait_quantile_s(after_s, p) > s.slo_ttft_s:
            reason = InfeasibleReason.PREFILL_EXCEEDS_SLO
            count, st = lo, role.state(ctx.rate_per_s, lo, after_s, p, s.arrival_cv2)
        else:
            def ok(n: int, role=role) -> PrefillState | None:
                st = role.state(ctx.rate_per_s, n, after_s, p, s.arrival_cv2)
                return st if st.rho <= s.rho_max and st.ttft_p_s <= s.slo_ttft_s else None

            count, st = _first_passing(ok, lo, s.max_gpus)
            if st is None:
                reason = InfeasibleReason.EXCEEDS_MAX_GPUS
                st = role.state(ctx.rate_per_s, count, after_s, p, s.arrival_cv2)
        rank = (reason is not None, count, st.ttft_p_s)
        if best is None or rank < best[0]:
            best = (rank, reason, st, role, lo)
    _, why, st, role, lo = best
    reason = None
    if why is InfeasibleReason.PREFILL_EXCEEDS_SLO:
        reason = (f"prefill + KV transfer + first decode step alone exceed the SLO "
                  f"(P{s.percentile:g} with no queue > {fmt_ms(s.slo_ttft_s, '.0f')})")
    elif why is not None:
        reason = f"prefill pool {why.value} within max_gpus {s.max_gpus}"
    lim = role.engine.limits
    # the utilisation cap's floor: the fewest instances with ρ_p = λ / n E[X(λ / n)] <= ρ_max (X grows as n does)
    floor, _ = _first_passing(lambda n: n if ctx.rate_per_s / n * float(role.weight @ role.service_at(
        ctx.rate_per_s / n, n)) <= s.rho_max else None, lo, max(lo, st.n_instances))
    plan = _role(ctx, gpu, st.n_instances, 1, st.rho, st.ttft_p_s, st.wait_p_s, st.mean_service_s, st.cs2,
                 reason, ctx.per_instance(gpu), REASON_CODE[why], max_num_seqs=lim.max_num_seqs,
                 max_num_batched_tokens=lim.max_num_batched_tokens, mean_step_s=float(role.weight @ role.alone_s),
                 floor_count=min(floor, st.n_instances) if why is None else 0)
    ctx.cache[key] = (plan, role)
    return plan, role


def _decode_roles(ctx: _Context, gpus: Sequence[GpuProfile], sized: _DecodeSized, units: Sequence[int],
                  ttft_s: float, extra_reason: str | None = None) -> tuple[PoolPlan, ...]:
    """One PoolPlan per decode role (PDD: decode; AFD: attention, ffn); counts = units x GPUs per unit."""
    role, st = sized.role, sized.state
    cap = role.engine.limits.max_num_seqs
    reason = extra_reason or sized.reason
    d = st.n_instances if reason is None and st is not None else 0
    hold = role.mean_output_tokens * st.step_s if st is not None else math.nan
    # instance-seconds of the binding resource (slots at the full batch) per request: λ · that / count = ρ_d
    per_request = st.slot_load * d / ctx.rate_per_s if st is not None and d else math.nan
    floor = min(sized.floor, d)
    return tuple(_role(ctx, g, d * k, cap, st.slot_load if st else math.inf, ttft_s, st.slot_wait_s if st else 0.0,
                       k * per_request, ctx.load.output_cs2, reason, ctx.per_instance(g), "decode",
                       tpot_p_s=st.tpot_p_s if st else math.nan, decode_batch=st.batch if st else math.nan,
                       mean_step_s=st.step_s if st else math.nan, mean_residence_s=hold, max_num_seqs=cap,
                       floor_count=floor * k)
                 for g, k in zip(gpus, units, strict=True))


def _candidate(ctx: _Context, topo: Topology, roles: tuple[str, ...], pools: tuple[PoolPlan, ...],
               unit: tuple[int, int], sized: _DecodeSized, xfer_s: float, fit: tuple[float, float],
               link: tuple[float, float], pd_ratio: tuple[int, int] | None = None) -> DisaggCandidate:
    s = ctx.settings
    total = sum(p.total_gpus for p in pools)
    cost = fleet_usd_per_h(pools) * H_PER_YEAR
    tokens_per_year = s.rate_per_s * ctx.mean_tokens * H_PER_YEAR * S_PER_H
    reason, code = next(((f"{r} ({p.gpu}): {p.reason}", p.reason_code)
                         for r, p in zip(roles, pools, strict=True) if not p.feasible), (None, None))
    if reason is None and total > s.max_gpus:
        reason, code = f"needs {total} GPUs, more than max_gpus {s.max_gpus}", "max-gpus"
    pf = pools[0]
    n_floor = max(1, math.ceil(ctx.rate_per_s * pf.mean_service_s / s.rho_max - 1e-9))
    st = sized.state
    cap = sized.role.engine.limits.max_num_seqs
    binding = (f"prefill: {'TTFT' if pf.count > n_floor else 'rho cap'}; "
               f"decode: b={cap}, n*={st.batch if st else math.nan:.0f} by slot load")
    tpot = st.tpot_p_s if st is not None else math.nan
    return DisaggCandidate(
        topology=topo, router=SizingRouter.LENGTH, pools=pools, total_gpus_needed=total, cost_usd_per_year=cost,
        cost_usd_per_mtok=cost / tokens_per_year * 1e6 if tokens_per_year > 0 else math.inf,
        ttft_p_s=pf.ttft_p_s, feasible=reason is None, reason=reason, reason_code=code, roles=roles, unit=unit,
        decode_batch=int(cap), decode_step_s=tpot if math.isfinite(tpot) else 0.0,
        mean_context_tokens=sized.role.context_tokens, p_transfer_s=xfer_s, binding=binding,
        decode_fit=fit, kv_link=(link[0], link[1], ctx.disagg.kv_latency_s), pd_ratio=pd_ratio,
        decode_elasticity=sized.role.elasticity(st.batch) if st is not None else 0.0)


def _after_prefill(ctx: _Context, link: tuple[float, float], sized: _DecodeSized) -> np.ndarray:
    """Transfer + mean slot wait + first decode step per prompt point (module docstring of ``queueing.disagg``)."""
    st = sized.state
    extra = (st.slot_wait_s + st.first_decode_s) if st is not None and st.stable else 0.0
    return kv_transfer_s(ctx.prompt, link[0], link[1], ctx.disagg.kv_latency_s) + extra


def _p_transfer(ctx: _Context, link: tuple[float, float]) -> float:
    order = np.argsort(ctx.prompt)
    cum = np.cumsum(ctx.weight[order]) / ctx.weight.sum()
    p_prompt = ctx.prompt[order][min(int(np.searchsorted(cum, ctx.settings.percentile / 100.0)), cum.size - 1)]
    return float(kv_transfer_s(np.asarray(p_prompt), link[0], link[1], ctx.disagg.kv_latency_s))


def _pre_decode_s(ctx: _Context, prefill: PrefillRole, link: tuple[float, float],
                  n_prefill: int | None = None) -> float:
    """h_pre: a decode slot is granted at prefill start (early binding) and held through prefill and transfer,
    E[Y] + E[T_x] with Y the prompt's own time in prefill in a role of ``n_prefill`` instances (the simulator's
    prefill start to end, ``PrefillRole.wall_at``); before the prefill role is sized (None), E[S_alone]."""
    w = ctx.weight / ctx.weight.sum()
    own = prefill.alone_s if n_prefill is None else prefill.wall_at(ctx.rate_per_s / n_prefill, n_prefill)
    return float(w @ own) + float(w @ kv_transfer_s(ctx.prompt, link[0], link[1], ctx.disagg.kv_latency_s))


def _sized_roles(ctx: _Context, g_p: GpuProfile, role: DecodeRole, link: tuple[float, float], key: tuple
                 ) -> tuple[_DecodeSized, np.ndarray, PoolPlan, PrefillRole]:
    """(decode sized, prefill after-time, prefill plan, prefill role): decode sized with the slot held for
    E[S_alone] + E[T_x] (the prefill role's count unknown), prefill sized after it; then, the prefill count
    known, decode re-sized with the hold the simulator measures (``_pre_decode_s`` at that count: the prompt's own
    time in a busy prefill role, longer than S_alone when prompts share its steps) and prefill after it."""
    first = _prefill_role(ctx, g_p, *prefill_limits(g_p, ctx.settings.step_models)[0])
    hold = _pre_decode_s(ctx, first, link)
    sized = _size_decode(ctx, role, hold)
    after = _after_prefill(ctx, link, sized)
    pf, pf_role = _prefill(ctx, g_p, after, key)
    if not (pf.feasible and sized.state is not None):
        return sized, after, pf, pf_role
    held = _pre_decode_s(ctx, pf_role, link, pf.count)
    if abs(held - hold) <= 1e-9 * hold:
        return sized, after, pf, pf_role
    sized = _size_decode(ctx, role, held)
    after = _after_prefill(ctx, link, sized)
    pf, pf_role = _prefill(ctx, g_p, after, (*key, "held", round(held, 9)))
    return sized, after, pf, pf_role


def _pdd_pair(ctx: _Context, g_p: GpuProfile, g_d: GpuProfile) -> list[DisaggCandidate] | None:
    """The PDD candidates of prefill ``g_p`` and decode ``g_d`` (one, or one per xPyD ratio of
    ``DisaggSettings.pd_ratios``); None when a role cannot hold the workload's longest request (prefill: its
    prompt's KV; decode: prompt + output).  The KV moves over the scale-out network; a fleet whose every
    instance fits one NVLink node (one GPU type, at most ``GPUS_PER_NODE`` GPUs) is re-sized with NVLink
    (a faster transfer only lowers the counts, so it still fits)."""
    if not (_holds(ctx, g_p, ctx.max_prompt_tokens) and _holds(ctx, g_d, ctx.max_total_tokens)):
        return None
    far = _link(ctx, g_p, g_d)
    found = _pdd_sized(ctx, g_p, g_d, far)
    if _base_gpu(g_p) == _base_gpu(g_d) and g_p.nvlink_gb_per_s and ctx.disagg.kv_bandwidth_bytes_per_s is None:
        near_link = _link(ctx, g_p, g_d, nvlink=True)
        near = _pdd_sized(ctx, g_p, g_d, near_link)
        found = [n if _one_node(ctx, c) and _one_node(ctx, n) else c for c, n in zip(found, near, strict=True)]
        found = [replace(c, kv_paths=(far[1], near_link[1])) for c in found]
    return found


def _pdd_sized(ctx: _Context, g_p: GpuProfile, g_d: GpuProfile, link: tuple[float, float]) -> list[DisaggCandidate]:
    dkey = ("decode-role", g_d.name)
    if dkey not in ctx.cache:
        probe = DecodeRole.of(_engine(ctx, g_d, 1, 1), ctx.prompt, ctx.output, ctx.weight)
        # a DP-attention instance's limits are its ranks' (``DecodeRole.batch_cap``)
        ranks = attention_dp_ranks(pool_step_model(g_d, dict(ctx.settings.step_models)))
        cap = probe.batch_cap(ctx.slo_tpot_s, ranks=ranks)
        ctx.cache[dkey] = None if cap < 1 else DecodeRole.of(
            _engine(ctx, g_d, cap, max(cap, 1)), ctx.prompt, ctx.output, ctx.weight)
    role = ctx.cache[dkey]
    if role is None:
        return [_unservable_pdd(ctx, g_p, g_d, link)]
    sized, after, pf, pf_role = _sized_roles(ctx, g_p, role, link, ("pdd", g_p.name, g_d.name, link))
    sv = g_d.require_serving()
    fit = (sv.iter_base_s, sv.iter_per_seq_s / sv.ref_context_tokens)
    if not ctx.disagg.pd_ratios:
        dec = _decode_roles(ctx, (g_d,), sized, (1,), pf.ttft_p_s)
        return [_candidate(ctx, Topology.PDD, ("prefill", "decode"), (pf, *dec), (1, 1), sized,
                           _p_transfer(ctx, link), fit, link)]
    out = []
    for x, y in ctx.disagg.pd_ratios:  # xPyD groups: both roles rounded up to whole groups
        groups = max(math.ceil(pf.count / x), math.ceil(sized.state.n_instances / y)) if pf.feasible and \
            sized.state is not None and sized.reason is None else 0
        pf_k, sized_k = pf, sized
        if groups:
            st = pf_role.state(ctx.rate_per_s, groups * x, after, ctx.settings.percentile / 100.0,
                               ctx.settings.arrival_cv2)
            pf_k = replace(pf, count=groups * x, spares=with_spares(groups * x, ctx.availability(g_p)) - groups * x,
                           rho=st.rho, ttft_p_s=st.ttft_p_s, wait_p_s=st.wait_p_s, mean_service_s=st.mean_service_s,
                           cs2=st.cs2)
            p_level = ctx.settings.percentile / 100.0
            sized_k = _DecodeSized(role, role.state(ctx.rate_per_s, groups * y, p_level,
                                                    _pre_decode_s(ctx, pf_role, link, groups * x)), None, sized.floor)
        dec = _decode_roles(ctx, (g_d,), sized_k, (1,), pf_k.ttft_p_s)
        out.append(_candidate(ctx, Topology.PDD, ("prefill", "decode"), (pf_k, *dec), (1, 1), sized_k,
                              _p_transfer(ctx, link), fit, link, pd_ratio=(int(x), int(y))))
    return out


def _unservable_pdd(ctx: _Context, g_p: GpuProfile, g_d: GpuProfile, link) -> DisaggCandidate:
    """A PDD candidate whose decode GPU cannot meet the TPOT target with one sequence (infeasible)."""
    role = DecodeRole.of(_engine(ctx, g_d, 1, 1), ctx.prompt, ctx.output, ctx.weight)
    reason = (f"TPOT target {fmt_ms(ctx.slo_tpot_s)} is below one sequence's decode step "
              f"({fmt_ms(float(role.step_s(1.0)), '.1f')}) or the KV cache holds no mean context")
    sized = _DecodeSized(role, None, reason)
    pf, _ = _prefill(ctx, g_p, kv_transfer_s(ctx.prompt, *link, ctx.disagg.kv_latency_s),
                     ("pdd-none", g_p.name, link))
    dec = _decode_roles(ctx, (g_d,), sized, (1,), pf.ttft_p_s)
    return _candidate(ctx, Topology.PDD, ("prefill", "decode"), (pf, *dec), (1, 1), sized, _p_transfer(ctx, link),
                      (math.nan, math.nan), link)


def _afd_unit(ctx: _Context, g_p: GpuProfile, g_a: GpuProfile, g_f: GpuProfile, a: int, f: int
              ) -> DisaggCandidate | None:
    """The AFD candidate: decode units of ``a`` attention GPUs of ``g_a`` and ``f`` FFN GPUs of ``g_f``, their
    step t_afd(n) linearised through t_afd(1) and t_afd(n) at κ (the step the simulator runs), the unit's
    KV blocks a x the attention GPU's; None when a role cannot hold the longest request."""
    d = ctx.disagg
    sv_a = g_a.require_serving()
    unit = AfdUnit(sv_a, g_f.require_serving(), a, f, int(d.n_micro_batches), d.bandwidth(g_a, g_f),
                   d.afd_link_latency_s)
    if not (_holds(ctx, g_p, ctx.max_prompt_tokens) and _holds(ctx, g_a, ctx.max_total_tokens, unit.kv_blocks())):
        return None
    link = _link(ctx, g_p, g_a)
    c_bar = ctx.load.mean_context_tokens
    n, step, step_1 = unit.batch(c_bar, ctx.slo_tpot_s, d.model)
    fit = linear_fit(step_1, step, n, c_bar)
    key = ("afd", g_p.name, g_a.name, g_f.name, a, f, link)
    if n >= 1:
        base, slope = fit
        ctx_tokens = float(ctx.max_tokens)
        model = LinearStepModel(base, slope * ctx_tokens, 0.0, ctx_tokens)
        # one role per unit, whatever the prefill GPU: its smoothed step and count states are computed once
        rkey = ("afd-role", g_a.name, g_f.name, a, f)
        if rkey not in ctx.cache:
            ctx.cache[rkey] = DecodeRole.of(_engine(ctx, g_a, n, n, step=model, kv_blocks=unit.kv_blocks()),
                                            ctx.prompt, ctx.output, ctx.weight)
        role = ctx.cache[rkey]
        sized, _, pf, _ = _sized_roles(ctx, g_p, role, link, key)
    else:
        role = DecodeRole.of(_engine(ctx, g_a, 1, 1), ctx.prompt, ctx.output, ctx.weight)
        sized = _DecodeSized(role, None, f"TPOT target {fmt_ms(ctx.slo_tpot_s)} is below the unit's one-sequence "
                                         f"step or its KV cache holds no mean context")
        pf, _ = _prefill(ctx, g_p, _after_prefill(ctx, link, sized), key)
    dec = _decode_roles(ctx, (g_a, g_f), sized, (a, f), pf.ttft_p_s)
    return _candidate(ctx, Topology.AFD, ("prefill", "attention", "ffn"), (pf, *dec), (a, f), sized,
                      _p_transfer(ctx, link), fit, link)


def disagg_candidates(points, topologies: Sequence[Topology], gpus: Sequence[GpuProfile], settings: PlanSettings,
                      disagg: DisaggSettings, slo_tpot_s: float,
                      availability: Callable[[GpuProfile], float]) -> list[DisaggCandidate]:
    """Every PDD / AFD candidate of ``gpus`` (module docstring); ``points`` is a ``LengthPoints``.  Pairs whose
    role cannot hold the longest request are left out; ``ConfigError`` when that leaves a requested
    disaggregated topology with no candidate.  "MTP on" placements (``plan.placement``'s ``mtp1`` twins) take
    no role: the PDD/AFD simulator runs no speculative decoding, so a role timed with MTP could not be
    verified (``fleetplan deploy`` refuses such a role too); their MTP-off placements are swept."""
    steps = dict(settings.step_models)
    gpus = [g for g in gpus if g.name not in steps or mtp_of(steps[g.name]) is None]
    sub = points.between(0, points.max_tokens)
    load = decode_load(sub.prompt_tokens, sub.output_tokens, sub.weight)
    ctx = _Context(sub.prompt_tokens, sub.output_tokens, sub.weight, load, settings, disagg, slo_tpot_s,
                   availability, points.mean_total_tokens, points.max_tokens,
                   served_share=min(1.0, float(sub.weight.sum()) / float(points.global_points.weight.sum())))
    out: list[DisaggCandidate] = []
    if Topology.PDD in topologies:
        found = [_pdd_pair(ctx, g_p, g_d) for g_d in gpus for g_p in gpus]
        _require_some(ctx, Topology.PDD, found, gpus)
        out.extend(c for cs in found if cs is not None for c in cs)
    if Topology.AFD in topologies:
        found = [_afd_unit(ctx, g_p, g_a, g_f, int(a), int(f))
                 for g_a in gpus for g_f in gpus for a, f in disagg.af_ratios for g_p in gpus]
        _require_some(ctx, Topology.AFD, found, gpus)
        out.extend(c for c in found if c is not None)
    return out


def _require_some(ctx: _Context, topo: Topology, found: Sequence[object | None],
                  gpus: Sequence[GpuProfile]) -> None:
    if any(c is not None for c in found):
        return
    raise ConfigError(
        f"no {topo.value} fleet of {', '.join(g.name for g in gpus)} holds the workload's longest request "
        f"({ctx.max_total_tokens:,} tokens) in a role's KV cache (prefill: the prompt; decode: prompt + output)",
        param="gpus", value=",".join(g.name for g in gpus),
        fix="give GPUs with more memory or a larger `tensor_parallel_size`, or a lower `max_model_len_tokens`")
