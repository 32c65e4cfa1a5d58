"""Speed of the prefill-decode disaggregation simulator (plain script; prints figures, asserts nothing).

    python benchmarks/bench_pdd.py            # 10^5 requests per configuration
    python benchmarks/bench_pdd.py --quick    # 10^4

A 16-host fabric: 8 H100 prefill instances -> 8 H100 decode instances (calibrated Llama-3-70B
constants, ``build_pool``), KV transfer 0.5 ms + bytes / 50 GB/s with Llama-3.1-70B's KV bytes per
token, layer-wise, the bundled LMSYS lengths, Poisson arrivals at about 60 % decode utilisation
(scaled from a light-load probe run).  Each assignment policy and both decode models; simulated
requests per wall-clock second of the kernel call (JIT/cache-load time reported apart).
Also 64 decode instances (SIBYL's scale) to show how SIBYL's O(instances + requests in flight)
projection per decision costs.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fleetplan import rng as fp_rng
from fleetplan.hardware import load_catalog
from fleetplan.models.catalog import load_model
from fleetplan.sim.builders import build_pool
from fleetplan.sim.pdd import KvTransferSpec, PddSpec
from fleetplan.sim.pdd.compile import compile_pdd
from fleetplan.sim.pdd.engine import run_compiled_pdd
from fleetplan.workload import load_workload

POLICIES = (("round_robin", "early"), ("ils", "early"), ("sibyl", "early"), ("oracle", "late"))
MODELS = ("steps", "processor_sharing")
PS_MAX_SEQS = 48  # the H20 curve's TPS(N) rises up to N = 53
PROBE_RATE_PER_DECODE = 0.5  # requests/s per decode instance of the light-load probe
TARGET_UTILISATION = 0.6


def _spec(n_prefill: int, n_decode: int, policy: str, binding: str, model: str) -> PddSpec:
    gpu = load_catalog().get("h100")
    pf = build_pool(gpu, "prefill", n_prefill, 8192)
    seqs = {"max_num_seqs": PS_MAX_SEQS} if model == "processor_sharing" else {}
    dec = build_pool(gpu, "decode", n_decode, 8192, **seqs)
    transfer = KvTransferSpec.from_model(load_model("llama-3.1-70b"), 5e-4, 50e9, layerwise=True)
    return PddSpec(pf, dec, transfer, policy, binding, model)


def _time(spec: PddSpec, rate: float, n: int) -> tuple[float, float, float]:
    """(requests/s of the kernel call, decode utilisation, events per request)."""
    arrival = np.cumsum(fp_rng.stream(1, "arrivals").exponential(1 / rate, n))
    prompt, output = load_workload("lmsys").sample(fp_rng.stream(1, "lengths"), n)
    run = compile_pdd(spec, arrival, prompt, output)
    t0 = time.perf_counter()
    out_t, out_i, pf_busy, dec_busy, n_events = run_compiled_pdd(run)
    wall = time.perf_counter() - t0
    end = np.nanmax(np.where(np.isfinite(out_t[:, 6]), out_t[:, 6], np.nan))
    return n / wall, float(dec_busy.mean() / end), n_events / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    n = 10_000 if parser.parse_args().quick else 100_000
    t0 = time.perf_counter()
    _time(_spec(1, 1, "sibyl", "early", "steps"), 1.0, 50)
    _time(_spec(1, 1, "round_robin", "early", "processor_sharing"), 1.0, 50)
    print(f"JIT / cache load: {time.perf_counter() - t0:.2f} s")
    for n_pf, n_dec in ((8, 8), (16, 64)):
        for model in MODELS:
            probe_rate = PROBE_RATE_PER_DECODE * n_dec  # light load: utilisation ~ proportional to the rate
            _, util, _ = _time(_spec(n_pf, n_dec, "round_robin", "early", model), probe_rate, min(n, 20_000))
            rate = TARGET_UTILISATION * probe_rate / util
            for policy, binding in POLICIES:
                rps, util, events = _time(_spec(n_pf, n_dec, policy, binding, model), rate, n)
                print(f"{n_pf:>2} P -> {n_dec:>2} D  {model:17s} {policy:11s} {binding:5s} rate {rate:7.1f}/s: "
                      f"{rps:>11,.0f} requests/s  ({events:.1f} events/request, decode util {util:.2f})")


if __name__ == "__main__":
    main()
