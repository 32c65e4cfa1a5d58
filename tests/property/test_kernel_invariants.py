"""Invariants of the simulator kernels, checked with hypothesis on random small fleets.

* Every request ends DONE, UNFINISHED or REJECTED; times are ordered
  (arrival <= first schedule <= first token <= done).
* KV blocks in use never exceed the budget: asserted after every scheduling decision
  inside the twin (which the kernel matches exactly); the twin's recorded peak is checked.
* Token accounting: a request never preempted is scheduled exactly its prompt once and
  ``output - 1`` decode tokens; the kernel's ``inst_tokens`` equals the tokens scheduled
  to all requests, and with no preemption and no horizon ``sum(prompt + output - 1)``.
* A request alone on an instance has TTFT equal to the sum of its prefill chunks' step
  times computed by hand from the linear step model.
* Least-outstanding routing on a homogeneous pool gives no instance more than 1.5x its
  fair share; adding an instance does not worsen P99 TTFT beyond noise.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.sim._kernels import (
    N_STEP_COEFS,
    ROUTE_LEAST_OUTSTANDING,
    STATUS_DONE,
    STATUS_REJECTED,
    STATUS_UNFINISHED,
    run_iteration_level,
    run_request_level,
)
from tests.reference.iteration_level import run_iteration_level as twin_iteration_level
from tests.sim.test_kernels_iteration import make_case, run_case
from tests.sim.test_kernels_request import make_case as make_request_case
from tests.sim.test_kernels_request import run_case as run_request_case

SEEDS = st.integers(0, 2**31 - 1)


@settings(max_examples=40, deadline=None)
@given(seed=SEEDS)
def test_iteration_statuses_and_time_order(seed: int) -> None:
    case = make_case(seed, n_max=200)
    _, out = run_case(run_iteration_level, case)
    status = out["out_status"]
    assert np.isin(status, [STATUS_DONE, STATUS_UNFINISHED, STATUS_REJECTED]).all()
    done = status == STATUS_DONE
    arrival = case["arrival_s"]
    assert np.all(out["out_first_sched_s"][done] >= arrival[done])
    assert np.all(out["out_first_token_s"][done] > out["out_first_sched_s"][done])
    assert np.all(out["out_first_token_s"][done] <= out["out_done_s"][done])
    assert np.all(out["out_done_s"][done] <= case["horizon_s"])
    assert np.all(out["out_done_s"][~done] == np.inf)
    assert np.all(out["out_inst"][status == STATUS_REJECTED] == -1)
    if case["horizon_s"] == np.inf:
        assert not (status == STATUS_UNFINISHED).any()
    assert np.all(out["inst_busy_s"] >= 0) and np.all(out["inst_seq_s"] >= out["inst_busy_s"] - 1e-12)


@settings(max_examples=40, deadline=None)
@given(seed=SEEDS)
def test_request_level_statuses_and_time_order(seed: int) -> None:
    case = make_request_case(seed, n_max=200)
    _, out = run_request_case(run_request_level, case)
    status = out["out_status"]
    assert np.isin(status, [STATUS_DONE, STATUS_UNFINISHED, STATUS_REJECTED]).all()
    done = status == STATUS_DONE
    assert np.all(out["out_start_s"][done] >= case["arrival_s"][done])
    assert np.all(out["out_first_token_s"][done] <= out["out_done_s"][done])
    slots_time = case["inst_slots"] * min(case["horizon_s"], float(np.max(out["out_done_s"], initial=0.0,
                                                                       where=done)))
    assert np.all(out["inst_busy_slot_s"] <= slots_time + 1e-9)


@settings(max_examples=30, deadline=None)
@given(seed=SEEDS)
def test_kv_budget_and_token_accounting(seed: int) -> None:
    case = make_case(seed, n_max=120)
    checks: dict = {}
    _, out_twin = run_case(twin_iteration_level, case, checks=checks)  # asserts blocks at every step
    _, out = run_case(run_iteration_level, case)
    n_inst = len(out["inst_tokens"])
    pool_of_inst = np.repeat(np.arange(len(case["pool_router"])), np.diff(case["pool_inst_start"]))
    assert np.all(np.asarray(checks["peak_blocks"]) <= case["pool_kv_blocks"][pool_of_inst[:n_inst]])
    prefill = np.asarray(checks["prefill_tokens"])
    decode = np.asarray(checks["decode_tokens"])
    prompt, output = case["prompt_tokens"], case["output_tokens"]
    clean = (out["out_status"] == STATUS_DONE) & (out["out_preemptions"] == 0)
    np.testing.assert_array_equal(prefill[clean], prompt[clean])
    np.testing.assert_array_equal(decode[clean], output[clean] - 1)
    done = out["out_status"] == STATUS_DONE
    assert np.all(prefill[done] + decode[done] >= prompt[done] + output[done] - 1)
    if case["horizon_s"] == np.inf:
        assert out["inst_tokens"].sum() == prefill.sum() + decode.sum()
        if out["out_preemptions"].sum() == 0:
            assert out["inst_tokens"].sum() == np.sum((prompt + output - 1)[done])


@settings(max_examples=60, deadline=None)
@given(
    prompt=st.integers(1, 3000), output=st.integers(1, 5), chunk=st.integers(1, 700),
    coef=st.tuples(*[st.floats(0.0, 0.01) for _ in range(3)], st.floats(0.0, 1e-5), st.floats(0.0, 1e-7)),
    arrival=st.floats(0.0, 100.0),
)
def test_single_request_ttft_is_sum_of_prefill_steps(prompt, output, chunk, coef, arrival) -> None:
    """TTFT = sum over chunks (offset, size) of W + H + P size + A size (offset + size / 2)."""
    step_coef = np.zeros((1, N_STEP_COEFS))
    step_coef[0, :5] = coef
    w, h, per_token, _, attention = coef
    expected = 0.0
    offset = 0
    while offset < prompt:
        size = min(chunk, prompt - offset)
        expected += w + h + per_token * size + attention * size * (offset + size / 2)
        offset += size
    case = dict(
        arrival_s=np.array([arrival]), prompt_tokens=np.array([prompt]), output_tokens=np.array([output]),
        req_pool=np.zeros(1, np.int32), route_u=np.zeros((1, 2)), pool_inst_start=np.array([0, 1], np.int32),
        pool_router=np.zeros(1, np.int32), pool_max_context=np.array([4000]),
        pool_max_num_seqs=np.array([8], np.int32), pool_max_batched_tokens=np.array([chunk], np.int32),
        pool_kv_blocks=np.array([1000]), pool_block_tokens=np.array([16], np.int32),
        pool_step_code=np.zeros(1, np.int32), pool_step_coef=step_coef, horizon_s=np.inf,
    )
    n_steps, out = run_case(run_iteration_level, case)
    ttft = out["out_first_token_s"][0] - arrival
    assert abs(ttft - expected) <= 1e-12 * max(expected, 1.0) + 1e-12
    assert n_steps == -(-prompt // chunk) + output - 1


def _homogeneous(n_inst: int, rate_per_s: float, n_req: int, seed: int) -> dict:
    """n_inst identical engines (W = 10 ms, H = 1 ms/seq, 0.05 ms/prefill token)."""
    rng = np.random.default_rng(seed)
    coef = np.zeros((1, N_STEP_COEFS))
    coef[0, :3] = [0.010, 0.001, 0.00005]
    return dict(
        arrival_s=np.cumsum(rng.exponential(1 / rate_per_s, n_req)),
        prompt_tokens=rng.integers(10, 400, n_req), output_tokens=rng.integers(1, 80, n_req),
        req_pool=np.zeros(n_req, np.int32), route_u=rng.random((n_req, 2)),
        pool_inst_start=np.array([0, n_inst], np.int32),
        pool_router=np.array([ROUTE_LEAST_OUTSTANDING], np.int32), pool_max_context=np.array([1000]),
        pool_max_num_seqs=np.array([32], np.int32), pool_max_batched_tokens=np.array([256], np.int32),
        pool_kv_blocks=np.array([4000]), pool_block_tokens=np.array([16], np.int32),
        pool_step_code=np.zeros(1, np.int32), pool_step_coef=coef, horizon_s=np.inf,
    )


def _capacity_per_s() -> float:
    """Rough requests/s one engine sustains at batch 16 (mean prompt 205, output 40)."""
    step_s = 0.010 + 0.001 * 16
    return 16 / (40 * step_s + 205 * 0.00005)


@settings(max_examples=15, deadline=None)
@given(seed=SEEDS, n_inst=st.integers(2, 12), load=st.floats(0.3, 0.7))
def test_least_outstanding_balances_requests(seed: int, n_inst: int, load: float) -> None:
    n_req = 300 * n_inst
    case = _homogeneous(n_inst, load * n_inst * _capacity_per_s(), n_req, seed)
    _, out = run_case(run_iteration_level, case)
    counts = np.bincount(out["out_inst"], minlength=n_inst)
    assert counts.max() <= 1.5 * n_req / n_inst


@settings(max_examples=10, deadline=None)
@given(seed=SEEDS, n_inst=st.integers(1, 6))
def test_adding_an_instance_does_not_worsen_p99_ttft(seed: int, n_inst: int) -> None:
    """Same arrivals, lengths and routing draws (common random numbers), n vs n + 1 engines
    at 70% load for n: P99 TTFT may not rise by more than 10% + one base step (noise)."""
    n_req = 3000
    rate = 0.7 * n_inst * _capacity_per_s()
    p99 = []
    for n in (n_inst, n_inst + 1):
        case = _homogeneous(n, rate, n_req, seed)
        _, out = run_case(run_iteration_level, case)
        ttft = out["out_first_token_s"] - case["arrival_s"]
        p99.append(np.quantile(ttft[n_req // 10:], 0.99))
    assert p99[1] <= 1.1 * p99[0] + 0.010
