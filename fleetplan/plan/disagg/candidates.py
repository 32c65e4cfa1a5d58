"""The disaggregated planner: PDD and AFD candidates, sized by ``plan.disagg.screen``.

PDD: one prefill pool of GPU type g_p and one decode pool of g_d, every (g_p, g_d) of the swept
types.  AFD: a prefill pool of g_p and D decode units of ``a`` attention GPUs of g_a and ``f``
FFN GPUs of g_f, every (g_p, g_a, g_f) and A:F ratio.  Each role is a ``PoolPlan`` (count in
instances, spares for node availability as co-located pools), so costs, tables and exports
treat a disaggregated fleet like any other; ``DisaggCandidate`` adds the roles, the decode
batch, the analytic TPOT and the AFD unit.

KV transfer: bytes per token from the served model or, without it, from the
model the GPU profiles' serving constants were calibrated on (``CALIBRATION_MODEL``);
bandwidth the slower of the two GPUs' per-GPU network (``network_gbps``) unless given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.hardware import GpuProfile, with_spares
from fleetplan.plan.defaults import (  # light: shown in the help
    CALIBRATION_MODEL,
    DEFAULT_AF_RATIOS,
    DEFAULT_KV_LATENCY_S,
    DEFAULT_MICRO_BATCHES,
    GBPS,
)
from fleetplan.plan.disagg.screen import (
    AfdUnit,
    DecodeLoad,
    ModelShape,
    decode_instances,
    decode_load,
    kv_batch_limit,
    linear_decode_batch,
    linear_decode_step_s,
    linear_fit,
    prefill_moments,
    transfer_s,
)
from fleetplan.plan.pools import REASON_CODE, PlanSettings, PoolPlan, fleet_usd_per_h
from fleetplan.plan.space import DISAGGREGATED, SizingRouter, Topology
from fleetplan.plan.sweep import Candidate
from fleetplan.queueing import InfeasibleReason, size_pool
from fleetplan.units import H_PER_YEAR, S_PER_H, fmt_ms

DEFAULT_AFD_LINK_LATENCY_S = 0.0
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

    def __post_init__(self) -> None:
        if not (math.isfinite(self.kv_latency_s) and self.kv_latency_s >= 0):
            raise ConfigError(param="kv_latency_s", value=self.kv_latency_s, rule="give a latency >= 0")
        bw = self.kv_bandwidth_bytes_per_s
        if bw is not None and not (math.isfinite(bw) and bw > 0):
            raise ConfigError(param="kv_bandwidth_bytes_per_s", value=bw, rule="give a bandwidth > 0")
        if not self.af_ratios or any(int(a) != a or int(f) != f or a < 1 or f < 1 for a, f in self.af_ratios):
            raise ConfigError(param="af_ratios", value=self.af_ratios, rule="give A:F integer pairs >= 1, e.g. 1:1,2:1")
        if int(self.n_micro_batches) != self.n_micro_batches or self.n_micro_batches < 1:
            raise ConfigError(param="n_micro_batches", value=self.n_micro_batches, rule="give an integer >= 1")

    def bandwidth(self, *gpus: GpuProfile) -> float:
        if self.kv_bandwidth_bytes_per_s is not None:
            return self.kv_bandwidth_bytes_per_s
        return min(g.network_gbps for g in gpus) * GBPS / BITS_PER_BYTE


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
        return (self.topology.value, f"{self.unit[0]}:{self.unit[1]}", (), tuple(p.gpu for p in self.pools))


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
    cache: dict = field(default_factory=dict)

    def per_instance(self, gpu: GpuProfile) -> int:
        return dict(self.settings.gpus_per_instance).get(gpu.name, 1)


def _role(ctx: _Context, gpu: GpuProfile, count: int, n_slots: int, rho: float, ttft_s: float, wait_s: float,
          mean_s: float, cs2: float, reason: str | None, gpus_per_instance: int,
          reason_code: str | None = None) -> PoolPlan:
    spares = with_spares(count, ctx.availability(gpu)) - count if reason is None else 0
    return PoolPlan(gpu.name, 0, ctx.max_tokens, n_slots, 1.0, ctx.settings.rate_per_s, count, spares, rho, ttft_s,
                    wait_s, mean_s, cs2, gpu.require_price_usd_per_h(), reason is None, reason, gpus_per_instance,
                    reason_code=None if reason is None else reason_code or "other")


def _prefill(ctx: _Context, gpu: GpuProfile, after_s: np.ndarray, key: tuple) -> PoolPlan:
    if key in ctx.cache:
        return ctx.cache[key]
    s = ctx.settings
    moments = prefill_moments(ctx.prompt, ctx.weight, gpu.require_serving(), after_s)
    # the whole stream reaches the prefill pool: GI/G/c, Kimura's (Ca² + Cs²)/2 for (1 + Cs²)/2
    bursty = replace(moments, cs2=max(moments.cs2 + s.arrival_cv2 - 1.0, 0.0))
    sized = size_pool(s.rate_per_s, bursty, s.slo_ttft_s, s.percentile / 100.0, rho_max=s.rho_max,
                      max_gpus=s.max_gpus, min_spare_gpus=s.min_spare_gpus, tail_model=s.tail_model,
                      ttft_model=s.ttft_model)
    reason = None
    if sized.reason is InfeasibleReason.PREFILL_EXCEEDS_SLO:
        reason = (f"prefill + KV transfer + first decode step alone exceed the SLO "
                  f"(P{s.percentile:g} with no queue > {fmt_ms(s.slo_ttft_s, '.0f')})")
    elif sized.reason is not None:
        reason = f"prefill pool {sized.reason.value} within max_gpus {s.max_gpus}"
    plan = _role(ctx, gpu, sized.n_gpus, 1, sized.rho, sized.ttft_p_s, sized.wait_p_s, moments.mean_s, moments.cs2,
                 reason, ctx.per_instance(gpu), REASON_CODE[sized.reason])
    ctx.cache[key] = plan
    return plan


def _decode_roles(ctx: _Context, gpus: Sequence[GpuProfile], batch: int, step_s: float, units: Sequence[int],
                  ttft_s: float) -> tuple[PoolPlan, ...]:
    """One PoolPlan per decode role (PDD: decode; AFD: attention, ffn); counts = units x GPUs per unit."""
    s, load = ctx.settings, ctx.load
    reason = None
    if batch < 1:
        reason = (f"TPOT target {fmt_ms(ctx.slo_tpot_s)} is below one sequence's decode step "
                  f"({fmt_ms(step_s, '.1f')}) or the KV cache holds no mean context")
    d = decode_instances(s.rate_per_s, load, step_s, batch, s.rho_max) if reason is None else 0
    rho = s.rate_per_s * load.mean_output_tokens * step_s / (d * batch) if d else math.inf
    return tuple(_role(ctx, g, d * k, batch, rho, ttft_s, 0.0, k * load.mean_output_tokens * step_s / max(batch, 1),
                       load.output_cs2, reason, ctx.per_instance(g), "decode")
                 for g, k in zip(gpus, units, strict=True))


def _candidate(ctx: _Context, topo: Topology, roles: tuple[str, ...], pools: tuple[PoolPlan, ...],
               unit: tuple[int, int], batch: int, step_s: float, xfer_s: float,
               fit: tuple[float, float], n_kv: int, bandwidth: float) -> DisaggCandidate:
    s = ctx.settings
    total = sum(p.total_gpus for p in pools)
    cost = fleet_usd_per_h(pools) * H_PER_YEAR
    tokens_per_year = s.rate_per_s * ctx.mean_tokens * H_PER_YEAR * S_PER_H
    reason, code = next(((f"{r} ({p.gpu}): {p.reason}", p.reason_code)
                         for r, p in zip(roles, pools, strict=True) if not p.feasible), (None, None))
    if reason is None and total > s.max_gpus:
        reason, code = f"needs {total} GPUs, more than max_gpus {s.max_gpus}", "max-gpus"
    pf = pools[0]
    n_floor = max(1, math.ceil(s.rate_per_s * pf.mean_service_s / s.rho_max - 1e-9))
    binding = (f"prefill: {'TTFT' if pf.count > n_floor else 'rho cap'}; "
               f"decode: n={batch} by {'KV blocks' if batch and batch == n_kv else 'TPOT'}")
    return DisaggCandidate(
        topology=topo, router=SizingRouter.LENGTH, pools=pools, total_gpus_needed=total, cost_usd_per_year=cost,
        cost_usd_per_mtok=cost / tokens_per_year * 1e6 if tokens_per_year > 0 else math.inf,
        ttft_p_s=pf.ttft_p_s, feasible=reason is None, reason=reason, reason_code=code, roles=roles, unit=unit,
        decode_batch=batch, decode_step_s=step_s,
        mean_context_tokens=ctx.load.mean_context_tokens, p_transfer_s=xfer_s, binding=binding,
        decode_fit=fit, kv_link=(ctx.disagg.model.kv_bytes_per_token, bandwidth, ctx.disagg.kv_latency_s))


def _after_prefill(ctx: _Context, bandwidth: float, step_s: float) -> np.ndarray:
    d = ctx.disagg
    return transfer_s(ctx.prompt, d.model.kv_bytes_per_token, bandwidth, d.kv_latency_s) + step_s


def _p_transfer(ctx: _Context, bandwidth: float) -> float:
    order = np.argsort(ctx.prompt)
    cum = np.cumsum(ctx.weight[order]) / ctx.weight.sum()
    p_prompt = ctx.prompt[order][min(int(np.searchsorted(cum, ctx.settings.percentile / 100.0)), cum.size - 1)]
    d = ctx.disagg
    return float(transfer_s(np.asarray(p_prompt), d.model.kv_bytes_per_token, bandwidth, d.kv_latency_s))


def disagg_candidates(points, topologies: Sequence[Topology], gpus: Sequence[GpuProfile], settings: PlanSettings,
                      disagg: DisaggSettings, slo_tpot_s: float,
                      availability: Callable[[GpuProfile], float]) -> list[DisaggCandidate]:
    """Every PDD / AFD candidate of ``gpus`` (module docstring); ``points`` is a ``LengthPoints``."""
    sub = points.between(0, points.max_tokens)
    load = decode_load(sub.prompt_tokens, sub.output_tokens, sub.weight)
    ctx = _Context(sub.prompt_tokens, sub.output_tokens, sub.weight, load, settings, disagg, slo_tpot_s,
                   availability, points.mean_total_tokens, points.max_tokens)
    c_bar = ctx.load.mean_context_tokens
    out: list[DisaggCandidate] = []
    if Topology.PDD in topologies:
        for g_d in gpus:
            sv = g_d.require_serving()
            n = linear_decode_batch(sv, c_bar, slo_tpot_s)
            step = float(linear_decode_step_s(max(n, 1), sv, c_bar))
            for g_p in gpus:
                bw = disagg.bandwidth(g_p, g_d)
                pf = _prefill(ctx, g_p, _after_prefill(ctx, bw, step), ("pdd", g_p.name, bw, step))
                dec = _decode_roles(ctx, (g_d,), n, step, (1,), pf.ttft_p_s)
                fit = (sv.iter_base_s, sv.iter_per_seq_s / sv.ref_context_tokens)
                out.append(_candidate(ctx, Topology.PDD, ("prefill", "decode"), (pf, *dec), (1, 1), n, step,
                                      _p_transfer(ctx, bw), fit,
                                      kv_batch_limit(sv.kv_blocks, sv.block_size_tokens, c_bar), bw))
    if Topology.AFD in topologies:
        for g_a in gpus:
            for g_f in gpus:
                for a, f in disagg.af_ratios:
                    sv_a = g_a.require_serving()
                    unit = AfdUnit(sv_a, g_f.require_serving(), int(a), int(f),
                                   int(disagg.n_micro_batches), disagg.bandwidth(g_a, g_f), disagg.afd_link_latency_s)
                    n, step, step_1 = unit.batch(c_bar, slo_tpot_s, disagg.model)
                    fit = linear_fit(step_1, step, n, c_bar)
                    step = step if math.isfinite(step) else 0.0  # no batch fits: infeasible below
                    for g_p in gpus:
                        bw = disagg.bandwidth(g_p, g_a)
                        pf = _prefill(ctx, g_p, _after_prefill(ctx, bw, step), ("afd", g_p.name, bw, step))
                        dec = _decode_roles(ctx, (g_a, g_f), n, step, (int(a), int(f)), pf.ttft_p_s)
                        out.append(_candidate(ctx, Topology.AFD, ("prefill", "attention", "ffn"), (pf, *dec),
                                              (int(a), int(f)), n, step, _p_transfer(ctx, bw), fit,
                                              kv_batch_limit(unit.kv_blocks(), sv_a.block_size_tokens, c_bar),
                                              bw))
    return out
