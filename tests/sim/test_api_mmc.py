"""Request-level ``simulate`` on an M/M/c-equivalent fleet matches Erlang-C.

Theorem (M/M/c, FCFS): with Poisson arrivals at λ, c servers and exponential
service of mean 1/μ, E[W] = C(c, λ/μ) / (cμ - λ)  (core paper eq. 1; Erlang-C).

Setup: one instance with c = max_num_seqs slots; prompts of 1 token (one
prefill iteration), outputs geometric with mean m, step time t_iter(c) = t.
A request holds its slot for (1 + L_out) t, a shifted geometric of mean
(1 + m) t with Cs² = m(m-1)/(m+1)² = 0.997 at m = 999 — exponential to within
0.15 % of the two-moment factor (1 + Cs²)/2, far below the sampling tolerance.

Tolerance: replications with independent seeds give a Student-t interval for
E[W]; the exact value must lie in the 99.9 % interval (warm-up trimmed: 10 %).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.metrics import student_t_interval
from fleetplan.perf.linear import LinearStepModel
from fleetplan.queueing.erlang import erlang_c
from fleetplan.rng import task_seed
from fleetplan.sim.engine import simulate
from fleetplan.sim.spec import FleetSpec, PoolSpec, SchedulerLimits

C_SLOTS = 4
MEAN_OUTPUT_TOKENS = 999
STEP_S = 0.001  # t_iter(c): W = 1 ms, H = 0 -> mean service (1 + 999) ms = 1 s
RHO = 0.7
N_REQUESTS = 50_000
N_REPLICATIONS = 10


@dataclass(frozen=True)
class GeometricOutputs:
    name: str = "geometric"
    trace: None = None

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        return np.ones(n, np.int64), rng.geometric(1.0 / MEAN_OUTPUT_TOKENS, n).astype(np.int64)


def test_request_level_mean_wait_matches_erlang_c():
    step = LinearStepModel(STEP_S, 0.0, 0.0)
    spec = FleetSpec((PoolSpec("mmc", "a100", 1, 65536, step, SchedulerLimits(C_SLOTS, 512, 1 << 20)),))
    mean_service_s = (1 + MEAN_OUTPUT_TOKENS) * STEP_S
    lam = RHO * C_SLOTS / mean_service_s
    exact_s = erlang_c(C_SLOTS, lam * mean_service_s) / (C_SLOTS / mean_service_s - lam)
    waits = []
    for r in range(N_REPLICATIONS):
        res = simulate(spec, GeometricOutputs(), lam, n_requests=N_REQUESTS, level="request",
                       seed=task_seed(2024, "mmc", r), warmup_fraction=0.1)
        waits.append(res.summary.overall.queue_wait.mean_s)
    mean, lo, hi = student_t_interval(np.array(waits), confidence=0.999)
    assert lo <= exact_s <= hi, (exact_s, mean, lo, hi)
    assert (hi - lo) / exact_s < 0.25  # the test has power: interval narrower than ±12.5 %
