"""The in-process thread executor: the MapFn contract, identical verification and headroom, and the
kernels really running side by side (they release the GIL)."""

from __future__ import annotations

import threading
import time

import numba
import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.exec.threads import ThreadExecutor
from fleetplan.parallel import MAX_ATTEMPTS
from fleetplan.plan.headroom import HeadroomSettings
from fleetplan.plan.optimize import optimize
from fleetplan.plan.verify import pool_tasks, run_pool_tasks
from fleetplan.sim import steady
from tests.exec.exec_tasks import Job, run_job, small_optimize_inputs


def test_every_task_once_with_its_index_and_progress(tmp_path):
    seen = []
    with ThreadExecutor(3) as ex:
        out = list(ex.map(run_job, [Job(k, marker_dir=str(tmp_path)) for k in range(7)],
                          progress=lambda d, t: seen.append((d, t))))
    assert sorted(o.index for o in out) == list(range(7))
    assert all(o.ok and o.value[0] == o.index for o in out)
    assert seen == [(k, 7) for k in range(1, 8)]


def test_retry_once_failures_as_data_and_user_errors_raised(tmp_path):
    with ThreadExecutor(2) as ex:
        (flaky,) = ex.map(run_job, [Job(1, "raise_once", str(tmp_path))])
        assert flaky.ok and flaky.attempts == 2
        out = sorted(ex.map(run_job, [Job(0), Job(2, "raise_always")]), key=lambda o: o.index)
        assert [o.ok for o in out] == [True, False] and out[1].attempts == MAX_ATTEMPTS
        with pytest.raises(ConfigError, match="bad input value"):
            list(ex.map(run_job, [Job(3, "user_error"), Job(4)]))


def test_bad_thread_counts_are_refused():
    with pytest.raises(ConfigError, match="whole number"):
        ThreadExecutor(0)


@pytest.mark.slow  # a verification and a headroom search, twice
def test_verification_and_headroom_are_identical_on_threads():
    req, vs = small_optimize_inputs()
    steady._STREAM_CACHE.clear()
    serial = optimize(req, vs, headroom=HeadroomSettings())
    steady._STREAM_CACHE.clear()
    with ThreadExecutor(2) as ex:
        threaded = optimize(req, vs, map_fn=ex, headroom=HeadroomSettings())
    assert repr(threaded.verification) == repr(serial.verification)
    assert repr(threaded.recommendation) == repr(serial.recommendation)
    assert threaded.headroom is not None
    assert threaded.headroom.step_slowdown_max == serial.headroom.step_slowdown_max
    assert threaded.headroom.rate_multiplier_max == serial.headroom.rate_multiplier_max


def test_the_same_pool_stream_drawn_by_several_threads_is_one_stream():
    req, vs = small_optimize_inputs()
    fleet = optimize(req, vs).recommendation
    gpus = {g.name: g for g in req.gpus}
    i = next(i for i, p in enumerate(fleet.pools) if p.count > 0)
    tasks = pool_tasks(fleet, i, gpus, req.workload, vs, 4000, 0.0) * 4  # same seeds, four times over
    steady._STREAM_CACHE.clear()
    with ThreadExecutor(4) as ex:
        threaded = [o.value for o in run_pool_tasks(tasks, ex)]
    steady._STREAM_CACHE.clear()
    serial = [o.value for o in run_pool_tasks(tasks)]
    assert [r.p_ttft_s for r in threaded] == [r.p_ttft_s for r in serial]


@pytest.mark.skipif(numba.config.DISABLE_JIT, reason="compiled kernels only")
def test_kernels_release_the_gil():
    """A kernel call lets another thread's Python run meanwhile (nogil=True): what the threads buy."""
    from fleetplan.sim._kernels import run_request_level

    def inputs(n: int) -> tuple:  # bench_des's M/M/64 at rho 0.8
        rng = np.random.default_rng(0)
        arrival = np.cumsum(rng.exponential(1.0 / (0.8 * 64), n))
        service = rng.exponential(1.0, n)
        return (arrival, service, 0.1 * service, np.full(n, 100, np.int64), np.zeros(n, np.int32), rng.random((n, 2)),
                np.array([0, 1], np.int32), np.array([0], np.int32), np.array([4096]), np.full(1, 64, np.int32),
                np.inf, np.empty(n, np.int32), np.empty(n), np.empty(n), np.empty(n), np.empty(n, np.int8),
                np.empty(1))

    run_request_level(*inputs(10))  # compile or load
    args = inputs(3_000_000)
    ticks: list[float] = []
    started, done = threading.Event(), threading.Event()

    def count() -> None:
        started.set()
        while not done.is_set():
            ticks.append(time.perf_counter())

    t = threading.Thread(target=count)
    t.start()
    started.wait()
    try:
        t0 = time.perf_counter()
        run_request_level(*args)  # ~0.1 s
        t1 = time.perf_counter()
    finally:
        done.set()
        t.join()
    # The middle half of the call: a kernel holding the GIL leaves no tick there (the other thread
    # runs only before the call and after it returns).
    lo, hi = t0 + 0.25 * (t1 - t0), t0 + 0.75 * (t1 - t0)
    assert sum(lo < x < hi for x in ticks) > 100
