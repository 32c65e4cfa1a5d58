"""Speed of the prefill-decode disaggregation simulator (plain script; prints figures, asserts nothing).

    python benchmarks/bench_pdd.py            # 10^5 requests per configuration
    python benchmarks/bench_pdd.py --quick    # 10^4
    python benchmarks/bench_pdd.py --fabric-only
    python benchmarks/bench_pdd.py --optimize  # wall time of a PDD optimize at 50 and 1,000 req/s

A 16-host fabric: 8 H100 prefill instances -> 8 H100 decode instances (calibrated Llama-3-70B
constants, ``build_pool``), KV transfer 0.5 ms + bytes / 50 GB/s with Llama-3.1-70B's KV bytes per
token, layer-wise, the bundled LMSYS lengths, Poisson arrivals at about 60 % decode utilisation
(scaled from a light-load probe run).  Each assignment policy and both decode models; simulated
requests per wall-clock second of the kernel call (JIT/cache-load time reported apart).
Also 64 decode instances (SIBYL's scale) to show how SIBYL's O(instances + requests in flight)
projection per decision costs.

Fabric section (issue #6 §7 target: >= 10^5 requests/s with the flow-level network): the same
8 + 8 instances on a 16-host leaf-spine fabric (4 leaves x 4 hosts, 2 spines, 100 Gb/s links;
prefill hosts 0-7, decode hosts 8-15), each KV transfer a flow with max-min fair sharing, ECMP
and path reservation; plus the decode steps one at a time (``cruise=False``) for comparison.
The first call of the kernel (JIT compile, or loading the on-disk cache) is timed apart.

Optimize section (``--optimize``, issue #27's closing note): ``optimize --topology pdd`` for Llama-3.1-70B
FP8 on H100 and H200 (every TP), azure_conv, P99 TTFT 1 s, TPOT 50 ms, at 50 and 1,000 req/s: the wall
time of the analytic phase and of the whole run with verification of the 5 cheapest (in-process), and each
verified fleet's role counts, analytic -> verified.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fleetplan import rng as fp_rng
from fleetplan.hardware import load_catalog
from fleetplan.models.catalog import load_model
from fleetplan.sim.builders import build_pool
from fleetplan.sim.network import LeafSpineFabric
from fleetplan.sim.pdd import FabricSpec, KvTransferSpec, PddSpec
from fleetplan.sim.pdd.compile import compile_pdd
from fleetplan.sim.pdd.engine import run_compiled_pdd_net
from fleetplan.sim.pdd.flows import flow_frame
from fleetplan.workload import load_workload

POLICIES = (("round_robin", "early"), ("ils", "early"), ("sibyl", "early"), ("oracle", "late"))
MODELS = ("steps", "processor_sharing")
PS_MAX_SEQS = 48  # the H20 curve's TPS(N) rises up to N = 53
PROBE_RATE_PER_DECODE = 0.5  # requests/s per decode instance of the light-load probe
TARGET_UTILISATION = 0.6


FABRIC = LeafSpineFabric(n_leaves=4, hosts_per_leaf=4, n_spines=2, host_link_gbps=100.0, spine_link_gbps=100.0)


def _spec(n_prefill: int, n_decode: int, policy: str, binding: str, model: str,
          path_policy: str | None = None) -> PddSpec:
    gpu = load_catalog().get("h100")
    pf = build_pool(gpu, "prefill", n_prefill, 8192)
    seqs = {"max_num_seqs": PS_MAX_SEQS} if model == "processor_sharing" else {}
    dec = build_pool(gpu, "decode", n_decode, 8192, **seqs)
    transfer = KvTransferSpec.from_model(load_model("llama-3.1-70b"), 5e-4, 50e9, layerwise=True)
    network = None if path_policy is None else FabricSpec(FABRIC, path_policy)
    return PddSpec(pf, dec, transfer, policy, binding, model, network=network)


def _time(spec: PddSpec, rate: float, n: int, cruise: bool = True) -> tuple[float, float, float, float]:
    """(requests/s of the kernel call, decode utilisation, events per request, mean KV-flow slowdown)."""
    arrival = np.cumsum(fp_rng.stream(1, "arrivals").exponential(1 / rate, n))
    prompt, output = load_workload("lmsys").sample(fp_rng.stream(1, "lengths"), n)
    run = compile_pdd(spec, arrival, prompt, output, seed=1, cruise=cruise)
    t0 = time.perf_counter()
    out_t, out_i, pf_busy, dec_busy, n_events, fl_t, fl_i, _ = run_compiled_pdd_net(run)
    wall = time.perf_counter() - t0
    end = np.nanmax(np.where(np.isfinite(out_t[:, 6]), out_t[:, 6], np.nan))
    slowdown = float("nan")
    if spec.network is not None and len(fl_t):
        flows = flow_frame(spec.network, run.net_in, out_i, fl_t, fl_i)
        slowdown = float(flows["slowdown"][np.isfinite(flows["done_s"])].mean())
    return n / wall, float(dec_busy.mean() / end), n_events / n, slowdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--fabric-only", action="store_true", help="only the 16-host fabric section")
    parser.add_argument("--optimize", action="store_true", help="only the PDD optimize timing (module docstring)")
    args = parser.parse_args()
    n = 10_000 if args.quick else 100_000
    if args.optimize:
        optimize_timing((50.0, 1000.0))
        return
    t0 = time.perf_counter()
    _time(_spec(8, 8, "sibyl", "early", "steps", "ecmp"), 1.0, 50)
    print(f"first kernel call (JIT compile or cache load), not in the rates below: {time.perf_counter() - t0:.2f} s")
    probe_rate = PROBE_RATE_PER_DECODE * 8
    _, util, _, _ = _time(_spec(8, 8, "round_robin", "early", "steps"), probe_rate, min(n, 20_000))
    rate = TARGET_UTILISATION * probe_rate / util
    for policy, binding in POLICIES:
        for path_policy, cruise in (("ecmp", True), ("reservation", True), ("ecmp", False)):
            rps, util, events, slowdown = _time(_spec(8, 8, policy, binding, "steps", path_policy), rate, n, cruise)
            print(f" 8 P ->  8 D  steps fabric 16 hosts {path_policy:11s} cruise {'on ' if cruise else 'off'} "
                  f"{policy:11s} {binding:5s} rate {rate:5.1f}/s: {rps:>11,.0f} requests/s  ({events:.1f} "
                  f"events/request, decode util {util:.2f}, mean flow slowdown {slowdown:.3f})")
    if args.fabric_only:
        return
    for n_pf, n_dec in ((8, 8), (16, 64)):
        for model in MODELS:
            probe_rate = PROBE_RATE_PER_DECODE * n_dec  # light load: utilisation ~ proportional to the rate
            _, util, _, _ = _time(_spec(n_pf, n_dec, "round_robin", "early", model), probe_rate, min(n, 20_000))
            rate = TARGET_UTILISATION * probe_rate / util
            for policy, binding in POLICIES:
                rps, util, events, _ = _time(_spec(n_pf, n_dec, policy, binding, model), rate, n)
                print(f"{n_pf:>2} P -> {n_dec:>2} D  {model:17s} {policy:11s} {binding:5s} rate {rate:7.1f}/s: "
                      f"{rps:>11,.0f} requests/s  ({events:.1f} events/request, decode util {util:.2f})")


def optimize_timing(rates) -> None:
    """Wall time of a PDD ``optimize`` (module docstring) at each rate."""
    from dataclasses import replace

    from fleetplan.models import Dtype
    from fleetplan.models.context import served_context_limit
    from fleetplan.plan.disagg import DisaggSettings, ModelShape
    from fleetplan.plan.optimize import OptimizeRequest, analytical_phase, optimize
    from fleetplan.plan.placement import place_model
    from fleetplan.plan.space import Topology
    from fleetplan.plan.verify import VerifySettings

    catalog, model = load_catalog(), load_model("llama-3.1-70b")
    placed = [p for g in ("h100", "h200") for p in place_model(model, catalog.get(g), weight_dtype=Dtype.FP8)]
    base = OptimizeRequest(workload=load_workload("azure_conv"), gpus=tuple(p.gpu for p in placed),
                           gpus_per_instance=tuple((p.gpu.name, p.gpus_per_instance) for p in placed),
                           step_models=tuple((p.gpu.name, p.predictor) for p in placed), slo_ttft_s=1.0,
                           slo_tpot_s=0.05, rate_per_s=50.0, topologies=(Topology.PDD,),
                           max_model_len_tokens=served_context_limit(model, None),
                           disagg=DisaggSettings(ModelShape.of(model)))
    for rate in rates:
        req = replace(base, rate_per_s=rate)
        t0 = time.perf_counter()
        n_cands = len(analytical_phase(req))
        t1 = time.perf_counter()
        vs = VerifySettings(slo_ttft_s=1.0, slo_tpot_s=0.05, rate_per_s=rate, max_gpus=req.max_gpus,
                            step_models=req.step_models,
                            max_model_len_tokens=req.max_model_len_tokens)
        result = optimize(req, vs)
        t2 = time.perf_counter()
        rec = result.recommendation
        what = "none" if rec is None else " + ".join(f"{p.count}x {p.gpu}" for p in rec.pools)
        print(f"optimize --topology pdd at {rate:,.0f} req/s: analytic {t1 - t0:.2f} s ({n_cands} candidates), "
              f"with verification {t2 - t1:.1f} s ({len(result.verification)} verified); recommended {what}",
              flush=True)
        by_rank = {c.rank: c for c in result.candidates}
        for v in result.verification:  # the roles' counts, analytic -> verified (issue #27's count target)
            c = by_rank[v.rank]
            roles = ", ".join(f"{p.gpu} {a} -> {b}" for p, a, b in zip(c.pools, v.analytic_counts, v.verified_counts,
                                                                      strict=True))
            print(f"    {roles}", flush=True)


if __name__ == "__main__":
    main()
