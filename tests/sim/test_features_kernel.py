"""The feature kernel (#5) equals its twin exactly, reduces to the featureless kernel with
every feature off or at its identity value, and keeps its invariants; policy order on
hand-built cases.  Cases: ``tests/sim/test_features_cases.py``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetplan.sim._kernels import STATUS_DONE, run_iteration_level
from fleetplan.sim._kernels.codes import SCHED_SGLANG
from fleetplan.sim.features.arrays import no_extras
from tests.sim.test_features_cases import (
    assert_twin,
    features_off,
    make_feature_case,
    run_one,
)
from tests.sim.test_features_cases import run_iteration_features as kernel
from tests.sim.test_kernels_iteration import make_case, run_case

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PAIRS = (("out_inst", "out_inst"), ("out_first_sched_s", "out_first_sched_s"),
         ("out_first_token_s", "out_first_token_s"), ("out_done_s", "out_done_s"),
         ("out_preemptions", "out_preemptions"), ("out_status", "out_status"), ("inst_busy_s", "inst_busy_s"),
         ("inst_seq_s", "inst_seq_s"), ("inst_steps", "inst_steps"), ("inst_tokens", "inst_tokens"))


def assert_featureless(case: dict, feats: dict, extras) -> dict:
    n_ref, ref = run_case(run_iteration_level, case)
    n_f, out = run_one(kernel, case, feats, extras)
    assert n_ref == n_f
    for a, b in PAIRS:
        np.testing.assert_array_equal(ref[a], out[b], err_msg=a)
    return out


@SETTINGS
@given(seed=st.integers(0, 10_000), which=st.sampled_from(["all", "all", "policy", "graph", "spec", "prefix",
                                                           "route"]))
def test_kernel_matches_twin(seed: int, which: str) -> None:
    assert_twin(*make_feature_case(seed, which))


@pytest.mark.parametrize("seed", range(25))
def test_all_off_is_the_featureless_kernel(seed: int) -> None:
    case = make_case(seed)
    n_pools = len(case["pool_router"])
    out = assert_featureless(case, features_off(n_pools), no_extras(case["prompt_tokens"]))
    np.testing.assert_array_equal(out["out_release_s"], np.where(out["out_status"] == 2, case["arrival_s"],
                                                                 out["out_release_s"]))
    assert out["pool_graph_tokens"].sum() == 0 and out["out_drafted"].sum() == 0


def identity_features(case: dict, which: str) -> dict:
    f = features_off(len(case["pool_router"]))
    if which == "mlfq_one_level":
        f["policy"][:] = 3
        f["policy_param"][:, :2] = (1e-3, 1)
    elif which in ("graph_full", "graph_piecewise"):
        f["graph_mode"][:] = 1 if which == "graph_full" else 2
        f["graph_sizes"] = np.tile(np.arange(1, 2049, dtype=np.int64), (len(case["pool_router"]), 1))
        f["graph_n"][:] = 2048
    elif which == "spec_zero":
        f["spec_accept"][:] = 0.9
        f["draft_coef"][:] = 1.0
    elif which == "prefix_no_keys":
        f["prefix_on"][:] = 1
        f["prefix_entries"][:] = 4
    elif which == "affinity_no_keys":
        case["pool_router"] = np.full_like(case["pool_router"], 4)
    return f


@pytest.mark.parametrize("which", ["mlfq_one_level", "graph_full", "graph_piecewise", "spec_zero", "prefix_no_keys",
                                   "affinity_no_keys"])
@pytest.mark.parametrize("seed", range(6))
def test_identity_values_are_featureless(which: str, seed: int) -> None:
    case = make_case(seed)
    if which == "affinity_no_keys":  # the fallback is least outstanding
        case["pool_router"] = np.zeros_like(case["pool_router"])
        ref = run_case(run_iteration_level, case)[1]
        f = identity_features(case, which)
        out = run_one(kernel, case, f, no_extras(case["prompt_tokens"]))[1]
        for a, b in PAIRS:
            np.testing.assert_array_equal(ref[a], out[b], err_msg=a)
        return
    if which == "prefix_no_keys" and run_case(run_iteration_level, case)[1]["out_preemptions"].sum() > 0:
        # a preempted request's computed blocks stay cached (state.own_segment): not featureless then
        assert_twin(case, identity_features(case, which), no_extras(case["prompt_tokens"]))
        return
    out = assert_featureless(case, identity_features(case, which), no_extras(case["prompt_tokens"]))
    if which.startswith("graph"):
        assert out["pool_graph_tokens"][:, 1].sum() == 0 and out["pool_step_kind"][:, 1].sum() > 0


@pytest.mark.parametrize("seed", range(12))
def test_invariants(seed: int) -> None:
    case, feats, extras = make_feature_case(seed, "all")
    checks: dict = {}
    out = assert_twin(case, feats, extras, checks)  # the twin asserts the block invariant after every pass
    done = out["out_status"] == STATUS_DONE
    for r in checks["reqs"]:
        assert r.gen <= r.output
        if done[r.idx]:
            assert r.gen == r.output
    assert (out["out_accepted"] <= out["out_drafted"]).all()
    np.testing.assert_array_equal(out["pool_accept_pos"].sum(1), pool_sum(case, out, "out_accepted"))
    np.testing.assert_array_equal(out["pool_draft_pos"].sum(1), pool_sum(case, out, "out_drafted"))
    inst_pool = np.repeat(np.arange(len(case["pool_router"])), np.diff(case["pool_inst_start"]))
    useful = np.zeros(len(case["pool_router"]), np.int64)
    pad = np.zeros_like(useful)
    for k, _, _, _, _, size, t_tokens in checks["steps"]:
        if size > 0:
            assert size >= t_tokens
            useful[inst_pool[k]] += t_tokens
            pad[inst_pool[k]] += size - t_tokens
    if np.isinf(case["horizon_s"]):
        np.testing.assert_array_equal(out["pool_graph_tokens"][:, 0], useful)
        np.testing.assert_array_equal(out["pool_graph_tokens"][:, 1], pad)
    assert (out["pool_graph_tokens"] >= 0).all()
    for r in np.flatnonzero(extras.prev_req >= 0):
        q = extras.prev_req[r]
        if np.isfinite(out["out_release_s"][r]):
            assert out["out_status"][q] == STATUS_DONE
            assert out["out_release_s"][r] == out["out_done_s"][q] + extras.delay_s[r]
            if out["out_status"][r] != 2:
                assert out["out_inst"][r] == out["out_inst"][q]
            first_s = out["out_first_sched_s"][r]
            assert first_s >= out["out_release_s"][r] or not np.isfinite(first_s)
        else:
            assert out["out_status"][q] != STATUS_DONE or out["out_done_s"][q] + extras.delay_s[r] > case["horizon_s"]
    assert (out["out_first_token_s"][done] <= out["out_done_s"][done]).all()


def pool_sum(case: dict, out: dict, name: str) -> np.ndarray:
    """Per-pool sum of a per-request output (by the instance that served the request)."""
    inst_pool = np.repeat(np.arange(len(case["pool_router"])), np.diff(case["pool_inst_start"]))
    served = out["out_inst"] >= 0
    return np.bincount(inst_pool[out["out_inst"][served]], weights=out[name][served],
                       minlength=len(case["pool_router"])).astype(np.int64)


def test_sglang_prefill_steps_carry_no_decodes() -> None:
    n_steps = 0
    for seed in range(15):
        case, feats, extras = make_feature_case(seed, "policy")
        feats["policy"][:] = SCHED_SGLANG
        checks: dict = {}
        assert_twin(case, feats, extras, checks)
        for _, _, n_decode, _, admitted, _, _ in checks["steps"]:
            if admitted > 0:
                n_steps += 1
                assert n_decode == 0
    assert n_steps > 0


def one_instance(prompts, outputs, arrivals, policy: int, param=(0, 0, 0, 0), max_seqs: int = 1) -> dict:
    n = len(prompts)
    coef = np.zeros((1, 18))
    coef[0, :3] = (0.01, 0.001, 1e-6)
    case = dict(
        arrival_s=np.array(arrivals, float), prompt_tokens=np.array(prompts, np.int64),
        output_tokens=np.array(outputs, np.int64), req_pool=np.zeros(n, np.int32), route_u=np.zeros((n, 2)),
        pool_inst_start=np.array([0, 1], np.int32), pool_router=np.zeros(1, np.int32),
        pool_max_context=np.array([65536]), pool_max_num_seqs=np.array([max_seqs], np.int32),
        pool_max_batched_tokens=np.array([40000], np.int32), pool_kv_blocks=np.array([8192]),
        pool_block_tokens=np.array([16], np.int32), pool_step_code=np.zeros(1, np.int32), pool_step_coef=coef,
        horizon_s=np.inf)
    feats = features_off(1)
    feats["policy"][0] = policy
    feats["policy_param"][0] = param
    checks: dict = {}
    assert_twin(case, feats, no_extras(case["prompt_tokens"]), checks)
    return checks


def test_spf_admits_the_shortest_first() -> None:
    checks = one_instance([20, 50, 10, 30], [3, 3, 3, 3], [0.0, 0.001, 0.002, 0.003], policy=2)
    assert checks["admitted"][0] == [0, 2, 3, 1]
    fcfs = one_instance([20, 50, 10, 30], [3, 3, 3, 3], [0.0, 0.001, 0.002, 0.003], policy=0)
    assert fcfs["admitted"][0] == [0, 1, 2, 3]


def test_h2q_br_short_answer_overtakes_a_long_round() -> None:
    """A 32768-token round goes to QL (l > L = 8192); a 256-token QS round that arrives later
    is admitted before it (FCFS would not)."""
    args = ([100, 32768, 256], [4, 4, 4], [0.0, 0.001, 0.002])
    checks = one_instance(*args, policy=4, param=(8192, 16384, 8, 0))
    assert checks["admitted"][0] == [0, 2, 1]
    assert one_instance(*args, policy=0)["admitted"][0] == [0, 1, 2]


def test_speculative_acceptance_extremes() -> None:
    for accept, check in ((1.0, lambda o: (o["out_accepted"] == o["out_drafted"]).all()),
                          (0.0, lambda o: o["out_accepted"].sum() == 0)):
        case, feats, extras = make_feature_case(3, "spec")
        feats["spec_k"][:] = 3
        feats["spec_accept"][:] = accept
        out = assert_twin(case, feats, extras)
        assert out["out_drafted"].sum() > 0 and check(out)


def test_h2q_br_sticky_history_keeps_a_small_answer_round_in_ql() -> None:
    """Session round 1 has 32768 new tokens (QL, sticky); its 256-token answer round stays in QL,
    so a standalone 256-token request arriving later is admitted first (FCFS: the other way)."""
    from fleetplan.sim.features.arrays import RequestExtras

    prompts = [32768, 100, 32768 + 4 + 256, 256]
    coef = np.zeros((1, 18))
    coef[0, :3] = (0.01, 0.001, 1e-6)
    n = 4
    case = dict(
        arrival_s=np.array([0.0, 0.0001, 0.0, 0.3]), prompt_tokens=np.array(prompts, np.int64),
        output_tokens=np.array([4, 50, 4, 4], np.int64), req_pool=np.zeros(n, np.int32), route_u=np.zeros((n, 2)),
        pool_inst_start=np.array([0, 1], np.int32), pool_router=np.zeros(1, np.int32),
        pool_max_context=np.array([65536]), pool_max_num_seqs=np.array([1], np.int32),
        pool_max_batched_tokens=np.array([40000], np.int32), pool_kv_blocks=np.array([8192]),
        pool_block_tokens=np.array([16], np.int32), pool_step_code=np.zeros(1, np.int32), pool_step_coef=coef,
        horizon_s=np.inf)
    extras = RequestExtras(
        prev_req=np.array([-1, -1, 0, -1]), delay_s=np.zeros(n), session=np.array([0, -1, 0, -1]), n_sessions=1,
        new_tokens=np.array([32768, 100, 256, 256]), prefix_key=np.full((n, 2), -1), prefix_tokens=np.zeros((n, 2),
                                                                                                          np.int64))
    orders = {}
    for policy in (0, 4):
        feats = features_off(1)
        feats["policy"][0] = policy
        feats["policy_param"][0] = (8192, 1 << 40, 1 << 40, 0)
        checks: dict = {}
        out = assert_twin(case, feats, extras, checks)
        assert (out["out_status"] == STATUS_DONE).all()
        assert out["out_release_s"][2] == out["out_done_s"][0]
        orders[policy] = checks["admitted"][0]
    assert orders[0] == [0, 1, 2, 3]
    assert orders[4] == [0, 1, 3, 2]
