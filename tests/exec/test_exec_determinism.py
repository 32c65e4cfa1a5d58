"""Parallel verification and replication give the same numbers as the serial loop, and a failed
verification task is reported against its candidate while the others still count."""

from __future__ import annotations

import pytest

from fleetplan.exec import LocalExecutor
from fleetplan.parallel import TaskFailedError, TaskOutcome, serial_map
from fleetplan.plan.optimize import optimize
from fleetplan.plan.whatif import simulated_holds, step_threshold
from fleetplan.sim.replications import replicate
from tests.exec.exec_tasks import RATE_PER_S, replicate_figures, replicate_inputs, small_optimize_inputs


@pytest.fixture(scope="module")
def serial_optimize():
    req, vs = small_optimize_inputs()
    return optimize(req, vs)


@pytest.mark.slow  # three verifications with their upward search, twice
def test_verification_is_identical_with_one_and_two_workers(serial_optimize):
    req, vs = small_optimize_inputs()
    stages = []
    with LocalExecutor(workers=2) as ex:
        parallel = optimize(req, vs, progress=lambda *a: stages.append(a), map_fn=ex)
    assert repr(parallel.verification) == repr(serial_optimize.verification)
    assert len(parallel.verification) == len(serial_optimize.verification) >= 3  # the top 3, then the bound's
    assert repr(parallel.recommendation) == repr(serial_optimize.recommendation)
    verify_calls = [a for a in stages if a[0] == "verify"]
    assert verify_calls[0] == ("verify", 0, 3) and verify_calls[-1] == ("verify", 3, 3)


def test_replicate_is_identical_with_one_and_two_workers():
    spec, wl = replicate_inputs()
    serial = replicate(spec, wl, RATE_PER_S, 3_000, seed=2, n_replications=4)
    with LocalExecutor(workers=2) as ex:
        parallel = replicate(spec, wl, RATE_PER_S, 3_000, seed=2, n_replications=4, map_fn=ex)
    assert replicate_figures(parallel) == replicate_figures(serial)
    assert len(set(serial.p99_ttft_s)) == 4  # the replications really differ from each other


def test_a_failed_verification_is_kept_against_its_candidate(serial_optimize):
    """Verification tasks are pool replications: a task that fails every attempt fails the candidates
    using that pool (kept, with the error, at their analytic counts); every other candidate's numbers
    are those of the undisturbed run."""
    req, vs = small_optimize_inputs()

    def second_task_fails(fn, tasks):
        for outcome in serial_map(fn, tasks):
            yield TaskOutcome(1, error="RuntimeError: boom (after 2 attempts)", attempts=2) if outcome.index == 1 \
                else outcome

    result = optimize(req, vs, map_fn=second_task_fails)
    failed = [v for v in result.verification if not v.passed and v.reason is not None
              and v.reason.startswith("verification task failed")]
    assert failed
    for v in failed:
        assert v.reason == "verification task failed: RuntimeError: boom (after 2 attempts)"
        assert v.verified_counts == v.analytic_counts
    for v, ref in zip(result.verification, serial_optimize.verification, strict=True):
        assert v.rank == ref.rank
        assert v in failed or repr(v) == repr(ref)
    assert result.recommendation is None or result.recommendation.rank not in {v.rank for v in failed}


def test_a_replication_that_always_fails_raises_one_line():
    spec, wl = replicate_inputs()

    def first_fails(fn, tasks):
        for outcome in serial_map(fn, tasks):
            yield TaskOutcome(0, error="ValueError: bad (after 2 attempts)", attempts=2) if outcome.index == 0 \
                else outcome

    with pytest.raises(TaskFailedError, match=r"replication 0 \(seed \d+\) failed: ValueError: bad"):
        replicate(spec, wl, RATE_PER_S, 1_000, n_replications=3, map_fn=first_fails)


def test_whatif_threshold_is_identical_with_one_and_two_workers(serial_optimize):
    """The step threshold's replications run on the executor and bisect to the same rate."""
    req, vs = small_optimize_inputs()
    fleet = serial_optimize.candidates[0]
    serial = step_threshold(simulated_holds(req, fleet, vs), RATE_PER_S)
    with LocalExecutor(workers=2) as ex:
        parallel = step_threshold(simulated_holds(req, fleet, vs, ex), RATE_PER_S)
    assert parallel == serial and serial[0] > RATE_PER_S and serial[1:] == (False, False)  # a real bisection
