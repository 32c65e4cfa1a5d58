"""What the recommendation's headroom search costs against verification (plain script; prints figures,
asserts nothing).

    python benchmarks/bench_headroom.py                          # lmsys and azure_conv at λ = 100 and 1,000
    python benchmarks/bench_headroom.py --workload azure_conv --lam 20000 --workers 2
    python benchmarks/bench_headroom.py --margin 0.15            # sized for 15 % slower steps

For each workload and rate: ``optimize --slo-ttft 500`` (the paper's constants, default verification of
the top 5 with the steady-state run length) with the headroom search on (``plan.headroom``), in this
process (``--workers 0``, the default: what the README command does below 2 M simulated requests) or on
a local process pool.  Printed: the recommended GPUs, the wall time of phase 1, phase 2 and the headroom
search, headroom / phase 2, the pool runs each simulated, and the headroom found.  ``optimize`` turns the
search on by default because it costs at most about as much as phase 2 at λ <= 1,000 (0.3-0.5x but for a
fleet with a large headroom, azure_conv at 100: 1.05x; the budget is 2x): a rate point is the slowed fleet
in scaled time, so the two searches share their runs (``plan.headroom``).
On a shared machine, read the load average printed first.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time

from fleetplan.exec import LocalExecutor
from fleetplan.hardware import load_catalog
from fleetplan.plan.headroom import HeadroomSettings
from fleetplan.plan.optimize import OptimizeRequest, optimize, resolve_gpus
from fleetplan.plan.verify import VerifySettings
from fleetplan.workload import load_workload

SLO_S = 0.5


def one(workload: str, rate: float, margin: float, map_fn) -> None:
    req = OptimizeRequest(workload=load_workload(workload), gpus=resolve_gpus(load_catalog(), None), slo_ttft_s=SLO_S,
                          rate_per_s=rate, step_time_margin=margin)
    vs = VerifySettings(slo_ttft_s=SLO_S, slo_tpot_s=None, rate_per_s=rate, max_gpus=100_000, step_time_margin=margin)
    t0 = time.perf_counter()
    res = optimize(req, vs, map_fn=map_fn, headroom=HeadroomSettings())
    total = time.perf_counter() - t0
    best, h = res.recommendation, res.headroom
    if best is None or h is None:
        print(f"  {workload:<10s} λ = {rate:>8,g}: no verified co-located recommendation ({total:.1f} s)")
        return
    n_verify = sum(v.n_simulations for v in res.verification)
    print(f"  {workload:<10s} λ = {rate:>8,g}: {best.total_gpus_needed:>5} GPUs; phase 1 {res.analytic_time_s:5.1f} s, "
          f"phase 2 {res.verify_time_s:6.1f} s ({n_verify} pool runs), headroom {h.time_s:6.1f} s "
          f"({h.n_simulations} pool runs) = {h.time_s / res.verify_time_s:4.2f}x phase 2; steps "
          f"{'>=' if h.step_slowdown_capped else ''}{h.step_slowdown_max:.0%} slower, traffic "
          f"{'>=' if h.rate_multiplier_capped else ''}{h.rate_multiplier_max - 1:.0%} higher "
          f"(binding pools {h.step_binding_pools} / {h.rate_binding_pools}); load {os.getloadavg()[0]:.2f}",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", action="append", default=None, help="workload(s) (default lmsys, azure_conv)")
    parser.add_argument("--lam", type=float, action="append", default=None, help="rate(s) (default 100, 1000)")
    parser.add_argument("--margin", type=float, default=0.0, help="--step-time-margin as a fraction")
    parser.add_argument("--workers", type=int, default=0, help="0: in this process; N: a local pool of N")
    args = parser.parse_args()
    load1, load5, _ = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load1:.2f} (1 min) {load5:.2f} (5 min); margin "
          f"{args.margin:.0%}; {'in process' if args.workers == 0 else f'{args.workers} workers'}")
    pool = contextlib.nullcontext(None) if args.workers == 0 else LocalExecutor(workers=args.workers)
    with pool as ex:
        for workload in args.workload or ("lmsys", "azure_conv"):
            for rate in args.lam or (100.0, 1000.0):
                one(workload, rate, args.margin, ex)


if __name__ == "__main__":
    main()
