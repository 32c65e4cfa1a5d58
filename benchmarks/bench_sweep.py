"""Speed of the analytical phase: Erlang-C throughput, pool sizing, and (when present) optimize.

Plain script, prints figures; nothing is asserted.  Run::

    PYTHONPATH=. python benchmarks/bench_sweep.py [--pairs 1000000] [--repeat 3] [--only optimize]

``--only`` runs some sections (erlang, size_pool, optimize, verify).  The optimize lines split the phase
into the engine model's pool sizing (``plan.pools.size_one_pool``, CPU seconds of this process) and the
rest (candidates combined and ranked); on a shared machine read the load average printed first.

Targets: >= 1e6 Erlang-C evaluations/s on one core; the whole analytical phase of
``optimize`` < 0.3 s.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable

import numpy as np
import scipy

from fleetplan.perf.linear import LinearStepModel
from fleetplan.queueing import ServiceModel, erlang_c, pool_service_moments, size_pool
from fleetplan.queueing.erlang import _erlang_c_raw

MAX_SERVERS = 100_000
MAX_RHO = 0.9999
SIZING_CALLS = 500
POOL_POINTS = (64, 1024)


def best_time_s(fn: Callable[[], object], repeat: int) -> float:
    """Fastest of ``repeat`` wall-clock runs of ``fn``, seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def bench_erlang_c(n_pairs: int, repeat: int, seed: int = 0) -> None:
    """Erlang-C evaluations per second on random (c, ρ): c log-uniform in [1, 1e5], ρ uniform."""
    rng = np.random.default_rng(seed)
    c = np.floor(np.exp(rng.uniform(0.0, np.log(MAX_SERVERS), n_pairs))).astype(np.int64)
    a = rng.uniform(0.0, MAX_RHO, n_pairs) * c
    c_f = c.astype(np.float64)
    public_s = best_time_s(lambda: erlang_c(c, a), repeat)
    raw_s = best_time_s(lambda: _erlang_c_raw(c_f, a), repeat)
    print(f"erlang_c  {n_pairs:,} random (c <= {MAX_SERVERS:,}, rho <= {MAX_RHO}) pairs")
    print(f"  public (validated)  {public_s * 1e3:8.1f} ms   {n_pairs / public_s / 1e6:6.2f} M evaluations/s")
    print(f"  kernel (no checks)  {raw_s * 1e3:8.1f} ms   {n_pairs / raw_s / 1e6:6.2f} M evaluations/s")


def _pool(n_points: int, n_slots: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    total = np.sort(rng.lognormal(6.2, 1.1, n_points).clip(2, 60_000))
    prompt = np.floor(0.8 * total)
    model = ServiceModel(LinearStepModel(0.008, 0.00065), n_slots, 512, n_prefill_seqs=1)
    return pool_service_moments(prompt, total - prompt, np.full(n_points, 1.0 / n_points), model)


def bench_size_pool(repeat: int) -> None:
    """size_pool calls per second for pools of 64 and 1024 request points, both TTFT models."""
    lams = np.linspace(5.0, 150.0, SIZING_CALLS)
    print(f"size_pool  {SIZING_CALLS} calls, λ from {lams[0]:g} to {lams[-1]:g}/s, P99 TTFT <= 0.5 s")
    for n_points in POOL_POINTS:
        for n_slots in (16, 256):
            service = _pool(n_points, n_slots)
            for model in ("quantile", "mean-prefill"):
                elapsed = best_time_s(lambda s=service, m=model: [size_pool(x, s, 0.5, ttft_model=m)
                                                                  for x in lams], repeat)
                print(f"  {n_points:5d} points  {n_slots:4d} slots  {model:12s}"
                      f"  {elapsed / SIZING_CALLS * 1e6:7.1f} us/call")


def bench_optimize(repeat: int) -> None:
    """Full analytical phase of ``optimize`` (default candidate space: homo, two-pool and 3-4 pools,
    all default thresholds, A10G/A100/H100, length and compress routers) for each bundled workload,
    λ = 100 req/s, P99 TTFT <= 500 ms.  Target < 0.3 s.  The workload's quadrature is rebuilt in
    every run (it is part of the phase)."""
    import fleetplan.plan.sweep as sweep_module
    from fleetplan.hardware import load_catalog
    from fleetplan.plan.optimize import OptimizeRequest, analytical_phase, resolve_gpus
    from fleetplan.workload import list_workloads, load_workload

    sizing_cpu_s = [0.0]
    plain = sweep_module.size_one_pool

    def timed_size_one_pool(*args, **kwargs):
        start = time.process_time()
        try:
            return plain(*args, **kwargs)
        finally:
            sizing_cpu_s[0] += time.process_time() - start

    sweep_module.size_one_pool = timed_size_one_pool
    try:
        gpus = resolve_gpus(load_catalog(), None)
        for name in list_workloads():
            request = OptimizeRequest(workload=load_workload(name), gpus=gpus, slo_ttft_s=0.5, rate_per_s=100.0)
            n_candidates = len(analytical_phase(request))  # warm imports
            best = (float("inf"), 0.0, 0.0)
            for _ in range(repeat):
                sizing_cpu_s[0] = 0.0
                start, cpu = time.perf_counter(), time.process_time()
                analytical_phase(request)
                best = min(best, (time.perf_counter() - start, time.process_time() - cpu, sizing_cpu_s[0]))
            wall, cpu, sizing = best
            print(f"optimize  analytical phase  {name:12s} {n_candidates:5d} candidates  {wall * 1e3:6.0f} ms "
                  f"({n_candidates / wall:6,.0f}/s; CPU {cpu * 1e3:5.0f} ms: pool sizing {sizing * 1e3:5.0f}, "
                  f"rest {(cpu - sizing) * 1e3:4.0f})")
    finally:
        sweep_module.size_one_pool = plain


def bench_verify(repeat: int) -> None:
    """``optimize`` with simulation verification of the top 5 candidates at 20,000 requests x 3
    replications (iteration level), lmsys λ = 100 req/s; JIT compile reported separately."""
    from fleetplan.hardware import load_catalog
    from fleetplan.plan.optimize import OptimizeRequest, optimize, resolve_gpus
    from fleetplan.plan.verify import VerifySettings
    from fleetplan.workload import load_workload

    t0 = time.perf_counter()
    import fleetplan.sim._kernels as kernels  # noqa: F401  (loads or compiles the numba cache)
    from fleetplan.sim import simulate
    from fleetplan.sim.builders import build_pool
    from fleetplan.sim.spec import FleetSpec

    cat = load_catalog()
    spec = FleetSpec((build_pool(cat.get("a100"), "p", 1, 4096),))
    simulate(spec, load_workload("lmsys"), 1.0, n_requests=50)  # first call: JIT compile or cache load
    print(f"verify    JIT compile / cache load + first tiny simulation: {time.perf_counter() - t0:.2f} s")
    request = OptimizeRequest(workload=load_workload("lmsys"), gpus=resolve_gpus(cat, None), slo_ttft_s=0.5,
                              rate_per_s=100.0)
    settings = VerifySettings(slo_ttft_s=0.5, slo_tpot_s=None, rate_per_s=100.0, max_gpus=10_000)
    elapsed = best_time_s(lambda: optimize(request, settings), repeat)
    result = optimize(request, settings)
    print(f"verify    optimize with verification of {len(result.verification)} candidates "
          f"(20,000 requests x 3 replications each, incl. upward search): {elapsed:.2f} s total "
          f"(a further run: analytic {result.analytic_time_s:.2f} s, simulation {result.verify_time_s:.2f} s)")


SECTIONS = {"erlang": None, "size_pool": bench_size_pool, "optimize": bench_optimize, "verify": bench_verify}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1_000_000, help="(c, rho) pairs for Erlang-C")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; the fastest is printed")
    parser.add_argument("--only", nargs="+", choices=sorted(SECTIONS), default=sorted(SECTIONS),
                        help="sections to run (default: all)")
    args = parser.parse_args()
    print(f"python {platform.python_version()}  numpy {np.__version__}  scipy {scipy.__version__}"
          f"  ({platform.machine()}, one core)  load average {os.getloadavg()[0]:.2f}")
    if "erlang" in args.only:
        bench_erlang_c(args.pairs, args.repeat)
    for name in ("size_pool", "optimize", "verify"):
        if name in args.only:
            SECTIONS[name](args.repeat)


if __name__ == "__main__":
    main()
