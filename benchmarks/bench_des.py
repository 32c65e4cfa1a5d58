"""Speed and memory of the simulator kernels (plain script; prints figures, asserts nothing).

    python benchmarks/bench_des.py            # full run (10^6 / 10^7 requests)
    python benchmarks/bench_des.py --quick    # 10x fewer requests

(1) iteration level, the bundled LMSYS lengths, lambda = 100 req/s, the core paper's Table 1
    fleet: 3 A100s for <= 4,096 tokens + 5 A100s for <= 65,536, built exactly as the product
    builds it (``fleetplan.sim.builders.build_pool`` from the A100-80GB profile and
    ``fleetplan.sim.compile.compile_fleet``: W = 8 ms, H = 0.65 ms per sequence at 8K context
    scaled by each sequence's context, 65,536 KV blocks of 16 tokens, max_num_seqs 256 / 16,
    token budget max_num_seqs + 512).  Its stability is printed with the timing: STABLE only when
    every request finished, the verifier's warm-up rule passes and the wait no longer rises
    (``drift_check`` says what it compared; RISING: not yet steady, UNSTABLE: drifting or unfinished).
(2) the same fleet scaled x128 to 1,024 GPUs with lambda scaled proportionally.
(3) request level, 10^7 requests at rho 0.8: one M/M/64 instance, and 8 instances x 64 slots
    with random and with least-outstanding routing (the latter keeps the departure heap).
(4) memory per simulated request: input + output array bytes, kernel-internal arrays
    (counted from the kernels' allocations), tracemalloc peak / N and peak-RSS growth / N.
JIT time (compile or cache load, first call) is reported apart from run time.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time
import tracemalloc

import numpy as np

from fleetplan.metrics import student_t_interval
from fleetplan.plan.verify import DEFAULT_DRIFT_TOLERANCE
from fleetplan.sim._kernels import STATUS_DONE, run_iteration_level, run_request_level
from fleetplan.sim._kernels.groups import iteration_groups
from fleetplan.sim.steady import mser5_truncation

SPLIT_TOKENS, LONG_CONTEXT = 4096, 65_536
MEAN_TOTAL_TOKENS, PROMPT_FRACTION, LOGNORMAL_SIGMA = 600.0, 0.8, 1.281  # sigma: F(4096) ~ 0.984


def sample_lengths(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, str]:
    try:
        from fleetplan.workload import load_workload

        prompt, output = load_workload("lmsys").sample(rng, n)
        return prompt.astype(np.int64), output.astype(np.int64), "fleetplan.workload lmsys"
    except Exception as exc:  # noqa: BLE001 - the stand-in is stated in the output
        mu = math.log(MEAN_TOTAL_TOKENS) - LOGNORMAL_SIGMA**2 / 2
        total = np.minimum(np.maximum(np.round(rng.lognormal(mu, LOGNORMAL_SIGMA, n)), 2), LONG_CONTEXT)
        prompt = np.maximum(np.round(PROMPT_FRACTION * total), 1).astype(np.int64)
        output = np.maximum(total.astype(np.int64) - prompt, 1)
        return prompt, output, f"lognormal stand-in (mean total {MEAN_TOTAL_TOKENS:.0f}, 80% prompt; {exc!r})"


def two_pool_fleet(n_short: int, n_long: int) -> dict:
    """Kernel arguments of the product's own two-pool A100 fleet (see the module docstring)."""
    from fleetplan.hardware import load_catalog
    from fleetplan.sim.builders import build_pool
    from fleetplan.sim.compile import compile_fleet
    from fleetplan.sim.spec import FleetSpec

    a100 = load_catalog().get("A100-80GB")
    fleet = compile_fleet(FleetSpec((build_pool(a100, "short", n_short, SPLIT_TOKENS),
                                     build_pool(a100, "long", n_long, LONG_CONTEXT))))
    names = ("pool_inst_start", "pool_router", "pool_max_context", "pool_max_num_seqs", "pool_max_batched_tokens",
             "pool_kv_blocks", "pool_block_tokens", "pool_step_code", "pool_step_coef")
    return {name: getattr(fleet, name) for name in names} | {"horizon_s": np.inf}


def workload(rng: np.random.Generator, rate_per_s: float, n: int) -> tuple[dict, str]:
    prompt, output, source = sample_lengths(rng, n)
    req = dict(arrival_s=np.cumsum(rng.exponential(1.0 / rate_per_s, n)), prompt_tokens=prompt,
               output_tokens=output, req_pool=(prompt + output > SPLIT_TOKENS).astype(np.int32),
               route_u=rng.random((n, 2)))
    return req, source


def iteration_outputs(n: int, n_inst: int) -> dict:
    return dict(out_inst=np.empty(n, np.int32), out_first_sched_s=np.empty(n), out_first_token_s=np.empty(n),
                out_done_s=np.empty(n), out_preemptions=np.empty(n, np.int32), out_status=np.empty(n, np.int8),
                inst_busy_s=np.empty(n_inst), inst_seq_s=np.empty(n_inst), inst_steps=np.empty(n_inst, np.int64),
                inst_tokens=np.empty(n_inst, np.int64))


REPEATS = 3  # timings: best of REPEATS (the CI-class machine is shared; the median is printed too)


def run_iteration(req: dict, fleet: dict, repeats: int = 1) -> tuple[list[float], int, dict]:
    out = iteration_outputs(len(req["arrival_s"]), int(fleet["pool_inst_start"][-1]))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        n_steps = run_iteration_level(*iteration_groups(req | fleet | out), fleet["horizon_s"])
        times.append(time.perf_counter() - t0)
    return times, n_steps, out


#: Batches of consecutive requests per half of the measured run whose mean waits the drift check pairs.
DRIFT_BATCHES = 20
#: A rise in mean wait below this is noise for fleets whose SLOs are hundreds of milliseconds.
MIN_DRIFT_S = 1e-3


def drift_check(wait_s: np.ndarray, ttft_s: np.ndarray, done: np.ndarray) -> tuple[str, str]:
    """(label, what was checked) of one run: STABLE only when every check passes.

    1. Every request finished (else UNSTABLE).
    2. Warm-up: MSER-5 on the TTFT series in arrival order (``fleetplan.sim.steady.mser5_truncation``,
       the verifier's); a cut at its limit (half the run) means the run never settled (UNSTABLE).
    3. Drift: after the cut, the second half's mean wait against the first half's, ``DRIFT_BATCHES``
       batch means of each half paired in order (they stand in for the verifier's replications), the
       rise's 95 % Student-t interval: the verifier's rule (``fleetplan.plan.verify.pool_check``: a rise
       above ``DEFAULT_DRIFT_TOLERANCE`` = 50 % of the first half's with the interval above 0) gives
       UNSTABLE; any rise above ``MIN_DRIFT_S`` with the interval above 0 gives RISING: the wait still
       grows, so the run is not yet steady (too short for its fleet, or slowly overloaded) and its
       speed is not a steady-state figure."""
    if not done.all():
        return "UNSTABLE", f"{int((~done).sum()):,} requests unfinished"
    cut, at_limit = mser5_truncation(ttft_s)
    if at_limit:
        return "UNSTABLE", f"warm-up check: MSER-5's cut reached its limit ({cut:,} of {len(ttft_s):,} requests)"
    halves = np.array_split(np.arange(cut, len(wait_s)), 2)
    means = [[float(np.mean(wait_s[b])) for b in np.array_split(h, DRIFT_BATCHES)] for h in halves]
    rise = np.array(means[1]) - np.array(means[0])
    base = float(np.mean(means[0]))
    rise_mean, rise_lo, rise_hi = student_t_interval(rise)
    if rise_lo > 0 and rise_mean > max(DEFAULT_DRIFT_TOLERANCE * base, MIN_DRIFT_S):
        label = "UNSTABLE"
    elif rise_lo > 0 and rise_mean > MIN_DRIFT_S:
        label = "RISING"
    else:
        label = "STABLE"
    return label, (f"checks: all done; MSER-5 warm-up cut {cut:,} requests (limit {len(ttft_s) // 2:,}); after it the "
                   f"second vs first half's mean wait {1e3 * rise_mean:+.2f} ms ({rise_mean / base:+.0%} of "
                   f"{1e3 * base:.2f} ms), 95 % interval [{1e3 * rise_lo:+.2f}, {1e3 * rise_hi:+.2f}] ms "
                   f"(UNSTABLE above +{DEFAULT_DRIFT_TOLERANCE:.0%}, RISING above {1e3 * MIN_DRIFT_S:g} ms, "
                   "when the interval is above 0)")


def stability(req: dict, out: dict) -> str:
    """The run's label and checks (``drift_check``), the mean queueing delay (first schedule - arrival)
    by quarter of the run, and P99 TTFT."""
    done = out["out_status"] == STATUS_DONE
    wait = out["out_first_sched_s"] - req["arrival_s"]
    q = np.array_split(np.arange(len(wait)), 4)
    quarters = [float(np.mean(wait[i][done[i]])) if done[i].any() else math.nan for i in q]
    ttft = out["out_first_token_s"] - req["arrival_s"]
    label, checked = drift_check(wait, ttft, done)
    return (f"{label}: mean wait by quarter (ms) " + ", ".join(f"{1e3 * w:.1f}" for w in quarters)
            + f"; P99 TTFT {1e3 * np.quantile(ttft[done], 0.99):.1f} ms; done {done.mean():.4f}; "
            f"preemptions {int(out['out_preemptions'].sum())}\n    {checked}")


def bench_iteration(n: int, rate_per_s: float, label: str, fleet_sizes: tuple[int, int]) -> float:
    rng = np.random.default_rng(20260601)
    req, source = workload(rng, rate_per_s, n)
    fleet = two_pool_fleet(*fleet_sizes)
    times, n_steps, out = run_iteration(req, fleet, REPEATS)
    elapsed = min(times)
    busy, seq = out["inst_busy_s"], out["inst_seq_s"]
    print(f"[{label}] {fleet_sizes[0]} short + {fleet_sizes[1]} long instances, lambda {rate_per_s:g}/s, "
          f"N {n:,}, lengths: {source}")
    print(f"    run best of {REPEATS} {elapsed:.3f} s (median {np.median(times):.3f} s): {n / elapsed:,.0f} "
          f"requests/s, {n_steps / elapsed:,.0f} steps/s, {1e9 * elapsed / n:.0f} ns/request; "
          f"{n_steps / n:.1f} steps/request; mean batch {seq.sum() / busy.sum():.1f}")
    print(f"    {stability(req, out)}")
    return elapsed / n


def bench_request_level(n: int, n_inst: int, slots: int, router: int, label: str) -> float:
    """FCFS instances of ``slots`` servers, exponential service (mean 1 s), rho = 0.8."""
    rng = np.random.default_rng(7)
    rho = 0.8
    arrival = np.cumsum(rng.exponential(1.0 / (rho * n_inst * slots), n))
    service = rng.exponential(1.0, n)
    args = (arrival, service, 0.1 * service, np.full(n, 100, np.int64), np.zeros(n, np.int32), rng.random((n, 2)),
            np.array([0, n_inst], np.int32), np.array([router], np.int32), np.array([4096]),
            np.full(n_inst, slots, np.int32), np.inf)
    outs = (np.empty(n, np.int32), np.empty(n), np.empty(n), np.empty(n), np.empty(n, np.int8), np.empty(n_inst))
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        n_events = run_request_level(*args, *outs)
        times.append(time.perf_counter() - t0)
    elapsed = min(times)
    wait = (outs[1] - arrival)[n // 10:]
    print(f"[request level, {label}] {n_inst} x {slots} slots, rho {rho}, N {n:,}: run best of {REPEATS} "
          f"{elapsed:.3f} s (median {np.median(times):.3f} s), "
          f"{n / elapsed:,.0f} requests/s, {n_events / elapsed:,.0f} events/s; "
          f"mean wait {wait.mean():.3e} s, P(W>0) {np.mean(wait > 0):.4f}")
    return elapsed


def jit_times() -> None:
    for name, fn, runner in (("run_iteration_level", run_iteration_level, lambda: bench_quiet_iteration()),
                             ("run_request_level", run_request_level, lambda: bench_quiet_request())):
        t0 = time.perf_counter()
        runner()
        print(f"JIT {name}: first call {time.perf_counter() - t0:.2f} s "
              f"(cache hits {sum(fn.stats.cache_hits.values())}, misses {sum(fn.stats.cache_misses.values())})")


def bench_quiet_iteration() -> None:
    req, _ = workload(np.random.default_rng(0), 10.0, 10)
    run_iteration(req, two_pool_fleet(1, 1))


def bench_quiet_request() -> None:
    n = 4
    run_request_level(np.arange(n, dtype=float), np.ones(n), np.ones(n), np.ones(n, np.int64), np.zeros(n, np.int32),
                      np.zeros((n, 2)), np.array([0, 1], np.int32), np.zeros(1, np.int32), np.array([10]),
                      np.ones(1, np.int32), np.inf, np.empty(n, np.int32), np.empty(n), np.empty(n), np.empty(n),
                      np.empty(n, np.int8), np.empty(1))


ITER_INTERNAL_BYTES = 4 + 4  # generated i4, next_waiting i4 (slot and instance arrays are O(fleet))
REQ_INTERNAL_BYTES = 8 + 4  # departure heap (f8 time, i4 instance), when routing reads it


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def _reset_peak_rss() -> int:
    """Touch nothing new, reset the peak-RSS mark (Linux clear_refs 5) and return the RSS."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_bytes("VmRSS")


def memory_child(kind: str, n: int) -> None:
    """Run in a fresh process: array bytes, tracemalloc peak and RSS growth in the kernel."""
    rng = np.random.default_rng(3)
    if kind == "iteration":
        bench_quiet_iteration()
        tracemalloc.start()
        req, _ = workload(rng, 100.0, n)
        fleet = two_pool_fleet(3, 5)
        out = iteration_outputs(n, int(fleet["pool_inst_start"][-1]))
        arrays = sum(a.nbytes for a in req.values()) + sum(a.nbytes for a in out.values())
        for a in out.values():
            a.fill(0)  # commit the output pages before measuring
        rss0 = _reset_peak_rss()
        run_iteration_level(*iteration_groups(req | fleet | out), fleet["horizon_s"])
        internal_analytic = ITER_INTERNAL_BYTES
    else:
        bench_quiet_request()
        tracemalloc.start()
        args = (np.cumsum(rng.exponential(1 / 400, n)), rng.exponential(1.0, n), np.zeros(n), np.full(n, 9, np.int64),
                np.zeros(n, np.int32), rng.random((n, 2)), np.array([0, 8], np.int32), np.zeros(1, np.int32),
                np.array([10]), np.full(8, 64, np.int32), np.inf)
        outs = (np.empty(n, np.int32), np.empty(n), np.empty(n), np.empty(n), np.empty(n, np.int8), np.empty(8))
        arrays = sum(a.nbytes for a in args if isinstance(a, np.ndarray)) + sum(a.nbytes for a in outs)
        for a in outs:
            a.fill(0)
        rss0 = _reset_peak_rss()
        run_request_level(*args, *outs)
        internal_analytic = REQ_INTERNAL_BYTES
    traced_peak = tracemalloc.get_traced_memory()[1]
    internal = max(0, _status_bytes("VmHWM") - rss0)
    print(f"[memory, {kind} level, N {n:,}] input+output arrays {arrays / n:.0f} B/request; kernel-internal "
          f"{internal / n:.0f} B/request by peak-RSS growth during the call ({internal_analytic} B/request "
          f"counted from the code); total {(arrays + max(internal, internal_analytic * n)) / n:.0f} B/request; "
          f"tracemalloc peak {traced_peak / n:.0f} B/request (numpy allocations incl. sampling temporaries)")


def bench_memory(n_iter: int, n_req: int) -> None:
    for kind, n in (("iteration", n_iter), ("request", n_req)):
        subprocess.run([sys.executable, __file__, "--memory", kind, str(n)], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10x fewer requests")
    parser.add_argument("--memory", nargs=2, metavar=("KIND", "N"), help="internal: one memory measurement")
    args = parser.parse_args()
    if args.memory:
        memory_child(args.memory[0], int(args.memory[1]))
        return
    scale = 10 if args.quick else 1
    n_iter, n_req = 1_000_000 // scale, 10_000_000 // scale
    jit_times()
    small, large = (3, 5), (3 * 128, 5 * 128)
    per_req_small = bench_iteration(n_iter, 100.0, "Table 1 fleet, 8 GPUs", small)
    per_req_large = bench_iteration(n_iter, 100.0 * 128, "x128, 1,024 GPUs", large)
    print(f"cost per request at {sum(large)} GPUs / at {sum(small)} GPUs: {per_req_large / per_req_small:.2f}x")
    bench_request_level(n_req, 1, 64, 0, "M/M/64")
    bench_request_level(n_req, 8, 64, 2, "random routing")
    bench_request_level(n_req, 8, 64, 0, "least-outstanding routing")
    bench_memory(n_iter, n_req)


if __name__ == "__main__":
    main()
