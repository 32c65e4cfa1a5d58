"""The iteration-level kernel with instance failures equals its pure-Python twin exactly.

Random small fleets (``test_kernels_iteration.make_case``: tiny KV and token budgets, all
four routers, several pools, least-loaded pools, finite horizons) get heavy failure
schedules: alternating down/up times per instance, some instances down at t = 0, some
pools entirely down for a while (requests held), event times that coincide with arrivals.
Also checked: no events equals the failure-free kernel bit for bit; conservation (every
request DONE, UNFINISHED or REJECTED; with an infinite horizon and every outage repaired,
every accepted request is DONE); the hand-computed effect of one failure.
"""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.sim._kernels import N_STEP_COEFS, STATUS_DONE, STATUS_REJECTED, STATUS_UNFINISHED
from fleetplan.sim._kernels.iteration_level import run_iteration_level, run_iteration_level_failures
from tests.reference.iteration_level import run_iteration_level_failures as twin_failures
from tests.sim.test_kernels_iteration import make_case, run_case


def add_failures(case: dict, seed: int, mean_up_s: float | None = None, repaired: bool = True) -> dict:
    """Alternating down/up times per instance over the arrival span (every outage repaired
    when ``repaired``; otherwise an instance may stay down for good)."""
    rng = np.random.default_rng(10_000 + seed)
    n_inst = int(case["pool_inst_start"][-1])
    span = float(case["arrival_s"][-1]) + 1e-3
    mean_up = span / rng.uniform(0.5, 6.0) if mean_up_s is None else mean_up_s
    mean_down = mean_up * rng.uniform(0.05, 1.0)
    events, lo = [], [0]
    for _ in range(n_inst):
        t = 0.0 if rng.random() < 0.2 else rng.exponential(mean_up)
        times = []
        while t < span:
            times.append(t)
            t += rng.exponential(mean_down)
            if repaired or rng.random() < 0.8:
                times.append(t)
            else:
                break
            t += rng.exponential(mean_up)
        if rng.random() < 0.3:  # coincide with arrivals / each other
            times = list(np.maximum.accumulate(np.round(times, 2)))
        events += times
        lo.append(len(events))
    return dict(case, inst_fail_event_s=np.array(events, dtype=np.float64), inst_fail_lo=np.array(lo, np.int64))


def run_failures(fn, case: dict, **kwargs) -> tuple[int, dict]:
    """``run_case`` plus the ``out_failures`` output (filled with garbage first)."""
    out_failures = np.full(len(case["arrival_s"]), 77, np.int32)
    n_steps, outs = run_case(fn, case, out_failures=out_failures, **kwargs)
    return n_steps, dict(outs, out_failures=out_failures)


def assert_same(case: dict) -> dict:
    n_kernel, out_kernel = run_failures(run_iteration_level_failures, case)
    n_twin, out_twin = run_failures(twin_failures, case)
    assert n_kernel == n_twin
    for name in out_kernel:
        np.testing.assert_array_equal(out_kernel[name], out_twin[name], err_msg=name)
    return out_kernel


@pytest.mark.parametrize("seed", range(60))
def test_kernel_matches_twin_with_failures(seed: int) -> None:
    assert_same(add_failures(make_case(seed), seed, repaired=seed % 3 != 0))


def test_failure_cases_cover_the_interesting_branches() -> None:
    """The cases above evict running requests, hold requests in pools with no healthy instance
    and still preempt."""
    evicted = preempted = 0
    for seed in range(60):
        case = add_failures(make_case(seed), seed, repaired=seed % 3 != 0)
        out = run_failures(run_iteration_level_failures, case)[1]
        evicted += int(out["out_failures"].sum())
        preempted += int(out["out_preemptions"].sum())
    assert evicted > 100 and preempted > 0


@pytest.mark.parametrize("seed", range(20))
def test_no_events_equals_the_failure_free_kernel(seed: int) -> None:
    """Failures off (empty schedule) is bit-identical to ``run_iteration_level``."""
    case = make_case(seed)
    n_inst = int(case["pool_inst_start"][-1])
    n_plain, out_plain = run_case(run_iteration_level, case)
    n_fail, out_fail = run_failures(run_iteration_level_failures, dict(
        case, inst_fail_event_s=np.empty(0), inst_fail_lo=np.zeros(n_inst + 1, np.int64)))
    assert n_plain == n_fail
    assert not out_fail.pop("out_failures").any()
    for name in out_plain:
        np.testing.assert_array_equal(out_plain[name], out_fail[name], err_msg=name)


@pytest.mark.parametrize("seed", range(20))
def test_conservation_under_heavy_failures(seed: int) -> None:
    """Every request ends DONE, UNFINISHED or REJECTED; none is lost.  With no horizon and every
    outage repaired, every accepted request finishes; a DONE request emitted all its tokens."""
    case = dict(make_case(seed), horizon_s=np.inf)
    case = add_failures(case, seed, mean_up_s=float(case["arrival_s"][-1]) / 20 + 1e-3)
    checks: dict = {}
    _, out = run_failures(twin_failures, case, checks=checks)
    status = out["out_status"]
    assert np.isin(status, [STATUS_DONE, STATUS_REJECTED]).all()
    done = status == STATUS_DONE
    assert np.all(out["out_first_token_s"][done] <= out["out_done_s"][done])
    # token accounting of DONE requests: one never evicted nor preempted was scheduled exactly its
    # prompt once and output - 1 decode tokens; each eviction can lose at most the decode token of
    # the step in flight and turns at most one later decode into a recompute (prefill) emission
    decode = np.array(checks["decode_tokens"])[done] - (case["output_tokens"][done] - 1)
    prefill = np.array(checks["prefill_tokens"])[done] - case["prompt_tokens"][done]
    n_fail, n_pre = out["out_failures"][done], out["out_preemptions"][done]
    clean = (n_fail == 0) & (n_pre == 0)
    assert np.all(decode[clean] == 0) and np.all(prefill[clean] == 0)
    assert np.all(decode <= n_fail) and np.all(decode >= -(n_fail + n_pre)) and np.all(prefill >= 0)
    assert out["out_failures"].sum() > 0
    # its prompt (+ generated tokens, on recompute) was prefilled at least once
    assert np.all(np.array(checks["prefill_tokens"])[done] >= case["prompt_tokens"][done])
    assert np.all(out["out_inst"][done] >= 0)


def test_unrepaired_pool_holds_requests_as_unfinished() -> None:
    """A one-instance pool that fails for good: its queued and later requests stay UNFINISHED."""
    case = make_case(5)
    case = dict(case, pool_inst_start=np.array([0, 1], np.int32), req_pool=np.zeros_like(case["req_pool"]),
                pool_router=case["pool_router"][:1], pool_max_context=np.array([4096]),
                pool_max_num_seqs=np.array([16], np.int32), pool_max_batched_tokens=np.array([2048], np.int32),
                pool_kv_blocks=np.array([4096]), pool_block_tokens=np.array([16], np.int32),
                pool_step_code=np.zeros(1, np.int32), pool_step_coef=case["pool_step_coef"][:1], horizon_s=np.inf)
    t_fail = float(case["arrival_s"][len(case["arrival_s"]) // 2])
    case.update(inst_fail_event_s=np.array([t_fail]), inst_fail_lo=np.array([0, 1], np.int64))
    out = assert_same(case)
    late = case["arrival_s"] >= t_fail
    assert np.all(out["out_status"][late] == STATUS_UNFINISHED)
    assert np.all(out["out_done_s"][out["out_status"] == STATUS_DONE] < t_fail)


def test_one_failure_hand_computed() -> None:
    """One request (prompt 4, output 6) on instance 0 of two, 1 s steps, least outstanding.

    Steps end at t = 1 (prefill, token 1), 2, 3 (tokens 2, 3).  Instance 0 fails at 3.5: the
    step in flight (token 4) is lost; the request moves to instance 1, re-prefills prompt 4 +
    generated 3 = 7 tokens in [3.5, 4.5], emits token 4 at 4.5 and tokens 5, 6 at 5.5, 6.5."""
    coef = np.zeros((1, N_STEP_COEFS))
    coef[0, 0] = 1.0
    case = dict(
        arrival_s=np.array([0.0]), prompt_tokens=np.array([4]), output_tokens=np.array([6]),
        req_pool=np.array([0], np.int32), route_u=np.zeros((1, 2)), pool_inst_start=np.array([0, 2], np.int32),
        pool_router=np.zeros(1, np.int32), pool_max_context=np.array([100]),
        pool_max_num_seqs=np.array([4], np.int32), pool_max_batched_tokens=np.array([100], np.int32),
        pool_kv_blocks=np.array([100]), pool_block_tokens=np.array([1], np.int32),
        pool_step_code=np.zeros(1, np.int32), pool_step_coef=coef, horizon_s=np.inf,
        inst_fail_event_s=np.array([3.5, 10.0]), inst_fail_lo=np.array([0, 2, 2], np.int64),
    )
    out = assert_same(case)
    assert out["out_inst"][0] == 1 and out["out_failures"][0] == 1 and out["out_preemptions"][0] == 0
    assert out["out_first_token_s"][0] == 1.0 and out["out_done_s"][0] == 6.5
    np.testing.assert_array_equal(out["inst_steps"], [3, 3])
    np.testing.assert_array_equal(out["inst_tokens"], [4 + 2, 7 + 2])


@pytest.mark.parametrize("fn", [run_iteration_level_failures, twin_failures])
@pytest.mark.parametrize("broken", ["offsets", "unsorted", "negative"])
def test_invalid_failure_schedules_raise(fn, broken: str) -> None:
    case = add_failures(make_case(4), 4)
    n_inst = int(case["pool_inst_start"][-1])
    if broken == "offsets":
        case["inst_fail_lo"] = np.zeros(n_inst, np.int64)
    elif broken == "unsorted":
        case["inst_fail_event_s"], case["inst_fail_lo"] = np.array([2.0, 1.0]), np.r_[0, np.full(n_inst, 2)]
    else:
        case["inst_fail_event_s"], case["inst_fail_lo"] = np.array([-1.0]), np.r_[0, np.full(n_inst, 1)]
    with pytest.raises(ValueError):
        run_failures(fn, case)
