"""The iteration-level kernel equals its pure-Python twin exactly on many small random cases.

Cases are built to hit every branch: tiny KV budgets (preemption), tiny token budgets
(chunked prefill, decodes starved of budget), few sequences per instance (admission
blocked), all four within-pool routers, several pools, ``req_pool = -1`` (kernel picks the
pool), oversized requests (rejection), simultaneous arrivals and finite horizons.
"""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.sim._kernels import (
    N_STEP_COEFS,
    POOL_LEAST_LOADED,
    STATUS_DONE,
    STATUS_REJECTED,
    STATUS_UNFINISHED,
    run_iteration_level,
)
from fleetplan.sim._kernels.groups import FailureInputs, StepLog, iteration_groups
from tests.reference.iteration_level import run_iteration_level as twin_iteration_level

REQ_OUT = (("out_inst", np.int32), ("out_first_sched_s", np.float64), ("out_first_token_s", np.float64),
           ("out_done_s", np.float64), ("out_preemptions", np.int32), ("out_status", np.int8))
INST_OUT = (("inst_busy_s", np.float64), ("inst_seq_s", np.float64), ("inst_steps", np.int64),
            ("inst_tokens", np.int64))


def make_case(seed: int, n_max: int = 300) -> dict:
    """A random small fleet and workload; every array typed as the contract says."""
    rng = np.random.default_rng(seed)
    n_req = int(rng.integers(1, n_max + 1))
    n_pools = int(rng.integers(1, 4))
    n_inst_per_pool = rng.integers(1, 5, size=n_pools)
    pool_inst_start = np.concatenate([[0], np.cumsum(n_inst_per_pool)]).astype(np.int32)
    block = rng.choice([1, 2, 4, 16], size=n_pools).astype(np.int32)
    max_context = rng.choice([64, 128, 256, 1024], size=n_pools).astype(np.int64)
    kv_blocks = np.maximum(1, (max_context // block) * rng.choice([1, 1, 2, 4], size=n_pools)
                           // rng.choice([1, 2], size=n_pools)).astype(np.int64)
    coef = np.zeros((n_pools, N_STEP_COEFS))
    coef[:, 0] = rng.uniform(0.001, 0.01, n_pools)
    coef[:, 1] = rng.uniform(0.0, 0.002, n_pools)
    coef[:, 2] = rng.uniform(0.0, 1e-4, n_pools)
    coef[:, 3] = rng.choice([0.0, 1e-6], n_pools)
    coef[:, 4] = rng.choice([0.0, 1e-8], n_pools)
    prompt = rng.integers(1, 200, size=n_req).astype(np.int64)
    output = rng.integers(1, 60, size=n_req).astype(np.int64)
    rate = rng.uniform(5.0, 300.0)
    arrival = np.cumsum(rng.exponential(1 / rate, n_req))
    if rng.random() < 0.3:  # simultaneous arrivals
        arrival = np.round(arrival, 2)
    req_pool = rng.integers(-1 if rng.random() < 0.5 else 0, n_pools, size=n_req).astype(np.int32)
    horizon = np.inf if rng.random() < 0.6 else float(arrival[-1] * rng.uniform(0.3, 1.5))
    return dict(
        arrival_s=np.sort(arrival), prompt_tokens=prompt, output_tokens=output, req_pool=req_pool,
        route_u=rng.random((n_req, 2)), pool_inst_start=pool_inst_start,
        pool_router=rng.integers(0, 4, size=n_pools).astype(np.int32), pool_max_context=max_context,
        pool_max_num_seqs=rng.choice([1, 2, 4, 16, 256], size=n_pools).astype(np.int32),
        pool_max_batched_tokens=rng.choice([1, 8, 32, 128, 2048], size=n_pools).astype(np.int32),
        pool_kv_blocks=kv_blocks, pool_block_tokens=block,
        pool_step_code=np.zeros(n_pools, dtype=np.int32), pool_step_coef=coef, horizon_s=horizon,
    )


def run_case(fn, case: dict, **kwargs) -> tuple[int, dict]:
    """Allocate outputs (filled with garbage: kernels must initialise them) and run ``fn``."""
    n_req = len(case["arrival_s"])
    n_inst = int(case["pool_inst_start"][-1])
    outs = {name: np.full(n_req, 77, dtype=dt) for name, dt in REQ_OUT}
    outs.update({name: np.full(n_inst, 77, dtype=dt) for name, dt in INST_OUT})
    n_steps = call_kernel(fn, case, outs, **kwargs)
    return n_steps, outs


def call_kernel(fn, case: dict, outs: dict, out_failures=None, log_dt_s=None, log_n=None, log_len=None,
                max_in_flight: int = 0, **kwargs) -> int:
    """Call an iteration-level kernel (or its twin) with its named groups (``groups.py``) built from
    the flat ``case`` and ``outs``: with failures when the case has ``inst_fail_event_s``, logged
    when ``log_dt_s`` is given."""
    requests, fleet, out = iteration_groups(case | outs)
    if "inst_fail_event_s" in case:
        failures = FailureInputs(case["inst_fail_event_s"], case["inst_fail_lo"])
        return fn(requests, fleet, failures, out, out_failures, case["horizon_s"], max_in_flight, **kwargs)
    if log_dt_s is not None:
        return fn(requests, fleet, out, case["horizon_s"], max_in_flight, StepLog(log_dt_s, log_n, log_len), **kwargs)
    return fn(requests, fleet, out, case["horizon_s"], max_in_flight, **kwargs)


def assert_same(case: dict) -> dict:
    n_kernel, out_kernel = run_case(run_iteration_level, case)
    n_twin, out_twin = run_case(twin_iteration_level, case)
    assert n_kernel == n_twin
    for name in out_kernel:
        np.testing.assert_array_equal(out_kernel[name], out_twin[name], err_msg=name)
    return out_kernel


@pytest.mark.parametrize("seed", range(60))
def test_kernel_matches_twin_exactly(seed: int) -> None:
    assert_same(make_case(seed))


def test_cases_cover_the_interesting_branches() -> None:
    """The random cases above really exercise preemption, rejection, horizons and -1 pools."""
    preemptions = rejected = unfinished = least_loaded = 0
    for seed in range(60):
        case = make_case(seed)
        out = run_case(run_iteration_level, case)[1]
        preemptions += int(out["out_preemptions"].sum())
        rejected += int((out["out_status"] == STATUS_REJECTED).sum())
        unfinished += int((out["out_status"] == STATUS_UNFINISHED).sum())
        least_loaded += int((case["req_pool"] == POOL_LEAST_LOADED).sum())
    assert min(preemptions, rejected, unfinished, least_loaded) > 0


def test_single_request_hand_computed() -> None:
    """One request, prompt 10, output 3, chunk 4: prefill steps of 4, 4, 2 tokens then 2 decodes.

    step_s = W + H n + P prefill + D context + A attention with W=1, H=0.5, P=0.1, D=0.01, A=0.001:
    prefill chunks (offset, chunk) = (0,4), (4,4), (8,2): attention work 8, 24, 18 ->
    1.5 + 0.4 + 0.008 = 1.908, 1.5 + 0.4 + 0.024 = 1.924, 1.5 + 0.2 + 0.018 = 1.718;
    decodes at context 10 and 11: 1.5 + 0.1 = 1.6 and 1.5 + 0.11 = 1.61."""
    coef = np.zeros((1, N_STEP_COEFS))
    coef[0, :5] = [1.0, 0.5, 0.1, 0.01, 0.001]
    case = dict(
        arrival_s=np.array([2.0]), prompt_tokens=np.array([10]), output_tokens=np.array([3]),
        req_pool=np.array([0], dtype=np.int32), route_u=np.zeros((1, 2)),
        pool_inst_start=np.array([0, 1], dtype=np.int32), pool_router=np.array([0], dtype=np.int32),
        pool_max_context=np.array([100]), pool_max_num_seqs=np.array([4], dtype=np.int32),
        pool_max_batched_tokens=np.array([4], dtype=np.int32), pool_kv_blocks=np.array([10]),
        pool_block_tokens=np.array([2], dtype=np.int32), pool_step_code=np.array([0], dtype=np.int32),
        pool_step_coef=coef, horizon_s=np.inf,
    )
    out = assert_same(case)
    ttft = 1.908 + 1.924 + 1.718
    assert out["out_status"][0] == STATUS_DONE
    assert out["out_first_sched_s"][0] == 2.0
    assert out["out_first_token_s"][0] == pytest.approx(2.0 + ttft, rel=1e-12)
    assert out["out_done_s"][0] == pytest.approx(2.0 + ttft + 1.6 + 1.61, rel=1e-12)
    assert out["inst_steps"][0] == 5
    assert out["inst_tokens"][0] == 10 + 2
    assert out["inst_busy_s"][0] == pytest.approx(ttft + 1.6 + 1.61, rel=1e-12)
    assert out["inst_seq_s"][0] == pytest.approx(ttft + 1.6 + 1.61, rel=1e-12)


def test_preemption_hand_computed() -> None:
    """Two requests, 1-token blocks, 12 KV blocks, unbounded token budget, step = 1 s.

    Request 0 arrives at an idle instance at t=0 and prefills 4 tokens alone (4 blocks);
    request 1 (same time) waits for the next step.  Trace of (blocks of r0, r1; free):
    t=1: r0 decodes (5), r1 admitted, prefills 4 (4); free 3.  t=2: 6, 5; free 1.
    t=3: r0 takes the last block; r1 needs one more: it is the most recently admitted, so
    r1 itself is preempted (frees 5; free 5) with 2 tokens generated; no admission in a
    step that preempted.  t=4: r0 -> 8 blocks (free 4); r1 needs prompt 4 + 2 = 6 > 4: waits.
    t=5: r0 -> 9 (free 3).  t=6: r0 emits its 6th token and finishes (free 12); r1
    re-prefills 6 tokens in [6, 7], emits token 3 at 7, tokens 4..6 at 8, 9, 10."""
    coef = np.zeros((1, N_STEP_COEFS))
    coef[0, 0] = 1.0
    case = dict(
        arrival_s=np.array([0.0, 0.0]), prompt_tokens=np.array([4, 4]), output_tokens=np.array([6, 6]),
        req_pool=np.array([0, 0], dtype=np.int32), route_u=np.zeros((2, 2)),
        pool_inst_start=np.array([0, 1], dtype=np.int32), pool_router=np.array([0], dtype=np.int32),
        pool_max_context=np.array([100]), pool_max_num_seqs=np.array([4], dtype=np.int32),
        pool_max_batched_tokens=np.array([100], dtype=np.int32), pool_kv_blocks=np.array([12]),
        pool_block_tokens=np.array([1], dtype=np.int32), pool_step_code=np.array([0], dtype=np.int32),
        pool_step_coef=coef, horizon_s=np.inf,
    )
    out = assert_same(case)
    np.testing.assert_array_equal(out["out_preemptions"], [0, 1])
    np.testing.assert_array_equal(out["out_first_token_s"], [1.0, 2.0])
    np.testing.assert_array_equal(out["out_first_sched_s"], [0.0, 1.0])
    np.testing.assert_array_equal(out["out_done_s"], [6.0, 10.0])
    assert out["inst_steps"][0] == 10
    # tokens: r0 4 + 5 decodes; r1 4 + 1 decode before preemption, 6 recomputed + 3 decodes
    assert out["inst_tokens"][0] == 9 + 5 + 9


@pytest.mark.parametrize("fn", [run_iteration_level, twin_iteration_level])
@pytest.mark.parametrize("broken", ["output_zero", "prompt_zero", "unsorted", "step_code"])
def test_invalid_inputs_raise(fn, broken: str) -> None:
    """Preconditions are checked, not assumed: output 0 would otherwise decode forever."""
    case = make_case(3)
    case["arrival_s"] = np.sort(case["arrival_s"])
    if broken == "output_zero":
        case["output_tokens"] = case["output_tokens"].copy()
        case["output_tokens"][0] = 0
    elif broken == "prompt_zero":
        case["prompt_tokens"] = case["prompt_tokens"].copy()
        case["prompt_tokens"][-1] = 0
    elif broken == "unsorted":
        case["arrival_s"] = case["arrival_s"][::-1].copy()
    else:
        case["pool_step_code"] = np.full_like(case["pool_step_code"], 7)
    with pytest.raises(ValueError):
        run_case(fn, case)


def test_long_decodes_match_across_cruise_runs() -> None:
    """Outputs longer than CRUISE_MAX_STEPS with arrivals cutting runs: still exact."""
    coef = np.zeros((1, N_STEP_COEFS))
    coef[0, :4] = [0.008, 0.00065, 0.0002, 1e-7]
    n = 6
    case = dict(
        arrival_s=np.array([0.0, 0.5, 3.0, 3.0, 7.5, 20.0]), prompt_tokens=np.array([700, 5, 60, 1, 900, 33]),
        output_tokens=np.array([1500, 1200, 40, 1100, 600, 700]), req_pool=np.zeros(n, np.int32),
        route_u=np.zeros((n, 2)), pool_inst_start=np.array([0, 1], np.int32), pool_router=np.zeros(1, np.int32),
        pool_max_context=np.array([4096]), pool_max_num_seqs=np.array([8], np.int32),
        pool_max_batched_tokens=np.array([512], np.int32), pool_kv_blocks=np.array([1000]),
        pool_block_tokens=np.array([16], np.int32), pool_step_code=np.zeros(1, np.int32), pool_step_coef=coef,
        horizon_s=np.inf,
    )
    out = assert_same(case)
    assert (out["out_status"] == STATUS_DONE).all()
    case["horizon_s"] = 25.0  # a horizon inside a run of decode steps
    assert_same(case)
