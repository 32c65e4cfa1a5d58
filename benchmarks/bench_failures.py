"""Speed of the iteration-level kernel with instance failures on vs off (plain script; prints figures).

    python benchmarks/bench_failures.py            # 10^6 requests
    python benchmarks/bench_failures.py --quick    # 10^5 requests

The core paper's Table 1 fleet (3 A100s for <= 4,096 tokens + 5 A100s up to 65,536, built as in
``bench_des.py``), the bundled LMSYS lengths, lambda = 100 req/s.  Rows:

* off: ``run_iteration_level`` (no failure code path taken);
* empty schedule: ``run_iteration_level_failures`` with no events (the failure machinery's overhead);
* catalog: A100-80GB MTBF 3,692 h (6.5 failures / 1000 node-days), MTTR 48 h, stationary start;
* stress: MTBF 1 h, MTTR 10 min; heavy: MTBF 10 min, MTTR 1 min (exponential repairs).

Schedules are drawn with ``fleetplan.sim.failures.draw_failure_schedule`` over the arrival span
(drawing time printed apart).  Timings are the best of ``REPEATS`` interleaved rounds after a warm-up call (JIT).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_des import iteration_outputs, two_pool_fleet, workload

from fleetplan.sim._kernels import STATUS_DONE
from fleetplan.sim._kernels.groups import FailureInputs, iteration_groups
from fleetplan.sim._kernels.iteration_level import run_iteration_level, run_iteration_level_failures
from fleetplan.sim.failures import FailureSpec, draw_failure_schedule

REPEATS = 3
HOUR_S = 3600.0
SCENARIOS = (
    ("off", None),
    ("empty schedule", FailureSpec(mtbf_s=np.inf, mttr_s=0.0)),
    ("catalog A100", FailureSpec(mtbf_s=86_400.0 / 0.0065, mttr_s=48 * HOUR_S)),
    ("stress 1 h / 10 min", FailureSpec(mtbf_s=HOUR_S, mttr_s=600.0)),
    ("heavy 10 min / 1 min", FailureSpec(mtbf_s=600.0, mttr_s=60.0)),
)


def run_one(req: dict, fleet: dict, schedule) -> tuple[float, int, dict]:
    """One timed kernel call; returns (seconds, steps, outputs incl. ``out_failures``)."""
    n, n_inst = len(req["arrival_s"]), int(fleet["pool_inst_start"][-1])
    out = iteration_outputs(n, n_inst)
    out_failures = np.zeros(n, np.int32)
    t0 = time.perf_counter()
    if schedule is None:
        n_steps = run_iteration_level(*iteration_groups(req | fleet | out), fleet["horizon_s"])
    else:
        requests, pools, outputs = iteration_groups(req | fleet | out)
        n_steps = run_iteration_level_failures(requests, pools, FailureInputs(schedule[0], schedule[1]), outputs,
                                               out_failures, fleet["horizon_s"])
    elapsed = time.perf_counter() - t0
    return elapsed, n_steps, dict(out, out_failures=out_failures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10x fewer requests")
    n = 100_000 if parser.parse_args().quick else 1_000_000
    req, source = workload(np.random.default_rng(20260601), 100.0, n)
    fleet = two_pool_fleet(3, 5)
    inst_pool = np.repeat([0, 1], [3, 5])
    span_s = float(req["arrival_s"][-1])
    print(f"Table 1 fleet 3 + 5 A100, LMSYS ({source}), lambda 100/s, N {n:,} over {span_s / HOUR_S:.2f} h; "
          f"best of {REPEATS}")
    schedules, draw_s = [], []
    for _, spec in SCENARIOS:
        t0 = time.perf_counter()
        schedules.append(None if spec is None else draw_failure_schedule(spec, inst_pool, span_s, seed=11))
        draw_s.append(time.perf_counter() - t0)
    for schedule in schedules:  # warm-up: load or compile the kernels
        run_one(req, fleet, schedule)
    best = [np.inf] * len(SCENARIOS)
    results = [None] * len(SCENARIOS)
    for _ in range(REPEATS):  # interleaved rounds, so machine noise hits every scenario alike
        for j, schedule in enumerate(schedules):
            elapsed, n_steps, out = run_one(req, fleet, schedule)
            best[j] = min(best[j], elapsed)
            results[j] = (n_steps, out)
    for j, (label, _) in enumerate(SCENARIOS):
        n_steps, out = results[j]
        elapsed = best[j]
        done = out["out_status"] == STATUS_DONE
        ttft = (out["out_first_token_s"] - req["arrival_s"])[done]
        n_outages = 0 if schedules[j] is None else schedules[j][0].size // 2
        print(f"  {label:22s} {n / elapsed:>12,.0f} requests/s ({elapsed:.3f} s, x{elapsed / best[0]:.2f} of off), "
              f"{n_steps / elapsed:,.0f} steps/s; outages {n_outages}, evictions {int(out['out_failures'].sum()):,}"
              f", done {done.mean():.4f}, P99 TTFT {1e3 * np.quantile(ttft, 0.99):,.1f} ms; "
              f"schedule drawn in {1e3 * draw_s[j]:.1f} ms")


if __name__ == "__main__":
    main()
