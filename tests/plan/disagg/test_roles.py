"""The disaggregated roles' analytic physics (``queueing.disagg``) against exact theory and the PDD simulator."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.perf.linear import LinearStepModel
from fleetplan.plan.disagg import DisaggCandidate, DisaggSettings, ModelShape
from fleetplan.plan.disagg.verify import pdd_spec
from fleetplan.plan.optimize import OptimizeRequest, analytical_phase, resolve_gpus
from fleetplan.plan.space import Topology
from fleetplan.queueing.disagg import DecodeRole, PrefillRole, kv_transfer_s
from fleetplan.queueing.engine import EngineLimits, EngineModel
from fleetplan.queueing.erlang import erlang_c
from fleetplan.sim.pdd import KvTransferSpec, PddSpec, simulate_pdd, simulate_pdd_arrays
from fleetplan.sim.spec import InstanceRouter, PoolSpec, SchedulerLimits
from fleetplan.workload import load_workload


def _engine(step: LinearStepModel, seqs: int, budget: int, blocks: int = 1 << 20) -> EngineModel:
    return EngineModel.of(step, EngineLimits(seqs, budget, blocks, 16))


def _exponential_prompts(mean_tokens: float, n: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    """Geometric prompt lengths (tokens >= 1) on a fine grid with their probabilities."""
    p = np.arange(1, n + 1, dtype=np.float64)
    q = 1.0 / mean_tokens
    w = q * (1 - q) ** (p - 1)
    return p, w / w.sum()


@pytest.mark.parametrize("n_instances", [1, 2, 5])
def test_prefill_role_with_constant_steps_is_erlang_c(n_instances):
    """One token per step of constant time and one prompt at a time: the service is p x step, geometric
    prompts make it (nearly) exponential, and the role's wait is M/M/c's probability of waiting (Erlang C);
    with one instance its whole survival is M/M/1's, rho exp(-(mu - lambda) t)."""
    step_s = 0.002
    role = PrefillRole.of(_engine(LinearStepModel(step_s, 0.0, 0.0, None), 1, 1), *_exponential_prompts(50.0))
    mean_s = float(role.weight @ role.alone_s)
    assert mean_s == pytest.approx(50.0 * step_s, rel=1e-3)
    lam = 0.7 * n_instances / mean_s
    st_ = role.state(lam, n_instances, 0.0, 0.99)
    np.testing.assert_allclose(role.service_at(lam / n_instances), role.alone_s)  # one prompt per step: no sharing
    assert st_.rho == pytest.approx(0.7, rel=1e-9)
    assert st_.wait_mass == pytest.approx(float(erlang_c(n_instances, lam * mean_s)), rel=1e-12)
    if n_instances == 1:
        assert st_.cs2 == pytest.approx(1.0, abs=0.03)  # geometric: 1 - 1/50
        # m = E[W²] / (2 E[W]) of M/G/1 (Takács), 1 / (mu - lambda) for exponential service
        x, w = role.alone_s, role.weight
        m2, m3 = float(w @ x**2), float(w @ x**3)
        e_w = lam * m2 / (2 * (1 - 0.7))
        e_w2 = 2 * e_w**2 + lam * m3 / (3 * (1 - 0.7))
        assert 1.0 / st_.wait_decay_per_s == pytest.approx(e_w2 / (2 * e_w), rel=1e-9)
        assert st_.wait_decay_per_s == pytest.approx(1.0 / mean_s - lam, rel=0.03)
        # P99 of W alone: ln(rho / 0.01) / (mu - lambda)
        assert st_.wait_p_s == pytest.approx(math.log(0.7 / 0.01) / (1 / mean_s - lam), rel=0.02)


def test_prefill_alone_is_the_simulators_prefill_alone():
    """S_alone of each prompt equals the simulator kernel's ``prefill_alone_s`` (chunks of B tokens)."""
    from fleetplan.sim._kernels.pdd.prefill import prefill_alone_s

    step = LinearStepModel(0.01, 0.001, 3e-5, 2048.0)
    eng = _engine(step, 16, 512)
    prompts = np.array([1, 17, 511, 512, 513, 1500, 4096, 9000])
    role = PrefillRole.of(eng, prompts, np.ones(prompts.size))
    code, coef = step.kernel_coefficients()
    out = np.zeros(prompts.size)
    prefill_alone_s(prompts.astype(np.int64), 512, int(code), np.asarray(coef), out)
    np.testing.assert_allclose(role.alone_s, out, rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(lam=st.floats(0.1, 50.0), more=st.integers(1, 4))
def test_prefill_work_falls_with_load_and_ttft_with_instances(lam, more):
    """X_j never exceeds S_alone (sharing a step is never dearer than running alone) and more instances never
    raise the role's P99 TTFT."""
    role = PrefillRole.of(_engine(LinearStepModel(0.02, 0.0, 1e-5, None), 256, 2048),
                          *_exponential_prompts(400.0, 3000))
    x = role.service_at(lam)
    assert np.all(x <= role.alone_s * (1 + 1e-12))
    n = max(1, math.ceil(lam * float(role.weight @ x) / 0.9))
    a, b = role.state(lam, n, 0.01, 0.99), role.state(lam, n + more, 0.01, 0.99)
    assert b.ttft_p_s <= a.ttft_p_s * (1 + 1e-9)


def test_a_prompts_own_prefill_time_holds_its_last_step_whole():
    """Y_j, the prompt's own time in prefill (``PrefillRole.wall_at``), is S_alone,j plus the others' tokens that
    ride its last step: with f = 20 ms + 10 µs per prefill token, Y_j - S_alone,j = 10 µs x min(e, B - r_j) for
    the others' e tokens, one figure for the prompts of one chunk and one for the longer ones (whose step before
    is their own chunk: every arrival during it rides along at one instance); S_alone,j on an idle instance;
    never below the instance-seconds X_j it is charged."""
    role = PrefillRole.of(_engine(LinearStepModel(0.02, 0.0, 1e-5, None), 256, 2048),
                          *_exponential_prompts(400.0, 3000))
    np.testing.assert_allclose(role.wall_at(0.0), role.alone_s, rtol=1e-12)
    budget = 2048.0
    rest = np.where(role.prompt_tokens % budget > 0, role.prompt_tokens % budget, budget)
    extra_tokens = (role.wall_at(20.0) - role.alone_s) / 1e-5
    for cls in (role.prompt_tokens <= budget, role.prompt_tokens > budget):
        others = float(extra_tokens[cls].max())
        assert others > 50.0
        np.testing.assert_allclose(extra_tokens[cls], np.minimum(others, budget - rest[cls]), atol=1e-6)
    assert np.all(role.service_at(20.0) <= role.wall_at(20.0) * (1 + 1e-12))


def _prefill_only_spec(n_prefill: int, step: LinearStepModel, budget: int) -> PddSpec:
    """A prefill pool of ``n_prefill`` least-outstanding instances feeding a decode pool that never makes it wait."""
    from fleetplan.sim.pdd import AssignPolicy, Binding

    pf = PoolSpec("prefill", "h100", n_prefill, 65536, step, SchedulerLimits(64, budget, 1 << 20, 16),
                  router=InstanceRouter.LEAST_OUTSTANDING)
    dec = PoolSpec("decode", "h100", 4, 65536, LinearStepModel(0.001, 0.0, 0.0, None),
                   SchedulerLimits(4096, 4096, 1 << 22, 16))
    return PddSpec(pf, dec, KvTransferSpec(0.002, 1e12, 1.0), policy=AssignPolicy.REQ_LEVEL, binding=Binding.EARLY)


@pytest.mark.parametrize(("n_prefill", "rho"), [(1, 0.8), (2, 0.8), (4, 0.6), (16, 0.85)])
def test_prompts_share_prefill_steps_as_the_least_outstanding_router_lets_them(n_prefill, rho):
    """The prompt's own time in prefill (prefill start to end, the simulator's ``prefill_s``; the decode slot's hold
    before the transfer) against the PDD simulator: one-chunk prompts (geometric, mean 1,000 tokens, budget 8,192;
    f = 30 ms + 30 µs per token, S_alone 60 ms) at P least-outstanding instances.  A prompt that waited (C(P, P ρ))
    shares its step only with prompts the router put behind it while every instance held one waiting (ρ^(P-1)), over
    a length-biased step: E[Y] within 8 % + 3 standard errors of three replications' mean, where every prompt's step
    taken as shared (the one-instance rate at each instance) is 40-75 % above it."""
    step = LinearStepModel(0.03, 0.0, 3e-5, None)
    prompts, weight = _exponential_prompts(1000.0, 8000)
    role = PrefillRole.of(_engine(step, 64, 8192), prompts, weight)
    lam = rho * n_prefill / float(role.weight @ role.alone_s)
    spec = _prefill_only_spec(n_prefill, step, 8192)
    sims, holds = [], []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        n = 20_000
        arrival = np.cumsum(rng.exponential(1.0 / lam, n))
        r = simulate_pdd_arrays(spec, arrival, np.minimum(rng.geometric(1e-3, n), 8000), np.full(n, 2),
                                warmup_fraction=0.1)
        f = r.requests[~r.requests["warmup"].to_numpy()]
        sims.append(float((f["prefill_end_s"] - f["prefill_start_s"]).mean()))
        holds.append(float((f["handoff_s"] - f["grant_s"]).mean()))
    mean, se = float(np.mean(sims)), float(np.std(sims, ddof=1)) / math.sqrt(len(sims))
    lam_i = lam / n_prefill
    model = float(role.weight @ role.wall_at(lam_i, n_prefill))
    assert abs(model - mean) <= 0.08 * mean + 3 * se, (sims, model)
    # the decode slot, granted at prefill start, is held for the prompt's own prefill time and the transfer
    hold, hold_se = float(np.mean(holds)), float(np.std(holds, ddof=1)) / math.sqrt(len(holds))
    assert abs(model + 0.002 - hold) <= 0.08 * hold + 3 * hold_se, (holds, model)
    if n_prefill > 1:  # every step shared at the one-instance rate (the screen before the router's shares)
        everyone = float(role.weight @ role.wall_at(lam_i))
        assert everyone >= 1.1 * model


def test_transfer_time_is_bytes_over_bandwidth_plus_latency_in_the_simulator():
    """T_x = latency + prompt x KV bytes per token / bandwidth, and the PDD simulator's transfer of a lone
    request is exactly that (no backpressure: free decode slots)."""
    kv, bw, lat = 160_000.0, 25e9, 0.003
    prompts = np.array([100, 2000, 30_000])
    np.testing.assert_allclose(kv_transfer_s(prompts, kv, bw, lat), lat + prompts * kv / bw)
    step = LinearStepModel(0.01, 0.0005, 2e-5, 2048.0)
    pools = [PoolSpec(n, "h100", 1, 65536, step, SchedulerLimits(8, 512, 1 << 16, 16),
                      router=InstanceRouter.LEAST_OUTSTANDING) for n in ("prefill", "decode")]
    spec = PddSpec(pools[0], pools[1], KvTransferSpec(lat, bw, kv))
    for p in prompts:
        r = simulate_pdd_arrays(spec, np.array([0.0]), np.array([p]), np.array([4]), warmup_fraction=0.0)
        assert float(r.requests["transfer_s"].iloc[0]) == pytest.approx(lat + p * kv / bw, rel=1e-9)
    with pytest.raises(ConfigError, match="bandwidth"):
        kv_transfer_s(prompts, kv, 0.0, lat)


def test_decode_operating_batch_is_littles_law():
    """n* = λ_d E[o] t_d(n*) below the cap; the slot load is the rate against the full-batch throughput."""
    p, o = np.array([200.0, 1000.0, 3000.0]), np.array([50.0, 200.0, 400.0])
    w = np.array([0.5, 0.3, 0.2])
    role = DecodeRole.of(_engine(LinearStepModel(0.008, 0.0002, 0.0, None), 256, 256), p, o, w)
    for lam in (1.0, 5.0, 10.0):
        st_ = role.state(lam, 2, 0.99, 0.1)
        n = st_.batch
        assert n == pytest.approx(lam / 2 * role.mean_output_tokens * float(role.mean_step_s(n, 2)), rel=1e-6)
        assert st_.step_s == pytest.approx(float(role.mean_step_s(n, 2)), rel=1e-12)
        assert st_.slot_load == pytest.approx(lam / 2 * (0.1 + role.mean_output_tokens * float(role.step_s(256)))
                                              / 256, rel=1e-12)
        assert st_.tpot_p_s >= st_.step_s
    assert not role.state(1000.0, 1, 0.99, 0.1).stable


@pytest.fixture(scope="module")
def h100_pdd_request():
    catalog = load_catalog()
    return OptimizeRequest(workload=load_workload("azure_conv"), gpus=resolve_gpus(catalog, ("h100", "a100")),
                           slo_ttft_s=1.0, slo_tpot_s=0.05, rate_per_s=30.0, topologies=(Topology.PDD,),
                           min_ce_gain=0.0)


def test_screen_agrees_with_the_pdd_simulator(h100_pdd_request):
    """The two cheapest PDD fleets at their analytic counts: simulated P99 TTFT and TPOT (mean of 3
    replications) within 25 % of the screen, widened by 3 standard errors of the replications."""
    req = h100_pdd_request
    cands = [c for c in analytical_phase(req) if isinstance(c, DisaggCandidate) and c.feasible][:2]
    assert cands
    gpus = {g.name: g for g in req.gpus}
    for c in cands:
        spec = pdd_spec(c, gpus, [p.count for p in c.pools])
        runs = [simulate_pdd(spec, req.workload, req.rate_per_s, 12_000, seed).summary for seed in range(3)]
        for sim, analytic in (([r.ttft.p99_s for r in runs], c.ttft_p_s), ([r.tpot.p99_s for r in runs],
                                                                          c.decode_step_s)):
            mean, se = float(np.mean(sim)), float(np.std(sim, ddof=1) / math.sqrt(len(sim)))
            assert abs(mean / analytic - 1.0) <= 0.25 + 3 * se / analytic, (c.key(), mean, analytic)


def test_a_role_that_cannot_hold_the_longest_request_is_left_out():
    """llama-3.1-70b FP8 on one H100 leaves 738 KV blocks: lmsys's longest prompt does not fit, so every pair
    with "H100-SXM tp1" is left out of a mixed run (it stopped the run before); with only that placement the
    run names the rule and the fix."""
    from fleetplan.models import Dtype
    from fleetplan.models.catalog import load_model
    from fleetplan.models.context import served_context_limit
    from fleetplan.plan.placement import place_model

    model = load_model("llama-3.1-70b")
    placed = list(place_model(model, load_catalog().get("h100"), weight_dtype=Dtype.FP8))
    req = OptimizeRequest(workload=load_workload("lmsys"), gpus=tuple(p.gpu for p in placed),
                          gpus_per_instance=tuple((p.gpu.name, p.gpus_per_instance) for p in placed),
                          step_models=tuple((p.gpu.name, p.predictor) for p in placed), slo_ttft_s=1.0,
                          slo_tpot_s=0.05, rate_per_s=100.0,
                          topologies=(Topology.HOMO, Topology.TWO_POOL, Topology.PDD),
                          max_model_len_tokens=served_context_limit(model, None),
                          disagg=DisaggSettings(ModelShape.of(model)))
    ranked = analytical_phase(req)
    pdd = [c for c in ranked if isinstance(c, DisaggCandidate)]
    assert pdd and not any("H100-SXM tp1" in {p.gpu for p in c.pools} for c in pdd)
    only = replace(req, gpus=req.gpus[:1], topologies=(Topology.PDD,))
    with pytest.raises(ConfigError, match="holds the workload's longest request"):
        analytical_phase(only)


@pytest.mark.parametrize(("lo", "need", "cap"), [(1, 1, 10), (1, 7, 10), (3, 10, 10), (300, 500, 500), (2, 11, 10)])
def test_count_search_finds_the_smallest_passing_count_up_to_the_cap(lo, need, cap):
    """Galloping then bisection finds the first count that passes, the cap included; none beyond it."""
    from fleetplan.plan.disagg.candidates import _first_passing

    count, found = _first_passing(lambda n: n if n >= need else None, lo, cap)
    assert (count, found) == ((need, need) if need <= cap else (cap, None))


def test_slots_all_held_is_the_tail_of_the_widened_mginf_count():
    """P(N_D >= D b) of the role's held slots, pooled by the assignment: mean D a_d, a_d = λ_d (h_pre + E[o]
    t_d(n*)) (M/G/∞), variance D a_d / (1 - g) with g = n t̄_d'(n) / t̄_d(n) the (smoothed) step's elasticity (a
    negative binomial; Poisson at g = 0); one instance's P(N >= b) at D = 1."""
    from scipy import stats

    from fleetplan.queueing.disagg import _slots_full

    assert _slots_full(273, 215.0, 0.0) == pytest.approx(float(stats.poisson.sf(272, 215.0)), rel=1e-12)
    r = 215.0 * (1 - 0.43) / 0.43
    nb = stats.nbinom(r, r / (r + 215.0))
    assert nb.mean() == pytest.approx(215.0) and nb.var() == pytest.approx(215.0 / (1 - 0.43))
    assert _slots_full(273, 215.0, 0.43) == pytest.approx(float(nb.sf(272)), rel=1e-12)
    assert _slots_full(273, 215.0, 0.43) > 10 * _slots_full(273, 215.0, 0.0)  # the AFD unit of the grid
    p, o = np.array([200.0, 1000.0, 3000.0]), np.array([50.0, 200.0, 4000.0])
    w = np.array([0.5, 0.3, 0.2])
    role = DecodeRole.of(_engine(LinearStepModel(0.008, 0.0002, 0.0, None), 64, 64), p, o, w)
    for lam, d in ((0.5, 1), (1.0, 1), (1.0, 2)):
        st_ = role.state(lam, d, 0.99, 0.1)
        a = lam / d * (0.1 + role.mean_output_tokens * st_.step_s)
        n = st_.batch
        assert n > 1 and st_.stable
        g = role._elasticity(n)
        h = 0.5
        assert g == pytest.approx(n * float(role.mean_step_s(n + h) - role.mean_step_s(n - h)) / (2 * h)
                                  / st_.step_s, rel=0.05)
        assert st_.slot_full == pytest.approx(_slots_full(64 * d, d * a, g), rel=1e-9, abs=1e-300)
    assert role.state(1.0, 1, 0.99, 0.1).slot_full > role.state(1.0, 2, 0.99, 0.1).slot_full


def _nb_tail_by_summing(cap: int, mean: float, g: float) -> float:
    """Σ_{k >= cap} P(N = k) for N negative binomial of mean ``mean`` and variance mean / (1 - g), its pmf
    written out: Γ(r + k) / (Γ(r) k!) q^r (1 - q)^k, r = mean (1 - g) / g, q = 1 - g (Poisson at g = 0); summed
    up to 80 standard deviations past the cap (the rest below 1e-300)."""
    k = np.arange(cap, cap + 80 * math.ceil(math.sqrt(mean / (1 - g))) + 200, dtype=np.float64)
    if g == 0.0:
        log_pmf = k * math.log(mean) - mean - np.array([math.lgamma(x + 1) for x in k])
    else:
        r = mean * (1 - g) / g
        log_pmf = (np.array([math.lgamma(r + x) - math.lgamma(r) - math.lgamma(x + 1) for x in k])
                   + r * math.log(1 - g) + k * math.log(g))
    return float(np.exp(log_pmf).sum())


@pytest.mark.parametrize(("d", "b", "a", "g"), [(1, 64, 40.0, 0.0), (4, 64, 40.0, 0.0), (4, 64, 40.0, 0.5),
                                                (16, 128, 100.0, 0.35), (3, 20, 15.0, 0.8)])
def test_pooled_slot_tail_is_the_negative_binomial_of_the_summed_instances(d, b, a, g):
    """P(N_D >= D b) (``_slots_full`` at the role's D b slots and mean D a_d) against the pmf summed directly;
    D independent NB(r, q) instances sum to NB(D r, q): the same mean D a_d and variance D a_d / (1 - g)."""
    from fleetplan.queueing.disagg import _slots_full

    pooled = _slots_full(d * b, d * a, g)
    assert pooled == pytest.approx(_nb_tail_by_summing(d * b, d * a, g), rel=1e-6, abs=1e-15)
    assert pooled <= _slots_full(b, a, g) * (1 + 1e-12)


@settings(max_examples=200, deadline=None)
@given(d=st.integers(1, 200), b=st.integers(4, 1024), load=st.floats(0.05, 0.99), g=st.floats(0.0, 0.9))
def test_pooled_slot_tail_never_needs_more_instances_than_one_instances_tail(d, b, load, g):
    """Whenever one instance's P(N >= b) is within the screen's limit (SLOT_FULL_SHARE of a P99's tail), so is the
    pooled P(N_D >= D b), and it is never larger: the pooled count sizes no more decode instances."""
    from fleetplan.plan.disagg.candidates import SLOT_FULL_SHARE
    from fleetplan.queueing.disagg import _slots_full

    a = load * b
    single, pooled = _slots_full(b, a, g), _slots_full(d * b, d * a, g)
    if single <= SLOT_FULL_SHARE * 0.01:
        assert pooled <= single * (1 + 1e-9) + 1e-300


def test_fewest_bound_assignment_pools_the_decode_slots_in_the_simulator():
    """Theorem (module docstring of ``queueing.disagg``): binding each request to the decode instance with the
    fewest requests bound (``req_level``) makes a request wait for a slot only when all D b are held, so the
    share that waits is the pooled count's tail P(N_D >= D b), N_D ~ Poisson(λ E[hold]) at a constant step
    (M/G/∞, g = 0), not one instance's P(N >= b) of mean λ E[hold] / D.  D = 4 instances of b = 8 slots at
    a = 22.5 held on average: pooled tail 0.035, one instance's 0.21.  Four seeds; the tolerance is 3 standard
    errors of their mean plus the M/G/∞ tail's gap to M/G/c's delay probability (Erlang C: 0.040 here)."""
    from scipy import stats

    from fleetplan.sim.pdd import AssignPolicy, Binding

    n, lam, d, b = 40_000, 110.0, 4, 8
    pf = PoolSpec("prefill", "h100", 8, 4096, LinearStepModel(1e-4, 0.0, 0.0, None),
                  SchedulerLimits(8, 512, 1 << 16, 16), router=InstanceRouter.LEAST_OUTSTANDING)
    dec = PoolSpec("decode", "h100", d, 4096, LinearStepModel(0.01, 0.0, 0.0, None), SchedulerLimits(b, b, 1 << 16, 16))
    spec = PddSpec(pf, dec, KvTransferSpec(0.0, 1e15, 1.0), policy=AssignPolicy.REQ_LEVEL, binding=Binding.EARLY)
    waited, pooled, single = [], [], []
    for seed in range(4):
        rng = np.random.default_rng(seed)
        arrival = np.cumsum(rng.exponential(1 / lam, n))
        r = simulate_pdd_arrays(spec, arrival, np.full(n, 16), rng.geometric(1 / 20, n), warmup_fraction=0.1)
        f = r.requests[~r.requests["warmup"].to_numpy()]
        a = lam * float((f["done_s"] - f["grant_s"]).mean())  # mean slots held (Little)
        waited.append(float(np.mean(f["grant_s"] > f["bind_s"])))
        pooled.append(float(stats.poisson.sf(d * b - 1, a)))
        single.append(float(stats.poisson.sf(b - 1, a / d)))
    mean, se = float(np.mean(waited)), float(np.std(waited, ddof=1)) / 2.0
    model = float(np.mean(pooled))
    gap = float(erlang_c(d * b, lam * 0.2)) / model - 1.0 if model > 0 else 0.0
    assert abs(mean - model) <= 3 * se + max(abs(gap), 0.2) * model, (waited, model)
    assert mean < 0.3 * float(np.mean(single))


def test_decode_count_keeps_the_slots_off_their_cap(h100_pdd_request):
    """Every sized decode role holds all its D b slots with probability at most SLOT_FULL_SHARE (1 - p) (checked
    with Poisson's narrower count on a lower bound of D a_d: the decode residence alone, without the slot's hold
    before the handoff), and no decode role is below its utilisation-cap floor."""
    from scipy import stats

    from fleetplan.plan.disagg.candidates import SLOT_FULL_SHARE

    req = h100_pdd_request
    for c in (c for c in analytical_phase(req) if isinstance(c, DisaggCandidate) and c.feasible):
        dec = c.pools[1]
        a_lower = req.rate_per_s * dec.mean_residence_s
        assert float(stats.poisson.sf(dec.count * dec.max_num_seqs - 1, a_lower)) <= SLOT_FULL_SHARE * 0.01, c.key()
        assert 1 <= dec.floor_count <= dec.count and dec.rho <= req.rho_max * (1 + 1e-9), c.key()


def test_kv_full_is_the_normal_tail_of_the_compound_poisson_kv_tokens():
    """Held KV tokens: compound Poisson of mean λ_d Σ w (h_pre p + o t (p + o / 2)) and variance
    λ_d Σ w o t (p² + p o + o² / 3) (a context growing linearly from p to p + o over a life of o t), at g = 0
    (a constant step); its normal tail against the instance's KV tokens."""
    from scipy import stats

    p, o, w = np.array([1000.0, 8000.0]), np.array([100.0, 2000.0]), np.array([0.9, 0.1])
    role = DecodeRole.of(_engine(LinearStepModel(0.02, 0.0, 0.0, None), 256, 256, blocks=20_000), p, o, w)
    lam, t, h = 0.5, 0.02, 0.3
    mean = lam * float(w @ (h * p + o * t * (p + o / 2)))
    var = lam * float(w @ (o * t * (p * p + p * o + o * o / 3)))
    assert role._kv_full(lam, t, h, 0.0) == pytest.approx(float(stats.norm.sf((20_000 * 16 - mean) / var**0.5)))
    # the count balanced over D instances (module docstring): its share a E_m[c]² falls to a E_m[c]² / D
    a, first = lam * float(w @ (o * t)), lam * float(w @ (o * t * (p + o / 2)))
    for d in (2, 8):
        var_d = var - first**2 / a * (1 - 1 / d)
        assert 0 < var_d < var
        expect = float(stats.norm.sf((20_000 * 16 - mean) / var_d**0.5))
        assert role._kv_full(lam, t, h, 0.0, d) == pytest.approx(expect)
    assert role._kv_full(lam, t, h, 0.5) > role._kv_full(lam, t, h, 0.0)  # the step's feedback widens it


def test_the_step_a_member_sees_is_size_biased_and_widened():
    """t̄_d(n) = E[t_d(N*)], N* = 1 + NB(r + 1, q) the batch a member sees when the batch N is NB(r, q) of mean n
    and variance n / (1 - g) (size-biased; Poisson at g = 0): for a step linear in the batch, t_d(n + 1 / (1 - g))
    with g of the Poisson pass (at most 0.9); for a step with a cliff at 128 sequences, the base plus the cliff times
    P(N* > 128)."""
    from scipy import stats

    p, o, w = np.array([500.0, 2000.0]), np.array([100.0, 300.0]), np.array([0.5, 0.5])
    lin = DecodeRole.of(_engine(LinearStepModel(0.01, 0.0001, 0.0, None), 4096, 4096), p, o, w)
    per = float(lin.step_s(1.0)) - float(lin.step_s(0.0))  # the step is linear in the batch
    grid = lin._smoothed[0]
    for n in grid[[8, 32, 64, 128]]:
        g = n * per / (float(lin.step_s(0.0)) + per * (n + 1.0))  # elasticity of t_d(n + 1), the Poisson pass
        g = min(g, 0.9)  # the widening's cap (queueing.disagg._MAX_ELASTICITY)
        assert float(lin.mean_step_s(n)) == pytest.approx(float(lin.step_s(n + 1.0 / (1.0 - g))), rel=1e-6)

    base, jump = 0.02, 0.002

    def cliff_role(cap: int) -> DecodeRole:
        role = DecodeRole.of(_engine(LinearStepModel(base, 0.0, 0.0, None), cap, cap), p, o, w)
        steps = np.where(np.arange(cap + 1) > 128, base + jump, base)
        object.__setattr__(role, "step_s", lambda n: np.interp(np.asarray(n, dtype=np.float64),
                                                                  np.arange(cap + 1), steps))
        return role

    role = cliff_role(400)
    n = 120.0
    g = role._elasticity(n)
    assert 0.0 < g < 0.9  # the smoothed step's slope near the cliff (the raw step is flat there)
    v = 1.0 / (1.0 - g)
    q = 1.0 / v
    r = n * q / (1.0 - q)
    above = float(stats.nbinom(r + 1.0, q).sf(127))  # 1 + M > 128
    assert float(role.mean_step_s(n)) == pytest.approx(base + jump * above, rel=2e-3)
    assert float(role.mean_step_s(20.0)) == pytest.approx(base, rel=1e-9)  # far below: the flat step
    assert float(role.mean_step_s(300.0)) == pytest.approx(base + jump, rel=1e-6)  # far above


def test_decode_tpot_follows_the_batch_across_a_tile_step():
    """Llama-3.1-70B FP8 on B200 tp1 (roofline step: 128-token GEMM tiles) at azure_conv 50 req/s: the raw step's
    Little's-law batch (112) sits below the 128-sequence tile step the fluctuating batch crosses (the simulated
    batch averages 140, P99 TPOT 1.32x the raw screen's); the smoothed step puts the analytic P99 TPOT within 10 %
    of the simulator (3 replications, widened by 3 standard errors)."""
    from fleetplan.models import Dtype
    from fleetplan.models.catalog import load_model
    from fleetplan.models.context import served_context_limit
    from fleetplan.perf.parallelism import Parallelism
    from fleetplan.plan.placement import place_model

    model = load_model("llama-3.1-70b")
    placed = place_model(model, load_catalog().get("b200"), weight_dtype=Dtype.FP8, timing_source="roofline",
                         parallelism=Parallelism.vllm(tensor_parallel_size=1))
    steps = tuple((p.gpu.name, p.step_model) for p in placed)
    req = OptimizeRequest(workload=load_workload("azure_conv"), gpus=tuple(p.gpu for p in placed),
                          gpus_per_instance=tuple((p.gpu.name, p.gpus_per_instance) for p in placed),
                          step_models=steps, slo_ttft_s=1.0, slo_tpot_s=0.05, rate_per_s=50.0,
                          topologies=(Topology.PDD,), min_ce_gain=0.0,
                          max_model_len_tokens=served_context_limit(model, None),
                          disagg=DisaggSettings(ModelShape.of(model)))
    c = next(c for c in analytical_phase(req) if isinstance(c, DisaggCandidate) and c.feasible)
    gpu = req.gpus[0]
    counts = [p.count for p in c.pools]
    spec = pdd_spec(c, {gpu.name: gpu}, counts, step_models=dict(steps), max_model_len_tokens=req.max_model_len_tokens)
    runs = [simulate_pdd(spec, req.workload, req.rate_per_s, 12_000, seed).summary for seed in range(3)]
    sim = [r.tpot.p99_s for r in runs]
    mean, se = float(np.mean(sim)), float(np.std(sim, ddof=1) / math.sqrt(len(sim)))
    assert abs(mean / c.decode_step_s - 1.0) <= 0.10 + 3 * se / c.decode_step_s, (mean, c.decode_step_s)


def test_a_pooled_role_sees_its_share_of_the_pooled_batch_fluctuation():
    """With the fewest-bound assignment an instance runs the pooled batch's share N_D / D, of variance
    a_d / ((1 - g) D): for a step linear in the batch the step a member sees is t_d(n + v), v = 1 / ((1 - g) D)
    with g = n t_d' / t_d(n + v) of that curve (a fixed point; exact below and above v = 1), t_d(n + 1 / (1 - g))
    with g of the Poisson pass at D = 1 as before; more instances never make it longer."""
    p, o, w = np.array([500.0, 2000.0]), np.array([100.0, 300.0]), np.array([0.5, 0.5])
    lin = DecodeRole.of(_engine(LinearStepModel(0.01, 0.0001, 0.0, None), 4096, 4096), p, o, w)
    per = float(lin.step_s(1.0)) - float(lin.step_s(0.0))
    base = float(lin.step_s(0.0))
    grid = lin._smoothed[0]
    for n in grid[[8, 32, 64, 128]]:
        g = min(n * per / (base + per * (n + 1.0)), 0.9)  # of the Poisson pass, as above
        assert float(lin.mean_step_s(n, 1)) == pytest.approx(float(lin.step_s(n + 1.0 / (1.0 - g))), rel=1e-6)
        for d in (2, 8, 64):
            v = 1.0 / d
            for _ in range(200):
                v = 1.0 / ((1.0 - min(n * per / (base + per * (n + v)), 0.9)) * d)  # the widening's cap
            assert float(lin.mean_step_s(n, d)) == pytest.approx(float(lin.step_s(n + v)), rel=2e-4), (n, d)
        assert float(lin.mean_step_s(n, 64)) <= float(lin.mean_step_s(n, 2)) <= float(lin.mean_step_s(n))


def test_balanced_decode_instances_run_the_pooled_batch_in_the_simulator():
    """Theorem (``queueing.disagg``): the fewest-bound assignment balances the decode instances, so each runs the
    pooled batch's share, not its own M/G/∞ batch: with a steep linear step (t = 5 ms + 1 ms per sequence, g = 0.7)
    the batch of Little's law n = λ_d E[o] t̄_d(n) at D = 8 instances is 12.6 with t̄_d(n) = t_d(n + 1 / ((1 - g) D)),
    22.9 with one instance's widening t_d(n + 1 / (1 - g)).  Simulated mean batch per instance (Little: λ E[time in
    decode] / D) of three replications (11.9-12.6) within 5 % + 3 standard errors of the pooled figure."""
    from fleetplan.sim.pdd import AssignPolicy, Binding

    d, lam = 8, 56.0
    outputs = np.arange(1, 3001, dtype=np.float64)
    w = (1 / 100) * (1 - 1 / 100) ** (outputs - 1)
    role = DecodeRole.of(_engine(LinearStepModel(0.005, 0.001, 0.0, None), 256, 256),
                         np.full(outputs.size, 16.0), outputs, w / w.sum())
    pooled, alone = role.operating_batch(lam / d, d), role.operating_batch(lam / d)
    assert alone > 1.3 * pooled
    pf = PoolSpec("prefill", "h100", 4, 4096, LinearStepModel(1e-4, 0.0, 0.0, None),
                  SchedulerLimits(64, 4096, 1 << 16, 16), router=InstanceRouter.LEAST_OUTSTANDING)
    dec = PoolSpec("decode", "h100", d, 4096, LinearStepModel(0.005, 0.001, 0.0, None),
                   SchedulerLimits(256, 256, 1 << 20, 16))
    spec = PddSpec(pf, dec, KvTransferSpec(0.0, 1e15, 1.0), policy=AssignPolicy.REQ_LEVEL, binding=Binding.EARLY)
    batches = []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        n = 30_000
        arrival = np.cumsum(rng.exponential(1 / lam, n))
        r = simulate_pdd_arrays(spec, arrival, np.full(n, 16), np.minimum(rng.geometric(1 / 100, n), 3000),
                                warmup_fraction=0.2)
        f = r.requests[~r.requests["warmup"].to_numpy()]
        batches.append(lam * float((f["done_s"] - f["handoff_s"]).mean()) / d)
    mean, se = float(np.mean(batches)), float(np.std(batches, ddof=1)) / math.sqrt(3)
    assert abs(mean - pooled) <= 0.05 * pooled + 3 * se, (batches, pooled, alone)
