"""Speed of the executors (plain script; prints figures, asserts nothing).

    python benchmarks/bench_exec.py              # 8 replications of ~1 s each; Ray if installed
    python benchmarks/bench_exec.py --requests 100000 --no-ray

(1) 8 independent simulations (``replicate`` of the core paper's Table 1 fleet, 3 + 5 A100s split
    at 4,096 tokens, LMSYS lengths, 100 req/s, iteration level) with ``--requests`` each, run
    through ``LocalExecutor(workers=1)`` (in-process) and ``LocalExecutor(workers=2)``.  The pool
    is warmed first (each worker loads the cached numba kernels once, ~0.7 s), as a long-lived
    executor is in ``optimize``; the cold time including pool start is printed too.  The figures
    of both runs are compared (they must be identical).  Each timing is the best of ``--repeats``
    (other work on the machine only ever adds time); the load average is printed first.
(2) Ray (when installed): a local cluster with 2 CPUs on loopback; the round trip of an empty task
    (one at a time, and amortised over a batch of 500), then the same 8 simulations.
"""

from __future__ import annotations

import argparse
import os
import time

from fleetplan.exec import LocalExecutor
from fleetplan.hardware import load_catalog
from fleetplan.sim.builders import build_pool
from fleetplan.sim.engine import simulate
from fleetplan.sim.replications import replicate
from fleetplan.sim.spec import FleetSpec
from fleetplan.workload import load_workload

RATE_PER_S = 100.0
N_TASKS = 8
N_EMPTY_SINGLE = 50
N_EMPTY_BATCH = 500
WARMUP_REQUESTS = 20_000


def fleet() -> FleetSpec:
    a100 = load_catalog().get("A100-80GB")
    return FleetSpec((build_pool(a100, "short", 3, 4096), build_pool(a100, "long", 5, 65_536)))


def run_tasks(spec, wl, n_requests: int, map_fn, n_tasks: int = N_TASKS, repeats: int = 1) -> tuple[float, tuple]:
    """Best wall time of ``repeats`` runs of ``n_tasks`` replications, and their P99 figures."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        rep = replicate(spec, wl, RATE_PER_S, n_requests, seed=1, n_replications=n_tasks, map_fn=map_fn)
        best = min(best, time.perf_counter() - t0)
    return best, rep.p99_ttft_s + rep.p99_tpot_s


def empty_round_trip_s(executor) -> tuple[float, float]:
    """(seconds per empty task one at a time, seconds per empty task in a batch)."""
    list(executor.map(abs, [0]))
    t0 = time.perf_counter()
    for _ in range(N_EMPTY_SINGLE):
        list(executor.map(abs, [0]))
    single = (time.perf_counter() - t0) / N_EMPTY_SINGLE
    t0 = time.perf_counter()
    list(executor.map(abs, [0] * N_EMPTY_BATCH))
    return single, (time.perf_counter() - t0) / N_EMPTY_BATCH


def bench_local(spec, wl, n_requests: int, repeats: int) -> tuple:
    simulate(spec, wl, RATE_PER_S, 1000)  # load the kernels in this process
    t0 = time.perf_counter()
    simulate(spec, wl, RATE_PER_S, n_requests, seed=99)
    print(f"one task: simulate {n_requests:,} requests = {time.perf_counter() - t0:.2f} s")
    serial_s, serial_figs = run_tasks(spec, wl, n_requests, LocalExecutor(workers=1), repeats=repeats)
    print(f"local workers=1 (in-process): {N_TASKS} tasks in {serial_s:.2f} s (best of {repeats})")
    with LocalExecutor(workers=2) as cold:
        cold_s, _ = run_tasks(spec, wl, n_requests, cold)
    print(f"local workers=2, cold pool (spawn + kernel load included): {cold_s:.2f} s "
          f"(speed-up {serial_s / cold_s:.2f}x)")
    with LocalExecutor(workers=2) as warm:
        run_tasks(spec, wl, WARMUP_REQUESTS, warm, n_tasks=4)  # each worker loads the kernels once
        warm_s, warm_figs = run_tasks(spec, wl, n_requests, warm, repeats=repeats)
        single, batch = empty_round_trip_s(warm)
    print(f"local workers=2, warm pool: {N_TASKS} tasks in {warm_s:.2f} s (best of {repeats}; "
          f"speed-up {serial_s / warm_s:.2f}x)")
    print(f"results identical for workers=1 and workers=2: {serial_figs == warm_figs}")
    print(f"local empty-task round trip: {single * 1e3:.2f} ms one at a time, {batch * 1e3:.3f} ms per task "
          f"in a batch of {N_EMPTY_BATCH}")
    return serial_s, serial_figs


def bench_ray(spec, wl, n_requests: int, repeats: int, serial_s: float, serial_figs: tuple) -> None:
    try:
        import ray
    except ImportError:
        print("ray: not installed (pip install 'fleetplan[ray]'); skipped")
        return
    from fleetplan.exec import make_executor

    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    print(f"ray: local cluster with 2 CPUs started in {time.perf_counter() - t0:.2f} s")
    try:
        executor = make_executor("ray")
        nice = sorted({o.value for o in executor.map(os.nice, [0, 0])})
        print(f"ray worker niceness {nice} (Ray's default 15: on a busy machine its workers yield to other work)")
        single, batch = empty_round_trip_s(executor)
        print(f"ray empty-task round trip (overhead per task): {single * 1e3:.2f} ms one at a time, "
              f"{batch * 1e3:.3f} ms per task in a batch of {N_EMPTY_BATCH}")
        run_tasks(spec, wl, WARMUP_REQUESTS, executor, n_tasks=4)  # each worker loads the kernels once
        ray_s, ray_figs = run_tasks(spec, wl, n_requests, executor, repeats=repeats)
        print(f"ray 2 CPUs, warm: {N_TASKS} tasks in {ray_s:.2f} s (best of {repeats}; speed-up "
              f"{serial_s / ray_s:.2f}x); "
              f"results identical to local: {ray_figs == serial_figs}")
    finally:
        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400_000, help="requests per simulation task")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per configuration (best is shown)")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray figures")
    args = parser.parse_args()
    load1, load5, _ = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load1:.2f} (1 min) {load5:.2f} (5 min)")
    spec, wl = fleet(), load_workload("lmsys")
    serial_s, serial_figs = bench_local(spec, wl, args.requests, args.repeats)
    if not args.no_ray:
        bench_ray(spec, wl, args.requests, args.repeats, serial_s, serial_figs)


if __name__ == "__main__":
    main()
