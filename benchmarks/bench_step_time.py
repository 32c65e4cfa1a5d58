"""Iteration-kernel speed with the linear vs the roofline step model on the same fleet.

    python benchmarks/bench_step_time.py              # 10^6 requests, lambda 15/s
    python benchmarks/bench_step_time.py --quick      # 10^5 requests
    python benchmarks/bench_step_time.py --rate 100   # bench_des's rate (roofline fleet overloaded)

Fleet: the core paper's Table 1 fleet as ``benchmarks/bench_des.py`` builds it (3 A100s for
<= 4,096 tokens + 5 A100s for <= 65,536, LMSYS lengths), compiled by
``fleetplan.sim.compile.compile_fleet``, at lambda = 15 req/s, where both step models are
stable.  At the paper's 100 req/s the roofline fleet is overloaded: a 70B prefill costs
~0.15 ms per token on a TP-4 A100 replica (compute-bound), ~2,000x the linear model's
H / L_ref, so the queue grows without bound (and at 30 req/s too).

Linear: the product's ``LinearStepModel`` (W = 8 ms, H = 0.65 ms at 8K).  Roofline:
``StepTimePredictor`` for Llama-3.1-70B on A100-80GB at the paper's implied replica (TP 4,
INT4 weights, BF16 KV, host overhead overlapped; docs/step_time_validation.md), whose
``kernel_coefficients()`` replace the pools' step code and coefficients in the compiled
fleet -- the arrays ``simulate`` would pass once ``PoolSpec.step_model`` accepts any object
with ``kernel_coefficients()`` and ``t_iter_s()`` (today it type-checks ``LinearStepModel``).
Same requests, same kernel, best of 3 runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_des import REPEATS, run_iteration, stability, two_pool_fleet, workload  # noqa: E402

from fleetplan.hardware import load_catalog  # noqa: E402
from fleetplan.models import Dtype, load_model  # noqa: E402
from fleetplan.perf import PredictorOptions, StepTimePredictor  # noqa: E402
from fleetplan.perf.parallelism import Parallelism  # noqa: E402

RATE_PER_S = 15.0
FLEET = (3, 5)
SEED = 20260601


def roofline_fleet(fleet: dict) -> dict:
    """``fleet`` with every pool's step model replaced by the roofline predictor's coefficients."""
    predictor = StepTimePredictor(load_model("llama-3.1-70b"), load_catalog().get("A100-80GB"), Parallelism(tp=4),
                                  Dtype.INT4, Dtype.BF16, PredictorOptions(cpu_overhead_s=0.0))
    code, coef = predictor.kernel_coefficients()
    n_pools = fleet["pool_step_code"].size
    return fleet | {"pool_step_code": np.full(n_pools, code, dtype=np.int32),
                    "pool_step_coef": np.ascontiguousarray(np.tile(coef, (n_pools, 1)))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10^5 requests instead of 10^6")
    parser.add_argument("--rate", type=float, default=RATE_PER_S, help="arrival rate, requests/s")
    args = parser.parse_args()
    n = 100_000 if args.quick else 1_000_000
    req, source = workload(np.random.default_rng(SEED), args.rate, n)
    linear = two_pool_fleet(*FLEET)
    print(f"{FLEET[0]} short + {FLEET[1]} long A100 instances, lambda {args.rate:g}/s, N {n:,}, lengths: {source}")
    for label, fleet in (("linear", linear), ("roofline", roofline_fleet(linear))):
        t0 = time.perf_counter()
        run_iteration({k: v[:1] for k, v in req.items()}, fleet)  # JIT compile or cache load
        jit_s = time.perf_counter() - t0
        times, n_steps, out = run_iteration(req, fleet, REPEATS)
        elapsed = min(times)
        print(f"[{label:8s}] best of {REPEATS} {elapsed:.3f} s (median {np.median(times):.3f} s): "
              f"{n / elapsed:,.0f} requests/s, {n_steps / elapsed:,.0f} steps/s, {n_steps / n:.1f} steps/request, "
              f"mean batch {out['inst_seq_s'].sum() / out['inst_busy_s'].sum():.1f}; first call {jit_s:.2f} s")
        print(f"           {stability(req, out)}")


if __name__ == "__main__":
    main()
