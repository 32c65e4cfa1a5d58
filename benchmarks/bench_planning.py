"""Speed of the planning commands: what-if (analytic and simulated thresholds), grid flex,
the throughput frontier and HTML rendering.

Plain script, prints figures; nothing is asserted.  Run::

    python benchmarks/bench_planning.py [--sim-requests 5000] [--replications 3]

Uses the bundled ``azure_conv`` workload (H100, two-pool, SLO 500 ms) so it runs without
../shared.  The first simulated figure includes numba compilation when the cache is cold.
"""

from __future__ import annotations

import argparse
import platform
import time

from fleetplan.hardware import load_catalog
from fleetplan.plan.figures import with_report_figures
from fleetplan.plan.frontier import throughput_frontier
from fleetplan.plan.gridflex import grid_flex
from fleetplan.plan.optimize import OptimizeRequest, optimize, resolve_gpus
from fleetplan.plan.space import SizingRouter, Topology
from fleetplan.plan.verify import VerifySettings
from fleetplan.plan.whatif import whatif
from fleetplan.report.html import render_html
from fleetplan.report.run_json import optimize_run_dict
from fleetplan.workload import load_workload

RATES_PER_S = (25.0, 50.0, 100.0, 150.0, 200.0, 300.0, 400.0)
SLO_S = 0.5


def timed(label: str, fn):
    t0 = time.perf_counter()
    out = fn()
    print(f"{label:<58s} {time.perf_counter() - t0:8.2f} s")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sim-requests", type=int, default=5000)
    ap.add_argument("--replications", type=int, default=3)
    args = ap.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}")
    wl = load_workload("azure_conv")
    cat = load_catalog()
    h100 = cat.get("h100")
    req = OptimizeRequest(workload=wl, gpus=resolve_gpus(cat, ["h100"]), slo_ttft_s=SLO_S, rate_per_s=25.0,
                          topologies=(Topology.TWO_POOL,), routers=(SizingRouter.LENGTH,))
    verify = VerifySettings(SLO_S, None, 25.0, 10_000, n_requests=args.sim_requests,
                            n_replications=args.replications)
    timed(f"whatif, analytic thresholds, {len(RATES_PER_S)} rates", lambda: whatif(req, RATES_PER_S))
    timed(f"whatif, simulated thresholds, {len(RATES_PER_S)} rates", lambda: whatif(req, RATES_PER_S, verify))
    timed("grid flex, 6 levels, analytic only", lambda: grid_flex(wl, h100, 200.0, 40, SLO_S, window_s=None,
                                                                   steady_requests=None))
    timed("grid flex, 6 levels, 75 s window + steady state", lambda: grid_flex(
        wl, h100, 200.0, 40, SLO_S, steady_requests=args.sim_requests, n_replications=args.replications))
    timed("throughput frontier, 6 caps x 4 rates", lambda: throughput_frontier(
        wl, h100, 4, (20.0, 40.0, 80.0, 160.0), SLO_S, n_requests=args.sim_requests))
    result = optimize(req)
    doc = optimize_run_dict(with_report_figures(result), 0)
    page = timed("HTML report (tables + plots when matplotlib is present)", lambda: render_html(doc))
    print(f"HTML size: {len(page) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
