"""SIBYL's terms (§4, eqs. 3-8) on a hand-built state, and its survival estimator (eq. 4)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fleetplan.sim._kernels.pdd import codes as pc
from tests.reference.pdd import Decode, Estimator, Req
from tests.reference.pdd_decode import DecodeEngine

BUCKET = 100.0


def _engine(ps: bool = False, tasks: bool = False) -> DecodeEngine:
    ci = [0] * pc.N_CFG_I
    ci[pc.CI_DECODE_MODEL] = pc.DECODE_PS if ps else pc.DECODE_STEPS
    ci[pc.CI_POLICY] = pc.ASSIGN_SIBYL
    ci[pc.CI_SIBYL_PRESSURE] = pc.PRESSURE_TASKS if tasks else pc.PRESSURE_TOKENS
    est = Estimator(5, BUCKET, 0.5, prior=10.0)
    est.s = [1.0, 0.8, 0.5, 0.25, 0.0]  # S(0..99)=1, S(100..199)=0.8, ...
    return DecodeEngine(ci, [0.0] * pc.N_CFG_F, [0.0] * 18,
                        est, [Decode(10**6)])


def _req(idx, prompt, **kw) -> Req:
    r = Req(idx, 0.0, prompt, 1000, kw.pop("est_handoff", 0.0), 0.0, 0.0)
    for k, v in kw.items():
        setattr(r, k, v)
    return r


def test_type1_active_task_uses_its_own_rate_and_conditional_survival():
    eng = _engine()
    r = _req(0, prompt=50, gen=120)
    r.t[pc.OT_HANDOFF] = 0.0
    eng.inst[0].running.append(r)
    t, tau = 4.0, 6.0
    v_k = 120 / 4.0  # observed: 30 tokens/s
    l_tau = 120 + v_k * (tau - t)  # 180
    want = (50 + l_tau) * (0.8 / 0.8)  # S(180) / S(120): same bucket
    assert eng.sibyl(0, t, tau) == pytest.approx(want)
    tau = 8.0  # l_tau = 240: S(240) / S(120) = 0.5 / 0.8
    assert eng.sibyl(0, t, tau) == pytest.approx((50 + 240) * 0.5 / 0.8)


def test_type2_pending_before_handoff_uses_the_system_rate_and_plain_survival():
    eng = _engine()
    r = _req(1, prompt=70, est_handoff=1.0)
    r.t[pc.OT_BIND] = 2.0  # tau_k = 3
    eng.inst[0].pending.append(r)
    gap = (8.0 - 3.0) * 10.0  # v_sys = prior = 10 tokens/s -> 50 tokens
    assert eng.sibyl(0, 2.5, 8.0) == pytest.approx((70 + gap) * 1.0)  # S(50) = 1
    gap = (28.0 - 3.0) * 10.0  # 250 tokens: S = 0.5
    assert eng.sibyl(0, 2.5, 28.0) == pytest.approx((70 + gap) * 0.5)


def test_type3_pending_after_handoff_is_relu_interference_decay():
    eng = _engine()
    r = _req(2, prompt=70, est_handoff=5.0)
    r.t[pc.OT_BIND] = 1.0  # tau_k = 6
    eng.inst[0].pending.append(r)
    assert eng.sibyl(0, 1.0, 4.0) == pytest.approx(70 - 10.0 * (6.0 - 4.0))  # eq. (8): 50
    assert eng.sibyl(0, 1.0, -10.0) == 0.0  # far future start: clamped at zero
    assert eng.sibyl(0, 1.0, 6.0) == pytest.approx(70.0)  # continuous at tau_k = tau (appendix D)


def test_system_rate_is_completed_tokens_over_decode_seconds():
    est = Estimator(3, BUCKET, 0.5, prior=7.0)
    assert est.rate() == 7.0
    est.completed(100, 4.0)
    est.completed(300, 6.0)
    assert est.rate() == pytest.approx(400 / 10.0)


def test_survival_estimator_converges_to_the_empirical_survival_function():
    """EMA of the indicator [L >= l]: stationary mean P(L >= l), sd sqrt(p(1-p)(1-a)/(1+a))."""
    rng = np.random.default_rng(7)
    alpha = 0.999
    est = Estimator(82, BUCKET, alpha, prior=1.0)
    lengths = np.minimum(rng.lognormal(math.log(1500), 1.0, 30_000).astype(int), 8192)
    for length in lengths:
        est.completed(int(length), 1.0)
    sd_max = math.sqrt(0.25 * (1 - alpha) / (1 + alpha))
    for b in (5, 10, 20, 40, 81):
        p = float(np.mean(lengths >= b * BUCKET))
        assert abs(est.s[b] - p) < 5 * sd_max + 0.01
    assert all(x >= y for x, y in zip(est.s, est.s[1:], strict=False))  # non-increasing in l


def test_pending_requests_weigh_their_prompts_so_one_long_task_outweighs_many_new_ones():
    """Why SIBYL herds (test_sibyl_qualitative, point 1): at ``tau_k = tau`` a pending request
    weighs its prompt (eqs. 7-8, appendix D), a running one its whole context.  Against one
    task of 200 + 4,000 tokens, 22 new 200-token requests in a row go to the empty instance."""
    ci = [0] * pc.N_CFG_I
    ci[pc.CI_DECODE_MODEL] = pc.DECODE_STEPS
    ci[pc.CI_POLICY] = pc.ASSIGN_SIBYL
    eng = DecodeEngine(ci, [0.0] * pc.N_CFG_F, [0.0] * 18, Estimator(5, BUCKET, 0.5, prior=10.0),
                       [Decode(10**6), Decode(10**6)])  # survival 1 everywhere: no completion expected
    old = _req(0, prompt=200, gen=4000)
    old.t[pc.OT_HANDOFF] = 0.0
    eng.inst[0].running.append(old)  # load at tau: 200 + 4000 + 40 tokens/s * 0.2 s = 4208
    t, chosen = 100.0, []
    for i in range(1, 25):
        r = _req(i, prompt=200, est_handoff=0.2)
        d = eng.choose(r, t)
        r.t[pc.OT_BIND] = t
        eng.inst[d].pending.append(r)
        chosen.append(d)
    assert chosen == [1] * 22 + [0, 1]


def test_task_pressure_weighs_every_task_one_times_its_survival_weight():
    """``SibylPressure.TASKS``: M = 1 in eqs. (6)-(7); eq. (8) divided by the prompt (the same
    linear decay, zero at the same distance ``l_in / v_sys``)."""
    eng = _engine(tasks=True)
    active = _req(0, prompt=50, gen=120)
    active.t[pc.OT_HANDOFF] = 0.0
    eng.inst[0].running.append(active)
    assert eng.sibyl(0, 4.0, 8.0) == pytest.approx(0.5 / 0.8)  # eq. 6: P only (l_tau = 240)
    eng.inst[0].running.clear()
    before = _req(1, prompt=70, est_handoff=1.0)
    before.t[pc.OT_BIND] = 2.0  # tau_k = 3
    eng.inst[0].pending.append(before)
    assert eng.sibyl(0, 2.5, 28.0) == pytest.approx(0.5)  # eq. 7: S(250 tokens)
    eng.inst[0].pending.clear()
    after = _req(2, prompt=70, est_handoff=5.0)
    after.t[pc.OT_BIND] = 1.0  # tau_k = 6
    eng.inst[0].pending.append(after)
    assert eng.sibyl(0, 1.0, 4.0) == pytest.approx((70 - 10.0 * 2.0) / 70)  # eq. 8 / l_in
    assert eng.sibyl(0, 1.0, 6.0) == pytest.approx(1.0)  # continuous at tau_k = tau
    assert eng.sibyl(0, 1.0, -10.0) == 0.0


def test_task_pressure_spreads_new_requests_instead_of_herding():
    """The herding case above with task pressure: the old task weighs 1, so the 24 new requests
    alternate between the two instances (ties to the lower index) and their task counts end
    one apart, 13 and 12."""
    ci = [0] * pc.N_CFG_I
    ci[pc.CI_POLICY] = pc.ASSIGN_SIBYL
    ci[pc.CI_SIBYL_PRESSURE] = pc.PRESSURE_TASKS
    eng = DecodeEngine(ci, [0.0] * pc.N_CFG_F, [0.0] * 18, Estimator(5, BUCKET, 0.5, prior=10.0),
                       [Decode(10**6), Decode(10**6)])
    old = _req(0, prompt=200, gen=4000)
    old.t[pc.OT_HANDOFF] = 0.0
    eng.inst[0].running.append(old)
    chosen = []
    for i in range(1, 25):
        r = _req(i, prompt=200, est_handoff=0.2)
        d = eng.choose(r, 100.0)
        r.t[pc.OT_BIND] = 100.0
        eng.inst[d].pending.append(r)
        chosen.append(d)
    assert chosen == [1, 0] * 12
    assert (1 + len(eng.inst[0].pending), len(eng.inst[1].pending)) == (13, 12)


def _three_terms(ablate: int, tasks: bool = False) -> float:
    """One active task (Type 1), one pending before the handoff (Type 2), one after (Type 3)."""
    eng = _engine(tasks=tasks)
    eng.ablate = ablate
    a = _req(0, prompt=50, gen=20)
    a.t[pc.OT_HANDOFF] = 0.0  # observed rate 5 tokens/s at t = 4
    eng.inst[0].running.append(a)
    b = _req(1, prompt=70, est_handoff=1.0)
    b.t[pc.OT_BIND] = 2.0  # tau_k = 3 < tau: Type 2, gap 250 tokens
    c = _req(2, prompt=90, est_handoff=30.0)
    c.t[pc.OT_BIND] = 0.0  # tau_k = 30 > tau: Type 3
    eng.inst[0].pending.extend([b, c])
    return eng.sibyl(0, 4.0, 28.0)


def test_ablations_drop_their_term_and_prob_at_one_removes_the_survival_weights():
    """The SIBYL paper's sensitivity variants (appendix J) on a state with one term of each type:
    Type 1 = (50 + 140) S(140)/S(20) = 190 x 0.8, Type 2 = (70 + 250) S(250) = 320 x 0.5,
    Type 3 = ReLU(90 - 10 x 2) = 70 (v_sys = the prior, 10 tokens/s; S as in ``_engine``)."""
    type1, type2, type3 = 190 * 0.8, 320 * 0.5, 70.0
    assert _three_terms(0) == pytest.approx(type1 + type2 + type3)
    assert _three_terms(pc.ABLATE_TYPE1) == pytest.approx(type2 + type3)
    assert _three_terms(pc.ABLATE_TYPE2) == pytest.approx(type1 + type3)
    assert _three_terms(pc.ABLATE_TYPE3) == pytest.approx(type1 + type2)
    assert _three_terms(pc.ABLATE_PROB) == pytest.approx(190 + 320 + type3)
    assert _three_terms(pc.ABLATE_TYPE1 | pc.ABLATE_TYPE2 | pc.ABLATE_TYPE3) == 0.0
    assert _three_terms(pc.ABLATE_PROB, tasks=True) == pytest.approx(1 + 1 + 70 / 90)


def test_req_level_counts_pending_requests_and_ils_does_not():
    """REQ LEVEL (appendix J) counts requests bound and still in prefill; the paper's ILS only those
    in decode, so it sends the next request to an instance with a long pending queue."""
    ci = [0] * pc.N_CFG_I
    ci[pc.CI_DECODE_MODEL] = pc.DECODE_STEPS
    eng = DecodeEngine(ci, [0.0] * pc.N_CFG_F, [0.0] * 18, Estimator(5, BUCKET, 0.5, prior=10.0),
                       [Decode(10**6), Decode(10**6)])
    eng.inst[0].n_in_decode, eng.inst[1].n_in_decode = 1, 2
    eng.inst[0].pending.extend(_req(i, prompt=10) for i in range(3))
    new = _req(9, prompt=10)
    ci[pc.CI_POLICY] = pc.ASSIGN_ILS_REQUESTS
    assert eng.choose(new, 0.0) == 0
    ci[pc.CI_POLICY] = pc.ASSIGN_REQ_LEVEL
    assert eng.choose(new, 0.0) == 1  # 1 + 3 pending > 2
