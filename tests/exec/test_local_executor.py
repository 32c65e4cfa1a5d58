"""The local process-pool executor: same results for 1 and N workers, retries, worker deaths,
timeouts and Ctrl-C (every test asserts results, not speed)."""

from __future__ import annotations

import os
import time

import pytest

from fleetplan.cli.errors import render_error
from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.exec import LocalExecutor, make_executor
from fleetplan.parallel import in_input_order
from tests.exec.exec_tasks import Job, pid_of, run_job, slow_square


@pytest.fixture(scope="module")
def pool2():
    with LocalExecutor(workers=2) as ex:
        yield ex


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_one_and_two_workers_give_identical_results(tmp_path, pool2):
    jobs = [Job(k, seed=11, marker_dir=str(tmp_path)) for k in range(6)]
    serial = in_input_order(LocalExecutor(workers=1).map(run_job, jobs), len(jobs))
    parallel = in_input_order(pool2.map(run_job, jobs), len(jobs))
    assert [o.value for o in serial] == [o.value for o in parallel]
    assert [o.value[0] for o in parallel] == list(range(6))


def test_outcomes_carry_the_task_index_and_progress_counts_up(pool2):
    seen = []
    out = list(pool2.map(slow_square, [3, 1, 2, 5], progress=lambda d, t: seen.append((d, t))))
    assert sorted((o.index, o.value) for o in out) == [(0, 9), (1, 1), (2, 4), (3, 25)]
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_the_pool_is_kept_across_map_calls(pool2):
    list(pool2.map(slow_square, [1, 2]))
    before = set(pool2.worker_pids())
    pids = {o.value for o in pool2.map(pid_of, list(range(6)))}
    assert 1 <= len(before) <= 2 and pids <= before and set(pool2.worker_pids()) == before


def test_a_raising_task_is_retried_once(tmp_path, pool2):
    jobs = [Job(0, "raise_once", str(tmp_path)), Job(1, "raise_always", str(tmp_path)), Job(2)]
    out = in_input_order(pool2.map(run_job, jobs), 3)
    assert out[0].ok and out[0].attempts == 2 and out[0].value[0] == 0
    assert not out[1].ok and out[1].attempts == 2
    assert out[1].error.startswith("ValueError: task 1 always fails")
    assert out[2].ok and out[2].attempts == 1


def test_a_worker_killed_mid_run_is_survived(tmp_path):
    # Task 1 calls os._exit(1) on its first attempt while tasks 0 and 2 may be in flight.
    jobs = [Job(k, "die_once" if k == 1 else "ok", str(tmp_path), seed=5) for k in range(5)]
    with LocalExecutor(workers=2) as ex:
        out = in_input_order(ex.map(run_job, jobs), len(jobs))
    expected = in_input_order(LocalExecutor(workers=1).map(run_job, [Job(k, seed=5) for k in range(5)]), 5)
    assert all(o.ok for o in out)
    assert [o.value for o in out] == [o.value for o in expected]
    assert out[1].attempts == 2  # died once (alone: charged; with others in flight: re-run alone), then succeeded
    assert (tmp_path / "attempted-1").exists()


def test_a_task_that_always_kills_its_worker_is_reported_and_the_rest_complete(tmp_path):
    jobs = [Job(k, "die_always" if k == 2 else "ok", str(tmp_path)) for k in range(5)]
    with LocalExecutor(workers=2) as ex:
        out = in_input_order(ex.map(run_job, jobs), len(jobs))
    assert [o.ok for o in out] == [True, True, False, True, True]
    assert out[2].attempts >= 2  # 3 when its first death also took a sibling down (that run is not charged)
    assert out[2].error == "worker process died while running the task (after 2 attempts)"
    assert [o.value[0] for o in out if o.ok] == [0, 1, 3, 4]
    assert all(o.attempts <= 2 for i, o in enumerate(out) if i != 2)  # innocents: re-run at most once, never failed


def test_a_hung_task_times_out_and_the_run_finishes(tmp_path):
    jobs = [Job(0, "sleep"), Job(1), Job(2)]
    t0 = time.monotonic()
    with LocalExecutor(workers=2, task_timeout_s=1.0, poll_s=0.05) as ex:
        out = in_input_order(ex.map(run_job, jobs), 3)
    assert time.monotonic() - t0 < 30
    assert not out[0].ok and out[0].error == "task timed out after 1 s (after 2 attempts)"
    assert out[1].ok and out[2].ok


def test_ctrl_c_cancels_and_kills_the_workers():
    ex = LocalExecutor(workers=2)
    list(ex.map(slow_square, [1, 2]))
    pids = ex.worker_pids()

    def interrupt(done: int, total: int) -> None:
        raise KeyboardInterrupt

    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        list(ex.map(run_job, [Job(0), Job(1, "sleep"), Job(2, "sleep")], progress=interrupt))
    assert time.monotonic() - t0 < 10
    assert ex.worker_pids() == ()
    assert not any(_alive(pid) for pid in pids)


def test_a_user_error_in_a_worker_stops_the_run_with_that_error(tmp_path):
    with LocalExecutor(workers=2) as ex:
        with pytest.raises(ConfigError, match="task 1: bad input value"):
            list(ex.map(run_job, [Job(0), Job(1, "user_error"), Job(2)]))
        assert ex.worker_pids() == ()


def test_make_executor_rejects_bad_names_and_mixed_options():
    with pytest.raises(UnknownNameError, match="unknown executor 'dask': valid executor names are local, ray"):
        make_executor("dask")
    # the CLI's wording (render_error) names the flags; the library's names the parameters
    with pytest.raises(ConfigError) as err:
        make_executor("local", ray_address="auto")
    assert err.value.param == "ray_address" and "applies to --executor ray only" in render_error(err.value)
    with pytest.raises(ConfigError) as err:
        make_executor("ray", workers=2)
    assert err.value.param == "workers" and "applies to --executor local only" in render_error(err.value)
    with pytest.raises(ConfigError) as err:
        LocalExecutor(workers=0)
    assert err.value.value == 0 and "--workers 0 is invalid" in render_error(err.value)
    assert make_executor("local", workers=3).n_workers == 3


SIGINT_SCRIPT = """
import sys
from fleetplan.exec import LocalExecutor
from tests.exec.exec_tasks import Job, run_job, slow_square
if __name__ == "__main__":
    ex = LocalExecutor(workers=2)
    list(ex.map(slow_square, [1, 2]))
    print(" ".join(map(str, ex.worker_pids())), flush=True)
    list(ex.map(run_job, [Job(0, "sleep"), Job(1, "sleep"), Job(2, "sleep")]))
"""


def test_a_real_sigint_stops_the_run_and_its_workers(tmp_path):
    import signal
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "interrupt_me.py"
    script.write_text(SIGINT_SCRIPT)
    repo = str(Path(__file__).resolve().parents[2])
    proc = subprocess.Popen([sys.executable, str(script)], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": repo})
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert pids
    time.sleep(1.0)  # the sleeping tasks are running
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert stderr.rstrip().endswith("KeyboardInterrupt")
    assert not any(_alive(pid) for pid in pids)
