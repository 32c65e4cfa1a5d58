"""The MapFn contract in the base layer: serial default, retry once, failures as data, user errors raised."""

from __future__ import annotations

import pytest

from fleetplan.errors import ConfigError, FleetplanError
from fleetplan.parallel import MAX_ATTEMPTS, TaskOutcome, call_task, in_input_order, serial_map
from tests.exec.exec_tasks import Job, run_job


def test_serial_map_yields_every_task_in_order_with_its_index(tmp_path):
    seen = []
    out = list(serial_map(run_job, [Job(k, marker_dir=str(tmp_path)) for k in range(4)],
                          progress=lambda d, t: seen.append((d, t))))
    assert [o.index for o in out] == [0, 1, 2, 3]
    assert [o.value[0] for o in out] == [0, 1, 2, 3]
    assert all(o.ok and o.attempts == 1 for o in out)
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_a_task_that_raises_once_is_retried_and_succeeds(tmp_path):
    (out,) = serial_map(run_job, [Job(7, "raise_once", str(tmp_path))])
    assert out.ok and out.attempts == 2 and out.value[0] == 7


def test_a_task_that_always_raises_is_reported_and_the_rest_complete(tmp_path):
    jobs = [Job(0, marker_dir=str(tmp_path)), Job(1, "raise_always", str(tmp_path)), Job(2, marker_dir=str(tmp_path))]
    out = list(serial_map(run_job, jobs))
    assert [o.ok for o in out] == [True, False, True]
    assert out[1].attempts == MAX_ATTEMPTS == 2
    assert out[1].error == "ValueError: task 1 always fails"


def test_user_errors_are_raised_not_retried(tmp_path):
    with pytest.raises(ConfigError, match="bad input value"):
        list(serial_map(run_job, [Job(3, "user_error", str(tmp_path))]))


def test_call_task_makes_user_errors_picklable():
    import pickle

    ok, raised = call_task(run_job, Job(1, "unknown_name"))
    assert not ok
    err = pickle.loads(pickle.dumps(raised)).user_error
    assert isinstance(err, FleetplanError)
    assert str(err) == "unknown widget 'bogus': valid widget names are a, b"


def test_in_input_order_sorts_and_detects_missing():
    outs = [TaskOutcome(2, "c"), TaskOutcome(0, "a"), TaskOutcome(1, "b")]
    assert [o.value for o in in_input_order(outs, 3)] == ["a", "b", "c"]
    with pytest.raises(ValueError, match=r"\[1\]"):
        in_input_order([TaskOutcome(0), TaskOutcome(2)], 3)
