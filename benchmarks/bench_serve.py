"""Wall time of ``fleetplan bench serve``'s library call (``run_bench_serve``), JIT compile separate.

Run: ``python benchmarks/bench_serve.py`` from the repository root.  Prints the first call
(numba compile, or load from its cache) and the best of ``REPEATS`` warm calls for 1,000
prompts of vLLM's random dataset (1024 in / 128 out) on Llama-3.1-8B, one H100, open loop
(``--request-rate inf``) and closed loop (``--max-concurrency 64``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's package, not an installed one
from fleetplan.bench import BenchServeConfig, DatasetSpec, EngineArgs, run_bench_serve  # noqa: E402
from fleetplan.hardware import load_catalog  # noqa: E402
from fleetplan.models import load_model  # noqa: E402

N_PROMPTS = 1000
REPEATS = 5


def main() -> None:
    engine = EngineArgs(load_model("llama-3.1-8b"), load_catalog().get("H100-SXM"))
    dataset = DatasetSpec(random_input_len=1024, random_output_len=128)
    for label, conc in (("request-rate inf", None), ("max-concurrency 64", 64)):
        cfg = BenchServeConfig(dataset, num_prompts=N_PROMPTS, max_concurrency=conc,
                               percentile_metrics=("ttft", "tpot", "itl", "e2el"))
        t0 = time.perf_counter()
        run_bench_serve(engine, cfg)
        first_s = time.perf_counter() - t0
        warm = []
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            result = run_bench_serve(engine, cfg)
            warm.append(time.perf_counter() - t0)
        print(f"[{label:18}] {N_PROMPTS} prompts: first call {first_s:.2f} s (compile or cache load), "
              f"warm best of {REPEATS} {min(warm) * 1e3:.1f} ms; simulated duration "
              f"{result.metrics['duration']:.1f} s, output {result.metrics['output_throughput']:,.0f} tok/s")


if __name__ == "__main__":
    main()
