"""PDD / AFD candidates in the planner: spend ratio and CE, the --min-ce-gain gate, one ranking,
and simulation verification against the screen."""

from __future__ import annotations

import math

import pytest

from fleetplan.cli.errors import render_error
from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.plan.disagg.candidates import DisaggCandidate
from fleetplan.plan.disagg.economics import apply_ce_gate, baselines, capacity_per_s, economics
from fleetplan.plan.frontier import cost_latency_frontier
from fleetplan.plan.optimize import OptimizeRequest, analytical_phase_with_baselines, optimize, resolve_gpus
from fleetplan.plan.pools import PoolPlan
from fleetplan.plan.space import SizingRouter, Topology, topology
from fleetplan.plan.sweep import Candidate
from fleetplan.plan.verify import VerifySettings
from fleetplan.workload import load_workload

TOPOS = tuple(topology(t) for t in ("homo", "two-pool", "pdd", "afd"))


def _pool(gpu: str, count: int, price: float, mean_s: float) -> PoolPlan:
    return PoolPlan(gpu, 0, 8192, 1, 1.0, 10.0, count, 0, 0.5, 0.1, 0.0, mean_s, 0.0, price, True, None)


def _cand(topo: Topology, pools: tuple[PoolPlan, ...], cost: float) -> Candidate:
    cls = DisaggCandidate if topo in (Topology.PDD, Topology.AFD) else Candidate
    extra = {"roles": ("prefill", "decode")[: len(pools)]} if cls is DisaggCandidate else {}
    return cls(topo, SizingRouter.LENGTH, pools, sum(p.count for p in pools), cost, 1.0, 0.1, True, None, **extra)


def test_spend_ratio_and_cost_efficiency_by_hand():
    # baseline: 4 premium GPUs at $4/h, 0.1 instance-s per request -> capacity 4 * 0.85 / 0.1 = 34 req/s
    base = _cand(Topology.PDD, (_pool("P", 1, 4.0, 0.01), _pool("P", 4, 4.0, 0.1)), 5 * 4.0 * 8760)
    cand = _cand(Topology.PDD, (_pool("P", 1, 4.0, 0.01), _pool("C", 6, 2.0, 0.12)), (4.0 + 12.0) * 8760)
    assert capacity_per_s(base, 0.85) == pytest.approx(34.0)  # min(85, 34)
    assert capacity_per_s(cand, 0.85) == pytest.approx(42.5)  # min(85, 6 * 0.85 / 0.12)
    e = economics(cand, base, 0.85)
    # SR = Price(g0) / Price(g) = 20 / 16; CE = (T / Price) / (T0 / Price0) = (42.5 / 16) / (34 / 20)
    assert e.spend_ratio == pytest.approx(20 / 16) and e.ce_gain == pytest.approx((42.5 / 16) / (34 / 20))
    assert baselines([cand, base], "P")["pdd"] is base
    kept = apply_ce_gate([cand, base], {"pdd": base}, 1.5, 0.85)
    assert all(c.feasible for c in kept)
    cut = apply_ce_gate([cand, base], {"pdd": base}, 1.6, 0.85)
    assert not cut[0].feasible and "cost-efficiency gain 1.562 < min_ce_gain 1.6" in cut[0].reason
    assert cut[1].feasible  # the baseline itself is the reference (CE = 1), never gated


@pytest.fixture(scope="module")
def lmsys():
    return load_workload("lmsys")


def _request(wl, **kw) -> OptimizeRequest:
    base = dict(workload=wl, gpus=resolve_gpus(load_catalog(), None), slo_ttft_s=0.5, rate_per_s=100.0,
                slo_tpot_s=0.05, topologies=TOPOS)
    return OptimizeRequest(**{**base, **kw})


def test_one_ranking_with_every_family_and_gated_candidates(lmsys):
    req = _request(lmsys)
    ranked, base = analytical_phase_with_baselines(req)
    fams = {c.topology for c in ranked if c.feasible}
    assert {Topology.HOMO, Topology.PDD, Topology.AFD} <= fams
    feasible = [c for c in ranked if c.feasible]
    assert [c.cost_usd_per_year for c in feasible] == sorted(c.cost_usd_per_year for c in feasible)
    assert [c.rank for c in ranked] == list(range(1, len(ranked) + 1))
    assert set(base) == {"colocated", "pdd", "afd"}
    for c in ranked:
        if c.feasible and isinstance(c, DisaggCandidate) and c.key() != base[c.topology.value].key():
            assert economics(c, base[c.topology.value], req.rho_max).ce_gain >= req.min_ce_gain
    rejected = [c for c in ranked if c.reason and "min_ce_gain" in c.reason]
    assert rejected
    loose, _ = analytical_phase_with_baselines(_request(lmsys, min_ce_gain=0.0))
    assert sum(c.feasible for c in loose) == sum(c.feasible for c in ranked) + len(rejected)


def test_disagg_candidate_is_sized_by_its_own_equations(lmsys):
    """Each role meets its rule (``queueing.disagg``): the prefill role's ρ_p and P99 TTFT, the decode role's
    slot load and P99 TPOT; a decode role with spare TPOT breaks its slot load with one instance (unit) fewer, or
    brings its batch near the cap (the slots-full rule)."""
    ranked, _ = analytical_phase_with_baselines(_request(lmsys, min_ce_gain=0.0))
    for c in (c for c in ranked if isinstance(c, DisaggCandidate) and c.feasible):
        pf, dec = c.pools[0], c.pools[1]
        assert c.decode_step_s <= 0.05 + 1e-12 and c.ttft_p_s <= 0.5
        assert pf.rho <= 0.85 + 1e-9 and dec.rho <= 0.85 + 1e-9
        assert dec.tpot_p_s <= 0.05 + 1e-12 and dec.decode_batch <= c.decode_batch
        if c.decode_units > 1 and dec.tpot_p_s < 0.05 * 0.9:  # bound by the slot load or the slots' cap
            d = c.decode_units
            by_load = dec.rho * d / (d - 1) > 0.85 * (1 - 1e-9)
            # one fewer puts the batch within 6 sd of its cap b (variance a / (1 - g) <= 4 b at g <= 3/4)
            near_cap = dec.decode_batch * d / (d - 1) + 6.0 * math.sqrt(4.0 * c.decode_batch) >= c.decode_batch
            assert by_load or near_cap, (c.key(), dec.rho, dec.decode_batch, c.decode_batch)
        if c.topology is Topology.AFD:
            assert c.pools[2].count == c.decode_units * c.unit[1]


def test_cost_latency_frontier_has_pdd_and_afd_points(lmsys):
    res = optimize(_request(lmsys, min_ce_gain=0.0))
    topos = {p.topology for p in cost_latency_frontier(res)}
    assert {"homo", "pdd", "afd"} <= topos


@pytest.mark.parametrize(("kw", "needle"), [
    ({"slo_tpot_s": None}, "needs --slo-tpot"),
    ({"slo_tpot_s": 0.0}, "--slo-tpot"),
    ({"min_ce_gain": -1.0}, "--min-ce-gain"),
])
def test_bad_disagg_inputs_are_one_line_config_errors(lmsys, kw, needle):
    with pytest.raises(ConfigError) as err:
        _request(lmsys, **kw)
    assert "\n" not in str(err.value)
    assert needle in render_error(err.value, "optimize")  # the CLI's wording names the flag


@pytest.mark.slow
def test_pdd_verification_agrees_with_the_screen(lmsys):
    """Easy case (λ = 20, H100 only): the simulator passes the screen's counts without growth, and its
    mean P99 TTFT over replications lies within [0.3, 1.2] x the screen's (``disagreement`` in
    [-0.7, 0.2]): the screen is conservative (one prompt per prefill server, the first decode step at
    the full batch) but not by more than ~3x, and not optimistic by more than 20 %."""
    req = _request(lmsys, gpus=resolve_gpus(load_catalog(), ["h100"]), rate_per_s=20.0,
                   topologies=(Topology.PDD, Topology.AFD))
    v = VerifySettings(slo_ttft_s=0.5, slo_tpot_s=0.05, rate_per_s=20.0, max_gpus=100, top_k=1, n_requests=3000,
                       n_replications=2)
    res = optimize(req, v)
    checked = {c.topology: c for c in res.candidates if c.verification is not None}
    assert set(checked) == {Topology.PDD, Topology.AFD}
    for c in checked.values():
        ver = c.verification
        assert ver.passed and ver.verified_counts == ver.analytic_counts
        assert -0.7 <= ver.disagreement <= 0.2, (c.topology, ver.disagreement)
        assert ver.p99_tpot_s_sim <= 0.05
    assert res.recommendation is not None and res.recommendation.verification.passed


def test_bursty_arrivals_need_at_least_as_many_prefill_instances(lmsys):
    """The prefill role's wait widens by Kimura's (Ca² + Cs²)/2 (``queueing.disagg``): with the same
    candidates, gaps of CV 2 (Ca² = 4) never need fewer prefill instances than Poisson, and some need
    more; Ca² = 1 is the Poisson screen exactly."""
    from fleetplan.plan.optimize import analytical_phase

    def prefill_counts(ca2):
        req = _request(lmsys, topologies=(topology("pdd"),), arrival_cv2=ca2, min_ce_gain=0.0, rate_per_s=300.0,
                       slo_ttft_s=0.2)
        return {c.key(): c.pools[0].count for c in analytical_phase(req) if getattr(c, "roles", ()) and c.feasible}

    poisson, bursty = prefill_counts(1.0), prefill_counts(4.0)
    common = set(poisson) & set(bursty)
    assert common and all(bursty[k] >= poisson[k] for k in common)
    assert any(bursty[k] > poisson[k] for k in common)
