"""What each serving mechanism of the step model moves, by model family (issue #26 item 2).

Run from the repository root: ``python benchmarks/bench_mechanisms.py`` (this checkout), or
``python benchmarks/bench_mechanisms.py --code /path/to/other/checkout --baseline`` for the same
scenarios under another checkout's step model (the "before" column: only options every version has).

For each scenario (DeepSeek-V3 FP8 on 8x H200 with EP 8, Qwen3-235B-A22B FP8 on 8x H100 TP 8 and on
two H100 nodes TP 8 x PP 2, Qwen3-30B-A3B BF16 on 1x H100, Llama-3.1-70B FP8 on 4x H100; vLLM profile)
it prints the step time (ms) of decode batches of 1, 16 and 64 requests at 2,048 tokens of context and
of one 8,192-token prefill, with every mechanism on, then with one turned off at a time:

* ``per-tensor``: FP8 weights timed as per-tensor instead of 128x128 block-scaled (the published
  DeepSeek-V3 and Qwen3-235B-A22B-FP8 checkpoints are block-scaled; Llama-3.1-70B FP8 is per-tensor);
* ``no tile floor``: grouped-GEMM tile floor per hit expert off (``moe_tile_m_tokens = 0`` and no block-FP8
  64-row tile);
* ``dp-attn``: DeepSeek-V3 with attention data parallelism (TP 1 x DP 8, EP 8; batch per DP rank);
* ``fp8 dispatch``: EP dispatch in FP8 (DeepEP) instead of BF16;
* ``mtp draft``: the cost of one MTP draft pass at the same batch.

``--fp8-block-readback`` instead prints the ``fp8_block_bandwidth_efficiency`` read back from
AIConfigurator's measured block-FP8 decode steps (``benchmarks/data/aiconfigurator_estimates.csv``)
per engine: the values of ``engine_profiles/*.toml``.

``--mi300x-version-fit`` instead solves the vLLM profile's MI300X weight-streaming efficiency of each ROCm release
fitted on AMD's published ``vllm bench latency`` runs (``MI300X_LATENCY_RUNS``: Llama-3.1-70B FP8 with FP8 KV,
TP 8, batch 1, 128 prompt / 2,048 output tokens): the efficiency at which fleetplan's steps of that command (one
128-token prefill, then 2,047 decode steps at context 129-2,175) add up to the measured seconds (bisection).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BATCHES = (1, 16, 64)
CONTEXT_TOKENS = 2048
PREFILL_TOKENS = 8192
READBACK_GRID = tuple(round(0.05 + 0.01 * i, 2) for i in range(88))  # 0.05 .. 0.92

#: name, model, GPU, parallelism keywords, weight dtype, FP8 scaling of the published checkpoint
SCENARIOS = (
    ("DeepSeek-V3 FP8, 8x H200, TP8 EP8", "deepseek-v3", "h200", {"tp": 8, "ep": 8}, "fp8", "block"),
    ("DeepSeek-V3 FP8, 8x H200, DP-attn 8 EP8", "deepseek-v3", "h200", {"tp": 1, "dp": 8, "ep": 8}, "fp8", "block"),
    ("Qwen3-235B-A22B FP8, 8x H100, TP8", "qwen3-235b-a22b", "h100", {"tp": 8}, "fp8", "block"),
    ("Qwen3-235B-A22B FP8, 16x H100, TP8 PP2", "qwen3-235b-a22b", "h100", {"tp": 8, "pp": 2}, "fp8", "block"),
    ("Qwen3-235B-A22B FP8, 16x H100, TP16 EP16", "qwen3-235b-a22b", "h100", {"tp": 16, "ep": 16}, "fp8", "block"),
    ("DeepSeek-V3 FP8, 16x H100, TP16 EP16", "deepseek-v3", "h100", {"tp": 16, "ep": 16}, "fp8", "block"),
    ("Qwen3-30B-A3B BF16, 1x H100", "qwen3-30b-a3b", "h100", {"tp": 1}, "bf16", None),
    ("Qwen3-30B-A3B FP8, 1x H100", "qwen3-30b-a3b", "h100", {"tp": 1}, "fp8", "block"),
    ("Llama-3.1-70B FP8, 4x H100, TP4", "llama-3.1-70b", "h100", {"tp": 4}, "fp8", "per_tensor"),
)


def _steps_ms(predictor, parse_batch) -> list[float]:
    texts = [f"decode={b}x{CONTEXT_TOKENS}" for b in BATCHES] + [f"prefill={PREFILL_TOKENS}@0"]
    return [predictor.predict(parse_batch(t)).total_s * 1e3 for t in texts]


def _fmt(values: list[float]) -> str:
    return " ".join(f"{v:8.2f}" for v in values)


def mechanisms(baseline: bool) -> None:
    import fleetplan.perf.predictor as predictor_module
    from fleetplan.hardware import load_catalog
    from fleetplan.models import Dtype, load_model
    from fleetplan.perf import StepTimePredictor, parse_batch
    from fleetplan.perf.engine_profile import load_engine_profile
    from fleetplan.perf.parallelism import Parallelism

    catalog, options = load_catalog(), load_engine_profile("vllm").options
    print(f"step ms: decode {', '.join(str(b) for b in BATCHES)} x {CONTEXT_TOKENS} ctx | prefill {PREFILL_TOKENS}")
    for name, model, gpu, par, wdt, scaling in SCENARIOS:
        args = (load_model(model), catalog.get(gpu), Parallelism(**par), Dtype(wdt), Dtype.BF16)
        if baseline:
            print(f"{name:44s} before        {_fmt(_steps_ms(StepTimePredictor(*args, options), parse_batch))}")
            continue
        kw = {"fp8_scaling": scaling} if scaling else {}
        p = StepTimePredictor(*args, options, **kw)
        print(f"{name:44s} all on        {_fmt(_steps_ms(p, parse_batch))}")
        if scaling == "block":
            q = StepTimePredictor(*args, options, fp8_scaling="per_tensor")
            print(f"{'':44s} per-tensor    {_fmt(_steps_ms(q, parse_batch))}")
        if p.model.is_moe:
            block_tile = predictor_module.BLOCK_FP8_MOE_TILE_M_TOKENS
            predictor_module.BLOCK_FP8_MOE_TILE_M_TOKENS = 0  # the grouped-GEMM tile floor off, block FP8 too
            q = StepTimePredictor(*args, dataclasses.replace(options, moe_tile_m_tokens=0), **kw)
            print(f"{'':44s} no tile floor {_fmt(_steps_ms(q, parse_batch))}")
            predictor_module.BLOCK_FP8_MOE_TILE_M_TOKENS = block_tile
            if p.parallelism.ffn_ep > 1:
                q = StepTimePredictor(*args, dataclasses.replace(options, ep_dispatch_fp8=True), **kw)
                print(f"{'':44s} fp8 dispatch  {_fmt(_steps_ms(q, parse_batch))}")
            if p.model.attention.value == "mla":
                draft = p.mtp_draft_predictor()
                print(f"{'':44s} mtp draft     {_fmt(_steps_ms(draft, parse_batch))}")


def fp8_block_readback() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import aiconfigurator_compare as aic

    from fleetplan.hardware import load_catalog
    from fleetplan.models import Dtype, load_model
    from fleetplan.perf import StepTimePredictor, parse_batch
    from fleetplan.perf.engine_profile import load_engine_profile
    from fleetplan.perf.parallelism import Parallelism

    catalog, rows = load_catalog(), aic.read_estimates()

    def predict_ms(row: dict, efficiency: float) -> float:
        opts = dataclasses.replace(load_engine_profile(row["engine"]).options,
                                   fp8_block_bandwidth_efficiency=efficiency)
        p = StepTimePredictor(load_model(row["model"]), catalog.get(row["gpu"]), Parallelism(tp=row["tp"]),
                              Dtype(row["weight_dtype"]), Dtype.BF16, opts, fp8_scaling="block")
        return p.predict(parse_batch(f"decode={row['batch_size']}x{row['context_tokens']}")).total_s * 1e3

    for engine in ("vllm", "sglang", "trtllm"):
        for systems in (("h100_sxm", "h200_sxm"), ("b200_sxm",)):
            sel = [r for r in rows if r["engine"] == engine and r["aic_quant_mode"] == "fp8_block"
                   and r["phase"] == "decode" and r["system"] in systems and r["model"] not in aic.MOE_MODELS]

            def logs(e: float, sel=sel) -> list[float]:
                return [math.log(predict_ms(r, e) / r["aic_ms"]) for r in sel]

            best = min(READBACK_GRID, key=lambda e: sum(x * x for x in logs(e)))
            before = logs(load_engine_profile(engine).options.weight_bandwidth_efficiency)
            after = logs(best)
            print(f"{engine:7s} {'+'.join(systems):18s} rows {len(sel):3d}  read back {best:.2f}  ratio "
                  f"{math.exp(sum(before) / len(before)):.2f} -> {math.exp(sum(after) / len(after)):.2f} "
                  f"(range {math.exp(min(after)):.2f}-{math.exp(max(after)):.2f})")


#: AMD's published batch-1 latencies of the rocm/vllm images (engine_profiles/vllm.toml cites each page):
#: vLLM release -> seconds of `vllm bench latency` (Llama-3.1-70B FP8-KV, TP 8, batch 1, 128 in / 2,048 out)
MI300X_LATENCY_RUNS = {"0.9.1": 17.236, "0.10.1": 15.254}


def mi300x_version_fit() -> None:
    from fleetplan.hardware import load_catalog
    from fleetplan.models import Dtype, load_model
    from fleetplan.perf import StepTimePredictor
    from fleetplan.perf.batch import BatchComposition
    from fleetplan.perf.engine_profile import load_engine_profile
    from fleetplan.perf.parallelism import Parallelism

    gpu, model = load_catalog().get("MI300X"), load_model("llama-3.1-70b")

    def run_s(efficiency: float) -> float:
        opts = dataclasses.replace(load_engine_profile("vllm").options_for(gpu, Dtype.FP8),
                                   weight_bandwidth_efficiency=efficiency)
        p = StepTimePredictor(model, gpu, Parallelism(tp=8), Dtype.FP8, Dtype.FP8, opts)
        return p.predict(BatchComposition.uniform(n_prefill=1, chunk_tokens=128)).total_s + sum(
            p.predict(BatchComposition.uniform(n_decode=1, context_tokens=128 + k)).total_s for k in range(1, 2048))

    print(f"at 0.41 (vLLM 0.6.3's value): {run_s(0.41):.3f} s")
    for release, measured_s in MI300X_LATENCY_RUNS.items():
        lo, hi = 0.05, 0.95
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if run_s(mid) > measured_s else (lo, mid)
        print(f"vLLM {release}: measured {measured_s:.3f} s -> weight_bandwidth_efficiency {0.5 * (lo + hi):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout whose fleetplan to import")
    parser.add_argument("--baseline", action="store_true", help="only options every version has (before)")
    parser.add_argument("--fp8-block-readback", action="store_true", help="engine profiles' block-FP8 read-back")
    parser.add_argument("--mi300x-version-fit", action="store_true", help="vLLM's MI300X weight streaming per release")
    args = parser.parse_args()
    sys.path.insert(0, str(args.code))
    if args.fp8_block_readback:
        fp8_block_readback()
    elif args.mi300x_version_fit:
        mi300x_version_fit()
    else:
        mechanisms(args.baseline)


if __name__ == "__main__":
    main()
