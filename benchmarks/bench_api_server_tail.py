"""P99 TTFT of one vLLM-profile instance (llama-3.1-8b, H100, one API server process: 4.60 ms + 1.2 µs/token
+ 22.5 µs per streamed chunk per request) at rising rates: the simulator's API server stage against the analytic
engine's
(``fleetplan.queueing.api_server``: wait 0 w.p. 1 - C, else exponential with Allen-Cunneen's mean) and
against the old mean-only wait.  Prints ρ_api, both analytic P99s, the simulated P99 and the gaps.

    python benchmarks/bench_api_server_tail.py [--workload lmsys | --fixed 16:16] [--requests 30000]
        [--rates 20,30,40,50,70]

The mean-only column is the wait at its Allen-Cunneen mean (docs/patches/api_server_analytic.patch's form).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fleetplan.hardware import load_catalog  # noqa: E402
from fleetplan.models import load_model  # noqa: E402
from fleetplan.perf.engine_profile import load_engine_profile  # noqa: E402
from fleetplan.perf.parallelism import Parallelism  # noqa: E402
from fleetplan.perf.predictor import StepTimePredictor  # noqa: E402
from fleetplan.queueing.engine import EngineLimits, EngineModel, EngineProfile  # noqa: E402
from fleetplan.sim.engine import simulate  # noqa: E402
from fleetplan.sim.spec import FleetSpec, PoolSpec, SchedulerLimits  # noqa: E402
from fleetplan.workload import load_workload  # noqa: E402


def fixed_lengths(prompt_tokens: int, output_tokens: int) -> SimpleNamespace:
    """A workload whose every request is ``prompt_tokens`` in, ``output_tokens`` out (``--fixed P:O``)."""
    return SimpleNamespace(name="fixed", sample=lambda rng, n: (np.full(n, prompt_tokens, dtype=np.int64),
                                                                np.full(n, output_tokens, dtype=np.int64)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="lmsys")
    ap.add_argument("--fixed", default=None, help="P:O fixed lengths instead of --workload")
    ap.add_argument("--requests", type=int, default=30_000)
    ap.add_argument("--rates", default="20,30,40,50,70")
    ap.add_argument("--points", type=int, default=2_000, help="request points of the analytic profile")
    args = ap.parse_args()
    wl = load_workload(args.workload) if args.fixed is None else fixed_lengths(*map(int, args.fixed.split(":")))
    pred = StepTimePredictor(load_model("llama-3.1-8b"), load_catalog().get("H100-SXM"), Parallelism(tp=1),
                             options=load_engine_profile("vllm").options)
    limits = SchedulerLimits(max_num_seqs=256, max_num_batched_tokens=8192, kv_blocks=20000)
    pool = PoolSpec(name="p", gpu="H100-SXM", n_instances=1, max_context_tokens=8192, step_model=pred,
                    limits=limits, n_api_servers=1)
    p, o = wl.sample(np.random.default_rng(12345), args.points)
    p, o = np.minimum(p, 8000).astype(float), np.maximum(np.minimum(o, 8192 - np.minimum(p, 8000)), 1).astype(float)
    prof = EngineProfile(EngineModel.of(pred, EngineLimits(256, 8192, 20000, 16), 1), p, o, np.ones(p.size))
    print(f"{'lam/s':>6} {'rho_api':>8} {'an P99 ms':>10} {'mean-only ms':>13} {'sim P99 ms':>11} {'an/sim':>7} "
          f"{'mean-only/sim':>14}")
    for lam in (float(r) for r in args.rates.split(",")):
        st = prof.state(lam, [1])
        an = float(prof.ttft_quantile_s(st, 0.99)[0])
        mean_only = dataclasses.replace(st, api_wait_mass=None)  # the wait at its mean (the patch's form)
        mean_only = dataclasses.replace(mean_only, prefill_levels=st.prefill_levels + st.api_wait_s[0])
        old = float(prof.ttft_quantile_s(mean_only, 0.99)[0])
        res = simulate(FleetSpec(pools=(pool,)), wl, lam, args.requests, seed=1)
        sim = float(np.quantile(res.requests["ttft_s"].dropna().to_numpy(), 0.99))
        rho = float(prof.api.utilisation(lam))
        print(f"{lam:6g} {rho:8.3f} {1e3 * an:10.1f} {1e3 * old:13.1f} {1e3 * sim:11.1f} {an / sim:7.2f} "
              f"{old / sim:14.2f}", flush=True)


if __name__ == "__main__":
    main()
