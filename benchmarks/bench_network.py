"""Speed of the flow-level KV-transfer network (plain script; prints figures, asserts nothing).

    python benchmarks/bench_network.py            # 10^4 .. 10^6 flows
    python benchmarks/bench_network.py --quick    # 10x fewer

Fabric: the 16-host leaf-spine of ``KvTransferSetting`` (4 leaves x 4 hosts, 2 spines, 100 Gb/s;
8 prefill hosts send 2.28 GB transfers to 8 decode hosts in turn, Poisson arrivals).  The prefill
leaves' spine uplinks (2 leaves x 2 spines x 100 Gb/s = 400 Gb/s) carry every transfer, so the
fabric saturates at 400e9 / (2.28e9 x 8) = 21.9 req/s.  Loads: 6 req/s (the paper's, 27 % of
that), 12 req/s (55 %) and 18 req/s (82 %).

(1) offline ``FlowNetwork.simulate_flows`` (numba kernel), ECMP and reservation;
(2) the incremental ``FlowSession`` driven from Python (one call per start and per completion);
(3) the pure-Python twin (``tests/reference/flows.py``), 2,000 flows.
Context: the PDD simulator targets >= 10^5 requests/s with this network on a 16-host fabric;
the NS-3 co-simulation of vidur-ns3-pd-cosim.txt took ~4,780 s for 500 flows (~0.1 flows/s).
JIT time (compile or cache load, first call) is reported apart from run time.
"""

from __future__ import annotations

import argparse
import heapq
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.reference for the twin

from fleetplan.rng import stream  # noqa: E402
from fleetplan.sim.network import FlowNetwork, FlowSession, KvTransferSetting  # noqa: E402

RATES_PER_S = (6.0, 12.0, 18.0)


def timed(fn, repeats: int = 3) -> float:
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def offline(sizes: list[int]) -> None:
    print("(1) offline kernel, flows/s (best of 3); peak flows in flight; mean / p99 slowdown")
    t0 = time.perf_counter()
    setting = KvTransferSetting()
    net = FlowNetwork(setting.fabric)
    net.simulate_flows(setting.flows(10, stream(0, "a")), "ecmp", rng=stream(0, "e"))
    print(f"    jit (compile or cache load): {time.perf_counter() - t0:.2f} s")
    for rate in RATES_PER_S:
        setting = KvTransferSetting(rate_per_s=rate)
        for n in sizes:
            flows = setting.flows(n, stream(0, "bench", "arrivals"))
            for policy in ("ecmp", "reservation"):
                res = net.simulate_flows(flows, policy, rng=stream(0, "bench", "ecmp"))
                s = res.summary()
                sec = timed(lambda: net.simulate_flows(flows, policy, rng=stream(0, "bench", "ecmp")))  # noqa: B023
                print(f"    {rate:4.0f} req/s  {n:>9,} flows  {policy:<11}  {n / sec:>12,.0f} flows/s  "
                      f"({sec * 1e3:8.1f} ms)  peak {int(s['peak_active_flows']):3d}  "
                      f"slowdown {s['mean_slowdown']:.2f} / {s['p99_slowdown']:.2f}")


def session(n: int) -> None:
    print("(2) incremental FlowSession driven from Python")
    for rate in RATES_PER_S:
        setting = KvTransferSetting(rate_per_s=rate)
        flows = setting.flows(n, stream(0, "bench", "arrivals"))
        sess = FlowSession(FlowNetwork(setting.fabric), "ecmp", rng=stream(0, "bench", "ecmp"))
        starts = list(zip(flows.start_at_s.tolist(), range(n), strict=True))
        heapq.heapify(starts)
        t0 = time.perf_counter()
        while starts or sess.n_active:
            t = min(starts[0][0] if starts else np.inf, sess.next_done_at_s())
            sess.advance_to(t)
            while starts and starts[0][0] == t:
                _, i = heapq.heappop(starts)
                sess.start_flow(t, int(flows.src[i]), int(flows.dst[i]), float(flows.size_bytes[i]))
        sec = time.perf_counter() - t0
        print(f"    {rate:4.0f} req/s  {n:>9,} flows  {n / sec:>12,.0f} flows/s  ({sec:.2f} s)")


def twin(n: int) -> None:
    from tests.reference.flows import run_flows as twin_run_flows

    print("(3) pure-Python twin")
    for rate in RATES_PER_S:
        setting = KvTransferSetting(rate_per_s=rate)
        net = FlowNetwork(setting.fabric)
        flows = setting.flows(n, stream(0, "bench", "arrivals"))
        links, hops, cap = net.kernel_inputs()
        ecmp = stream(0, "bench", "ecmp").integers(0, 2, size=n)
        done, spine = np.empty(n), np.empty(n, dtype=np.int64)
        t0 = time.perf_counter()
        twin_run_flows(flows.start_at_s, flows.src, flows.dst, flows.size_bytes, ecmp, 0, 16, 2, links, hops, cap,
                       done, spine)
        sec = time.perf_counter() - t0
        print(f"    {rate:4.0f} req/s  {n:>9,} flows  {n / sec:>12,.0f} flows/s  ({sec:.2f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10x fewer flows")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    offline([10_000 // scale, 100_000 // scale, 1_000_000 // scale])
    session(20_000 // scale)
    twin(2_000 // scale)


if __name__ == "__main__":
    main()
