"""Serving-level validation: ``bench serve`` against every published measurement, written to
``docs/serving_validation.md``.

Run from the repository root: ``python benchmarks/bench_validation.py`` (about a minute; the
first run compiles the kernels).  Each row of ``benchmarks/data/serving_measurements.csv`` is
one measured mean of one published run; rows of the same run share one simulation
(``run_bench_serve`` with the row's model, GPU, tensor-parallel size, weight dtype, engine
profile, chunked prefill on/off, fixed input/output lengths, request rate, concurrency and number of
prompts).  The
signed error is predicted / measured - 1.  Targets (issue "[Serving accuracy]"): mean signed
error within +-10 %, mean absolute error <= 15 %, every row within 35 % unless listed as an
outlier with its reason (<= 10 % of rows).  ``--check`` exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package, not an installed one
from fleetplan.atomic import atomic_write_text  # noqa: E402
from fleetplan.bench import BenchServeConfig, DatasetSpec, EngineArgs, run_bench_serve  # noqa: E402
from fleetplan.hardware import load_catalog  # noqa: E402
from fleetplan.models import Dtype, load_model  # noqa: E402
from fleetplan.perf.engine_profile import load_engine_profile  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "serving_measurements.csv"
DOC = ROOT / "docs" / "serving_validation.md"
ROW_TOLERANCE = 0.35
MEAN_SIGNED_TARGET = 0.10
MEAN_ABS_TARGET = 0.15
OUTLIER_SHARE_MAX = 0.10
RUN_KEYS = ("engine", "model", "gpu", "tp", "weight_dtype", "input_tokens", "output_tokens", "request_rate",
            "max_concurrency", "num_prompts", "profile", "chunked_prefill")


READING = """\
Covered: MHA (Llama-2-7B, -13B) and GQA (Llama-2-70B, Llama-3.1-8B/70B) attention; 1 and 4 GPUs per
instance; A100-40GB, A100-80GB, H100-SXM (FP8), H200; prefill-bound runs (2048-token prompts, 128
outputs) and decode-bound ones (1- or 128-token prompts, 128-2048 outputs); closed loops of 1-64
clients; engines LMDeploy v0.1 TurboMind (180 rows from one static-benchmark table), vLLM (3) and
TensorRT-LLM v0.5 (3).  Not covered yet: MoE models, 8-GPU instances, SGLang serving runs (the
SGLang/vLLM comparison in sgl-project/sglang `benchmark/benchmark_vllm_060/README.md` uses ShareGPT
prompts whose lengths are not published, so those rows cannot be replayed without the dataset file).
The LMDeploy batch-1 decode/prefill figures, the TensorRT-LLM and the vLLM nightly latency rows are
also among the 14 step-time rows the predictor's defaults were fitted on
(`docs/step_time_validation.md`); the other 170 rows are out of sample.

Reading: over all rows there is no systematic bias; the misses are engine behaviours fleetplan does
not model.  TurboMind v0.1 prefills whole prompts (no chunked prefill, modelled so: column
`chunked_prefill`), returns the first token one decode step after the context step (listed
outliers).  At 32-64 clients with short prompts the measured throughput is 35-68 % below the
prediction (most of the unexplained rows, above all Llama-2-70B on 4 GPUs); the cause is not
established.  The same rows show Llama-2-70B on 4 GPUs decoding 15-30 % slower than predicted, the
gap growing with the batch (measured median token latency 29 ms at 1 client, 37 ms at 64; predicted
25 and 27 ms) while Llama-2-7B on one GPU stays within 12 % (1-token prompts, 1-64 clients): the cost that grows is
tensor-parallel, consistent with TurboMind v0.1's NCCL all-reduce being slower than the custom
all-reduce fleetplan's 10 us alpha comes from (a hypothesis, not yet sourced); the Python client
threads of `profile_generation.py`, which stream every token, are another candidate.
Median ITL is compared with the median over tokens of the duration of the step that produced
each token (the kernel's step log, `fleetplan.bench.serve`), as LMDeploy's per-token latency
percentiles measure it.
"""


def read_rows(path: Path = DATA) -> list[dict]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    return list(csv.DictReader(lines))


def _model(name: str):
    return load_model(str(ROOT / name) if name.endswith(".json") else name)


def simulate_run(key: tuple, catalog) -> dict:
    k = dict(zip(RUN_KEYS, key, strict=True))
    gpu = catalog.get(k["gpu"])
    weights = Dtype(k["weight_dtype"])
    engine = EngineArgs(_model(k["model"]), gpu, int(k["tp"]), weights, Dtype.BF16,
                        enable_chunked_prefill=k["chunked_prefill"] == "true",
                        options=load_engine_profile(k["profile"]).options_for(gpu, weights))
    conc = int(k["max_concurrency"]) if k["max_concurrency"] else None
    rate = math.inf if k["request_rate"] == "inf" else float(k["request_rate"])
    dataset = DatasetSpec(random_input_len=int(k["input_tokens"]), random_output_len=int(k["output_tokens"]))
    cfg = BenchServeConfig(dataset, num_prompts=int(k["num_prompts"]), request_rate_per_s=rate, max_concurrency=conc,
                           percentile_metrics=("ttft", "tpot", "itl", "e2el"), metric_percentiles=(50.0, 99.0))
    return dict(run_bench_serve(engine, cfg).metrics)


def evaluate(rows: list[dict]) -> list[dict]:
    catalog = load_catalog()
    cache: dict[tuple, dict] = {}
    out = []
    for row in rows:
        key = tuple(row[k] for k in RUN_KEYS)
        if key not in cache:
            cache[key] = simulate_run(key, catalog)
        predicted = float(cache[key][row["metric"]])
        measured = float(row["measured"])
        out.append({**row, "predicted": predicted, "error": predicted / measured - 1.0})
    return out


def summary(results: list[dict]) -> dict:
    err = np.array([r["error"] for r in results])
    listed = [r for r in results if r["outlier_reason"]]
    beyond = [r for r in results if abs(r["error"]) > ROW_TOLERANCE]
    unexplained = [r for r in beyond if not r["outlier_reason"]]
    return {"n": len(results), "mean_signed": float(err.mean()), "mean_abs": float(np.abs(err).mean()),
            "within": int(np.sum(np.abs(err) <= ROW_TOLERANCE)), "beyond": len(beyond), "listed": len(listed),
            "unexplained": len(unexplained)}


def _fmt(metric: str, value: float) -> str:
    return f"{value:,.0f} tok/s" if metric == "output_throughput" else f"{value:,.1f} ms"


def markdown(results: list[dict], s: dict, wall_s: float) -> str:
    by_metric = {}
    for r in results:
        by_metric.setdefault(r["metric"], []).append(r["error"])
    by_engine = {}
    for r in results:
        by_engine.setdefault(r["engine"], []).append(r["error"])
    ok = (abs(s["mean_signed"]) <= MEAN_SIGNED_TARGET and s["mean_abs"] <= MEAN_ABS_TARGET
          and s["unexplained"] == 0 and s["listed"] <= OUTLIER_SHARE_MAX * s["n"])
    lines = [
        "# Serving-level validation (`fleetplan bench serve` against published runs)",
        "",
        "Generated by `python benchmarks/bench_validation.py` from `benchmarks/data/serving_measurements.csv` "
        f"({s['n']} measured means).  Each row is simulated as `bench serve` with the run's "
        "model, GPU, tensor-parallel size, weight dtype, fixed input/output lengths, request rate, client "
        "concurrency and number of prompts, chunked prefill on or off (`chunked_prefill`), and the engine "
        "profile in the `profile` column; signed error = "
        "predicted / measured - 1.  The predictor is the default one (`fleetplan.perf.overheads`), no per-row term.",
        "",
        "## Summary",
        "",
        "| | value | target |",
        "|---|---|---|",
        f"| mean signed error | {s['mean_signed']:+.1%} | within +-{MEAN_SIGNED_TARGET:.0%} |",
        f"| mean absolute error | {s['mean_abs']:.1%} | <= {MEAN_ABS_TARGET:.0%} |",
        f"| rows within {ROW_TOLERANCE:.0%} | {s['within']} of {s['n']} | all, or listed as outliers |",
        f"| rows beyond {ROW_TOLERANCE:.0%} without a stated reason | {s['unexplained']} | 0 |",
        f"| rows listed as outliers | {s['listed']} | <= {OUTLIER_SHARE_MAX:.0%} of rows |",
        f"| **targets met** | **{'yes' if ok else 'no'}** | |",
        "",
        "By metric and by engine (mean signed / mean absolute error, rows):",
        "",
        "| group | mean signed | mean absolute | rows |",
        "|---|---|---|---|",
    ]
    for name, errs in [*sorted(by_metric.items()), *sorted(by_engine.items())]:
        e = np.array(errs)
        lines.append(f"| {name} | {e.mean():+.1%} | {np.abs(e).mean():.1%} | {e.size} |")
    lines += ["", "## Coverage and reading", "", *READING.splitlines()]
    lines += ["", "## Rows", "",
              "| # | engine | model | GPU x TP | in / out | conc. | metric | measured | predicted | error | source |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(results, 1):
        model = Path(r["model"]).stem if r["model"].endswith(".json") else r["model"]
        flag = " (outlier: " + r["outlier_reason"] + ")" if r["outlier_reason"] else ""
        lines.append(f"| {i} | {r['engine']} {r['engine_version']} | {model} | {r['gpu']} x{r['tp']} "
                     f"{r['weight_dtype']} | {r['input_tokens']} / {r['output_tokens']} | {r['max_concurrency']} | "
                     f"{r['metric']} | {_fmt(r['metric'], float(r['measured']))} | "
                     f"{_fmt(r['metric'], r['predicted'])} | {r['error']:+.1%}{flag} | {r['source']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--out", type=Path, default=DOC)
    args = parser.parse_args()
    t0 = time.perf_counter()
    results = evaluate(read_rows())
    wall_s = time.perf_counter() - t0
    s = summary(results)
    atomic_write_text(args.out, markdown(results, s, wall_s))
    print(f"{s['n']} rows: mean signed {s['mean_signed']:+.1%}, mean absolute {s['mean_abs']:.1%}, "
          f"{s['within']} within {ROW_TOLERANCE:.0%}, {s['unexplained']} beyond without a reason; wrote {args.out} "
          f"({wall_s:.1f} s)")
    ok = (abs(s["mean_signed"]) <= MEAN_SIGNED_TARGET and s["mean_abs"] <= MEAN_ABS_TARGET
          and s["unexplained"] == 0 and s["listed"] <= OUTLIER_SHARE_MAX * s["n"])
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
