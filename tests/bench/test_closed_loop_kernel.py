"""Closed-loop clients (``max_in_flight``) in the iteration kernel: twin equality and the invariant.

Invariant (vLLM's client semaphore): at every release, fewer than N requests are outstanding,
and a request is never released before its send time; with N >= the number of requests the
closed loop is the open loop bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.sim._kernels import STATUS_DONE, run_iteration_level
from tests.reference.iteration_level import run_iteration_level as twin_iteration_level
from tests.sim.test_kernels_iteration import make_case, run_case


def _closed(case: dict) -> dict:
    case = dict(case, horizon_s=np.inf, arrival_s=case["arrival_s"].copy())
    return case


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("n_in_flight", [1, 3, 16])
def test_kernel_equals_twin(seed: int, n_in_flight: int) -> None:
    case = _closed(make_case(seed, n_max=80))
    twin_case = dict(case, arrival_s=case["arrival_s"].copy())
    n_k, out_k = run_case(run_iteration_level, case, max_in_flight=n_in_flight)
    n_t, out_t = run_case(twin_iteration_level, twin_case, max_in_flight=n_in_flight)
    assert n_k == n_t
    np.testing.assert_array_equal(case["arrival_s"], twin_case["arrival_s"])  # the release times
    for name in out_k:
        np.testing.assert_array_equal(out_k[name], out_t[name], err_msg=name)


@pytest.mark.parametrize("seed", range(10))
def test_at_most_n_outstanding_and_never_early(seed: int) -> None:
    n = 4
    case = _closed(make_case(seed, n_max=120))
    send = case["arrival_s"].copy()
    _, out = run_case(run_iteration_level, case, max_in_flight=n)
    release = case["arrival_s"]
    assert np.all(release >= send)
    assert np.all(np.diff(release) >= 0)
    done = out["out_status"] == STATUS_DONE
    routed = out["out_inst"] >= 0
    for i in np.flatnonzero(routed):
        t = release[i]
        # requests released before i (routed) and not yet completed at t (completions at t free a slot first)
        earlier = np.flatnonzero(routed[:i])
        outstanding = np.sum(~done[earlier] | (out["out_done_s"][earlier] > t))
        assert outstanding < n


@pytest.mark.parametrize("seed", range(10))
def test_large_limit_is_the_open_loop(seed: int) -> None:
    case = _closed(make_case(seed, n_max=80))
    open_case = dict(case, arrival_s=case["arrival_s"].copy())
    _, out_closed = run_case(run_iteration_level, case, max_in_flight=10_000)
    _, out_open = run_case(run_iteration_level, open_case)
    for name in out_open:
        np.testing.assert_array_equal(out_closed[name], out_open[name], err_msg=name)


# ---- the feature kernel (CUDA graphs, speculative decoding, prefix caching, policies) ----------------------


def _run_features(fn, case, feats, extras, n_in_flight):
    from fleetplan.sim.features.run import allocate_outputs
    from tests.reference.features_level import OUT_NAMES
    from tests.sim.test_features_cases import kernel_groups

    n, n_inst, p = len(case["arrival_s"]), int(case["pool_inst_start"][-1]), len(case["pool_router"])
    out = allocate_outputs(n, n_inst, p, log_itl=True)
    for a in out.values():
        a.fill(77)
    n_steps = fn(*kernel_groups(case, feats, extras, out), n_in_flight)
    return n_steps, dict(zip(OUT_NAMES, out.values(), strict=True))


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("n_in_flight", [1, 5])
def test_feature_kernel_equals_twin(seed: int, n_in_flight: int) -> None:
    from fleetplan.sim._kernels.features.level import run_iteration_features
    from tests.reference.features_level import run_iteration_features as twin_features
    from tests.sim.test_features_cases import make_feature_case

    case, feats, extras = make_feature_case(seed, sessions=seed % 2 == 0, n_max=60)
    case["horizon_s"] = np.inf
    n1, o1 = _run_features(run_iteration_features, case, feats, extras, n_in_flight)
    n2, o2 = _run_features(twin_features, case, feats, extras, n_in_flight)
    assert n1 == n2
    for name in o1:
        np.testing.assert_array_equal(o1[name], o2[name], err_msg=name)
    fresh = (extras.prev_req < 0) & (o1["out_inst"] >= 0)
    assert np.all(o1["out_release_s"][fresh] >= case["arrival_s"][fresh])
