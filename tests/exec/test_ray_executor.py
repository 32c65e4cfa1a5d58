"""The Ray executor on a real local Ray cluster started by the test (2 CPUs, loopback): same results
as the local executor, worker deaths survived, failures reported, user errors raised."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleetplan.exec import LocalExecutor, make_executor
from fleetplan.parallel import in_input_order
from fleetplan.plan.optimize import optimize
from fleetplan.sim.replications import replicate
from tests.exec.exec_tasks import (
    RATE_PER_S,
    Job,
    replicate_figures,
    replicate_inputs,
    run_job,
    small_optimize_inputs,
)

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow  # starting a Ray cluster takes several seconds

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ray_executor():
    if ray.is_initialized():
        ray.shutdown()
    pythonpath = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": pythonpath}})
    executor = make_executor("ray", task_timeout_s=600.0)
    yield executor
    executor.close()  # leaves the test's session alone
    assert ray.is_initialized()
    ray.shutdown()


def test_ray_returns_the_same_results_as_local(ray_executor, tmp_path):
    jobs = [Job(k, seed=21, marker_dir=str(tmp_path)) for k in range(6)]
    on_ray = in_input_order(ray_executor.map(run_job, jobs), 6)
    with LocalExecutor(workers=2) as local:
        on_local = in_input_order(local.map(run_job, jobs), 6)
    assert [o.value for o in on_ray] == [o.value for o in on_local]
    assert ray_executor.n_workers == 2


def test_ray_replications_equal_local_and_serial(ray_executor):
    spec, wl = replicate_inputs()
    serial = replicate(spec, wl, RATE_PER_S, 3_000, seed=2, n_replications=4)
    on_ray = replicate(spec, wl, RATE_PER_S, 3_000, seed=2, n_replications=4, map_fn=ray_executor)
    assert replicate_figures(on_ray) == replicate_figures(serial)


def test_ray_verification_equals_serial(ray_executor):
    req, vs = small_optimize_inputs()
    serial = optimize(req, vs)
    on_ray = optimize(req, vs, map_fn=ray_executor)
    assert repr(on_ray.verification) == repr(serial.verification)
    assert all(v.reason is None or "task failed" not in v.reason for v in on_ray.verification)


def test_ray_survives_a_killed_worker_and_reports_one_that_always_dies(ray_executor, tmp_path):
    modes = {1: "die_once", 3: "die_always", 4: "raise_once"}
    jobs = [Job(k, modes.get(k, "ok"), str(tmp_path), seed=8) for k in range(6)]
    out = in_input_order(ray_executor.map(run_job, jobs), 6)
    assert [o.ok for o in out] == [True, True, True, False, True, True]
    assert out[1].attempts == 2 and out[4].attempts == 2 and out[3].attempts == 2
    assert out[3].error.startswith("Ray task failed: ") and out[3].error.endswith("(after 2 attempts)")
    expected = in_input_order(LocalExecutor(workers=1).map(run_job, [Job(k, seed=8) for k in range(6)]), 6)
    assert [o.value for i, o in enumerate(out) if i != 3] == [o.value for i, o in enumerate(expected) if i != 3]


def test_ray_reraises_user_errors(ray_executor):
    from fleetplan.errors import ConfigError

    with pytest.raises(ConfigError, match="task 2: bad input value"):
        list(ray_executor.map(run_job, [Job(0), Job(2, "user_error")]))


def test_ray_times_out_a_hung_task_and_keeps_working(ray_executor):
    # Ray's clock starts at submission (worker start-up included), hence a few seconds, not one.
    quick = make_executor("ray", task_timeout_s=4.0)
    (out,) = quick.map(run_job, [Job(0, "sleep")])
    assert not out.ok and out.attempts == 2 and out.error == "task timed out after 4 s (after 2 attempts)"
    after = in_input_order(ray_executor.map(run_job, [Job(1), Job(2)]), 2)
    assert [o.value[0] for o in after] == [1, 2]
