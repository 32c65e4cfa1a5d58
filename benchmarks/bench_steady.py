"""Does the verified fleet depend on how long the simulator runs? (plain script; prints figures, asserts nothing)

    python benchmarks/bench_steady.py --lam 20000
    python benchmarks/bench_steady.py --lam 100000 --factor 10

``optimize --workload azure_conv --slo-ttft 500 --lam L`` (the paper's constants; verification of the top
5 with the default steady-state run length, ``plan.verify``), then the recommended candidate verified again
with every run ``--factor`` times longer (warm-up allowance, measured lifetimes and minimum completions all
scaled; same seeds, so the long streams extend the default ones).  Printed: per pool the analytic count,
the default verified count and the long one, their difference against the target (+-1 GPU or +-2 %), the
default fleet's pools checked at their default counts with the long runs (does the recommendation meet the
SLO in the longer run?), the MSER-5 warm-up cut and the measured lifetimes, and the wall times.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from fleetplan.exec import LocalExecutor
from fleetplan.hardware import load_catalog
from fleetplan.plan.optimize import OptimizeRequest, optimize, resolve_gpus
from fleetplan.plan.verify import VerifySettings, check_pool, verify_colocated
from fleetplan.workload import load_workload

SLO_S = 0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lam", type=float, default=20_000.0)
    parser.add_argument("--factor", type=float, default=10.0, help="how much longer the second verification runs")
    parser.add_argument("--workload", default="azure_conv")
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    req = OptimizeRequest(workload=load_workload(args.workload), gpus=resolve_gpus(load_catalog(), None),
                          slo_ttft_s=SLO_S, rate_per_s=args.lam)
    vs = VerifySettings(slo_ttft_s=SLO_S, slo_tpot_s=None, rate_per_s=args.lam, max_gpus=100_000)
    f = args.factor
    long = replace(vs, warmup_lifetimes=vs.warmup_lifetimes * f, measured_lifetimes=vs.measured_lifetimes * f,
                   min_completions=int(vs.min_completions * f))
    gpus = {g.name: g for g in req.gpus}
    with LocalExecutor(workers=args.workers) as ex:
        t0 = time.perf_counter()
        result = optimize(req, vs, map_fn=ex)
        t_default = time.perf_counter() - t0
        best = result.recommendation
        cand = next(c for c in result.candidates if c.rank == best.rank)
        print(f"{args.workload} λ = {args.lam:g}: optimize with default verification {t_default:.1f} s "
              f"(phase 2 {result.verify_time_s:.1f} s); recommended rank {best.rank} ({cand.topology.value}, "
              f"{cand.router.value}), {best.total_gpus_needed} GPUs")
        t1 = time.perf_counter()
        v_long = verify_colocated([cand], gpus, req.workload, long, req.availability_of, map_fn=ex)[0]
        t_long = time.perf_counter() - t1
    v = cand.verification
    print(f"{f:g}x longer verification of the recommended candidate: {t_long:.1f} s; passed {v_long.passed}")
    print(f"{'pool':<22} {'analytic':>8} {'default':>8} {f'{f:g}x':>8} {'diff':>6} {'ok':>4} "
          f"{'default count in long run':>27} {'warm-up s':>10} {'lifetimes':>10}")
    for i, p in enumerate(cand.pools):
        if p.count == 0:
            continue
        a, d, lg = p.count, v.verified_counts[i], v_long.verified_counts[i]
        ok = abs(d - lg) <= max(1, 0.02 * lg)
        st = v_long.steady[i]
        check = check_pool(cand, i, d, gpus, req.workload, long, n_requests=st.n_requests)
        verdict = f"P99 {check.upper_ttft_s * 1e3:,.0f} ms {'pass' if check.passes else 'FAIL'}" + (
            " drift" if check.drifting else "")
        sd = v.steady[i]
        label = f"{p.lo_tokens + 1}-{p.hi_tokens} {p.gpu}"
        print(f"{label:<22} {a:>8} {d:>8} {lg:>8} {d - lg:>+6} {'yes' if ok else 'NO':>4} {verdict:>27} "
              f"{sd.warmup_s:>5.1f}/{st.warmup_s:<4.1f} {sd.measured_lifetimes:>4.1f}/"
              f"{st.measured_lifetimes:<5.1f}")


if __name__ == "__main__":
    main()
