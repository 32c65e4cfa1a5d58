"""Spend ratio and cost efficiency against an all-premium baseline (Frontier, Feng et al. 2026, §6.2).

Frontier §6.2 defines, for an allocation g of GPU types to roles r with N_r GPUs each and the
all-premium baseline g0 (there all-H800):

    Price(g) = Σ_r N_r p(g(r))                       hourly spend (p: price per GPU-hour)
    SR(g)    = Price(g0) / Price(g)                   spend ratio; > 1: cheaper than g0
    CE(g)    = (T(g) / Price(g)) / (T(g0) / Price(g0))  cost efficiency; > 1: more tokens per dollar

with T the aggregated token throughput, and accepts a placement only when CE(g) > 1.08 ("at
least 8% more tokens per dollar than the all-H800 baseline").

Here every fleet is sized for the same offered rate λ, so T is the fleet's *capacity*: the
largest rate its bottleneck pool or role carries at the utilisation cap, times the mean tokens
per request (which cancels in CE):

    λ_cap(g) = min over pools/roles i with traffic of  N_i ρ_max / (share_i E[S_i])

where N_i is the pool's instance count (without spares) and E[S_i] the instance-seconds one
request costs it (``PoolPlan.mean_service_s``: co-located E[S]/n_max; prefill E[S_p]; decode
E[L_out] t(n) / n; AFD roles the same per GPU of the unit).  SLOs are checked separately (the
sizing and the simulator); CE measures headroom per dollar.

Baseline per family (co-located, pdd, afd): the cheapest feasible candidate of the family whose
every pool uses the premium GPU type (the highest price per GPU-hour among the swept types),
sized by the same screen.  The gate (``min_ce_gain``, default Frontier's 1.08) rejects PDD and
AFD candidates other than their baseline whose CE is below it; co-located candidates get SR and
CE for comparison but are not gated (the issue's rule is for disaggregated placements).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from fleetplan.hardware import GpuProfile
from fleetplan.plan.pools import fleet_usd_per_h
from fleetplan.plan.space import DISAGGREGATED, family
from fleetplan.plan.sweep import Candidate


@dataclass(frozen=True)
class Economics:
    """SR, CE and the capacity (requests/s) of one candidate against its family's baseline."""

    spend_ratio: float
    ce_gain: float
    capacity_per_s: float
    baseline_gpu: str


def premium_gpu(gpus: Sequence[GpuProfile]) -> str:
    """The swept GPU type with the highest price per GPU-hour (the first on ties)."""
    return max(gpus, key=lambda g: g.require_price_usd_per_h()).name


def capacity_per_s(c: Candidate, rho_max: float) -> float:
    """λ_cap (module docstring); 0 when a pool with traffic has no instances."""
    caps = [p.count * rho_max / (p.traffic_share * p.mean_service_s)
            for p in c.pools if p.traffic_share > 0 and p.mean_service_s > 0]
    return min(caps, default=0.0)


def hourly_spend_usd(c: Candidate) -> float:
    """Price(g) = Σ GPUs (with spares) x price per GPU-hour."""
    return fleet_usd_per_h(c.pools)


def baselines(candidates: Sequence[Candidate], premium: str) -> dict[str, Candidate]:
    """Per family, the cheapest feasible all-``premium`` candidate."""
    out: dict[str, Candidate] = {}
    for c in candidates:
        if not c.feasible or any(p.gpu != premium for p in c.pools if p.count + p.spares):
            continue
        fam = family(c.topology)
        if fam not in out or c.cost_usd_per_year < out[fam].cost_usd_per_year:
            out[fam] = c
    return out


def economics(c: Candidate, baseline: Candidate | None, rho_max: float) -> Economics | None:
    """SR and CE of ``c`` against ``baseline`` (None without a baseline or a priced fleet)."""
    if baseline is None:
        return None
    price, price0 = hourly_spend_usd(c), hourly_spend_usd(baseline)
    cap, cap0 = capacity_per_s(c, rho_max), capacity_per_s(baseline, rho_max)
    if not (price > 0 and price0 > 0 and cap0 > 0):
        return None
    sr = price0 / price
    ce = (cap / price) / (cap0 / price0)
    return Economics(sr, ce, cap, baseline.pools[0].gpu)


def apply_ce_gate(candidates: Sequence[Candidate], base: dict[str, Candidate], min_ce_gain: float,
                  rho_max: float) -> list[Candidate]:
    """Disaggregated candidates with CE < ``min_ce_gain`` become infeasible with that reason."""
    out = []
    for c in candidates:
        b = base.get(family(c.topology))
        if c.feasible and c.topology in DISAGGREGATED and b is not None and c.key() != b.key():
            e = economics(c, b, rho_max)
            if e is not None and not e.ce_gain >= min_ce_gain:
                c = replace(c, feasible=False, reason_code="other", reason=(
                    f"cost-efficiency gain {e.ce_gain:.3f} < min_ce_gain {min_ce_gain:g} against the "
                    f"all-{e.baseline_gpu} {c.topology.value} baseline (spend ratio {e.spend_ratio:.3f})"))
        out.append(c)
    return out


def rank_with_baselines(ranked: Sequence[Candidate], extra: Sequence[Candidate], premium: str, min_ce_gain: float,
                        rho_max: float) -> tuple[list[Candidate], dict[str, Candidate]]:
    """``ranked`` (co-located, already ranked) joined by ``extra`` (PDD / AFD), CE-gated and re-ranked
    by (infeasible last, annual cost, TTFT percentile, GPUs), and the per-family baselines."""
    if not extra:
        return list(ranked), baselines(ranked, premium)
    every = list(ranked) + list(extra)
    base = baselines(every, premium)
    every = sorted(apply_ce_gate(every, base, min_ce_gain, rho_max), key=lambda c: (
        not c.feasible, c.cost_usd_per_year if c.feasible else 0.0, c.ttft_p_s, c.total_gpus_needed, c.key()))
    out = [replace(c, rank=i + 1) for i, c in enumerate(every)]
    by_key = {c.key(): c for c in out}
    return out, {fam: by_key[b.key()] for fam, b in base.items()}
