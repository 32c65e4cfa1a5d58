"""Task functions for the executor tests (importable by spawned and Ray workers as
``tests.exec.exec_tasks``): deterministic work, flaky tasks that fail or kill their worker on the
first attempt (a marker file records the attempt), tasks that always fail, a slow task; and the
small verification / replication inputs shared by the local and Ray tests."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.hardware import load_catalog
from fleetplan.plan.optimize import OptimizeRequest, resolve_gpus
from fleetplan.plan.verify import VerifySettings
from fleetplan.rng import stream
from fleetplan.sim.builders import build_pool
from fleetplan.sim.spec import FleetSpec
from fleetplan.workload import load_workload


@dataclass(frozen=True)
class Job:
    """One test task: ``key`` names it, ``mode`` says how it misbehaves, ``marker_dir`` records attempts."""

    key: int
    mode: str = "ok"  # ok | raise_once | die_once | raise_always | die_always | sleep | user_error | unknown_name
    marker_dir: str = ""
    seed: int = 0


def _first_attempt(job: Job) -> bool:
    marker = Path(job.marker_dir) / f"attempted-{job.key}"
    if marker.exists():
        return False
    marker.write_text(str(os.getpid()))
    return True


def run_job(job: Job) -> tuple[int, float]:
    """``(key, a number drawn from the task's own seeded stream)`` unless ``mode`` says otherwise."""
    if job.mode == "raise_once" and _first_attempt(job):
        raise RuntimeError(f"flaky task {job.key} fails on its first attempt")
    if job.mode == "die_once" and _first_attempt(job):
        os._exit(1)
    if job.mode == "raise_always":
        raise ValueError(f"task {job.key} always fails")
    if job.mode == "die_always":
        os._exit(1)
    if job.mode == "sleep":
        time.sleep(60)
    if job.mode == "user_error":
        raise ConfigError(f"task {job.key}: bad input value; fix it")
    if job.mode == "unknown_name":
        raise UnknownNameError("widget", "bogus", ["a", "b"])
    return job.key, float(stream(job.seed, "job", job.key).random())


def pid_of(_: object) -> int:
    """The worker's process id."""
    return os.getpid()


def slow_square(x: int) -> int:
    """``x * x`` after a short sleep, so several tasks are in flight at once."""
    time.sleep(0.3)
    return int(np.square(x))


SLO_S = 0.5
RATE_PER_S = 100.0


def small_optimize_inputs():
    """Top-3 verification of the bundled LMSYS workload, small enough for a unit test."""
    req = OptimizeRequest(workload=load_workload("lmsys"), gpus=resolve_gpus(load_catalog(), None),
                          slo_ttft_s=SLO_S, rate_per_s=RATE_PER_S)
    vs = VerifySettings(slo_ttft_s=SLO_S, slo_tpot_s=None, rate_per_s=RATE_PER_S, max_gpus=10_000, top_k=3,
                        n_requests=3_000, n_replications=2, seed=3)
    return req, vs


def replicate_inputs():
    a100 = load_catalog().get("A100-80GB")
    spec = FleetSpec((build_pool(a100, "short", 3, 4096), build_pool(a100, "long", 5, 65_536)))
    return spec, load_workload("lmsys")


def replicate_figures(rep) -> tuple:
    """Everything a ReplicatedResult reports, comparable with == (repr keeps NaN comparable)."""
    return (rep.seeds, rep.p99_ttft_s, rep.p99_tpot_s, rep.p99_ttft_interval_s, rep.p99_tpot_interval_s,
            repr(rep.summaries))
