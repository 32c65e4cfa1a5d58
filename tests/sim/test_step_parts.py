"""Run-time shortcuts of the step models are bit for bit the full evaluation, the feature kernel's
integer acceptance thresholds decide as the twin's float comparisons, and the feature kernel's runs
(plain, speculative, MLFQ) equal the twin's single steps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.sim._kernels.codes import N_STEP_COEFS, STEP_MODEL_LINEAR, STEP_MODEL_ROOFLINE
from fleetplan.sim._kernels.features.rng import accept_thresholds
from fleetplan.sim._kernels.jit import njit
from fleetplan.sim._kernels.step_model import decode_step_parts, step_time_s, verify_step_parts, verify_step_s
from fleetplan.sim.features.arrays import SPEC_K_MAX
from tests.perf.test_step_kernel import PREDICTORS, roofline_case
from tests.sim.test_features_cases import assert_twin, make_feature_case, random_extras, random_features

COEFS = [(STEP_MODEL_ROOFLINE, p.kernel_coefficients()[1]) for p in PREDICTORS]
COEFS.append((STEP_MODEL_LINEAR, np.array([4e-3, 2e-5, 1.5e-4, 3e-8, 1e-9] + [0.0] * (N_STEP_COEFS - 5))))


@njit
def _both(code, coef, n_seqs, n_decode, prefill, ctx, attn2, dcode, dcoef):
    full = step_time_s(code, coef, n_seqs, n_decode, prefill, ctx, attn2)
    parts = verify_step_parts(code, coef, n_seqs, n_decode, prefill)
    base_s, per_ctx_s = decode_step_parts(dcode, dcoef, n_seqs)
    return full, verify_step_s(code, coef, parts, ctx, attn2), step_time_s(dcode, dcoef, n_seqs, n_seqs, 0, ctx, 0), \
        base_s + per_ctx_s * ctx


@settings(max_examples=300, deadline=None)
@given(which=st.integers(0, len(COEFS) - 1), draft=st.integers(0, len(COEFS) - 1), n=st.integers(1, 600),
       k=st.integers(0, 16), ctx=st.integers(0, 10**8), extra=st.integers(0, 10**9))
def test_verify_parts_are_step_time_bit_for_bit(which, draft, n, k, ctx, extra) -> None:
    code, coef = COEFS[which]
    dcode, dcoef = COEFS[draft]
    attn2 = 2 * k * ctx + n * k * k + extra
    full, fast, dfull, dfast = _both(code, coef, n, n, n * k, ctx, attn2, dcode, dcoef)
    assert full == fast
    assert dfull == dfast


@pytest.mark.parametrize("which", ["all", "spec", "policy"])
@pytest.mark.parametrize("seed", range(12))
def test_runs_with_roofline_steps_match_twin(seed: int, which: str) -> None:
    case = roofline_case(seed)
    rng = np.random.default_rng(20_000 + seed)
    extras = random_extras(rng, case, True)
    feats = random_features(rng, case, which)
    if which in ("all", "spec"):  # speculative decoding everywhere, drafts from a roofline model
        feats["spec_k"][:] = rng.integers(1, 4, feats["spec_k"].size)
        feats["draft_code"] = case["pool_step_code"].copy()
        feats["draft_coef"] = case["pool_step_coef"].copy()
    assert_twin(case, feats, extras)


SPECIAL_ACCEPT = [0.0, 1.0, 0.5, 1.5, -0.25, 2.0**-60, 1.0 - 2.0**-53, np.inf, np.nan]


@settings(max_examples=200, deadline=None)
@given(row=st.lists(st.one_of(st.sampled_from(SPECIAL_ACCEPT), st.floats(0.0, 1.2)), min_size=SPEC_K_MAX,
                    max_size=SPEC_K_MAX), bits=st.lists(st.integers(0, 2**53 - 1), min_size=1, max_size=20))
def test_integer_acceptance_thresholds_are_the_twins_comparisons(row, bits) -> None:
    """``b < accept_thresholds[j]`` iff the twin accepts position j (and all before it) at ``u = b 2**-53``,
    for any acceptance values, including draws next to each threshold."""
    accept = np.array([row])
    thr = accept_thresholds(accept)[0]
    near = [int(t) + d for t in thr for d in (-1, 0) if 0 <= int(t) + d < 2**53]
    for b in bits + near:
        u = float(b) * 2.0**-53
        reach, accepted = 1.0, True
        for j in range(SPEC_K_MAX):
            reach *= float(accept[0, j])  # (plain floats: inf * 0 is nan without a warning)
            accepted = accepted and u < reach  # the twin's leading run
            assert (b < thr[j]) == accepted


@pytest.mark.parametrize("seed", range(8))
def test_speculative_mlfq_runs_with_any_acceptance_values_match_twin(seed: int) -> None:
    """Speculative runs under MLFQ with prefix caching, acceptance values outside [0, 1] included."""
    case, feats, extras = make_feature_case(seed, "all")
    rng = np.random.default_rng(30_000 + seed)
    feats["policy"][:] = 3
    feats["policy_param"][:, :2] = (rng.choice([0.002, 0.02]), 4)
    feats["spec_k"][:] = rng.integers(1, 5, feats["spec_k"].size)
    feats["spec_accept"] = rng.choice(np.array([0.0, 0.3, 0.8, 0.95, 1.0, 1.3, -0.1]), feats["spec_accept"].shape)
    assert_twin(case, feats, extras)
