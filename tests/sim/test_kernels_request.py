"""The request-level kernel equals its pure-Python twin exactly, and FCFS hand cases hold."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.sim._kernels import STATUS_DONE, STATUS_REJECTED, STATUS_UNFINISHED, run_request_level
from tests.reference.request_level import run_request_level as twin_request_level

REQ_OUT = (("out_inst", np.int32), ("out_start_s", np.float64), ("out_first_token_s", np.float64),
           ("out_done_s", np.float64), ("out_status", np.int8))


def make_case(seed: int, n_max: int = 300) -> dict:
    rng = np.random.default_rng(seed)
    n_req = int(rng.integers(1, n_max + 1))
    n_pools = int(rng.integers(1, 4))
    n_inst = rng.integers(1, 5, size=n_pools)
    pool_inst_start = np.concatenate([[0], np.cumsum(n_inst)]).astype(np.int32)
    service = rng.exponential(1.0, n_req)
    if rng.random() < 0.3:  # coarse times: many exact ties between arrivals and departures
        service = np.round(service, 1)
    arrival = np.sort(np.cumsum(rng.exponential(1 / rng.uniform(0.5, 20.0), n_req)))
    if rng.random() < 0.3:
        arrival = np.round(arrival, 1)
    return dict(
        arrival_s=arrival, service_s=service, first_token_offset_s=service * rng.random(n_req),
        total_tokens=rng.integers(1, 2000, size=n_req).astype(np.int64),
        req_pool=rng.integers(-1 if rng.random() < 0.5 else 0, n_pools, size=n_req).astype(np.int32),
        route_u=rng.random((n_req, 2)), pool_inst_start=pool_inst_start,
        pool_router=rng.integers(0, 4, size=n_pools).astype(np.int32),
        pool_max_context=rng.choice([500, 1000, 4000], size=n_pools).astype(np.int64),
        inst_slots=rng.integers(1, 6, size=int(pool_inst_start[-1])).astype(np.int32),
        horizon_s=np.inf if rng.random() < 0.6 else float(arrival[-1] * rng.uniform(0.3, 1.5)),
    )


def run_case(fn, case: dict) -> tuple[int, dict]:
    n_req = len(case["arrival_s"])
    outs = {name: np.full(n_req, 77, dtype=dt) for name, dt in REQ_OUT}
    outs["inst_busy_slot_s"] = np.full(len(case["inst_slots"]), 77.0)
    return fn(**case, **outs), outs


def assert_same(case: dict) -> dict:
    n_kernel, out_kernel = run_case(run_request_level, case)
    n_twin, out_twin = run_case(twin_request_level, case)
    assert n_kernel == n_twin
    for name in out_kernel:
        np.testing.assert_array_equal(out_kernel[name], out_twin[name], err_msg=name)
    return out_kernel


@pytest.mark.parametrize("seed", range(80))
def test_kernel_matches_twin_exactly(seed: int) -> None:
    out = assert_same(make_case(seed))
    done = out["out_status"] == STATUS_DONE
    assert np.all(out["out_inst"][out["out_status"] == STATUS_REJECTED] == -1)
    assert np.all(out["out_start_s"][done] <= out["out_done_s"][done])


def test_cases_cover_rejection_and_horizon() -> None:
    statuses = np.concatenate([run_case(run_request_level, make_case(s))[1]["out_status"] for s in range(80)])
    assert {STATUS_DONE, STATUS_REJECTED, STATUS_UNFINISHED} <= set(statuses.tolist())


def _one_instance(arrival, service, slots, horizon=np.inf, router=0) -> dict:
    n = len(arrival)
    return dict(
        arrival_s=np.asarray(arrival, float), service_s=np.asarray(service, float),
        first_token_offset_s=np.full(n, 0.25), total_tokens=np.full(n, 10, dtype=np.int64),
        req_pool=np.zeros(n, dtype=np.int32), route_u=np.zeros((n, 2)),
        pool_inst_start=np.array([0, 1], dtype=np.int32), pool_router=np.array([router], dtype=np.int32),
        pool_max_context=np.array([100]), inst_slots=np.array([slots], dtype=np.int32), horizon_s=horizon,
    )


def test_fcfs_two_servers_hand_computed() -> None:
    """Arrivals 0, 0, 1, 1.5 with services 4, 2, 3, 1 on 2 servers (FCFS):
    starts 0, 0, max(1, 2)=2, max(1.5, 4)=4; dones 4, 2, 5, 5; busy 4+2+3+1 = 10 slot-s."""
    out = assert_same(_one_instance([0, 0, 1, 1.5], [4, 2, 3, 1], slots=2))
    np.testing.assert_array_equal(out["out_start_s"], [0, 0, 2, 4])
    np.testing.assert_array_equal(out["out_done_s"], [4, 2, 5, 5])
    np.testing.assert_array_equal(out["out_first_token_s"], [0.25, 0.25, 2.25, 4.25])
    assert out["inst_busy_slot_s"][0] == 10.0


def test_horizon_marks_late_starts_unfinished() -> None:
    """Same case with horizon 3: request 3 starts at 4 > 3 -> unfinished; busy clipped at 3:
    3 + 2 + 1 = 6 slot-s."""
    out = assert_same(_one_instance([0, 0, 1, 1.5], [4, 2, 3, 1], slots=2, horizon=3.0))
    np.testing.assert_array_equal(out["out_status"], [STATUS_DONE] * 3 + [STATUS_UNFINISHED])
    assert out["out_done_s"][3] == np.inf
    assert out["inst_busy_slot_s"][0] == 6.0


def test_round_robin_and_least_outstanding_routing() -> None:
    """Three instances, one slot each.  Round robin sends requests 0..5 to 0,1,2,0,1,2.
    Least outstanding with u0 = 0 scans from instance 0: arrivals every 1 s with service
    2.5 s -> instance 0, 1, 2 (0 busy until 2.5, 1 until 3.5), then at t=3 instance 0 is
    free again -> 0, then 1 (free at 3.5 < 4), then 2."""
    case = _one_instance(np.arange(6.0), np.full(6, 2.5), slots=1, router=1)
    case["pool_inst_start"] = np.array([0, 3], dtype=np.int32)
    case["inst_slots"] = np.ones(3, dtype=np.int32)
    np.testing.assert_array_equal(assert_same(case)["out_inst"], [0, 1, 2, 0, 1, 2])
    case["pool_router"] = np.array([0], dtype=np.int32)
    np.testing.assert_array_equal(assert_same(case)["out_inst"], [0, 1, 2, 0, 1, 2])


@pytest.mark.parametrize("fn", [run_request_level, twin_request_level])
def test_unsorted_arrivals_raise(fn) -> None:
    case = _one_instance([0.0, 2.0, 1.0], [1.0, 1.0, 1.0], slots=1)
    with pytest.raises(ValueError):
        run_case(fn, case)
