"""Phase 2 of disaggregated fleets: the run's warm-up against M/G/∞ theory, the transfer path of the simulated
placement, xPyD fleets kept at their ratio, and the roles' rate without the requests the model rejects."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from fleetplan.hardware import load_catalog
from fleetplan.plan.defaults import GBPS, GPUS_PER_NODE
from fleetplan.plan.disagg import DisaggCandidate, DisaggSettings, ModelShape
from fleetplan.plan.disagg.verify import _steps, context_warmup_s, pdd_spec, verify_disagg, warmup_s
from fleetplan.plan.optimize import OptimizeRequest, analytical_phase, resolve_gpus
from fleetplan.plan.points import LengthPoints
from fleetplan.plan.space import Topology
from fleetplan.plan.verify import VerifySettings
from fleetplan.workload import load_workload


@pytest.mark.parametrize("shortfall", [0.01, 0.05, 0.2])
def test_warmup_is_where_the_mginf_batch_lacks_the_shortfall(shortfall):
    """From an empty start an M/G/∞ batch lacks λ E[(R - t)^+]: equal lifetimes R lack R - t, so t_w = (1 - ε) R;
    exponential lifetimes of mean m lack m e^{-t/m}, so t_w = m ln(1 / ε)."""
    assert warmup_s(np.array([100.0]), np.array([1.0]), 0.02, shortfall) == pytest.approx((1 - shortfall) * 2.0)
    u = (np.arange(200_000) + 0.5) / 200_000
    out = -500.0 * np.log1p(-u)  # exponential outputs of mean 500 tokens, 10 ms a step: m = 5 s
    assert warmup_s(out, np.ones_like(out), 0.01, shortfall) == pytest.approx(5.0 * math.log(1 / shortfall),
                                                                               rel=2e-3)


@pytest.mark.parametrize("shortfall", [0.01, 0.05, 0.2])
def test_context_warmup_is_where_the_held_context_lacks_the_shortfall(shortfall):
    """Equal requests (prompt p, life R = o t_d) from an empty start lack p (R - t) + (R² - t²) / (2 t_d) context
    token-seconds, a quadratic in t whose root at ε of its t = 0 value is t_c; a prompt-free one is later than the
    count's warm-up (its late life holds the most context), a long prompt's nearer to it."""
    o, t_d = 1000.0, 0.01
    life = o * t_d
    for p in (0.0, 5000.0, 1e6):
        full = p * life + life**2 / (2 * t_d)
        got = context_warmup_s(np.array([p]), np.array([o]), np.array([1.0]), t_d, shortfall)
        lack = p * (life - got) + (life**2 - got**2) / (2 * t_d)
        assert lack == pytest.approx(shortfall * full, rel=1e-6)
        assert got >= warmup_s(np.array([o]), np.array([1.0]), t_d, shortfall) * (1 - 1e-9)


@pytest.fixture(scope="module")
def h100_request():
    return OptimizeRequest(workload=load_workload("azure_conv"), gpus=resolve_gpus(load_catalog(), ("h100",)),
                           slo_ttft_s=1.0, slo_tpot_s=0.05, rate_per_s=20.0, topologies=(Topology.PDD,),
                           min_ce_gain=0.0, disagg=DisaggSettings(ModelShape.of(_model()), pd_ratios=((1, 2),)))


def _model():
    from fleetplan.models.catalog import load_model

    return load_model("llama-3.1-70b")


def _cheapest(req) -> DisaggCandidate:
    return next(c for c in analytical_phase(req) if isinstance(c, DisaggCandidate) and c.feasible)


def test_the_kv_path_follows_the_simulated_placement(h100_request):
    """One GPU type: NVLink (half the catalog's bidirectional figure) while the simulated fleet fits one node of
    GPUS_PER_NODE GPUs, the scale-out network once verification's counts pass it; the simulator gets that one."""
    c = _cheapest(h100_request)
    gpu = h100_request.gpus[0]
    nvlink, network = gpu.nvlink_gb_per_s / 2 * GBPS, gpu.network_gbps * GBPS / 8
    assert c.kv_paths == (pytest.approx(network), pytest.approx(nvlink))
    gpus = {g.name: g for g in h100_request.gpus}
    small, large = [1, 2], [GPUS_PER_NODE, 2 * GPUS_PER_NODE]
    assert c.kv_bandwidth_at(small) == pytest.approx(nvlink) and c.kv_bandwidth_at(large) == pytest.approx(network)
    for counts, bw in ((small, nvlink), (large, network)):
        assert pdd_spec(c, gpus, counts).transfer.bandwidth_bytes_per_s == pytest.approx(bw)
    # a bandwidth given by the user is the only path
    given = replace(h100_request, disagg=replace(h100_request.disagg, kv_bandwidth_bytes_per_s=2e10))
    g = _cheapest(given)
    assert g.kv_bandwidth_at(small) == g.kv_bandwidth_at(large) == 2e10


def test_verification_keeps_the_xpyd_ratio(h100_request):
    """A fleet chosen as 1P:2D groups moves by whole groups in verification: verified at 20 times the rate it
    was sized for, it grows, and the verified counts are g and 2 g."""
    c = _cheapest(h100_request)
    assert c.pd_ratio == (1, 2) and _steps(c) == ((1, 2),)
    assert c.pools[1].count == 2 * c.pools[0].count
    s = VerifySettings(slo_ttft_s=0.3, slo_tpot_s=0.05, rate_per_s=400.0, max_gpus=64, n_requests=1500,
                       n_replications=2)
    v = verify_disagg(c, {g.name: g for g in h100_request.gpus}, h100_request.workload, s, lambda g: 1.0)
    pf, dec = v.verified_counts
    assert dec == 2 * pf and pf > c.pools[0].count, (c.pools[0].count, v.verified_counts)  # grown by groups


def test_roles_serve_the_arrivals_within_the_context_limit():
    """agent_heavy at max_model_len 32,768: the requests beyond it are rejected at arrival, so the prefill role's
    load is λ x the served share x E[X] (not λ E[X])."""
    wl = load_workload("agent_heavy")
    req = OptimizeRequest(workload=wl, gpus=resolve_gpus(load_catalog(), ("h100",)), slo_ttft_s=2.0,
                          slo_tpot_s=0.05, rate_per_s=10.0, topologies=(Topology.PDD,), min_ce_gain=0.0,
                          max_model_len_tokens=32_768)
    points = LengthPoints(wl, req.pool_points, req.quadrature_points, 32_768)
    share = float(points.between(0, points.max_tokens).weight.sum() / points.global_points.weight.sum())
    assert 0.8 < share < 0.99
    pf = _cheapest(req).pools[0]
    assert pf.rho * pf.count == pytest.approx(10.0 * share * pf.mean_service_s, rel=1e-9)


def _least_outstanding_share(frame, n_dec: int) -> float:
    """Share of bindings made to an instance with the fewest requests bound to it and not finished (those still in
    prefill or transfer included), replayed from the per-request table in binding order."""
    bound = frame[np.isfinite(frame.bind_s)].sort_values(["bind_s", "request_id"], kind="stable")
    bind_s, done_s = bound.bind_s.to_numpy(), bound.done_s.to_numpy()
    inst = bound.decode_instance.to_numpy()
    hits = 0
    for k in range(len(bound)):
        live = done_s[:k] > bind_s[k]
        outstanding = np.bincount(inst[:k][live], minlength=n_dec)
        hits += outstanding[inst[k]] == outstanding.min()
    return hits / len(bound)


def test_verification_binds_decode_to_the_fewest_outstanding_requests(h100_request):
    """Verification's simulator binds each request to the decode instance with the fewest requests bound and not
    finished, those still in prefill or transfer included (``DECODE_ASSIGNMENT``), so every instance serves
    λ / D with its slots balanced, as the screen sizes it.  The simulator's ILS (fewest handed-off decode tokens)
    does not: bound early, a request counts nowhere until its handoff, so the bindings of one prefill time herd
    onto the instances whose handed-off load is lowest, with more outstanding requests than others."""
    from fleetplan.plan.disagg.verify import DECODE_ASSIGNMENT
    from fleetplan.sim.pdd import AssignPolicy, simulate_pdd

    c = _cheapest(h100_request)
    gpus = {g.name: g for g in h100_request.gpus}
    n_dec = 12
    spec = pdd_spec(c, gpus, [8, n_dec])
    assert spec.policy is AssignPolicy(DECODE_ASSIGNMENT) is AssignPolicy.REQ_LEVEL
    share = {}
    for policy in (AssignPolicy.REQ_LEVEL, AssignPolicy.ILS):
        frame = simulate_pdd(replace(spec, policy=policy), h100_request.workload, 60.0, 3000, seed=5).requests
        share[policy] = _least_outstanding_share(frame, n_dec)
    assert share[AssignPolicy.REQ_LEVEL] >= 0.99 > 0.9 > share[AssignPolicy.ILS], share


def _pdd_only(req):
    return replace(req, disagg=replace(req.disagg, pd_ratios=()))


def test_verification_never_shrinks_a_role_below_its_utilisation_floor(h100_request, monkeypatch):
    """Every fleet passes (a stub simulation): the search shrinks each role to its utilisation-cap floor
    (``PoolPlan.floor_count``, the fewest instances within ρ_max, as the co-located verifier) and no further."""
    from fleetplan.plan.disagg import verify as V

    c = _cheapest(_pdd_only(h100_request))
    floors = [p.floor_count for p in c.pools]
    assert all(1 <= f <= p.count for f, p in zip(floors, c.pools, strict=True))
    assert c.pools[1].rho <= h100_request.rho_max * (1 + 1e-9)
    ok = V._Check(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    monkeypatch.setattr(V, "_simulate", lambda *a, **k: ok)
    s = VerifySettings(slo_ttft_s=1.0, slo_tpot_s=0.05, rate_per_s=20.0, max_gpus=64, n_requests=500)
    v = verify_disagg(c, {g.name: g for g in h100_request.gpus}, h100_request.workload, s, lambda g: 1.0)
    assert v.passed and list(v.verified_counts) == floors


@pytest.mark.parametrize(("queue_s", "slot_wait_s", "tpot_s", "grown"),
                         [(0.0, 0.0, 0.01, 0), (0.2, 0.1, 0.01, 0), (0.1, 0.2, 0.01, 1), (0.5, 0.0, 0.2, 1)])
def test_a_failing_fleet_grows_the_role_that_holds_its_requests(h100_request, queue_s, slot_wait_s, tpot_s, grown):
    """TTFT the worse ratio: prefill grows unless the decode role's backpressure (a finished prefill waiting for a
    slot) exceeds the prefill queue, a prefill wall time over the SLO included (neither waits); TPOT the worse
    ratio: decode grows."""
    from fleetplan.plan.disagg import verify as V

    c = _cheapest(_pdd_only(h100_request))
    s = VerifySettings(slo_ttft_s=1.0, slo_tpot_s=0.05, rate_per_s=20.0, max_gpus=64, n_requests=500)
    counts = [10, 10]
    V._grow(c, counts, V._Check(1.1, tpot_s, 1.0, tpot_s, queue_s, slot_wait_s), s)
    assert counts == [11, 10] if grown == 0 else counts == [10, 11]


def test_slot_wait_is_the_percentile_of_the_kv_held_past_the_prefill_end():
    """max(0, grant - prefill end) over the measured requests; the warm-up and never-granted ones left out."""
    import pandas as pd

    from fleetplan.plan.disagg.verify import _slot_wait_s

    end = np.arange(10, dtype=np.float64)
    grant = end + np.array([0.0, -1.0, 0.5, 2.0, 0.0, 0.0, 0.0, 0.0, 3.0, np.inf])
    warm = np.array([True] + [False] * 9)
    frame = pd.DataFrame({"prefill_end_s": end, "grant_s": grant, "warmup": warm})
    expect = np.percentile([0.0, 0.5, 2.0, 0.0, 0.0, 0.0, 0.0, 3.0], 90.0)
    assert _slot_wait_s(frame, 90.0) == pytest.approx(expect)


@pytest.mark.parametrize(("gain", "passes"), [(0.0, False), (0.01, False), (0.05, True)])
def test_growth_stops_when_more_instances_no_longer_lower_the_percentile(h100_request, monkeypatch, gain, passes):
    """A stub simulation whose TTFT starts 20 % over the SLO and falls by ``gain`` per growth step: growth stops,
    the fleet failed, after NO_GAIN_STEPS steps that each gain less than 1 - NO_GAIN; a fleet that gains more
    grows until it passes."""
    from fleetplan.plan.disagg import verify as V

    c = _cheapest(_pdd_only(h100_request))
    start = tuple(p.count for p in c.pools)
    s = VerifySettings(slo_ttft_s=1.0, slo_tpot_s=0.05, rate_per_s=20.0, max_gpus=10_000, n_requests=500)

    def fake(cand, gpus, counts, workload, settings, prior=()):
        steps = (counts[0] - start[0]) + (counts[1] - start[1])  # one instance per step at these counts
        ttft = 1.2 * (1.0 - gain) ** steps
        return V._Check(ttft, 0.01, ttft, 0.01, 1.0, 0.0)

    monkeypatch.setattr(V, "_simulate", fake)
    v = verify_disagg(c, {g.name: g for g in h100_request.gpus}, h100_request.workload, s, lambda g: 1.0)
    assert v.passed is passes
    if not passes:
        assert "no longer lower" in v.reason and v.n_simulations <= (V.NO_GAIN_STEPS + 1) * s.n_replications


def _runs(ttft_s) -> tuple:
    from fleetplan.plan.disagg import verify as V

    return tuple(V._Run(float(x), 0.01, 0.0, 0.0, 0.0, 0.0) for x in ttft_s)


#: P99 TTFTs of ten replications, mean 0.95 s at 3 and at 7 of them, sample deviation 0.05 s at 3.
_FLOOR_RUNS_S = (0.90, 1.00, 0.95, 0.92, 0.98, 0.94, 0.96, 0.93, 0.97, 0.95)


def test_floor_replications_project_the_interval_from_the_replications_run():
    """ŝ = (u - m) √n / t_{n-1}; the fewest N with m + t_{N-1} ŝ / √N within the SLO: m 0.95 s, ŝ 0.05 s against a
    1 s SLO needs t_{N-1} / √N <= 1: N = 7 (t_6 / √7 = 0.925; t_5 / √6 = 1.050).  A mean above the SLO, an
    interval the cap cannot narrow enough, or a TPOT mean over its target: None."""
    from scipy.special import stdtrit

    from fleetplan.plan.disagg import verify as V

    s = VerifySettings(slo_ttft_s=1.0, slo_tpot_s=0.05, rate_per_s=20.0, max_gpus=64, n_requests=500)
    three = V._check_of(_runs(_FLOOR_RUNS_S[:3]))
    assert three.upper_ttft_s == pytest.approx(0.95 + float(stdtrit(2, 0.975)) * 0.05 / math.sqrt(3))
    assert not three.passes(s) and V.floor_replications(three, s) == 7
    assert stdtrit(6, 0.975) / math.sqrt(7) < 1.0 < stdtrit(5, 0.975) / math.sqrt(6)
    assert V._check_of(_runs(_FLOOR_RUNS_S[:7])).passes(s)
    assert V.floor_replications(V._check_of(_runs(np.array(_FLOOR_RUNS_S[:3]) + 0.08)), s) is None  # mean 1.03
    assert V.floor_replications(V._check_of(_runs(np.array(_FLOOR_RUNS_S[:3]) + 0.04)), s) is None  # 0.99: cap
    assert V.floor_replications(three, replace(s, slo_tpot_s=0.009)) is None  # TPOT mean 10 ms over 9 ms


@pytest.mark.parametrize(("shift_s", "passes", "note"), [(0.0, True, None), (0.04, False, True), (0.08, False, False)])
def test_a_floor_bound_fleet_is_checked_with_more_replications(h100_request, monkeypatch, shift_s, passes, note):
    """A stub simulation whose TTFT does not fall with more instances (a floor), mean 0.95 s + ``shift_s`` against a
    1 s SLO: at mean 0.95 s, 3 replications' upper end (1.07 s) fails and 7 pass, so the fleet passes and shrinks
    at 7 (every count has the floor) to its roles' utilisation floors, the first 3 replications of each count not
    re-run; at 0.99 s no count of replications within the cap narrows it enough and at 1.03 s the mean is above the
    SLO: both fail, the first naming the interval as the cause."""
    from fleetplan.plan.disagg import verify as V

    c = _cheapest(_pdd_only(h100_request))
    s = VerifySettings(slo_ttft_s=1.0, slo_tpot_s=0.05, rate_per_s=20.0, max_gpus=10_000, n_requests=500)
    asked: list[tuple[int, int]] = []

    def fake(cand, gpus, counts, workload, settings, prior=()):
        assert tuple(r.ttft_s for r in prior) == tuple(np.array(_FLOOR_RUNS_S[:len(prior)]) + shift_s)
        asked.append((len(prior), settings.n_replications))
        return V._check_of(_runs(np.array(_FLOOR_RUNS_S[:settings.n_replications]) + shift_s))

    monkeypatch.setattr(V, "_simulate", fake)
    v = verify_disagg(c, {g.name: g for g in h100_request.gpus}, h100_request.workload, s, lambda g: 1.0)
    assert v.passed is passes
    assert v.n_simulations == sum(n - k for k, n in asked)
    if passes:
        assert list(v.verified_counts) == [p.floor_count for p in c.pools]
        assert max(n for _, n in asked) == 7 and (3, 7) in asked
        assert v.p99_ttft_s_sim == pytest.approx(V._check_of(_runs(_FLOOR_RUNS_S[:7])).upper_ttft_s)
    else:
        assert "no longer lower" in v.reason
        assert ("within the SLO but its 95 % interval is not" in v.reason) is note
        assert max(n for _, n in asked) == 3  # the projection never asked for more
