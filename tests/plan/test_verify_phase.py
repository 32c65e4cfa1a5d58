"""Phase 2: the simulator verifies the cheapest analytic fleets and is authoritative."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fleetplan.hardware import load_catalog
from fleetplan.plan.optimize import BOUND_SLACK, OptimizeRequest, optimize, resolve_gpus, verified_fleet
from fleetplan.plan.space import SizingRouter, Topology
from fleetplan.plan.verify import DEFAULT_VERIFY_EXTEND, VerifySettings, fleet_direction, fleet_spec
from fleetplan.sim import PoolRouter
from fleetplan.workload import load_workload

SLO_S = 0.5


@pytest.fixture(scope="module")
def run():
    cat = load_catalog()
    req = OptimizeRequest(workload=load_workload("lmsys"), gpus=resolve_gpus(cat, None), slo_ttft_s=SLO_S,
                          rate_per_s=100.0)
    vs = VerifySettings(slo_ttft_s=SLO_S, slo_tpot_s=None, rate_per_s=100.0, max_gpus=10_000, top_k=5,
                        n_replications=3, seed=0)  # steady-state run length (no fixed request count)
    return req, optimize(req, vs)


def test_verified_fleets_meet_the_slo_and_say_which_way_they_moved(run):
    """Two-sided search: a pool may end below or above its analytic count, and the direction says which."""
    _, result = run
    assert [v.rank for v in result.verification][:5] == [1, 2, 3, 4, 5]  # the top 5, then the bound's
    for v in result.verification:
        if v.passed:
            assert v.p99_ttft_s_sim <= SLO_S
            assert v.reason is None
        for a, b, d in zip(v.analytic_counts, v.verified_counts, v.pool_direction, strict=True):
            assert d == ("exact" if a == b else "too_high" if b < a else "too_low")
        assert v.direction == fleet_direction(v.pool_direction)


def test_simulator_overrules_the_formula():
    """The simulator is authoritative: told Poisson arrivals, the formula sizes for them; simulated with
    burstier traffic (gamma gaps, CV 3) and a tight SLO, fleets change size, and every changed fleet passes at
    its new counts."""
    cat = load_catalog()
    slo_s = 0.25
    req = OptimizeRequest(workload=load_workload("lmsys"), gpus=resolve_gpus(cat, None), slo_ttft_s=slo_s,
                          rate_per_s=100.0)
    vs = VerifySettings(slo_ttft_s=slo_s, slo_tpot_s=None, rate_per_s=100.0, max_gpus=10_000, top_k=3,
                        n_replications=3, seed=0, arrival="gamma", arrival_cv=3.0)
    result = optimize(req, vs)
    moved = [v for v in result.verification if v.verified_counts != v.analytic_counts]
    assert moved and all(v.passed for v in moved)
    assert all(sum(v.verified_counts) >= sum(v.analytic_counts) for v in moved)  # burstier traffic needs more


def test_like_for_like_figures_at_the_analytic_counts(run):
    """Every verification records analytic and simulated percentiles fleet-wide and per pool; the fleet-wide
    simulated TTFT (all requests) lies between the pools' simulated figures."""
    _, result = run
    for v in result.verification:
        at = v.at_analytic
        assert at is not None and len(at.pools) == len(v.analytic_counts)
        sims = [p.ttft_p_s_sim for p, n in zip(at.pools, v.analytic_counts, strict=True) if n > 0]
        assert min(sims) <= at.ttft_p_s_sim <= max(sims)
        assert all(p is None for p, n in zip(at.pools, v.analytic_counts, strict=True) if n == 0)
        assert at.ttft_p_s_analytic == v.p99_ttft_s_analytic


def test_recommendation_is_the_cheapest_verified_fleet(run):
    _, result = run
    best = result.recommendation
    assert best.verification is not None and best.verification.passed
    passed = [verified_fleet(c) for c in result.candidates if c.verification is not None and c.verification.passed]
    assert best.cost_usd_per_year == pytest.approx(min(c.cost_usd_per_year for c in passed))
    assert tuple(p.count for p in best.pools) == best.verification.verified_counts


def test_fleet_spec_mirrors_the_candidate(run):
    req, result = run
    gpus = {g.name: g for g in req.gpus}
    for c in result.candidates[:20]:
        spec = fleet_spec(c, gpus, [p.count for p in c.pools])
        kept = [p for p in c.pools if p.count > 0]
        # every pool's context is its range's top, but the largest pool's: it takes every longer request its
        # KV cache holds (a sampler may draw totals above the length CDF's last point), with its sized slots
        assert [p.max_context_tokens for p in spec.pools[:-1]] == [p.hi_tokens for p in kept[:-1]]
        top, sized = spec.pools[-1], kept[-1]
        assert top.max_context_tokens == top.limits.kv_blocks * top.limits.block_size_tokens >= sized.hi_tokens
        assert (top.limits.max_num_seqs, top.limits.max_num_batched_tokens) == (sized.max_num_seqs,
                                                                                sized.max_num_batched_tokens)
        assert [p.n_instances for p in spec.pools] == [p.count for p in kept]
        assert [p.gpu for p in spec.pools] == [p.gpu for p in kept]
        expected = PoolRouter.COMPRESS_AND_ROUTE if c.router is SizingRouter.COMPRESS else PoolRouter.LENGTH
        assert spec.pool_router is expected


def test_homogeneous_request_level_agreement_on_low_variance_workload():
    """Where the two-moment model is at its best (one pool, chat traffic), the simulated P99 TTFT at
    the analytic count stays within the SLO, i.e. the analytic pick is not rejected."""
    cat = load_catalog()
    req = OptimizeRequest(workload=load_workload("azure_conv"), gpus=resolve_gpus(cat, ["h100"]), slo_ttft_s=SLO_S,
                          rate_per_s=50.0, topologies=(Topology.HOMO,), routers=(SizingRouter.LENGTH,))
    vs = VerifySettings(slo_ttft_s=SLO_S, slo_tpot_s=None, rate_per_s=50.0, max_gpus=100, top_k=1,
                        n_requests=10_000, n_replications=3)
    result = optimize(req, vs)
    v = result.verification[0]
    assert v.passed and v.direction in ("exact", "too_high")


def test_verification_uses_the_slo_percentile():
    from fleetplan.errors import ConfigError
    from fleetplan.plan.verify import verify_candidate

    with pytest.raises(ConfigError, match="P99.9"):
        VerifySettings(slo_ttft_s=SLO_S, slo_tpot_s=None, rate_per_s=50.0, max_gpus=10, percentile=97.0)
    cat = load_catalog()
    req = OptimizeRequest(workload=load_workload("azure_conv"), gpus=resolve_gpus(cat, ["h100"]), slo_ttft_s=SLO_S,
                          rate_per_s=50.0, topologies=(Topology.HOMO,), routers=(SizingRouter.LENGTH,))
    cand = optimize(req).recommendation
    gpus = {g.name: g for g in req.gpus}
    figures = {}
    for pct in (95.0, 99.0):
        vs = VerifySettings(slo_ttft_s=SLO_S, slo_tpot_s=None, rate_per_s=50.0, max_gpus=100, n_requests=5_000,
                            n_replications=3, percentile=pct)
        figures[pct] = verify_candidate(cand, gpus, req.workload, vs, req.availability_of).at_analytic.ttft_p_s_sim
    # same fleet (the analytic counts), same seeds: the 95th percentile of every replication is below its 99th
    assert figures[95.0] < figures[99.0]


def test_reports_put_analytic_and_simulated_side_by_side(run):
    """JSON ``verification.at_analytic`` and the HTML verification table carry both phases' figures."""
    from fleetplan.plan.figures import with_report_figures
    from fleetplan.report.html import render_html, verification_rows
    from fleetplan.report.run_json import optimize_run_dict

    _, result = run
    doc = optimize_run_dict(with_report_figures(result), seed=0)
    rows = verification_rows(doc)
    fleet_rows = [r for r in rows if r["pool"] == "fleet"]
    assert len(fleet_rows) == len(result.verification)
    for r, v in zip(fleet_rows, result.verification, strict=True):
        assert r["p99_ttft_ms_sim"] == pytest.approx(v.at_analytic.ttft_p_s_sim * 1e3, abs=1e-3)
        assert r["direction"] == v.direction
    html = render_html(doc)
    assert "Verification: analytic vs simulated at the analytic counts" in html and "p99_ttft_ms_sim" in html


def test_the_bound_leaves_no_candidate_within_its_slack_unverified(run):
    """Phase 2 goes on past the top 5 until every unverified candidate costs (analytically) more than
    the slack above the cheapest verified fleet (the most verification shrank a candidate, at most
    BOUND_SLACK), or extend_max more were verified."""
    req, result = run
    verified = {v.rank for v in result.verification}
    best = result.recommendation.cost_usd_per_year
    checked = [c for c in result.candidates if c.verification is not None and c.verification.passed]
    slack = min(max((1.0 - verified_fleet(c).cost_usd_per_year / c.cost_usd_per_year for c in checked),
                    default=0.0), BOUND_SLACK)
    assert len(verified) <= 5 + DEFAULT_VERIFY_EXTEND
    if len(verified) < 5 + DEFAULT_VERIFY_EXTEND:
        for c in result.candidates:
            if c.feasible and c.rank not in verified:
                assert c.cost_usd_per_year > best * (1.0 + max(slack, 0.0))


def test_every_reason_code_has_a_fix_in_the_library_and_the_cli():
    from fleetplan.cli.options import FIX_OF_REASON as CLI_FIX
    from fleetplan.errors import REASONS
    from fleetplan.plan.optimize_errors import FIX_OF_REASON

    assert set(FIX_OF_REASON) == set(REASONS) == set(CLI_FIX)


def test_prefill_bound_failures_say_no_count_helps(run):
    """When every verified candidate failed because more instances stopped lowering its percentile, the
    one-line error names the cheapest of them and a fix that can work (not more GPUs)."""
    from fleetplan.cli.errors import render_error
    from fleetplan.plan.optimize_errors import no_verified_fleet_error

    req, result = run
    failed = tuple(replace(v, passed=False, reason=f"pool 1: simulated P99 fails the SLO ({v.rank})",
                           reason_code="prefill-bound") for v in result.verification)
    err = no_verified_fleet_error(req, replace(result, verification=failed))
    cheapest = min(failed, key=lambda v: v.cost_usd_per_year)
    assert err.reason == "prefill-bound" and f"candidate {cheapest.rank}:" in str(err)
    line = render_error(err, "optimize")
    assert "--slo-ttft" in line and "--max-num-batched-tokens" in line and "--max-gpus" not in line
    mixed = failed[:-1] + (replace(failed[-1], reason_code="max-gpus"),)
    assert no_verified_fleet_error(req, replace(result, verification=mixed)).reason == "verification-failed"


def test_the_largest_pool_serves_requests_drawn_above_the_length_cdf():
    """azure_conv's sampler draws prompt and output apart, so a few totals exceed the total-length CDF's last
    point (14,089 tokens), which the analytic ranges end at.  The largest pool takes them (they are ~2 % of a
    6,145-14,089-token pool's traffic): none is rejected and its percentile stays finite."""
    from fleetplan.plan.verify import _existing, check_pool
    from fleetplan.sim.steady import pool_stream

    cat = load_catalog()
    req = OptimizeRequest(workload=load_workload("azure_conv"), gpus=resolve_gpus(cat, ["a100"]), slo_ttft_s=SLO_S,
                          rate_per_s=100.0, topologies=(Topology.TWO_POOL,), thresholds_tokens=(6144,),
                          routers=(SizingRouter.LENGTH,))
    cand = optimize(req).recommendation
    gpus = {g.name: g for g in req.gpus}
    top = len(cand.pools) - 1
    assert cand.pools[top].lo_tokens == 6144
    spec = fleet_spec(cand, gpus, [p.count for p in cand.pools])
    drawn, _ = pool_stream(spec, _existing(cand).index(top), req.workload, 100.0, 3000, 1)
    assert drawn.total_tokens.max() > cand.pools[top].hi_tokens  # the precondition: totals above the CDF
    vs = VerifySettings(slo_ttft_s=SLO_S, slo_tpot_s=None, rate_per_s=100.0, max_gpus=100, n_requests=3000,
                        n_replications=2, seed=1)
    check = check_pool(cand, top, cand.pools[top].count, gpus, req.workload, vs)
    assert all(r.n_not_done == 0 for r in check.runs) and check.upper_ttft_s < 10.0
