"""Horizon-optimal procurement plan vs the per-step cheapest plan, and the planning wall time
(plain script; prints figures, asserts nothing).

    python benchmarks/bench_growth.py                    # 4 scenarios, 12 months, analytic
    python benchmarks/bench_growth.py --months 24 --workers 2 --repeats 2
    python benchmarks/bench_growth.py --verify           # every chosen fleet simulated (slow)

Scenarios: two workloads (azure_conv, lmsys) x two demand curves (15 %/month compound from 50 req/s;
an S-curve 20 -> 300 req/s with P50 = 80 % of P90), SLO P99 TTFT 500 ms, the calibrated GPU trio,
bundled prices (``gpu_profiles/procurement/prices.toml``), no owned fleet.  Both plans are costed
with the same prices and candidate fleets (``plan.horizon``); the horizon program's plan is never dearer.  The
wall time covers the periods' analytic sweeps (on ``--workers`` processes), the program and, with
``--verify``, the simulations; the first repeat loads numba's cache, so read the best.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import time

from fleetplan.exec import make_executor
from fleetplan.hardware import load_catalog
from fleetplan.hardware.procurement import load_gpu_prices
from fleetplan.plan.horizon.forecast import Forecast, add_months, compound_forecast
from fleetplan.plan.horizon.plan import HorizonSettings, plan_horizon
from fleetplan.plan.optimize import OptimizeRequest, resolve_gpus
from fleetplan.plan.verify import VerifySettings
from fleetplan.workload import load_workload

START = dt.date(2026, 1, 1)
S_CURVE_LO_PER_S, S_CURVE_HI_PER_S, S_CURVE_P50_SHARE = 20.0, 300.0, 0.8


def s_curve(months: int) -> Forecast:
    mid, width = months / 2, months / 8
    p90 = tuple(S_CURVE_LO_PER_S + (S_CURVE_HI_PER_S - S_CURVE_LO_PER_S) / (1 + math.exp(-(t - mid) / width))
                for t in range(months))
    dates = tuple(add_months(START, t) for t in range(months))
    return Forecast(dates, tuple(S_CURVE_P50_SHARE * x for x in p90), p90, add_months(START, months),
                    f"S-curve {S_CURVE_LO_PER_S:g}->{S_CURVE_HI_PER_S:g} req/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--months", type=int, default=12)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--verify", action="store_true")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores; months {args.months}; "
          f"workers {args.workers}; verify {args.verify}")
    catalog = load_catalog()
    gpus = resolve_gpus(catalog, None)
    prices = load_gpu_prices(catalog, tuple(g.name for g in gpus))
    curves = {"15%/month": compound_forecast(50.0, 0.15, args.months, START), "S-curve": s_curve(args.months)}
    ex = make_executor("local", workers=args.workers, ray_address=None)
    try:
        for wl_name in ("azure_conv", "lmsys"):
            wl = load_workload(wl_name)
            for curve_name, fc in curves.items():
                req = OptimizeRequest(workload=wl, gpus=gpus, slo_ttft_s=0.5, rate_per_s=fc.p90_per_s[0])
                ver = VerifySettings(0.5, None, fc.p90_per_s[0], req.max_gpus) if args.verify else None
                best_s = math.inf
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    plan = plan_horizon(req, HorizonSettings(fc, prices), verify=ver, map_fn=ex)
                    best_s = min(best_s, time.perf_counter() - t0)
                saving = plan.baseline_cost_usd - plan.total_cost_usd
                print(f"{wl_name:10s} {curve_name:9s} horizon-optimal ${plan.total_cost_usd:>10,.0f}  per-step "
                      f"cheapest ${plan.baseline_cost_usd:>10,.0f}  saving ${saving:>9,.0f} "
                      f"({saving / plan.baseline_cost_usd:5.1%})  never worse: {saving >= -1e-6}  "
                      f"{args.months} periods in {best_s:5.1f} s (best of {args.repeats})")
    finally:
        ex.close()


if __name__ == "__main__":
    main()
