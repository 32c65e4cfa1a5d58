"""KV-saturated send-everything-at-once runs with vLLM's prefix caching off and on.

Run from the repository root: ``python benchmarks/bench_preempt_cache.py`` (about two minutes with
the first compile).  Each row of ``benchmarks/data/serving_measurements.csv`` whose run sends every
request at once with prompts of at least ``MIN_PROMPT_TOKENS`` tokens on a vLLM profile (GPUStack's
performance lab: 32,000-token prompts whose KV cache holds about one sequence) is simulated with
``bench serve`` twice: ``enable_prefix_caching`` off (a preempted request recomputes its prompt from
zero) and on (vLLM v1's default: its computed blocks stay cached and are hit when it is admitted
again, ``fleetplan.sim._kernels.features.state.own_segment``).  Prints duration, mean TTFT, mean
TPOT, median ITL and output throughput of each against the published ones (median ITL: pooled gaps
between streamed chunks, the feature kernel's histogram with prefix caching on, the step log without).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_validation as bv  # noqa: E402

from fleetplan.bench import BenchServeConfig, DatasetSpec, EngineArgs, run_bench_serve  # noqa: E402
from fleetplan.hardware import load_catalog  # noqa: E402
from fleetplan.models import Dtype  # noqa: E402
from fleetplan.perf.engine_profile import load_engine_profile  # noqa: E402

MIN_PROMPT_TOKENS = 32000
METRICS = ("mean_ttft_ms", "mean_tpot_ms", "median_itl_ms", "output_throughput")


def runs() -> dict[tuple, dict[str, float]]:
    """Published metrics of each qualifying run (key: model, GPU, TP, dtype, lengths, prompts)."""
    out: dict[tuple, dict[str, float]] = {}
    for r in bv.read_rows():
        if (r["engine"] != "vllm" or r["request_rate"] != "inf" or int(r["input_tokens"]) < MIN_PROMPT_TOKENS
                or r["max_concurrency"] or any(int(r[c] or 1) > 1 for c in ("pp", "dp", "ep"))
                or r["metric"] not in METRICS):
            continue
        key = (r["model"], r["gpu"], int(r["tp"]), r["weight_dtype"], int(r["input_tokens"]),
               int(r["output_tokens"]), int(r["num_prompts"]), r["profile"])
        out.setdefault(key, {})[r["metric"]] = float(r["measured"])
    return out


def simulate(key: tuple, prefix_caching: bool, catalog) -> dict[str, float]:
    model, gpu_name, tp, dtype, prompt, output, n, profile = key
    gpu = catalog.get(gpu_name)
    weights = Dtype(dtype)
    engine = EngineArgs(bv._model(model), gpu, tp, weights, Dtype("bf16"), enable_prefix_caching=prefix_caching,
                        options=load_engine_profile(profile).options_for(gpu, weights))
    cfg = BenchServeConfig(DatasetSpec(random_input_len=prompt, random_output_len=output), num_prompts=n,
                           request_rate_per_s=math.inf, percentile_metrics=("ttft", "tpot", "itl"))
    return dict(run_bench_serve(engine, cfg).metrics)


def main() -> int:
    catalog = load_catalog()
    for key, measured in runs().items():
        print(f"{key[0]} on {key[2]} x {key[1]} {key[3]}, {key[4]} / {key[5]} tokens, {key[6]} prompts at once:")
        for on in (False, True):
            m = simulate(key, on, catalog)
            parts = [f"duration {m['duration']:.0f} s"]
            for name in METRICS:
                if name in measured:
                    parts.append(f"{name} {m[name]:.2f} (measured {measured[name]:.2f}, "
                                 f"{m[name] / measured[name] - 1:+.1%})")
            print(f"  prefix caching {'on ' if on else 'off'}: " + ", ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
