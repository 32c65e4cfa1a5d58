"""fleetplan's step-time predictor against NVIDIA AIConfigurator's estimates for the same configurations.

AIConfigurator (github.com/ai-dynamo/aiconfigurator, Apache-2.0; its data and estimators are the PyPI
distribution ``aiconfigurator-core``) predicts a step from a database of per-operator timings measured per
system, engine and engine version (``aiconfigurator_core/systems/data/<system>/<op>/<engine>/<version>/
*.parquet``).  This script has these parts:

* ``generate`` (needs ``aiconfigurator-core``, through ``fleetplan.perf.measured.aic``) asks AIConfigurator for the
  grid below and writes ``benchmarks/data/aiconfigurator_estimates.csv``, one row per configuration
  with its source in columns (``aiconfigurator_version``, ``system``, ``engine_version``,
  ``database_mode``).  The CSV is checked in, so nothing else needs AIConfigurator.
* ``compare`` (needs fleetplan, not AIConfigurator) predicts each row with
  ``fleetplan.perf.StepTimePredictor`` and the row's engine profile (``engine_profiles/*.toml``)
  and returns ours / theirs.  ``benchmarks/bench_validation.py`` writes the result as a section of
  ``docs/serving_validation.md``.

* ``--generate-parallel`` (needs ``aiconfigurator-core``): the same for the parallel grid (``PARALLEL_GRID``: expert,
  data-parallel-attention and pipeline shardings of DeepSeek-V3, Qwen3-235B-A22B and Llama-3.1-70B, up to two
  nodes), written to ``benchmarks/data/aiconfigurator_parallel_estimates.csv`` with ``pp``, ``dp`` and ``ep``
  columns (10 s on two shared cores; 147 rows);
* ``--agreement`` (measured source needs ``aiconfigurator-core``): share of configurations within
  +-10 % of AIConfigurator for fleetplan's measured source (``fleetplan.perf.measured``, kernels only) and
  for the roofline fallback on the same configurations, the tensor-parallel grid by engine x weights x phase, the
  parallel grid by engine x sharding x phase, and both together (issue 26 target: >= 90 %, FP8 included);
* ``--fit-overhead`` (needs ``aiconfigurator-core``): each engine's non-kernel step overhead fitted on
  published serving runs (``engine_profiles/*.toml`` ``[measured_overhead]``), each run replayed as
  ``benchmarks/bench_validation.py`` replays it, and each engine release with runs fitted on its own too.
* ``--moe-tables`` (needs ``aiconfigurator-core``): the achieved share of the peak of AIConfigurator's fused-MoE
  tables per system, engine, version and dtype (``moe_table_efficiency``), the read-back of the vLLM and SGLang
  profiles' ``moe_gemm_efficiency`` / ``moe_fp8_gemm_efficiency`` (the roofline's routed-expert GEMM rate);
* ``--moe-kernel-tables`` (needs ``aiconfigurator-core``): the same for the weight-only 4-bit MoE dtypes, split by
  the table's kernel (``moe_kernel_efficiency``), the read-back of the vLLM profile's ``moe_mxfp4_gemm_efficiency``
  (Marlin, OpenAI Triton and FlashInfer MXFP4 MoE) and of its A100 ``moe_int4_gemm_efficiency``;
* ``--moe-ramp`` (needs ``aiconfigurator-core``): the same tables against the rows per hit expert at 1,024-16,384
  tokens (``moe_ramp_fit``), the read-back of the profiles' ``moe_hit_expert_weight_reads`` and of
  ``fleetplan.perf.moe.MOE_REFERENCE_ROWS_PER_EXPERT`` (the grouped GEMM's ramp);
* ``--moe-decode-tables`` (needs ``aiconfigurator-core``): the same tables' weight-bound decode rows
  (``moe_decode_bandwidth_fit``), the read-back of the profiles' ``moe_weight_bandwidth_efficiency``;
* ``--moe-decode-overhead`` (needs ``aiconfigurator-core``): the same tables at 1-512 tokens against fleetplan's
  routed-expert time (``moe_decode_overhead``), the read-back of the vLLM profile's ``moe_layer_overhead_s``;
* ``--attention-tables`` (needs ``aiconfigurator-core``): the vLLM context-attention table's efficiency per head
  dimension (``attention_table_efficiency``), the source of ``fleetplan.perf.attention``'s head-dim factors;
* ``--triton-attention-tables`` (needs ``aiconfigurator-core``): the Triton and FlashAttention prefill kernels' share of
  the BF16 peak in the vLLM and SGLang context-attention tables of the L40S and RTX PRO 6000
  (``triton_attention_table_efficiency``), the read-back of the vLLM profile's ``sink_attention_prefill_efficiency``;
* ``--dsa-tables`` (needs ``aiconfigurator-core``): the DSA indexer's prefill cost per query-key pair fitted on the
  measured DeepSeek-V3.2 attention-module tables (``dsa_indexer_table_efficiency``), the source of
  ``fleetplan.perf.attention.DSA_INDEXER_PREFILL_EFFICIENCY``;
* ``--dsa-query-tables`` (needs ``aiconfigurator-core``): the same modules' prefill cost per query beyond
  fleetplan's own module (``dsa_prefill_query_table_cost``), the source of the engine profiles'
  ``dsa_prefill_s_per_token``;
* ``--mla-query-tables`` (needs ``aiconfigurator-core``): the same for the dense MLA attention modules of DeepSeek-V3
  (``mla_prefill_query_table_cost``), the source of the engine profiles' ``mla_prefill_s_per_token``.

aiconfigurator-core 0.12.0 needs numpy>=2.1,<3, pandas>=2.2.3, scipy>=1.13.1, pyarrow>=15, pyyaml,
packaging; it resolves alongside fleetplan's numpy/numba/pandas/scipy without moving them (checked with
``pip install --dry-run``: it adds only itself and pyarrow 26.0.1, keeping numpy 2.4.6, numba 0.68.1,
pandas 3.1.1, scipy 1.17.1).  It is the optional extra ``fleetplan[aiconfigurator]``, not a default
dependency, by measurement (2026-11-28, two shared cores, load average 6-8): installed size 284 MB (the
package 114 MB, of which 89 MB measured tables and an 8 MB compiled engine; pyarrow 170 MB), download 137 MB
(81.7 + 55.0 MB wheels); first run 10.3 s for the first pool of a GPU system (tables loaded, operator list
compiled, 89 shapes timed, seven fits), 0.7-4.9 s for each further pool, 0.10-0.18 s per pool once its
table and fit are cached (``fleetplan.perf.measured.table.cache_dir``) — a sweep over a dozen placements
would spend a minute on its first run, against the README's first-run target; what it buys: the step within
+-10 % of AIConfigurator on 94.7 % of the 1,113 configurations below, both grids (roofline: 32.4 %), and on the
published serving runs of ``--fit-overhead`` (fitted rows, 38 SGLang and 2 vLLM decode-time means) SGLang +1.3 % /
vLLM -3.4 % mean signed error against +3.6 % / -15.8 % for the roofline (Qwen3-235B-A22B on 8x B200 at concurrency 1:
-6.5 % against +24.5 %), TensorRT-LLM's 46 saturated throughputs -9.5 % against -3.8 %; what it
does not buy: on the held-out serving rows (``python benchmarks/bench_validation.py --timing-source auto``, 137 of
314 runs timed by the tables) +0.8 % / 22.5 % mean signed / absolute error and 282 of 350 within 35 %, against
-0.2 % / 19.8 % / 292 for the roofline (2026-12-08, after the tables cover pipeline and data-parallel shardings).
The CSV is regenerated with::

    pip install 'fleetplan[aiconfigurator]'   # or a --system-site-packages venv with aiconfigurator-core==0.12.0
    python benchmarks/aiconfigurator_compare.py --generate     # 2.5 min on two shared cores (141 pools);
                                                               # 966 rows; the 924 without DeepSeek-V3
                                                               # identical to the CSV that aiconfigurator
                                                               # 0.12.0's cli_estimate wrote
    python benchmarks/aiconfigurator_compare.py --agreement    # the comparison and the target table
    python benchmarks/bench_validation.py                      # the doc section

Grid (``GRID_*``): Llama-3.1-8B TP1, Qwen3-32B TP2, Llama-3.1-70B TP4 and TP8, Qwen3-30B-A3B TP1
(MoE, experts split TP-wise, no expert parallelism) on H100-SXM, H200 and B200, and DeepSeek-V3 TP8 (MLA and MoE,
experts split TP-wise; its block-FP8 checkpoint on H200 and B200 only, ``GRID_ONLY``); engines vLLM,
TensorRT-LLM and SGLang, each at the database version AIConfigurator calls ``current`` for that
system; weights BF16, FP8 per-tensor (AIConfigurator ``fp8``: W8A8 with one scale per tensor, e.g.
nvidia/Llama-3.1-70B-Instruct-FP8) and FP8 block-scaled (``fp8_block``: 128x128 weight blocks,
e.g. Qwen/Qwen3-32B-FP8); KV cache and attention BF16 throughout.  Phases:

* ``prefill``: AIConfigurator ``static_ctx`` at batch 1 (its TTFT) against fleetplan's step of one
  first chunk of ``prompt_tokens`` (``prefill=P@0``).
* ``decode``: AIConfigurator ``static_gen`` with ``osl=2`` (one generation step; its TPOT) against
  fleetplan's step of ``batch_size`` decodes holding ``context_tokens`` each (``decode=BxC``).

Both sides are the latency of one engine iteration, with the engine's per-step overheads as each tool
models them.  Each FP8 row is predicted in its scheme: ``fp8`` per tensor, ``fp8_block`` as fleetplan plans a
block-scaled checkpoint (``Fp8Scaling.BLOCK``).  ``--block-gemm-floor-tables`` prints the time per call of the
block-FP8 GEMM tables (``block_gemm_floor``; the doc section's "a time per call").
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CSV_PATH = ROOT / "benchmarks" / "data" / "aiconfigurator_estimates.csv"

# fleetplan model name -> AIConfigurator model id (its bundled HuggingFace config)
GRID_MODELS = {
    "llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B",
    "qwen3-32b": "Qwen/Qwen3-32B",
    "llama-3.1-70b": "meta-llama/Meta-Llama-3.1-70B",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
}
GRID_MODEL_TP = (("llama-3.1-8b", 1), ("qwen3-32b", 2), ("llama-3.1-70b", 4), ("llama-3.1-70b", 8),
                 ("qwen3-30b-a3b", 1), ("deepseek-v3", 8))
#: Models the grid times only on some systems and quantisations: DeepSeek-V3's published checkpoint is block FP8
#: (625 GiB), which 8 GPUs hold at TP 8 only with more than 80 GB each (H200, B200)
GRID_ONLY = {"deepseek-v3": (frozenset({"h200_sxm", "b200_sxm"}), frozenset({"fp8_block"}))}
# AIConfigurator system -> fleetplan GPU (gpu_profiles/)
GRID_SYSTEMS = {"h100_sxm": "H100-SXM", "h200_sxm": "H200", "b200_sxm": "B200"}
GRID_ENGINES = ("vllm", "trtllm", "sglang")
# AIConfigurator GEMM quant mode -> fleetplan weight dtype
GRID_QUANT = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8"}
GRID_PREFILL_TOKENS = (512, 2048, 8192)
GRID_DECODE = ((1, 2048), (32, 2048), (128, 2048), (32, 8192))  # (batch_size, context_tokens)
MOE_MODELS = ("qwen3-30b-a3b", "deepseek-v3")
MLA_MODELS = ("deepseek-v3",)  # MLA attention: its own kind in the block-FP8 summary (``block_floor_summary``)
DATABASE_MODE = "SILICON"
#: The parallel grid (``parallel_grid``, its own CSV ``PARALLEL_CSV_PATH``): the shardings today's MoE fleets run,
#: each (model, pp, dp, ep in vLLM's meaning with ``tp``, systems, AIConfigurator quant modes): DeepSeek-V3's block-FP8
#: checkpoint with its experts spread over 8 GPUs (``-tp 8 --enable-expert-parallel``) and with data-parallel attention
#: (``-dp 8 --enable-expert-parallel``; AIConfigurator ``attention_dp_size`` 8: one rank's batch, the experts seeing
#: every rank's tokens); Qwen3-235B-A22B block FP8 over two 8-GPU H100 nodes, pipelined (``-tp 8 -pp 2``, experts
#: spread within a stage) and data-parallel (``-dp 16``, experts over both nodes); Llama-3.1-70B BF16 pipelined
#: (``-tp 4 -pp 2``).
PARALLEL_GRID = (
    ("deepseek-v3", 8, 1, 1, 8, ("h200_sxm", "b200_sxm"), ("fp8_block",)),
    ("deepseek-v3", 1, 1, 8, 8, ("h200_sxm", "b200_sxm"), ("fp8_block",)),
    ("qwen3-235b-a22b", 8, 2, 1, 8, ("h100_sxm",), ("fp8_block",)),
    ("qwen3-235b-a22b", 1, 1, 16, 16, ("h100_sxm",), ("fp8_block",)),
    ("llama-3.1-70b", 4, 2, 1, 1, ("h100_sxm",), ("bfloat16",)),
)
PARALLEL_MOE_MODELS = ("deepseek-v3", "qwen3-235b-a22b")

COLUMNS = ("engine", "engine_version", "system", "gpu", "model", "aic_model", "tp", "weight_dtype", "aic_quant_mode",
           "phase", "batch_size", "prompt_tokens", "context_tokens", "aic_ms", "aiconfigurator_version",
           "database_mode")
PHASES = ("prefill", "decode")
#: The parallel grid's columns: ``pp``, ``dp``, ``ep`` after ``tp`` (vLLM's meaning, ``Parallelism(tp, pp, dp, ep)``).
PARALLEL_COLUMNS = (*COLUMNS[:COLUMNS.index("tp") + 1], "pp", "dp", "ep", *COLUMNS[COLUMNS.index("tp") + 1:])
PARALLEL_CSV_PATH = ROOT / "benchmarks" / "data" / "aiconfigurator_parallel_estimates.csv"
_INT_COLUMNS = ("tp", "pp", "dp", "ep", "batch_size", "prompt_tokens", "context_tokens")


# ---- the AIConfigurator side (its venv) ---------------------------------------------------------------
def grid() -> Iterable[dict]:
    """Every configuration of the grid (module docstring), AIConfigurator's columns still empty."""
    for system, gpu in GRID_SYSTEMS.items():
        for engine in GRID_ENGINES:
            for model, tp in GRID_MODEL_TP:
                for quant, dtype in GRID_QUANT.items():
                    systems, quants = GRID_ONLY.get(model, (None, None))
                    if (systems is not None and system not in systems) or (quants is not None and quant not in quants):
                        continue
                    base = {"engine": engine, "system": system, "gpu": gpu, "model": model,
                            "aic_model": GRID_MODELS[model], "tp": tp, "weight_dtype": dtype, "aic_quant_mode": quant}
                    for p in GRID_PREFILL_TOKENS:
                        yield base | {"phase": "prefill", "batch_size": 1, "prompt_tokens": p, "context_tokens": 0}
                    for b, c in GRID_DECODE:
                        yield base | {"phase": "decode", "batch_size": b, "prompt_tokens": 0, "context_tokens": c}


def parallel_grid() -> Iterable[dict]:
    """Every configuration of the parallel grid (``PARALLEL_GRID``), AIConfigurator's columns still empty: the
    grid's phases and shapes, the decode batch and the prompt being one attention rank's with ``dp`` > 1."""
    for model, tp, pp, dp, ep, systems, quants in PARALLEL_GRID:
        for system in systems:
            for engine in GRID_ENGINES:
                for quant in quants:
                    base = {"engine": engine, "system": system, "gpu": GRID_SYSTEMS[system], "model": model,
                            "aic_model": GRID_MODELS[model], "tp": tp, "pp": pp, "dp": dp, "ep": ep,
                            "weight_dtype": GRID_QUANT[quant], "aic_quant_mode": quant}
                    for p in GRID_PREFILL_TOKENS:
                        yield base | {"phase": "prefill", "batch_size": 1, "prompt_tokens": p, "context_tokens": 0}
                    for b, c in GRID_DECODE:
                        yield base | {"phase": "decode", "batch_size": b, "prompt_tokens": 0, "context_tokens": c}


def sharding(row: dict) -> str:
    """A row's sharding in short: ``tp8``, ``tp1 dp8 ep8``, ``tp8 pp2 ep8``."""
    return " ".join(f"{k}{row.get(k, 1)}" for k in ("tp", "pp", "dp", "ep") if k == "tp" or row.get(k, 1) > 1)


def row_parallelism(row: dict):
    """The row's ``fleetplan.perf.parallelism.Parallelism``: ``tp`` with the parallel grid's ``pp``, ``dp``, ``ep``
    (1 in the tensor-parallel grid: a MoE model's experts split tensor-parallel, AIConfigurator's moe_tp = tp)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from fleetplan.perf.parallelism import Parallelism

    return Parallelism(tp=row["tp"], pp=row.get("pp", 1), dp=row.get("dp", 1), ep=row.get("ep", 1))


def _aic_engine(row: dict, engine_version: str):
    """aiconfigurator-core's compiled engine for a row's pool (``fleetplan.perf.measured.aic``), its sharding
    in AIConfigurator's terms as the measured source maps it (``coverage``: attention tp and data-parallel ranks,
    pipeline stages, the experts' tp and ep)."""
    from fleetplan.perf.measured.aic import AicEngine
    from fleetplan.perf.measured.coverage import MeasuredKey

    par = row_parallelism(row)
    moe = row["model"] in MOE_MODELS or row["model"] in PARALLEL_MOE_MODELS
    key = MeasuredKey(row["aic_model"], row["system"], row["engine"], par.attn_tp, par.ffn_tp if moe else None,
                      par.ffn_ep if moe else None, row["aic_quant_mode"], "bfloat16", pp=par.pp,
                      attention_dp=par.attn_dp)
    return AicEngine(key, engine_version)


def _aic_estimate_ms(engine, row: dict) -> float:
    """Its ``static_ctx`` TTFT at batch 1 (prefill) or ``static_gen`` TPOT at ``osl`` 2 (one decode step), ms:
    ``predict_prefill_latency`` / ``predict_decode_latency`` of the compiled engine (the same figures
    ``aiconfigurator.cli.api.cli_estimate`` 0.12.0 returns: checked equal on the Llama-3.1-8B H100 vLLM rows)."""
    if row["phase"] == "prefill":
        return engine.prefill_ms(1, row["prompt_tokens"])
    return engine.decode_ms(row["batch_size"], row["context_tokens"])


def generate(path: Path = CSV_PATH, *, log=print, parallel: bool = False) -> int:
    """Ask aiconfigurator-core for every grid row (``parallel``: the parallel grid's) and write ``path``;
    configurations it cannot estimate (no database rows for the engine/quantisation, model too large) are logged
    and left out.  Returns the number of rows written."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from fleetplan.perf.measured.aic import database_version, package_version

    aic_version = package_version()
    if aic_version is None:
        raise RuntimeError("aiconfigurator-core is not installed: pip install 'fleetplan[aiconfigurator]'")
    engines: dict[tuple, object] = {}
    rows, skipped = [], 0
    for row in (parallel_grid() if parallel else grid()):
        version = database_version(row["system"], row["engine"])
        if version is None:
            skipped += 1
            continue
        key = (row["system"], row["engine"], row["model"], row["tp"], row.get("pp"), row.get("dp"), row.get("ep"),
               row["aic_quant_mode"])
        if key in engines and engines[key] is None:
            skipped += 1
            continue
        try:
            if key not in engines:
                engines[key] = _aic_engine(row, version)
            ms = _aic_estimate_ms(engines[key], row)
        except Exception as err:  # noqa: BLE001 - AIConfigurator raises many kinds; the row is left out
            engines.setdefault(key, None)  # a pool that does not compile is not retried row by row
            skipped += 1
            log(f"skip {row['engine']} {row['system']} {row['model']} {row_parallelism(row).flags()} "
                f"{row['aic_quant_mode']} {row['phase']}: {type(err).__name__}: {str(err)[:120]}")
            continue
        if not (math.isfinite(ms) and ms > 0):
            skipped += 1
            log(f"skip {row}: estimate {ms!r}")
            continue
        rows.append(row | {"engine_version": version, "aic_ms": f"{ms:.4f}",
                           "aiconfigurator_version": aic_version, "database_mode": DATABASE_MODE})
    _write(path, rows, aic_version, PARALLEL_COLUMNS if parallel else COLUMNS)
    log(f"wrote {len(rows)} rows to {path} ({skipped} skipped)")
    return len(rows)


GEMM_TABLE_MIN_DIM = 2048  # M, N and K at least this: compute-bound shapes


def _aic_tables_and_profiles() -> tuple[Path, dict]:
    """AIConfigurator's measured-table folder (``systems/data``; needs ``aiconfigurator-core``) and fleetplan's
    GPU profiles (``gpu_profiles/*.toml``) by catalog name, the peaks the read-backs divide by."""
    import tomllib

    import aiconfigurator_core

    profiles = [tomllib.loads(f.read_text(encoding="utf-8")) for f in (ROOT / "gpu_profiles").glob("*.toml")]
    return Path(aiconfigurator_core.__file__).parent / "systems" / "data", {p["name"]: p for p in profiles}


def _efficiency_summary(eff) -> dict:
    """Rows, median and 10th / 90th percentiles of a pandas series of achieved / peak shares."""
    return {"n": len(eff), "median": float(eff.median()), "p10": float(eff.quantile(0.1)),
            "p90": float(eff.quantile(0.9))}


def gemm_table_efficiency() -> list[dict]:
    """Achieved / dense peak of AIConfigurator's raw GEMM tables (needs ``aiconfigurator`` and its pandas /
    pyarrow): per system, engine, database version and GEMM dtype, the median and 10th-90th percentiles of
    ``2 M N K / latency`` over shapes with M, N, K >= ``GEMM_TABLE_MIN_DIM``, all kernels the table holds
    pooled; peaks from ``gpu_profiles/`` (FP8 dtypes against ``fp8_tflops``, BF16 against ``bf16_tflops``)."""
    import pandas as pd

    data, profiles = _aic_tables_and_profiles()
    out = []
    for system, gpu in GRID_SYSTEMS.items():
        for table in sorted((data / system / "gemm").glob("*/*/gemm_perf.parquet")):
            frame = pd.read_parquet(table)
            big = frame[(frame.m >= GEMM_TABLE_MIN_DIM) & (frame.n >= GEMM_TABLE_MIN_DIM)
                        & (frame.k >= GEMM_TABLE_MIN_DIM)]
            for dtype in GRID_QUANT:
                rows = big[big.gemm_dtype == dtype]
                if rows.empty:
                    continue
                peak = profiles[gpu]["fp8_tflops" if dtype.startswith("fp8") else "bf16_tflops"] * 1e12
                eff = 2.0 * rows.m * rows.n * rows.k / (rows.latency * 1e-3) / peak  # latency in ms
                out.append({"system": system, "engine": table.parent.parent.name, "engine_version": table.parent.name,
                            "gemm_dtype": dtype, **_efficiency_summary(eff)})
    return out


#: rows of the block-FP8 floor read-back: 64-1,024 rows (a prefill chunk's or a decode batch's), N and K <= 8,192
#: (attention projections and shared experts of today's MoE models), where compute is below the floor
FLOOR_TABLE_M = (64, 1024)
FLOOR_TABLE_MAX_NK = 8192


def block_gemm_floor() -> list[dict]:
    """The time of one block-FP8 dense GEMM call where compute is below it (needs ``aiconfigurator-core``): per
    system, engine, version and kernel of AIConfigurator's raw GEMM tables (``gemm_dtype`` ``fp8_block``), the
    median and 10th-90th percentiles of ``latency`` over rows with ``FLOOR_TABLE_M`` rows and N, K <=
    ``FLOOR_TABLE_MAX_NK``, and the same rows' BF16 median (the shapes' own cost without the floor); the source of
    the engine profiles' ``fp8_block_gemm_floor_s``."""
    import pandas as pd

    data = _aic_tables_and_profiles()[0]
    out = []
    for system in GRID_SYSTEMS:
        for table in sorted((data / system / "gemm").glob("*/*/gemm_perf.parquet")):
            frame = pd.read_parquet(table)
            rows = frame[frame.m.between(*FLOOR_TABLE_M) & (frame.n <= FLOOR_TABLE_MAX_NK)
                         & (frame.k <= FLOOR_TABLE_MAX_NK)]
            bf16 = rows[rows.gemm_dtype == "bfloat16"]
            for kernel, block in rows[rows.gemm_dtype == "fp8_block"].groupby("kernel_source"):
                out.append({"system": system, "engine": table.parent.parent.name,
                            "engine_version": table.parent.name, "kernel": str(kernel), "n": len(block),
                            "median_ms": float(block.latency.median()), "p10_ms": float(block.latency.quantile(0.1)),
                            "p90_ms": float(block.latency.quantile(0.9)),
                            "bf16_median_ms": float(bf16.latency.median()) if len(bf16) else math.nan})
    return out


#: ``block_gemm_floor()``'s vLLM 0.24.0 DeepGEMM medians (aiconfigurator-core 0.12.0,
#: ``systems/data/<system>/gemm/vllm/0.24.0/gemm_perf.parquet``), s per call, by catalog GPU: the floor the section's
#: "as AIConfigurator times them" column applies (``PredictorOptions.fp8_block_gemm_floor_s``); no profile sets it
BLOCK_GEMM_FLOOR_S = {"H100-SXM": 9.07e-5, "H200": 8.88e-5, "B200": 1.891e-4}


def block_floor_summary(results: list[dict]) -> list[dict]:
    """vLLM ``fp8_block`` rows by systems (Hopper, B200), model kind (dense, MoE, MLA MoE: ``kind``) and phase:
    ratio (geometric mean, range) as predicted and with each GEMM call raised to ``BLOCK_GEMM_FLOOR_S``
    (AIConfigurator's per-call time)."""
    rows = [r for r in results if r["engine"] == "vllm" and r["aic_quant_mode"] == "fp8_block"]
    floored: dict[int, float] = {}
    for gpu, floor_s in BLOCK_GEMM_FLOOR_S.items():
        idx = [i for i, r in enumerate(rows) if r["gpu"] == gpu]
        floored.update(zip(idx, _predict_ms([rows[i] for i in idx], fp8_block_gemm_floor_s=floor_s), strict=True))

    def gm(values: list[float]) -> float:
        return math.exp(sum(math.log(v) for v in values) / len(values))
    out = []
    def kind(model: str) -> str:
        return "MLA MoE" if model in MLA_MODELS else "MoE" if model in MOE_MODELS else "dense"
    for systems in (("h100_sxm", "h200_sxm"), ("b200_sxm",)):
        for group in ("dense", "MoE", "MLA MoE"):
            for phase in PHASES:
                idx = [i for i, r in enumerate(rows) if r["system"] in systems and r["phase"] == phase
                       and kind(r["model"]) == group]
                if not idx:
                    continue
                now = [rows[i]["ratio"] for i in idx]
                floor = [floored[i] / rows[i]["aic_ms"] for i in idx]
                out.append({"systems": systems, "kind": group, "phase": phase, "n": len(idx), "ratio": gm(now),
                            "range": (min(now), max(now)), "ratio_floor": gm(floor),
                            "range_floor": (min(floor), max(floor))})
    return out


#: AIConfigurator system -> fleetplan GPU for the MoE read-back (the grid's systems and the A100, whose vLLM and
#: SGLang MoE tables exist)
MOE_TABLE_SYSTEMS = {**GRID_SYSTEMS, "a100_sxm": "A100-80GB"}
MOE_TABLE_TOKENS = (4096, 8192, 16384)  # step tokens of the compute-bound rows
MOE_TABLE_DISTRIBUTION = "power_law_1.01"  # AIConfigurator's default routing workload (``power_law``)
#: MoE table dtype -> the peak it is read against (W8A8 FP8 against ``fp8_tflops``, the rest against ``bf16_tflops``)
MOE_TABLE_PEAK = {"bfloat16": "bf16_tflops", "w4a16_mxfp4": "bf16_tflops", "int4_wo": "bf16_tflops",
                  "fp8": "fp8_tflops", "fp8_block": "fp8_tflops"}


def _one_gpu_moe_rows():
    """(catalog GPU, AIC system, table path, rows) of every fused-MoE table of ``MOE_TABLE_SYSTEMS`` (needs
    ``aiconfigurator-core``): the rows on one GPU (MoE TP 1, EP 1) at ``MOE_TABLE_TOKENS`` tokens with routing
    ``MOE_TABLE_DISTRIBUTION``, the rows the MoE efficiency read-backs take."""
    import pandas as pd

    data = _aic_tables_and_profiles()[0]
    for system, gpu in MOE_TABLE_SYSTEMS.items():
        for table in sorted((data / system / "moe").glob("*/*/moe_perf.parquet")):
            frame = pd.read_parquet(table)
            yield gpu, system, table, frame[(frame.moe_tp_size == 1) & (frame.moe_ep_size == 1)
                                            & frame.num_tokens.isin(MOE_TABLE_TOKENS)
                                            & (frame.distribution == MOE_TABLE_DISTRIBUTION)]


def moe_table_efficiency() -> list[dict]:
    """Achieved / dense peak of AIConfigurator's fused-MoE tables (needs ``aiconfigurator-core``), the read-back of
    the engine profiles' ``moe_gemm_efficiency`` / ``moe_fp8_gemm_efficiency``: per system, engine, database
    version and MoE dtype, the median and 10th-90th percentiles of ``2 * 3 h I T k / latency`` (gate, up and down
    projections of ``T k`` token-expert rows) over every model shape of the table at ``MOE_TABLE_TOKENS`` tokens,
    one GPU (MoE TP 1, EP 1), routing ``MOE_TABLE_DISTRIBUTION``; peaks from ``gpu_profiles/``."""
    profiles = _aic_tables_and_profiles()[1]
    out = []
    for gpu, system, table, big in _one_gpu_moe_rows():
        for dtype, peak_key in MOE_TABLE_PEAK.items():
            rows = big[big.moe_dtype == dtype]
            if rows.empty or profiles[gpu].get(peak_key) is None:
                continue
            flop = 2.0 * 3.0 * rows.hidden_size * rows.inter_size * rows.num_tokens * rows.topk
            eff = flop / (rows.latency * 1e-3) / (profiles[gpu][peak_key] * 1e12)  # latency in ms
            out.append({"system": system, "engine": table.parent.parent.name, "engine_version": table.parent.name,
                        "moe_dtype": dtype, **_efficiency_summary(eff),
                        "shapes": int(rows.groupby(["hidden_size", "inter_size", "num_experts", "topk"]).ngroups)})
    return out


#: weight-only 4-bit MoE dtypes of the per-kernel read-back (``moe_kernel_efficiency``)
MOE_KERNEL_DTYPES = ("w4a16_mxfp4", "int4_wo")


def moe_kernel_efficiency() -> list[dict]:
    """``moe_table_efficiency`` split by the table's ``kernel_source`` for the weight-only 4-bit dtypes
    ``MOE_KERNEL_DTYPES`` (needs ``aiconfigurator-core``), the read-back of the vLLM profile's
    ``moe_mxfp4_gemm_efficiency`` / ``moe_int4_gemm_efficiency``: one MoE dtype runs different kernels (vLLM's
    gpt-oss MXFP4 experts on the OpenAI Triton ``matmul_ogs`` kernels, other MXFP4 checkpoints on Marlin, FlashInfer's
    TRT-LLM MoE on B200), so each kernel gets its own median of ``2 * 3 h I T k / latency`` over the BF16 peak at
    ``MOE_TABLE_TOKENS`` tokens, one GPU, routing ``MOE_TABLE_DISTRIBUTION``."""
    profiles = _aic_tables_and_profiles()[1]
    out = []
    for gpu, system, table, rows_1gpu in _one_gpu_moe_rows():
        big = rows_1gpu[rows_1gpu.moe_dtype.isin(MOE_KERNEL_DTYPES)]
        for (dtype, kernel), rows in big.groupby(["moe_dtype", "kernel_source"]):
            flop = 2.0 * 3.0 * rows.hidden_size * rows.inter_size * rows.num_tokens * rows.topk
            eff = flop / (rows.latency * 1e-3) / (profiles[gpu]["bf16_tflops"] * 1e12)  # latency in ms
            out.append({"system": system, "engine": table.parent.parent.name, "engine_version": table.parent.name,
                        "moe_dtype": dtype, "kernel": kernel, **_efficiency_summary(eff),
                        "shapes": int(rows.groupby(["hidden_size", "inter_size", "num_experts", "topk"]).ngroups)})
    return out


#: (system, engine, database version) of the expert-width read-back (``moe_width_exponent``): the tables of the grid's
#: Hopper systems with expert-TP rows for both BF16 and block-FP8 experts
MOE_WIDTH_TABLES = (("h100_sxm", "vllm", "0.24.0"), ("h200_sxm", "vllm", "0.24.0"),
                    ("h100_sxm", "sglang", "0.5.14"), ("h200_sxm", "sglang", "0.5.14"))
MOE_WIDTH_DTYPES = ("bfloat16", "fp8_block")
MOE_WIDTH_FIT_MIN = 128  # narrowest per-GPU width in the fit (bundled models at TP <= 16 are at least this wide)


def moe_width_efficiency() -> list[dict]:
    """The fused-MoE efficiency against the per-GPU expert width (needs ``aiconfigurator-core``), the read-back of
    ``fleetplan.perf.moe.expert_width_factor``: per table of ``MOE_WIDTH_TABLES`` and dtype, every row at
    ``MOE_TABLE_TOKENS`` tokens with routing ``MOE_TABLE_DISTRIBUTION`` and no EP, its efficiency (per-GPU FLOPs
    ``2 * 3 h (I / tp) T k`` over its latency and the dtype's peak) over the median efficiency of the table's TP-1
    rows (the engine profiles' ``moe_gemm_efficiency`` read-back), against the width ``w = I / moe_tp``; the exponent
    ``x`` of ``(w / MOE_REFERENCE_WIDTH) ** x`` by least squares in log over the rows from ``MOE_WIDTH_FIT_MIN`` up
    to the reference width, and the median ratio per width."""
    import numpy as np
    import pandas as pd

    from fleetplan.perf.moe import MOE_REFERENCE_WIDTH

    data, profiles = _aic_tables_and_profiles()
    out = []
    for system, engine, version in MOE_WIDTH_TABLES:
        gpu = profiles[GRID_SYSTEMS[system]]
        frame = pd.read_parquet(data / system / "moe" / engine / version / "moe_perf.parquet")
        frame = frame[frame.num_tokens.isin(MOE_TABLE_TOKENS) & (frame.distribution == MOE_TABLE_DISTRIBUTION)
                      & (frame.moe_ep_size == 1)]
        for dtype in MOE_WIDTH_DTYPES:
            rows = frame[frame.moe_dtype == dtype]
            flop = 2.0 * 3.0 * rows.hidden_size * rows.inter_size / rows.moe_tp_size * rows.num_tokens * rows.topk
            eff = flop / (rows.latency * 1e-3) / (gpu[MOE_TABLE_PEAK[dtype]] * 1e12)
            width = rows.inter_size // rows.moe_tp_size
            ratio = eff / eff[rows.moe_tp_size == 1].median()
            narrow = (width < MOE_REFERENCE_WIDTH) & (width >= MOE_WIDTH_FIT_MIN)
            x = np.log(width[narrow] / MOE_REFERENCE_WIDTH).to_numpy()
            y = np.log(ratio[narrow]).to_numpy()
            exponent = float(np.sum(x * y) / np.sum(x * x))
            by_width = {int(w): float(ratio[width == w].median()) for w in sorted(set(width)) if w <= 4096}
            out.append({"system": system, "engine": engine, "engine_version": version, "moe_dtype": dtype,
                        "n": int(narrow.sum()), "exponent": exponent, "by_width": by_width})
    return out + moe_width_exponents(out)


#: The engine profile option each dtype's mean exponent sets (``moe_width_exponents``).
MOE_WIDTH_OPTION = {"bfloat16": "moe_width_exponent", "fp8_block": "moe_fp8_width_exponent"}


def moe_width_exponents(rows: list[dict]) -> list[dict]:
    """Per engine, release and dtype, the mean of the tables' exponents over their systems (H100 and H200): the
    values of the engine profiles' ``MOE_WIDTH_OPTION`` (BF16 experts' and W8A8 FP8 experts' width exponents)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["engine"], r["engine_version"], r["moe_dtype"]), []).append(r)
    return [{"summary": True, "engine": e, "engine_version": v, "moe_dtype": d, "option": MOE_WIDTH_OPTION[d],
             "systems": [g["system"] for g in group],
             "exponent": sum(g["exponent"] for g in group) / len(group)} for (e, v, d), group in groups.items()]


#: systems of the rows-per-expert ramp read-back (``moe_ramp_fit``): the MoE read-back's and the L40S (a low
#: bandwidth-to-FLOP GPU, where the per-expert offset is largest in rows)
MOE_RAMP_SYSTEMS = {**MOE_TABLE_SYSTEMS, "l40s": "L40S"}
MOE_RAMP_MIN_TOKENS = 1024  # rows in the fit: 1,024-16,384 tokens (the read-back's 4,096-16,384 and the ramp below)
#: dtype groups of the ramp fit and their weight bytes per parameter (4-bit: 4.25 bits with the block scales)
MOE_RAMP_GROUPS = {"bf16 + fp8_block": {"bfloat16": 2.0, "fp8_block": 1.0},
                   "4-bit weight-only": {"w4a16_mxfp4": 0.53, "int4_wo": 0.53}, "fp8 per-tensor": {"fp8": 1.0}}
MOE_RAMP_RHO = tuple(0.25 * i for i in range(13))  # rho grid 0-3
MOE_RAMP_REF_ROWS = tuple(range(96, 1025, 16))  # R_ref grid
MOE_RAMP_MAX_SHIFT = 0.01  # |median log ratio| at the read-back's tokens allowed to move


def _moe_ramp_rows():
    """Every one-GPU fused-MoE row of ``MOE_RAMP_SYSTEMS`` (vLLM, SGLang) at ``MOE_RAMP_MIN_TOKENS``-16,384 tokens with
    routing ``MOE_TABLE_DISTRIBUTION``, with its efficiency, its table's read-back ``eff`` (median at
    ``MOE_TABLE_TOKENS``), the rows per hit expert ``R = T k / (E (1 - (1 - k / E) ** T))`` and ``r_w``, one hit
    expert's weight read at the HBM peak in rows at ``eff`` (``fleetplan.perf.moe``, 'Rows per expert')."""
    import pandas as pd

    data, profiles = _aic_tables_and_profiles()
    dtype_bytes = {d: b for group in MOE_RAMP_GROUPS.values() for d, b in group.items()}
    out = []
    for system, gpu in MOE_RAMP_SYSTEMS.items():
        profile = profiles[gpu]
        for engine in ("vllm", "sglang"):
            for table in sorted((data / system / "moe" / engine).glob("*/moe_perf.parquet")):
                f = pd.read_parquet(table)
                f = f[(f.moe_tp_size == 1) & (f.moe_ep_size == 1) & (f.distribution == MOE_TABLE_DISTRIBUTION)
                      & (f.num_tokens >= MOE_RAMP_MIN_TOKENS) & f.moe_dtype.isin(list(dtype_bytes))].copy()
                f = f[[profile.get(MOE_TABLE_PEAK[d]) is not None for d in f.moe_dtype]]
                if f.empty:
                    continue
                peak = f.moe_dtype.map(lambda d, p=profile: p[MOE_TABLE_PEAK[d]] * 1e12)
                f["eff"] = 6.0 * f.hidden_size * f.inter_size * f.num_tokens * f.topk / (f.latency * 1e-3) / peak
                f["eff_read"] = f.groupby("moe_dtype").eff.transform(
                    lambda e, t=f.num_tokens: e[t.loc[e.index].isin(MOE_TABLE_TOKENS)].median())
                e, k, t = f.num_experts, f.topk, f.num_tokens
                f["rows_per_expert"] = t * k / (e * (1.0 - (1.0 - k / e) ** t))
                f["r_w"] = f.moe_dtype.map(dtype_bytes) * f.eff_read * peak / (2.0 * profile["hbm_tb_per_s"] * 1e12)
                f["engine"], f["system"], f["version"] = engine, system, table.parent.name
                out.append(f)
    return pd.concat(out)


def moe_ramp_fit() -> list[dict]:
    """The fused MoE's ramp with rows per expert (needs ``aiconfigurator-core``), the read-back of the engine
    profiles' ``moe_hit_expert_weight_reads`` and ``fleetplan.perf.moe.MOE_REFERENCE_ROWS_PER_EXPERT``: per engine
    and dtype group (``MOE_RAMP_GROUPS``), the ``(rho, R_ref)`` of the grids minimising the mean |log ratio| of the
    model efficiency ``eff (1 + r0 / R_ref) R / (R + r0)``, ``r0 = rho r_w`` (``_moe_ramp_rows``), to the table's
    over 1,024-16,384 tokens, with its median log ratio at ``MOE_TABLE_TOKENS`` (the read-back's rows) kept within
    ``MOE_RAMP_MAX_SHIFT``; beside it the flat read-back's (``rho = 0``) and the ramp at fleetplan's reference rows."""
    import numpy as np

    from fleetplan.perf.moe import MOE_REFERENCE_ROWS_PER_EXPERT

    rows = _moe_ramp_rows()
    out = []
    for engine in ("vllm", "sglang"):
        for group, dtypes in MOE_RAMP_GROUPS.items():
            f = rows[(rows.engine == engine) & rows.moe_dtype.isin(list(dtypes))]
            if f.empty:
                continue
            big = f.num_tokens.isin(MOE_TABLE_TOKENS).to_numpy()
            small = (f.num_tokens < min(MOE_TABLE_TOKENS)).to_numpy()
            rpe, r_w = f.rows_per_expert.to_numpy(), f.r_w.to_numpy()
            log_eff = np.log(f.eff.to_numpy() / f.eff_read.to_numpy())

            def log_ratio(rho: float, ref: float, rpe=rpe, r_w=r_w, log_eff=log_eff) -> np.ndarray:
                r0 = rho * r_w
                return np.log(rpe * (1.0 + r0 / ref) / (rpe + r0)) - log_eff

            def summary(lr: np.ndarray, big=big, small=small) -> dict:
                return {"read_median": float(np.median(lr[big])), "read_abs": float(np.mean(np.abs(lr[big]))),
                        "ramp_median": float(np.median(lr[small])), "ramp_abs": float(np.mean(np.abs(lr[small])))}
            best = None
            for rho in MOE_RAMP_RHO:
                for ref in MOE_RAMP_REF_ROWS:
                    lr = log_ratio(rho, float(ref))
                    if abs(np.median(lr[big])) > MOE_RAMP_MAX_SHIFT:
                        continue
                    score = float(np.mean(np.abs(lr)))
                    if best is None or score < best[0]:
                        best = (score, rho, ref, lr)
            ref_rows = MOE_REFERENCE_ROWS_PER_EXPERT
            at_ref = min(MOE_RAMP_RHO, key=lambda r, ref_rows=ref_rows: float(np.mean(np.abs(log_ratio(r, ref_rows)))))
            out.append({"engine": engine, "group": group, "n": len(f),
                        "tables": int(f.groupby(["system", "version"]).ngroups), "flat": summary(log_ratio(0.0, 1.0)),
                        "rho": None if best is None else best[1], "ref_rows": None if best is None else best[2],
                        "fit": None if best is None else summary(best[3]),
                        "rho_at_reference": at_ref, "at_reference": summary(log_ratio(at_ref, ref_rows))})
    return out


#: (engine, database version) of the decode-sized read-backs (``moe_decode_bandwidth_fit``, ``moe_decode_overhead``):
#: the engine profiles' default versions, on the grid's systems (H100, H200, B200)
MOE_DECODE_TABLES = (("vllm", "0.24.0"), ("sglang", "0.5.14"))
MOE_DECODE_DTYPES = {"bfloat16": 2.0, "fp8_block": 1.0}  # expert dtype -> weight bytes per parameter
MOE_DECODE_MAX_ROWS_PER_EXPERT = 4  # weight-bound rows: every expert of a rank hit, at most this many rows each
MOE_DECODE_MAX_TOKENS = 512  # decode-sized steps of the overhead read-back
MOE_DECODE_MAX_GPUS = 16  # expert TP x EP of the overhead read-back's rows


def _moe_decode_frames():
    """(engine, system, catalog GPU, table frame) of ``MOE_DECODE_TABLES`` on ``GRID_SYSTEMS``, BF16 and block-FP8
    experts only (needs ``aiconfigurator-core``)."""
    import pandas as pd

    data = _aic_tables_and_profiles()[0]
    for engine, version in MOE_DECODE_TABLES:
        for system, gpu in GRID_SYSTEMS.items():
            frame = pd.read_parquet(data / system / "moe" / engine / version / "moe_perf.parquet")
            yield engine, system, gpu, frame[frame.moe_dtype.isin(list(MOE_DECODE_DTYPES))]


def moe_decode_bandwidth_fit() -> list[dict]:
    """The routed experts' weight-streaming efficiency at decode sizes (needs ``aiconfigurator-core``), the read-back
    of the engine profiles' ``moe_weight_bandwidth_efficiency``: per engine, the rows of ``_moe_decode_frames`` with
    routing ``balanced`` (AIConfigurator spreads the ``T k`` token-expert rows evenly) at which every expert of a rank
    is hit with at most ``MOE_DECODE_MAX_ROWS_PER_EXPERT`` rows (any expert TP and EP), each reading ``E / ep`` experts'
    ``3 h (I / tp)`` weights; ``latency = t0 + bytes / (eff * HBM peak)`` with one ``t0`` per table and dtype and one
    ``eff`` per engine, by least squares of the relative error.  A model shape (dtype, h, I, E, k) is left out when
    the median row of any of its expert TP x EP layouts would stream faster than the HBM peak: that table cannot be
    reading every hit expert's weights (DeepSeek-V3's block-FP8 shape 7,168 x 2,048 x 256 in every table, up to 1.7x
    the peak at expert TP 1; BF16 2,048 x 5,120 x 512 and 2,688 x 1,856 x 128 in every vLLM table and SGLang's B200
    one, and 8,192 x 5,120 x 512 in SGLang's B200 table).  DeepSeek-V3's decode steps are therefore not checked against
    these tables."""
    import numpy as np
    import pandas as pd

    profiles = _aic_tables_and_profiles()[1]
    parts = []
    for engine, system, gpu, f in _moe_decode_frames():
        f = f[f.distribution == "balanced"].copy()
        rank_experts, rank_rows = f.num_experts / f.moe_ep_size, f.num_tokens * f.topk / f.moe_ep_size
        f = f[(rank_rows >= rank_experts) & (rank_rows <= MOE_DECODE_MAX_ROWS_PER_EXPERT * rank_experts)].copy()
        bytes_per_param = f.moe_dtype.astype(object).map(MOE_DECODE_DTYPES).astype(float)
        f["bytes"] = (f.num_experts / f.moe_ep_size * 3.0 * f.hidden_size * f.inter_size / f.moe_tp_size
                      * bytes_per_param)
        f["read_s"] = f.bytes / (profiles[gpu]["hbm_tb_per_s"] * 1e12)
        f["eff"] = f.read_s / (f.latency * 1e-3)
        shape = ["moe_dtype", "hidden_size", "inter_size", "num_experts", "topk"]
        config_eff = f.groupby([*shape, "moe_tp_size", "moe_ep_size"]).eff.transform("median")
        f["physical"] = (config_eff <= 1.0).groupby([f[c] for c in shape]).transform("all")
        f["engine"], f["system"] = engine, system
        parts.append(f)
    rows = pd.concat(parts)
    out = []
    for engine, g in rows.groupby("engine", sort=False):
        kept = g[g.physical]
        groups = sorted(set(zip(kept.system, kept.moe_dtype, strict=True)))
        y = kept.latency.to_numpy() * 1e-3
        x = np.c_[np.array([((kept.system == s) & (kept.moe_dtype == d)).to_numpy(float) for s, d in groups]).T,
                  kept.read_s.to_numpy()]
        coef = np.linalg.lstsq(x / y[:, None], np.ones_like(y), rcond=None)[0]
        log_ratio = np.log(x @ coef / y)
        per_table = {}
        for (system, dtype), t in kept.groupby(["system", "moe_dtype"]):
            yt = t.latency.to_numpy() * 1e-3
            xt = np.c_[np.ones_like(yt), t.read_s.to_numpy()]
            ct = np.linalg.lstsq(xt / yt[:, None], np.ones_like(yt), rcond=None)[0]
            per_table[f"{system} {dtype}"] = 1.0 / ct[1]
        out.append({"engine": engine, "n": len(kept), "dropped": int((~g.physical).sum()), "eff": 1.0 / coef[-1],
                    "t0_us": (float(coef[:-1].min()) * 1e6, float(coef[:-1].max()) * 1e6),
                    "mean_abs_log": float(np.mean(np.abs(log_ratio))), "per_table": per_table})
    return out


def moe_decode_overhead() -> list[dict]:
    """The fused-MoE tables' time beyond fleetplan's routed-expert terms at decode sizes (needs
    ``aiconfigurator-core``), the read-back of the vLLM profile's ``moe_layer_overhead_s``: per engine, system and
    dtype, the median over the rows of ``_moe_decode_frames`` with AIConfigurator's default routing
    ``MOE_TABLE_DISTRIBUTION`` at 1-``MOE_DECODE_MAX_TOKENS`` tokens and expert TP x EP up to ``MOE_DECODE_MAX_GPUS``
    of the table's latency minus one layer of
    ``StepTimePredictor``'s expected routed-expert time (``moe_experts`` / MoE layers; the engine profile's default
    version, the table's shape on a one-layer model) -- the kernel chain's fixed time that the roofline does not see;
    beside it the profile's ``moe_layer_overhead_s``.  DeepSeek-V3's shape, unphysical in ``moe_decode_bandwidth_fit``,
    is left out."""
    import dataclasses

    import numpy as np

    sys.path.insert(0, str(ROOT))
    from fleetplan.hardware import load_catalog
    from fleetplan.models import Dtype, load_model
    from fleetplan.perf import StepTimePredictor
    from fleetplan.perf.engine_profile import load_engine_profile
    from fleetplan.perf.parallelism import Parallelism
    from fleetplan.perf.quant import Fp8Scaling

    catalog, base = load_catalog(), load_model("qwen3-235b-a22b")
    dtypes = {"bfloat16": (Dtype.BF16, Fp8Scaling.PER_TENSOR), "fp8_block": (Dtype.FP8, Fp8Scaling.BLOCK)}
    out = []
    for engine, system, gpu_name, f in _moe_decode_frames():
        gpu, profile = catalog.get(gpu_name), load_engine_profile(engine)
        f = f[(f.distribution == MOE_TABLE_DISTRIBUTION) & (f.num_tokens <= MOE_DECODE_MAX_TOKENS)
              & (f.moe_tp_size * f.moe_ep_size <= MOE_DECODE_MAX_GPUS)
              & ~((f.hidden_size == 7168) & (f.inter_size == 2048) & (f.num_experts == 256))]
        for dtype, g in f.groupby("moe_dtype"):
            weight_dtype, scaling = dtypes[dtype]
            options = profile.options_for(gpu, weight_dtype)
            gaps = []
            for shape, rows in g.groupby(["hidden_size", "inter_size", "num_experts", "topk", "moe_tp_size",
                                          "moe_ep_size"]):
                h, inter, n_experts, top_k, tp, ep = (int(v) for v in shape)
                if inter % tp or n_experts % ep:
                    continue
                model = dataclasses.replace(base, hidden_size=h, moe_intermediate_size=inter, n_experts=n_experts,
                                            n_experts_per_token=top_k, n_heads=256, n_kv_heads=256, n_layers=1)
                step = StepTimePredictor(model, gpu, Parallelism(tp=tp * ep, ep=ep), weight_dtype, Dtype.BF16, options,
                                         scaling)
                for tokens, latency_ms in zip(rows.num_tokens.to_numpy(int), rows.latency.to_numpy(), strict=True):
                    gaps.append(latency_ms * 1e-3 - step._moe_s(int(tokens), None))
            gaps = np.array(gaps)
            out.append({"engine": engine, "system": system, "moe_dtype": dtype, "n": len(gaps),
                        "median_us": float(np.median(gaps)) * 1e6, "p25_us": float(np.quantile(gaps, 0.25)) * 1e6,
                        "p75_us": float(np.quantile(gaps, 0.75)) * 1e6,
                        "profile_us": options.moe_layer_overhead_s * 1e6})
    return out


ATTENTION_TABLE = ("h100_sxm", "vllm", "0.24.0")  # the one vLLM context-attention table with several head dims
ATTENTION_TABLE_MIN_ISL = 4096  # prompt tokens of the compute-bound rows


def attention_table_efficiency() -> list[dict]:
    """Achieved / BF16 peak of AIConfigurator's vLLM context-attention (FlashAttention prefill) table per head
    dimension (needs ``aiconfigurator-core``): median of ``4 d H B L^2 / 2 / latency`` over its rows with BF16 KV,
    no window and ``isl >= ATTENTION_TABLE_MIN_ISL``; the source of ``fleetplan.perf.attention``'s head-dim
    factors (each median over the head-dim-128 one)."""
    import pandas as pd

    data, profiles = _aic_tables_and_profiles()
    system, engine, version = ATTENTION_TABLE
    gpu = profiles[GRID_SYSTEMS[system]]
    frame = pd.read_parquet(data / system / "attention" / engine / version / "context_attention_perf.parquet")
    rows = frame[(frame.kv_cache_dtype == "bfloat16") & (frame.window_size == 0)
                 & (frame.isl >= ATTENTION_TABLE_MIN_ISL) & (frame.attn_dtype == "bfloat16")]
    flop = 4.0 * rows.head_dim * rows.num_heads * rows.batch_size * rows.isl * rows.isl / 2.0  # causal
    rows = rows.assign(eff=flop / (rows.latency * 1e-3) / (gpu["bf16_tflops"] * 1e12))
    out = []
    for (kernel, dim), g in rows.groupby(["kernel_source", "head_dim"]):
        out.append({"system": system, "engine": engine, "engine_version": version, "kernel": kernel,
                    "head_dim": int(dim), "n": len(g), "median": float(g.eff.median())})
    return out


#: (system, engine, database version) of the Triton prefill-attention read-back (``triton_attention_table_efficiency``):
#: the non-Hopper systems whose vLLM tables time vLLM's Triton unified attention beside FlashAttention 2, and
#: SGLang's tables of the same systems (its Triton prefill kernel at several head dims)
TRITON_ATTENTION_TABLES = (("l40s", "vllm", "0.24.0"), ("rtx_pro_6000_server", "vllm", "0.24.0"),
                           ("l40s", "sglang", "0.5.14"), ("rtx_pro_6000_server", "sglang", "0.5.14"))


def triton_attention_table_efficiency() -> list[dict]:
    """Achieved / BF16 peak of the Triton and FlashAttention prefill kernels of AIConfigurator's context-attention
    tables of ``TRITON_ATTENTION_TABLES`` (needs ``aiconfigurator-core``), the read-back of the vLLM profile's
    ``sink_attention_prefill_efficiency``: per table, kernel, KV dtype and head dim, the median of
    ``4 d H B L^2 / 2 / latency`` over rows with no window and ``isl >= ATTENTION_TABLE_MIN_ISL``; the peak is
    AIConfigurator's own (``gpu.bfloat16_tc_flops`` of ``systems/<system>.yaml``: these GPUs have no fleetplan
    profile, or their peak is AIConfigurator's clock-scaled one)."""
    import pandas as pd
    import yaml

    data = _aic_tables_and_profiles()[0]
    out = []
    for system, engine, version in TRITON_ATTENTION_TABLES:
        spec = yaml.safe_load((data.parent / f"{system}.yaml").read_text(encoding="utf-8"))
        peak = float(spec["gpu"]["bfloat16_tc_flops"])
        frame = pd.read_parquet(data / system / "attention" / engine / version / "context_attention_perf.parquet")
        rows = frame[(frame.window_size == 0) & (frame.isl >= ATTENTION_TABLE_MIN_ISL)]
        flop = 4.0 * rows.head_dim * rows.num_heads * rows.batch_size * rows.isl * rows.isl / 2.0  # causal
        rows = rows.assign(eff=flop / (rows.latency * 1e-3) / peak)
        for (kernel, kv, dim), g in rows.groupby(["kernel_source", "kv_cache_dtype", "head_dim"]):
            out.append({"system": system, "engine": engine, "engine_version": version, "kernel": kernel,
                        "kv_cache_dtype": kv, "head_dim": int(dim), "n": len(g), "median": float(g.eff.median())})
    return out


DSA_MODEL = "deepseek-ai/DeepSeek-V3.2"
DSA_TOPK = 2048  # index_topk of DeepSeek-V3.2's config.json
DSA_INDEXER_FLOP_PER_PAIR = 2.0 * 64 * 128  # 2 n_i d_i: index_n_heads 64, index_head_dim 128
DSA_TABLE_TOKENS = (1024, 65536)  # step tokens of the rows fitted (batch x new tokens)
DSA_TABLE_MAX_PREFIX = 65536


def _dsa_valid_keys(prefix, new):
    """Keys the sparse MLA reads for ``new`` tokens after ``prefix``: sum over positions of min(position, topk)."""
    import numpy as np

    return np.array([np.minimum(o + np.arange(1, int(c) + 1), DSA_TOPK).sum()
                     for o, c in zip(prefix, new, strict=True)], float)


def dsa_indexer_table_efficiency() -> list[dict]:
    """The DSA indexer's prefill cost per (query, key) pair read back from AIConfigurator's measured DeepSeek-V3.2
    attention modules (``sparse_attention/<engine>/<version>/dsa_context_module_perf.parquet``; needs
    ``aiconfigurator-core``): per system, engine, heads per GPU and KV dtype (FP8 block weights; SGLang's sparse
    FlashMLA rows, its dense-MHA rows of prompts <= 2,048 tokens left out), a relative least-squares fit of the
    module latency to ``a T + v V + b P + c`` over rows of ``DSA_TABLE_TOKENS`` tokens (``T`` tokens, ``V`` keys
    the sparse MLA reads, ``P`` causal query-key pairs the indexer scores, prefix ``step`` included); ``b`` as a
    share of the FP8 peak is ``2 n_i d_i / (b x peak)``, the source of ``fleetplan.perf.attention``'s
    ``DSA_INDEXER_PREFILL_EFFICIENCY``.  The same fit with ``V`` = top-k keys per query (the step model's charge
    before its "Keys a query has" term) gives each table's error under that form, the evidence for the term."""
    import numpy as np
    import pandas as pd

    data, profiles = _aic_tables_and_profiles()
    sparse_kernels = {"FLASHMLA_SPARSE", "sglang_dsa_indexer_flashmla_sparse", "sglang_dsa_indexer_flashmla_kv"}
    out = []
    for system, gpu_name in GRID_SYSTEMS.items():
        for path in sorted((data / system / "sparse_attention").glob("*/*/dsa_context_module_perf.parquet")):
            frame = pd.read_parquet(path)
            frame = frame[(frame.model == DSA_MODEL) & (frame.gemm_type == "fp8_block")
                          & frame.kernel_source.isin(sparse_kernels) & (frame.step <= DSA_TABLE_MAX_PREFIX)]
            tokens = frame.batch_size * frame.isl
            frame = frame[(tokens >= DSA_TABLE_TOKENS[0]) & (tokens <= DSA_TABLE_TOKENS[1])]
            for (heads, kv), g in frame.groupby(["num_heads", "kv_cache_dtype"]):
                if len(g) < 8:
                    continue
                b_seqs, new, prefix = (g[c].to_numpy(float) for c in ("batch_size", "isl", "step"))
                x = np.c_[b_seqs * new, b_seqs * _dsa_valid_keys(prefix, new),
                          b_seqs * (new * prefix + new * (new + 1) / 2), np.ones(len(g))]
                y = g.latency.to_numpy() * 1e-3
                coef, *_ = np.linalg.lstsq(x / y[:, None], np.ones(len(g)), rcond=None)
                rel = x @ coef / y - 1
                # the same fit with every query charged the full top-k (K keys per token, not min(position, K))
                x_k = np.c_[x[:, 0], b_seqs * new * DSA_TOPK, x[:, 2:]]
                coef_k, *_ = np.linalg.lstsq(x_k / y[:, None], np.ones(len(g)), rcond=None)
                peak = profiles[gpu_name]["fp8_tflops"] * 1e12
                out.append({"system": system, "engine": path.parts[-3], "engine_version": path.parts[-2],
                            "heads": int(heads), "kv": kv, "n": len(g), "s_per_pair": float(coef[2]),
                            "share": DSA_INDEXER_FLOP_PER_PAIR / float(coef[2]) / peak,
                            "median_abs_err": float(np.median(np.abs(rel))),
                            "median_abs_err_topk_per_query": float(np.median(np.abs(x_k @ coef_k / y - 1))),
                            "s_per_key": float(coef[1])})
    return out


#: The attention module's GEMMs of one DeepSeek-V3.2 layer (``fleetplan.perf.operators.step_gemms`` names)
DSA_MODULE_GEMMS = frozenset({"q_a_proj", "q_b_proj", "kv_a_proj", "kv_b_proj", "o_proj", "index_wq_b", "index_wk"})
DSA_QUERY_MIN_TOKENS = 4096  # rows of at least this many step tokens: the size of a serving step's prefill
#: The dense MLA module's GEMMs of one DeepSeek-V3 layer and the model AIConfigurator's MLA module tables time
MLA_MODULE_GEMMS = frozenset({"q_a_proj", "q_b_proj", "kv_a_proj", "kv_b_proj", "o_proj"})
MLA_MODEL = "deepseek-ai/DeepSeek-V3"
#: vLLM's MLA prefill kernel on Hopper and Blackwell: FlashAttention varlen over the up-projected heads (the module
#: tables' other kernel sources time non-default backends)
MLA_PREFILL_KERNELS = frozenset({"FLASH_ATTN"})


def _module_prefill_query_cost(model_name: str, table: str, gemms: frozenset, kernels: frozenset, zeroed: str,
                               model_id: str) -> list[dict]:
    """An attention module's prefill cost per query outside fleetplan's terms (``dsa_prefill_query_table_cost``,
    ``mla_prefill_query_table_cost``): per system, engine, heads per GPU and KV dtype of AIConfigurator's measured
    module table ``table`` (``<op>/<engine>/<version>/<name>.parquet`` under each system; FP8 block weights, rows of
    ``kernels``, no prefix, ``DSA_QUERY_MIN_TOKENS``-65,536 step tokens), the measured module latency minus fleetplan's
    own module of one layer at the engine profile's values with option ``zeroed`` 0 (the module's ``gemms``' roofline
    and the attention terms, ``StepTimePredictor.predict`` over ``n_layers``), fitted by relative least squares to
    ``r T + c`` (``T`` step tokens)."""
    import dataclasses

    import numpy as np
    import pandas as pd

    sys.path.insert(0, str(ROOT))
    from fleetplan.hardware import load_catalog
    from fleetplan.models import Dtype, load_model
    from fleetplan.perf import StepTimePredictor
    from fleetplan.perf.batch import BatchComposition
    from fleetplan.perf.engine_profile import load_engine_profile
    from fleetplan.perf.operators import gemm_block, step_gemms
    from fleetplan.perf.parallelism import Parallelism
    from fleetplan.perf.quant import Fp8Scaling

    data, _ = _aic_tables_and_profiles()
    catalog, model = load_catalog(), load_model(model_name)
    out = []
    for system, gpu_name in GRID_SYSTEMS.items():
        gpu = catalog.get(gpu_name)
        for path in sorted(data.joinpath(system).glob(table)):
            engine = path.parts[-3]
            options = dataclasses.replace(load_engine_profile(engine).options_for(gpu, Dtype.FP8), **{zeroed: 0.0})
            frame = pd.read_parquet(path)
            frame = frame[(frame.model == model_id) & (frame.gemm_type == "fp8_block") & (frame.step == 0)
                          & frame.kernel_source.isin(kernels)]
            tokens = frame.batch_size * frame.isl
            frame = frame[(tokens >= DSA_QUERY_MIN_TOKENS) & (tokens <= DSA_TABLE_TOKENS[1])]
            for (heads, kv), g in frame.groupby(["num_heads", "kv_cache_dtype"]):
                if len(g) < 5 or model.n_heads % int(heads):
                    continue
                kv_dtype = Dtype.FP8 if kv == "fp8" else Dtype.BF16
                step = StepTimePredictor(model, gpu, Parallelism(tp=model.n_heads // int(heads)), Dtype.FP8, kv_dtype,
                                         options, Fp8Scaling.BLOCK)
                shapes = tuple(s for s in step_gemms(model, step.parallelism, Dtype.FP8,
                                                     step.weight_stream_bytes_per_param) if s.name in gemms)
                block = gemm_block(shapes, step.rates)
                t, ours = [], []
                for n_seqs, isl in zip(g.batch_size.to_numpy(int), g.isl.to_numpy(int), strict=True):
                    seconds = step.predict(BatchComposition(np.full(n_seqs, isl), np.zeros(n_seqs, int),
                                                            np.zeros(0, int))).seconds
                    n_tok = n_seqs * isl
                    gemm_s = max(block.compute_s_per_padded_token * n_tok,
                                 block.memory_s + block.memory_s_per_token * n_tok)
                    t.append(n_tok)
                    ours.append((seconds["attention_prefill"] + seconds["attention_window"] + gemm_s) / model.n_layers)
                t, ours = np.array(t, float), np.array(ours)
                y = g.latency.to_numpy() * 1e-3
                x = np.c_[t, np.ones(len(t))]
                coef, *_ = np.linalg.lstsq(x / y[:, None], (y - ours) / y, rcond=None)
                out.append({"system": system, "engine": engine, "engine_version": path.parts[-2], "heads": int(heads),
                            "kv": kv, "n": len(g), "s_per_token": float(coef[0]), "fixed_s": float(coef[1]),
                            "ratio_before": float(np.median(ours / y)),
                            "ratio_after": float(np.median((ours + coef[0] * t) / y))})
    return out


def dsa_prefill_query_table_cost() -> list[dict]:
    """The DSA attention module's prefill cost per query outside fleetplan's terms, read back from AIConfigurator's
    measured DeepSeek-V3.2 modules (``sparse_attention/<engine>/<version>/dsa_context_module_perf.parquet``; needs
    ``aiconfigurator-core``; sparse-kernel rows; ``_module_prefill_query_cost``): fleetplan's module is the GEMMs'
    roofline, the indexer's pairs and the sparse MLA's keys; ``r`` is the source of the engine profiles'
    ``dsa_prefill_s_per_token`` (``fleetplan.perf.attention``, "Per-query prefill cost")."""
    return _module_prefill_query_cost(
        "deepseek-v3.2", "sparse_attention/*/*/dsa_context_module_perf.parquet", DSA_MODULE_GEMMS,
        frozenset({"FLASHMLA_SPARSE", "sglang_dsa_indexer_flashmla_sparse", "sglang_dsa_indexer_flashmla_kv"}),
        "dsa_prefill_s_per_token", DSA_MODEL)


def mla_prefill_query_table_cost() -> list[dict]:
    """The dense MLA attention module's prefill cost per query outside fleetplan's terms, read back from
    AIConfigurator's measured DeepSeek-V3 modules (``mla/<engine>/<version>/mla_context_module_perf.parquet``; needs
    ``aiconfigurator-core``; ``MLA_PREFILL_KERNELS`` rows; ``_module_prefill_query_cost``): fleetplan's module is the
    five projections' roofline and the MHA-form prefill attention; ``r`` is the source of the engine profiles'
    ``mla_prefill_s_per_token`` (``fleetplan.perf.attention``, "Per-query prefill cost")."""
    return _module_prefill_query_cost("deepseek-v3", "mla/*/*/mla_context_module_perf.parquet", MLA_MODULE_GEMMS,
                                      MLA_PREFILL_KERNELS, "mla_prefill_s_per_token", MLA_MODEL)


def _write(path: Path, rows: list[dict], aic_version: str, columns: tuple[str, ...] = COLUMNS) -> None:
    header = (f"# AIConfigurator {aic_version} estimates (database_mode {DATABASE_MODE}) written by "
              "benchmarks/aiconfigurator_compare.py --generate; aic_ms is static_ctx TTFT (prefill, batch 1) or "
              "static_gen TPOT with osl 2 (one decode step); source of each row: aiconfigurator_version, system, "
              "engine, engine_version.\n")
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as fh:
        fh.write(header)
        writer = csv.DictWriter(fh, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)


# ---- the fleetplan side ---------------------------------------------------------------------------------
def read_estimates(path: Path = CSV_PATH, columns: tuple[str, ...] = COLUMNS) -> list[dict]:
    """The checked-in estimates, typed (ints, ``aic_ms`` float); ``ValueError`` names a bad row's file line.
    ``columns``: ``PARALLEL_COLUMNS`` for the parallel grid's CSV."""
    numbered = [(n, line) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
                if not line.startswith("#")]
    rows = []
    for (i, _), raw in zip(numbered[1:], csv.DictReader(line for _, line in numbered), strict=True):
        if set(raw) != set(columns):
            raise ValueError(f"{path}: columns {sorted(raw)} are not {sorted(columns)}")
        row = dict(raw)
        try:
            for name in _INT_COLUMNS:
                if name in raw:
                    row[name] = int(raw[name])
            row["aic_ms"] = float(raw["aic_ms"])
        except ValueError as err:
            raise ValueError(f"{path} line {i}: {err}") from None
        if row["phase"] not in PHASES or not (math.isfinite(row["aic_ms"]) and row["aic_ms"] > 0):
            raise ValueError(f"{path} line {i}: phase {row['phase']!r} / aic_ms {row['aic_ms']!r}")
        rows.append(row)
    return rows


def _predict_ms(rows: list[dict], **overrides) -> list[float]:
    """fleetplan's step (ms) for each row with the row's engine profile, options replaced by ``overrides``; FP8
    rows in the row's scheme (``fp8_block``: ``Fp8Scaling.BLOCK``, as a block-scaled checkpoint is planned)."""
    import dataclasses

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from fleetplan.hardware import load_catalog
    from fleetplan.models import Dtype, load_model
    from fleetplan.perf import StepTimePredictor, parse_batch
    from fleetplan.perf.engine_profile import load_engine_profile
    from fleetplan.perf.quant import Fp8Scaling

    catalog = load_catalog()
    predictors: dict[tuple, StepTimePredictor] = {}
    out = []
    for row in rows:
        scaling = Fp8Scaling.BLOCK if row["aic_quant_mode"] == "fp8_block" else Fp8Scaling.PER_TENSOR
        par = row_parallelism(row)
        key = (row["engine"], row["gpu"], row["model"], par, row["weight_dtype"], scaling)
        if key not in predictors:
            gpu, dtype = catalog.get(row["gpu"]), Dtype(row["weight_dtype"])
            options = dataclasses.replace(load_engine_profile(row["engine"]).options_for(gpu, dtype), **overrides)
            predictors[key] = StepTimePredictor(load_model(row["model"]), gpu, par, dtype, Dtype.BF16, options,
                                                fp8_scaling=scaling)
        if row["phase"] == "prefill":
            batch = parse_batch(f"prefill={row['prompt_tokens']}@0")
        else:
            batch = parse_batch(f"decode={row['batch_size']}x{row['context_tokens']}")
        out.append(predictors[key].predict(batch).total_s * 1e3)
    return out


def compare(rows: list[dict]) -> list[dict]:
    """Each row with ``ours_ms`` (fleetplan's step with the row's engine profile) and
    ``ratio`` = ours / AIConfigurator's."""
    return [row | {"ours_ms": ms, "ratio": ms / row["aic_ms"]} for row, ms in zip(rows, _predict_ms(rows), strict=True)]


# ---- agreement of the step model's sources with AIConfigurator (issue 26 target) -----------------------
AGREEMENT_TOLERANCE = 0.10  # |ours / AIConfigurator - 1| <= 10 %
AGREEMENT_TARGET = 0.90  # share of configurations within the tolerance


def _batch_aggregates(row: dict) -> tuple[int, int, int, int, int]:
    """(n_seqs, n_decode, prefill_tokens, decode_context_tokens, attn2) of a row's step."""
    if row["phase"] == "prefill":
        p = row["prompt_tokens"]
        return 1, 0, p, 0, p * p
    b, c = row["batch_size"], row["context_tokens"]
    return b, b, 0, b * c, 0


def measured_ms(rows: list[dict], *, log=None) -> list[float | None]:
    """The measured source's step (ms) for each row (``fleetplan.perf.measured``: aiconfigurator-core's
    tables at the grid, fitted to the roofline's coefficient form), kernels only (the engine's fitted
    non-kernel overhead taken back out, as AIConfigurator's estimates have none of it); None where the
    measured source does not cover the row or aiconfigurator-core is not installed."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from fleetplan.hardware import load_catalog
    from fleetplan.models import Dtype, load_model
    from fleetplan.perf import StepTimePredictor
    from fleetplan.perf.engine_profile import load_engine_profile
    from fleetplan.perf.measured import measured_step_model
    from fleetplan.perf.measured.overhead import engine_overhead

    catalog = load_catalog()
    models: dict[tuple, object] = {}
    out: list[float | None] = []
    for row in rows:
        scheme = row["aic_quant_mode"] if row["aic_quant_mode"] != "bfloat16" else "fp8"
        par = row_parallelism(row)
        key = (row["engine"], row["gpu"], row["model"], par, row["weight_dtype"], scheme)
        if key not in models:
            gpu, dtype = catalog.get(row["gpu"]), Dtype(row["weight_dtype"])
            options = load_engine_profile(row["engine"]).options_for(gpu, dtype)
            model = load_model(row["model"])
            predictor = StepTimePredictor(model, gpu, par, dtype, Dtype.BF16, options)
            models[key] = measured_step_model(predictor, row["engine"], scheme)
            if log is not None:
                log(f"{len(models)} pools: {key} -> {'measured' if models[key] is not None else 'not covered'}")
        step = models[key]
        if step is None:
            out.append(None)
            continue
        over = engine_overhead(row["engine"])
        agg = _batch_aggregates(row)
        out.append((step.step_s(*agg) - over.step_s - over.per_seq_s * agg[0]) * 1e3)
    return out


def agreement(rows: list[dict], ours_ms: list[float | None], *, by_sharding: bool = False) -> list[dict]:
    """Share of configurations within ``AGREEMENT_TOLERANCE`` of AIConfigurator, by engine x weights (FP8
    schemes apart) x phase (``by_sharding``: engine x ``sharding`` x phase, the parallel grid) and over all rows;
    rows a source does not cover (None) count as misses."""
    groups: dict[tuple, list[bool]] = {}
    for row, ms in zip(rows, ours_ms, strict=True):
        hit = ms is not None and abs(ms / row["aic_ms"] - 1.0) <= AGREEMENT_TOLERANCE
        kind = sharding(row) if by_sharding else row["aic_quant_mode"]
        for g in ((row["engine"], kind, row["phase"]), ("all", "all", "all"),
                  ("all", "fp8 (both schemes)" if row["aic_quant_mode"] != "bfloat16" else "bfloat16", "all")):
            groups.setdefault(g, []).append(hit)
    return [{"engine": e, "aic_quant_mode": q, "phase": p, "n": len(h), "within": sum(h) / len(h)}
            for (e, q, p), h in sorted(groups.items(), key=lambda kv: (kv[0][0] == "all", kv[0]))]


# ---- the engines' non-kernel step overhead, fitted on published serving runs ---------------------------
SERVING_CSV = ROOT / "benchmarks" / "data" / "serving_measurements.csv"
OVERHEAD_METRICS = ("median_itl_ms", "mean_tpot_ms", "median_tpot_ms", "mean_e2el_ms")  # decode-time metrics
OVERHEAD_TRIAL_S = 2e-3  # the second simulation's overhead; metrics are close to linear in it
#: Published runs not in the serving table (FITTED: they count as fitted rows, never held out), in the serving table's
#: columns.  SGLang's ``--random-range-ratio`` default 0 draws lengths on [1, L] (``range_ratio_rule`` sglang).
SGLANG_COOKBOOK = ("sgl-project/sgl-cookbook@07e25b7be1a6e42acacbc7a4f1fe67a5f7313f64 docs/Qwen/Qwen3.md sec. 5.1.1 "
                   "(8x B200, sglang 0.5.6, launch_server --tp 8, sglang.bench_serving random 1000/1000)")
_SGLANG_COOKBOOK_RUN = {
    "engine": "sglang", "engine_version": "0.5.6", "model": "qwen3-235b-a22b", "gpu": "B200", "tp": "8",
    "weight_dtype": "bf16", "dataset": "random", "input_tokens": "1000", "output_tokens": "1000",
    "random_range_ratio": "0", "range_ratio_rule": "sglang", "request_rate": "inf", "profile": "sglang",
    "chunked_prefill": "true", "kv_cache_dtype": "", "max_num_seqs": "", "max_num_batched_tokens": "", "pp": "1",
    "dp": "1", "ep": "1", "dp_attention": "", "outlier_reason": "", "held_out": "fit", "unusable_reason": "",
    "metric": "median_itl_ms"}
EXTRA_OVERHEAD_ROWS = (
    {**_SGLANG_COOKBOOK_RUN, "max_concurrency": "1", "num_prompts": "10", "measured": "10.28",
     "source": SGLANG_COOKBOOK + ", max-concurrency 1: median ITL 10.28 ms"},
    {**_SGLANG_COOKBOOK_RUN, "max_concurrency": "16", "num_prompts": "80", "measured": "14.73",
     "source": SGLANG_COOKBOOK + ", max-concurrency 16: median ITL 14.73 ms"},
    {**_SGLANG_COOKBOOK_RUN, "max_concurrency": "100", "num_prompts": "500", "measured": "23.78",
     "source": SGLANG_COOKBOOK + ", max-concurrency 100: median ITL 23.78 ms"},
)


def _bench_validation():
    """``benchmarks/bench_validation.py`` (imported here: it imports this module), whose replay of a serving row
    the overhead fit shares."""
    bench_dir = str(ROOT / "benchmarks")
    if bench_dir not in sys.path:
        sys.path.insert(0, bench_dir)
    import bench_validation

    return bench_validation


def overhead_rows(path: Path = SERVING_CSV) -> list[dict]:
    """The runs the non-kernel overhead is fitted on, never a held-out row (``held_out`` yes), on GPUs with measured
    tables, no listed outlier, BF16 weights: the serving table's vLLM and SGLang decode-time metrics
    (``OVERHEAD_METRICS``) of runs below saturation (a finite rate or concurrency, or a static batch), plus
    ``EXTRA_OVERHEAD_ROWS``; and TensorRT-LLM's output throughputs (its runs in the table are ``trtllm-bench``
    throughput runs, all saturated: a step's overhead shows in them too, with the batch the engine holds), read as
    ``bench_validation.read_rows`` reads them."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from fleetplan.perf.measured.coverage import SYSTEM_OF_GPU

    bv = _bench_validation()
    rows = [r for r in bv.read_rows(path) + bv.typed_rows([dict(r) for r in EXTRA_OVERHEAD_ROWS])
            if r["gpu"] in SYSTEM_OF_GPU and not r["outlier_reason"] and r["held_out"] != "yes"]
    below = [r for r in rows if r["engine"] in ("vllm", "sglang") and r["metric"] in OVERHEAD_METRICS
             and r["weight_dtype"] == "bf16" and (r["request_rate"] != "inf" or r["max_concurrency"])]
    return below + [r for r in rows if r["engine"] == "trtllm" and r["metric"] == "output_throughput"]


def _replay(row: dict, profile) -> float:
    """The row's metric from ``bench_validation``'s replay of its run (its engine, scheduler, limits, client and
    profile release) with ``profile`` as the step model (None: the roofline and engine profile)."""
    bv = _bench_validation()
    key = tuple(row[k] for k in bv.RUN_KEYS)
    return float(bv.simulate_run(key, _catalog(), perf_profile=profile)[row["metric"]])


def _catalog():
    from fleetplan.hardware import load_catalog

    return load_catalog()


def profile_model(row: dict):
    from fleetplan.models import load_model

    return load_model(str(ROOT / row["model"]) if row["model"].endswith(".json") else row["model"])


def kernel_step_model(row: dict):
    """The measured step model of a serving row's pool (its engine's sharding and measured tables, as ``bench
    serve --timing-source measured`` builds it) with the engine's non-kernel overhead taken back out (None: not
    covered)."""
    import dataclasses

    from fleetplan.perf.measured.source import MEASURED_PREFIX, timing_source

    bv = _bench_validation()
    k = {name: row[name] for name in bv.RUN_KEYS}
    engine = bv.engine_args(k, _catalog(), "auto")
    step = engine.step_model()
    if not timing_source(step).startswith(MEASURED_PREFIX):
        return None
    coef = list(step.coefficients)
    coef[0] -= step.scales["overhead_step_s"]
    coef[11] -= step.scales["overhead_per_seq_s"]
    return dataclasses.replace(step, coefficients=tuple(coef))


def _with_overhead(step, overhead_s: float):
    import dataclasses

    coef = list(step.coefficients)
    coef[0] += overhead_s
    return dataclasses.replace(step, coefficients=tuple(coef))


def fit_overhead(rows: list[dict], *, log=print) -> dict[str, dict]:
    """Per engine, the per-step overhead ``s`` minimising the squared relative error of the rows' metrics,
    each metric simulated at s = 0 and s = ``OVERHEAD_TRIAL_S`` and taken as linear in s between them
    (closed form: s = sum w (1 - a) / sum w^2 with a = metric(0) / measured, w = slope / measured);
    then every row simulated again at the fitted s.  The same closed form per engine release (the rows'
    ``engine_version``) is logged and returned as ``by_release`` (release -> (s, rows)): the check that one value
    per engine holds across the releases with runs."""
    fits: dict[str, dict] = {}
    for engine in sorted({r["engine"] for r in rows}):
        pts = []
        for row in (r for r in rows if r["engine"] == engine):
            step = kernel_step_model(row)
            if step is None:
                log(f"not covered: {row['model']} {row['gpu']} tp{row['tp']}")
                continue
            measured = float(row["measured"])
            at0 = _replay(row, step)
            at1 = _replay(row, _with_overhead(step, OVERHEAD_TRIAL_S))
            pts.append((row, step, at0 / measured, (at1 - at0) / OVERHEAD_TRIAL_S / measured))
        if not pts:
            continue

        def closed_form(group: list) -> float:
            return max(0.0, sum(w * (1.0 - a) for _, _, a, w in group) / sum(w * w for _, _, _, w in group))

        s = closed_form(pts)
        releases: dict[str, list] = {}
        for p in pts:
            releases.setdefault(p[0].get("engine_version", ""), []).append(p)
        by_release = {release: (closed_form(group), len(group)) for release, group in sorted(releases.items())}
        after = [_replay(row, _with_overhead(step, s)) / float(row["measured"]) - 1.0 for row, step, _, _ in pts]
        roof = [_replay(row, None) / float(row["measured"]) - 1.0 for row, _, _, _ in pts]
        fits[engine] = {"step_s": s, "n": len(pts), "rows": [p[0] for p in pts],
                        "error_kernels_only": [a - 1.0 for _, _, a, _ in pts], "error_fitted": after,
                        "error_roofline": roof, "by_release": by_release}

        def stats(errors: list[float]) -> str:
            return (f"mean signed {sum(errors) / len(errors):+.1%}, mean abs "
                    f"{sum(abs(e) for e in errors) / len(errors):.1%}")
        log(f"{engine}: overhead {s * 1e3:.3f} ms/step on {len(pts)} rows; kernels only: "
            f"{stats([a - 1 for _, _, a, _ in pts])}; fitted: {stats(after)}; roofline + engine profile: {stats(roof)}")
        log(f"{engine} by release: " + "; ".join(f"{release or 'unstated'} {v * 1e3:.3f} ms/step on {n} rows"
                                                 for release, (v, n) in by_release.items()))
        for (row, _, a, _), e, r in zip(pts, after, roof, strict=True):
            log(f"   {row['model']:16s} {row['gpu']:8s} tp{row['tp']} {row['input_tokens']}/{row['output_tokens']} "
                f"rate {row['request_rate']} conc {row['max_concurrency'] or '-'} {row['metric']} {row['measured']}: "
                f"kernels only {a - 1:+.1%}, fitted {e:+.1%}, roofline {r:+.1%}")
    return fits


FIT_MIN_PROMPT_TOKENS = 2048  # prefill rows long enough to be GEMM-compute-bound
FIT_GRID = tuple(round(0.05 + 0.01 * i, 2) for i in range(86))  # 0.05 .. 0.90
FIT_GROUPS = (("vllm", "fp8", ("h100_sxm", "h200_sxm")), ("vllm", "fp8_block", ("h100_sxm", "h200_sxm")),
              ("vllm", "fp8", ("b200_sxm",)), ("vllm", "fp8_block", ("b200_sxm",)),
              ("trtllm", "fp8", ("h100_sxm", "h200_sxm")), ("trtllm", "fp8_block", ("h100_sxm", "h200_sxm")))


def fit_fp8_gemm_efficiency(results: list[dict], engine: str, quant: str, systems: tuple[str, ...]) -> dict:
    """The ``fp8_gemm_efficiency`` (``fp8_block_gemm_efficiency`` for ``fp8_block``; grid ``FIT_GRID``) that
    brings fleetplan's dense-model FP8 prefill steps of at least ``FIT_MIN_PROMPT_TOKENS`` tokens closest to
    AIConfigurator's (least squares in log ratio), every other option as in the engine profile: AIConfigurator's
    measured GEMM tables, composed by its own model, read back as one efficiency.  MoE models are left out (their
    FP8 experts use other kernels)."""
    rows = [r for r in results if r["engine"] == engine and r["aic_quant_mode"] == quant and r["system"] in systems
            and r["phase"] == "prefill" and r["prompt_tokens"] >= FIT_MIN_PROMPT_TOKENS
            and r["model"] not in MOE_MODELS]
    if not rows:
        raise ValueError(f"no {engine} {quant} prefill rows on {systems} to fit")

    def cost(eff: float) -> tuple[float, list[float]]:
        name = "fp8_block_gemm_efficiency" if quant == "fp8_block" else "fp8_gemm_efficiency"
        logs = [math.log(ms / r["aic_ms"]) for r, ms in zip(rows, _predict_ms(rows, **{name: eff}), strict=True)]
        return sum(x * x for x in logs) / len(logs), logs

    best = min(FIT_GRID, key=lambda e: cost(e)[0])
    before = [math.log(r["ratio"]) for r in rows]
    after = cost(best)[1]
    return {"engine": engine, "aic_quant_mode": quant, "systems": systems, "n": len(rows), "fitted": best,
            "geomean_before": math.exp(sum(before) / len(before)), "geomean_after": math.exp(sum(after) / len(after)),
            "range_after": (math.exp(min(after)), math.exp(max(after)))}


def group_summary(results: list[dict]) -> list[dict]:
    """Ratio statistics per engine x AIConfigurator quant mode x phase (geometric mean, min, max, rows)."""
    groups: dict[tuple, list[float]] = {}
    for r in results:
        groups.setdefault((r["engine"], r["aic_quant_mode"], r["phase"]), []).append(r["ratio"])
    out = []
    for (engine, quant, phase), ratios in sorted(groups.items()):
        out.append({"engine": engine, "aic_quant_mode": quant, "phase": phase, "n": len(ratios),
                    "geomean": math.exp(sum(math.log(x) for x in ratios) / len(ratios)),
                    "mean": sum(ratios) / len(ratios), "min": min(ratios), "max": max(ratios)})
    return out


def fp8_vs_bf16(results: list[dict]) -> list[dict]:
    """The issue's question, per engine x FP8 scheme x phase: for configurations present in both,
    (ours FP8 / theirs FP8) against (ours BF16 / theirs BF16), and the FP8 speed-up each side
    predicts (BF16 ms / FP8 ms)."""
    def key(r: dict) -> tuple:
        return (r["engine"], r["system"], r["model"], r["tp"], r["phase"], r["batch_size"], r["prompt_tokens"],
                r["context_tokens"])

    bf16 = {key(r): r for r in results if r["aic_quant_mode"] == "bfloat16"}
    groups: dict[tuple, list[tuple[dict, dict]]] = {}
    for r in results:
        if r["aic_quant_mode"] != "bfloat16" and key(r) in bf16:
            groups.setdefault((r["engine"], r["aic_quant_mode"], r["phase"]), []).append((r, bf16[key(r)]))
    out = []
    for (engine, quant, phase), pairs in sorted(groups.items()):
        def gm(values: list[float]) -> float:
            return math.exp(sum(math.log(v) for v in values) / len(values))
        out.append({"engine": engine, "aic_quant_mode": quant, "phase": phase, "n": len(pairs),
                    "ratio_fp8": gm([f["ratio"] for f, _ in pairs]), "ratio_bf16": gm([b["ratio"] for _, b in pairs]),
                    "ratio_fp8_min": min(f["ratio"] for f, _ in pairs),
                    "ratio_fp8_max": max(f["ratio"] for f, _ in pairs),
                    "speedup_ours": gm([b["ours_ms"] / f["ours_ms"] for f, b in pairs]),
                    "speedup_aic": gm([b["aic_ms"] / f["aic_ms"] for f, b in pairs])})
    return out


SECTION_READING = """\
Reading.  BF16 agrees: on the dense models on H100 and H200, fleetplan's vLLM BF16 steps are 0.89-1.25x
AIConfigurator's (slowest relative to it at Llama-3.1-8B, where the profile's 1.7 ms host time is a large
share of a step), so the BF16 efficiencies of `engine_profiles/vllm.toml` are consistent with vLLM
0.24.0's measured operators.  FP8 is where the two disagree, in both directions:

* FP8 prefill with vLLM: fleetplan is 1.3-2.4x slower than AIConfigurator on dense models on H100/H200
  (prompts of 2048 and 8192 tokens).  The vLLM profile's `fp8_gemm_efficiency` 0.22 comes from
  block-FP8 CUTLASS GEMMs on DeepSeek-V3 shapes (vLLM PR #23280), which makes an FP8 prefill
  0.68-0.78x as fast as BF16 in fleetplan; AIConfigurator's vLLM 0.24.0 measurements have it 1.07-1.52x
  faster than BF16 (per-tensor) and 0.98-1.42x (block-scaled, at 2048 tokens and more).  Read back
  through fleetplan's roofline, that is 0.50 (per-tensor) and 0.47 (block) of the FP8 peak on H100/H200
  (table above).  Its raw vLLM GEMM tables agree (`aiconfigurator_compare.py --gemm-tables`): at M, N,
  K >= 2048 on H100, CUTLASS per-tensor scaled_mm reaches a median 0.45 of the FP8 peak and DeepGEMM
  block-FP8 0.51 (10th percentile 0.34), against 0.79 of the BF16 peak for BF16; the issue's 14-18 %
  is not what these tables show for compute-bound shapes.
* FP8 decode with vLLM block-FP8: predicted per-tensor (before the block scheme), fleetplan's step was
  0.22-0.89x of AIConfigurator's on H100/H200 and 0.05-0.40x on B200.  In the block scheme (weights
  streamed at `fp8_block_bandwidth_efficiency` 0.16, read back on the H100/H200 rows) it is 0.47-1.69x on
  H100/H200 (geometric mean 0.98 dense, 0.95 MoE) and 0.11-0.49x on B200.  The cause is the per-call time
  of vLLM's block-FP8 GEMM tables (section above), not the compute efficiency: raising
  `fp8_gemm_efficiency` does not move it.  Per-tensor FP8 decode (CUTLASS scaled_mm) agrees within
  0.76-1.38x on the dense models on H100/H200.
* FP8 MoE with vLLM (Qwen3-30B-A3B, per-tensor FP8 on H100/H200): AIConfigurator's FP8 expert kernels
  are 2.6-4.5x slower than fleetplan's roofline in decode and 1.5-4.8x in prefill; fleetplan has no
  per-engine MoE kernel efficiency.
* TensorRT-LLM FP8: fleetplan's steps are 0.65-0.73x of AIConfigurator's (geometric means); read back,
  the FP8 GEMM efficiency is 0.44-0.46 against the profile's 0.54, which is fitted on the TensorRT-LLM
  FP8 serving measurements of the tables above (v0.5 to v1.0), while AIConfigurator's database is
  1.3.0rc20.  Part of the gap is already in BF16 (0.85-0.90x), where fleetplan is also faster.
* SGLang: BF16 1.08-1.10x (geometric means, range 0.59-1.37x), FP8 0.79-0.90x.

The default profiles are unchanged.  The serving measurements hold no vLLM FP8 run (the vLLM rows are
BF16), so a new vLLM FP8 value could not be checked against a measured serving run, and 0.22 is the
value the vLLM-profile test pins (`tests/bench/test_bench_serve.py`); the read-back values are here for
a profile that targets vLLM >= 0.24 FP8 prefill.  The TensorRT-LLM value stays fitted on measurements
rather than on another model's estimates: with the read-back 0.46 instead of 0.54 the serving validation
above misses its targets (mean absolute error 15.2 %, one row beyond 35 % without a stated reason;
TensorRT-LLM rows -9.5 % mean signed against -4.4 %).
"""


def _range(lo: float, hi: float) -> str:
    return f"{lo:.2f}-{hi:.2f}"


def sharding_summary(results: list[dict]) -> list[dict]:
    """Ratio statistics of the parallel grid per engine x ``sharding`` x phase (as ``group_summary``)."""
    return group_summary([r | {"aic_quant_mode": sharding(r)} for r in results])


PARALLEL_READING = """\
On these shardings the roofline is not AIConfigurator: with the experts spread over the GPUs its prefill steps are
0.24-0.73x AIConfigurator's (geometric means by engine and sharding) and its 16-rank decode steps 0.37-0.49x, while
8-GPU decode and the dense pipeline stay within 0.58-1.46x; the measured source (`fleetplan.perf.measured`, which
covers them: AIConfigurator's `attention_dp_size` and `pp_size`) is what tracks the tables (`python
benchmarks/aiconfigurator_compare.py --agreement`, with aiconfigurator-core installed). Two operators make most of
the gap, read from AIConfigurator's per-operator breakdown (`run_static_per_op`): its fused-MoE tables with experts
spread over 8 GPUs reach about half the FLOP rate fleetplan's read-back `moe_fp8_gemm_efficiency` gives (DeepSeek-V3
`-tp 8 --enable-expert-parallel`, 4,096-token prefill on H200: its MoE 108 ms, fleetplan's 56 ms), and its dispatch
and combine at 16 ranks over two H100 nodes grow like every rank receiving every rank's hidden states over the
scale-out network (Qwen3-235B `-dp 16`, a 4,096-token prompt per rank: 1.27 s each, 50 GB per step at about 40
GB/s), where fleetplan's all-to-all moves each token's routed copies only, as DeepEP does. No published serving run
of these shardings is held out to decide between them (the serving table's expert-parallel rows, SGLang MiniMax-M2.5
and Qwen3-Coder, are fitted rows, and its one held-out data-parallel run, SGLang DeepSeek-V3.2 `--dp 8
--enable-dp-attention`, keeps its experts tensor-parallel); a plan that uses them is timed by the tables where
aiconfigurator-core is installed and says so in its timing source."""


def parallel_markdown_section(results: list[dict]) -> list[str]:
    """The parallel grid's part of the ``docs/serving_validation.md`` section: ratio by engine x sharding x phase."""
    lines = ["### Expert, data and pipeline parallel shardings", "",
             f"`{PARALLEL_CSV_PATH.relative_to(ROOT)}` ({len(results)} configurations, written by `python "
             "benchmarks/aiconfigurator_compare.py --generate-parallel`; the same phases and shapes, a decode batch "
             "and a prompt being one attention rank's with `dp` > 1, as AIConfigurator's `attention_dp_size` times "
             "them): " + "; ".join(f"{m} {' '.join(q)}" for m, *_, q in (
                 (model, tp, pp, dp, ep, systems, [sharding({"tp": tp, "pp": pp, "dp": dp, "ep": ep})] + [
                     f"({', '.join(GRID_SYSTEMS[x] for x in systems)}, {', '.join(quants)})"])
                 for model, tp, pp, dp, ep, systems, quants in PARALLEL_GRID)) + ".  ratio = fleetplan's "
             "roofline / AIConfigurator.", "",
             "| engine | sharding | phase | rows | ratio, geometric mean | mean | range |",
             "|---|---|---|---|---|---|---|"]
    for g in sharding_summary(results):
        lines.append(f"| {g['engine']} | {g['aic_quant_mode']} | {g['phase']} | {g['n']} | {g['geomean']:.2f} | "
                     f"{g['mean']:.2f} | {_range(g['min'], g['max'])} |")
    return [*lines, "", *PARALLEL_READING.splitlines()]


def markdown_section(results: list[dict], path: Path = CSV_PATH, parallel: list[dict] | None = None) -> list[str]:
    """The ``docs/serving_validation.md`` section: summary by engine x weights x phase, the FP8-vs-BF16
    question, the read-back FP8 GEMM efficiencies, the parallel grid (``parallel``: its ``compare`` rows), and one
    line per configuration of the tensor-parallel grid."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from fleetplan.perf.engine_profile import load_engine_profile

    versions = sorted({(r["engine"], r["system"], r["engine_version"]) for r in results})
    aic_versions = sorted({r["aiconfigurator_version"] for r in results})
    modes = sorted({r["database_mode"] for r in results})
    db = "; ".join(f"{e} {', '.join(sorted({s for e2, s, v2 in versions if e2 == e and v2 == v}))} {v}"
                   for e, v in sorted({(e, v) for e, _, v in versions}))
    try:
        csv_name = path.relative_to(ROOT)
    except ValueError:
        csv_name = path
    lines = [
        "## Step time against NVIDIA AIConfigurator",
        "",
        f"Generated from `{csv_name}` ({len(results)} configurations): AIConfigurator "
        f"{', '.join(aic_versions)} (PyPI `aiconfigurator`, {', '.join(modes)} database mode: per-operator timings "
        f"measured per system, engine and engine version; databases {db}).  Prefill = its `static_ctx` TTFT at "
        "batch 1 against fleetplan's step of one first chunk of the prompt; decode = its `static_gen` TPOT with "
        "`osl 2` (one generation step) against fleetplan's step of `batch` decodes at `context` tokens each; "
        "fleetplan uses the engine's profile (`engine_profiles/<engine>.toml`) and BF16 KV cache, like "
        "AIConfigurator here.  Each FP8 row is predicted in its scheme: `fp8` per-tensor W8A8, `fp8_block` "
        "128x128 block-scaled as fleetplan plans a block-scaled checkpoint (`Fp8Scaling.BLOCK`: the profile's "
        "`fp8_block_*` values, vLLM's block-FP8 fused-MoE tile).  "
        "ratio = fleetplan / AIConfigurator (above 1: fleetplan predicts a slower step).  Configurations "
        "AIConfigurator has no data for (SGLang per-tensor FP8 MoE) are left out.  To regenerate the CSV: "
        "`pip install 'fleetplan[aiconfigurator]'` and `python benchmarks/bench_validation.py "
        "--regenerate-aiconfigurator`, or, keeping AIConfigurator's packages out of the main environment, "
        "`python -m venv /tmp/aicvenv && /tmp/aicvenv/bin/pip install aiconfigurator==0.12.0 && "
        "/tmp/aicvenv/bin/python benchmarks/aiconfigurator_compare.py --generate`, then "
        "`python benchmarks/bench_validation.py`.",
        "",
        "### By engine, weights and phase",
        "",
        "| engine | weights (AIConfigurator mode) | phase | rows | ratio, geometric mean | mean | range |",
        "|---|---|---|---|---|---|---|",
    ]
    for g in group_summary(results):
        lines.append(f"| {g['engine']} | {g['aic_quant_mode']} | {g['phase']} | {g['n']} | {g['geomean']:.2f} | "
                     f"{g['mean']:.2f} | {_range(g['min'], g['max'])} |")
    lines += [
        "",
        "### FP8 against BF16 (issue \"[Serving accuracy]\" item 3)",
        "",
        "Same configurations in both weight types.  Ratio columns: fleetplan / AIConfigurator (geometric mean); "
        "speed-up columns: BF16 step / FP8 step as each tool predicts it.",
        "",
        "| engine | FP8 scheme | phase | pairs | ratio FP8 | ratio FP8 range | ratio BF16 | FP8 speed-up, fleetplan "
        "| FP8 speed-up, AIConfigurator |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for g in fp8_vs_bf16(results):
        lines.append(f"| {g['engine']} | {g['aic_quant_mode']} | {g['phase']} | {g['n']} | {g['ratio_fp8']:.2f} | "
                     f"{_range(g['ratio_fp8_min'], g['ratio_fp8_max'])} | {g['ratio_bf16']:.2f} | "
                     f"{g['speedup_ours']:.2f}x | {g['speedup_aic']:.2f}x |")
    lines += [
        "",
        "### FP8 GEMM efficiency read back from AIConfigurator",
        "",
        f"`fit_fp8_gemm_efficiency`: the `fp8_gemm_efficiency` (`fp8_block_gemm_efficiency` for `fp8_block`) that "
        "brings fleetplan's dense-model FP8 prefill "
        f"steps of >= {FIT_MIN_PROMPT_TOKENS} tokens (GEMM-compute-bound) closest to AIConfigurator's "
        "(least squares in log ratio, grid 0.05-0.90, every other option from the profile).",
        "",
        "| engine | FP8 scheme | systems | rows | profile value | read back | ratio before | ratio after (range) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for engine, quant, systems in FIT_GROUPS:
        if not any(r["engine"] == engine and r["aic_quant_mode"] == quant and r["system"] in systems for r in results):
            continue
        f = fit_fp8_gemm_efficiency(results, engine, quant, systems)
        options = load_engine_profile(engine).options
        current = options.fp8_block_gemm_efficiency if quant == "fp8_block" else None
        current = options.fp8_gemm_efficiency if current is None else current
        lines.append(f"| {engine} | {quant} | {', '.join(systems)} | {f['n']} | "
                     f"{'-' if current is None else f'{current:.2f}'} | {f['fitted']:.2f} | "
                     f"{f['geomean_before']:.2f} | {f['geomean_after']:.2f} ({_range(*f['range_after'])}) |")
    lines += [
        "",
        "### Block-FP8 GEMMs in vLLM's tables: a time per call",
        "",
        "vLLM 0.24.0's block-FP8 dense GEMM tables take a fixed time per call whatever the shape, up to where "
        "compute passes it (`aiconfigurator_compare.py --block-gemm-floor-tables`, 64-1,024 rows, N, K <= 8,192: "
        "DeepGEMM median 0.091 ms on H100, 0.089 ms on H200, 0.189 ms on B200, CUTLASS 0.17-0.18 ms; BF16 on the "
        "same shapes 0.006 ms), while SGLang 0.5.14's and TensorRT-LLM's tables of the same DeepGEMM kernel take "
        "0.009-0.011 ms: the time of vLLM's block-FP8 linear op outside CUDA graphs (activation quantisation and "
        "the op's host path), not of the kernel.  It is what makes AIConfigurator's vLLM block-FP8 steps slow: "
        "Qwen3-30B-A3B, H100, 512-token prefill, 27.5 ms of which the 96 attention-projection GEMMs take 8.7 ms "
        "(BF16: 1.7 ms), its fused MoE 15.0 ms (fleetplan: 11.9 ms + 4.8 ms MoE layer latency), on B200 19.1 of "
        "33.0 ms.  Below, the vLLM `fp8_block` rows as predicted and with each block-FP8 GEMM call raised to that "
        "time (`PredictorOptions.fp8_block_gemm_floor_s` = `BLOCK_GEMM_FLOOR_S`; no profile sets it: charged on "
        "every step it moves the held-out serving rows from -5.1 % / 27.9 % / 248 of 350 within 35 % to -4.1 % / "
        "28.3 % / 243, mostly vLLM decode ITL rows, which vLLM runs under CUDA graphs; charged only on steps "
        "above vLLM's 512-token CUDA-graph capture size, to -4.9 % / 27.7 % / 248: the held-out MoE prefill "
        "gap is not this floor).  On Hopper decode the floor and the streaming read-back "
        "`fp8_block_bandwidth_efficiency` count the same time twice.",
        "",
        "| systems | model | phase | rows | ratio (range) | with the per-call time (range) |",
        "|---|---|---|---|---|---|",
    ]
    for g in block_floor_summary(results):
        lines.append(f"| {', '.join(g['systems'])} | {g['kind']} | {g['phase']} | {g['n']} | "
                     f"{g['ratio']:.2f} ({_range(*g['range'])}) | {g['ratio_floor']:.2f} "
                     f"({_range(*g['range_floor'])}) |")
    lines += ["", *SECTION_READING.splitlines()]
    if parallel:
        lines += ["", *parallel_markdown_section(parallel)]
    lines += ["", "### Configurations", "",
              "| engine | GPU | model | TP | weights | phase | batch x tokens | AIConfigurator | fleetplan | ratio |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        tokens = r["prompt_tokens"] if r["phase"] == "prefill" else r["context_tokens"]
        lines.append(f"| {r['engine']} {r['engine_version']} | {r['gpu']} | {r['model']} | {r['tp']} | "
                     f"{r['aic_quant_mode']} | {r['phase']} | {r['batch_size']} x {tokens} | {r['aic_ms']:.2f} ms | "
                     f"{r['ours_ms']:.2f} ms | {r['ratio']:.2f} |")
    return lines


def _dsa_line(g: dict) -> str:
    return (f"{g['system']:9s} {g['engine']:7s} {g['engine_version']:8s} heads {g['heads']:3d} KV {g['kv']:9s} "
            f"{g['n']:4d} rows: indexer {g['s_per_pair']:.2e} s per pair and layer = {g['share']:.2f} of the FP8 "
            f"peak (fit median |error| {g['median_abs_err']:.1%}; sparse MLA {g['s_per_key']:.2e} s per key read, "
            f"the fit with top-k keys per query instead of min(position, top-k): "
            f"{g['median_abs_err_topk_per_query']:.1%})")


def _moe_width_line(g: dict) -> str:
    if g.get("summary"):
        return (f"{g['engine']:7s} {g['engine_version']:7s} {g['moe_dtype']:10s} mean exponent over "
                f"{', '.join(g['systems'])}: {g['exponent']:.3f} ({g['option']})")
    widths = ", ".join(f"{w}: {r:.2f}" for w, r in g["by_width"].items())
    return (f"{g['system']:9s} {g['engine']:7s} {g['engine_version']:7s} {g['moe_dtype']:10s} {g['n']:4d} "
            f"narrow rows exponent {g['exponent']:.2f}; efficiency / TP-1 median by width I/tp: {widths}")


#: Each table read-back flag (its ``argparse`` dest): the function giving its rows and the line printed per row.
def _module_query_line(g: dict) -> str:
    return (f"{g['system']:9s} {g['engine']:7s} {g['engine_version']:8s} heads {g['heads']:3d} KV {g['kv']:9s} "
            f"{g['n']:4d} rows: {g['s_per_token']:.2e} s per prefill token and layer beyond fleetplan's module "
            f"(+ {g['fixed_s'] * 1e3:.2f} ms per call); fleetplan / measured median {g['ratio_before']:.2f} -> "
            f"{g['ratio_after']:.2f}")


_TABLE_READBACKS = {
    "gemm_tables": (gemm_table_efficiency, lambda g: (
        f"{g['system']:9s} {g['engine']:7s} {g['engine_version']:12s} {g['gemm_dtype']:10s} {g['n']:6d} "
        f"median {g['median']:.2f} (p10-p90 {g['p10']:.2f}-{g['p90']:.2f}) of the dense peak")),
    "block_gemm_floor_tables": (block_gemm_floor, lambda g: (
        f"{g['system']:9s} {g['engine']:7s} {g['engine_version']:12s} {g['kernel'][:36]:36s} "
        f"{g['n']:5d} rows median {g['median_ms']:.4f} ms (p10-p90 {g['p10_ms']:.4f}-{g['p90_ms']:.4f}); "
        f"BF16 on the same shapes {g['bf16_median_ms']:.4f} ms")),
    "attention_tables": (attention_table_efficiency, lambda g: (
        f"{g['system']} {g['engine']} {g['engine_version']} {g['kernel']:22s} head_dim {g['head_dim']:3d} "
        f"{g['n']:5d} rows median {g['median']:.3f} of the BF16 peak")),
    "triton_attention_tables": (triton_attention_table_efficiency, lambda g: (
        f"{g['system']:19s} {g['engine']:6s} {g['engine_version']:6s} {g['kernel']:25s} "
        f"KV {g['kv_cache_dtype']:8s} head_dim {g['head_dim']:3d} {g['n']:5d} rows "
        f"median {g['median']:.3f} of the BF16 peak")),
    "dsa_tables": (dsa_indexer_table_efficiency, _dsa_line),
    "dsa_query_tables": (dsa_prefill_query_table_cost, _module_query_line),
    "mla_query_tables": (mla_prefill_query_table_cost, _module_query_line),
    "moe_decode_tables": (moe_decode_bandwidth_fit, lambda g: (
        f"{g['engine']:7s} {g['n']:6d} rows ({g['dropped']} of unphysical shapes left out): experts' weight stream "
        f"{g['eff']:.3f} of the HBM peak, t0 {g['t0_us'][0]:.0f}-{g['t0_us'][1]:.0f} us per table, mean |log ratio| "
        f"{g['mean_abs_log']:.3f}; per table " + ", ".join(f"{k} {v:.2f}" for k, v in g["per_table"].items()))),
    "moe_decode_overhead": (moe_decode_overhead, lambda g: (
        f"{g['engine']:7s} {g['system']:9s} {g['moe_dtype']:10s} {g['n']:5d} rows: table - fleetplan's experts median "
        f"{g['median_us']:.0f} us (p25-p75 {g['p25_us']:.0f}-{g['p75_us']:.0f}) per MoE layer; profile's "
        f"moe_layer_overhead_s {g['profile_us']:.0f} us")),
    "moe_width_tables": (moe_width_efficiency, _moe_width_line),
    "moe_kernel_tables": (moe_kernel_efficiency, lambda g: (
        f"{g['system']:9s} {g['engine']:7s} {g['engine_version']:8s} {g['moe_dtype']:12s} "
        f"{g['kernel'][:60]:60s} {g['n']:3d} rows {g['shapes']:2d} shapes median {g['median']:.3f} "
        f"(p10-p90 {g['p10']:.2f}-{g['p90']:.2f}) of the BF16 peak")),
    "moe_tables": (moe_table_efficiency, lambda g: (
        f"{g['system']:9s} {g['engine']:7s} {g['engine_version']:12s} {g['moe_dtype']:12s} {g['n']:4d} rows "
        f"{g['shapes']:3d} shapes median {g['median']:.3f} (p10-p90 {g['p10']:.2f}-{g['p90']:.2f}) of the "
        f"{MOE_TABLE_PEAK[g['moe_dtype']].split('_')[0].upper()} peak")),
}


def _print_moe_ramp() -> None:
    """``--moe-ramp``: the rows-per-expert ramp's fit per engine and expert type (``moe_ramp_fit``)."""
    from fleetplan.perf.moe import MOE_REFERENCE_ROWS_PER_EXPERT

    def fmt(g: dict | None) -> str:
        return "-" if g is None else (f"read-back rows median {g['read_median']:+.3f} abs {g['read_abs']:.3f}, "
                                      f"<4,096 tokens median {g['ramp_median']:+.3f} abs {g['ramp_abs']:.3f}")
    for g in moe_ramp_fit():
        print(f"{g['engine']:7s} {g['group']:18s} {g['n']:5d} rows {g['tables']:2d} tables | flat: {fmt(g['flat'])}")
        print(f"{'':26s} best rho {g['rho']} R_ref {g['ref_rows']}: {fmt(g['fit'])}")
        print(f"{'':26s} at R_ref {MOE_REFERENCE_ROWS_PER_EXPERT:.0f}: rho {g['rho_at_reference']}: "
              f"{fmt(g['at_reference'])}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generate", action="store_true",
                        help="query AIConfigurator (must be importable) and rewrite the estimates CSV")
    parser.add_argument("--gemm-tables", action="store_true",
                        help="print the FP8/BF16 efficiency of AIConfigurator's raw GEMM tables (needs aiconfigurator)")
    for flag, what in (("--moe-tables", "fused-MoE tables, the engine profiles' moe_gemm_efficiency read-back"),
                       ("--moe-kernel-tables", "weight-only 4-bit fused-MoE tables per kernel, the vLLM profile's "
                        "moe_mxfp4_gemm_efficiency / moe_int4_gemm_efficiency read-back"),
                       ("--moe-width-tables", "fused-MoE tables against the per-GPU expert width, the source of "
                        "the step model's expert-width factor"),
                       ("--moe-decode-tables", "fused-MoE tables at decode sizes (weight-bound rows), the "
                        "engine profiles' moe_weight_bandwidth_efficiency read-back"),
                       ("--moe-decode-overhead", "fused-MoE tables at 1-512 tokens beyond fleetplan's routed-expert "
                        "time, the vLLM profile's moe_layer_overhead_s read-back"),
                       ("--moe-ramp", "fused-MoE tables against the rows per expert (1,024-16,384 tokens), the "
                        "source of the engine profiles' moe_hit_expert_weight_reads"),
                       ("--attention-tables", "vLLM context-attention table per head dim, the source of the step "
                        "model's head-dim factors"),
                       ("--dsa-tables", "DeepSeek-V3.2 attention-module tables, the source of the DSA indexer's "
                        "prefill efficiency"),
                       ("--triton-attention-tables", "Triton and FlashAttention prefill tables of non-Hopper GPUs, "
                        "the vLLM profile's sink_attention_prefill_efficiency read-back"),
                       ("--dsa-query-tables", "DeepSeek-V3.2 attention-module tables, the source of the engine "
                        "profiles' dsa_prefill_s_per_token"),
                       ("--mla-query-tables", "DeepSeek-V3 MLA attention-module tables, the source of the engine "
                        "profiles' mla_prefill_s_per_token")):
        parser.add_argument(flag, action="store_true",
                            help=f"print the efficiency of AIConfigurator's {what} (needs aiconfigurator-core)")
    parser.add_argument("--block-gemm-floor-tables", action="store_true",
                        help="print the time of one block-FP8 GEMM call of AIConfigurator's raw GEMM tables where "
                        "compute is below it, the engine profiles' fp8_block_gemm_floor_s (needs aiconfigurator-core)")
    parser.add_argument("--csv", type=Path, default=CSV_PATH)
    parser.add_argument("--fit-overhead", action="store_true",
                        help="fit each engine's non-kernel step overhead on published serving runs against the "
                        "measured source (needs aiconfigurator-core)")
    parser.add_argument("--agreement", action="store_true",
                        help="also print the share within +-10 %% of AIConfigurator for the measured source "
                        "(needs aiconfigurator-core) and the roofline fallback, the parallel grid's too")
    parser.add_argument("--generate-parallel", action="store_true",
                        help="query AIConfigurator (must be importable) for the parallel grid (expert, data and "
                        "pipeline parallel shardings) and rewrite its CSV")
    args = parser.parse_args()
    if args.generate:
        return 0 if generate(args.csv) else 1
    if args.generate_parallel:
        return 0 if generate(PARALLEL_CSV_PATH, parallel=True) else 1
    if args.fit_overhead:
        fit_overhead(overhead_rows())
        return 0
    for flag, (rows, line) in _TABLE_READBACKS.items():
        if getattr(args, flag):
            for g in rows():
                print(line(g))
            return 0
    if args.moe_ramp:
        _print_moe_ramp()
        return 0
    results = compare(read_estimates(args.csv))
    print(f"{len(results)} configurations from {args.csv}")
    print(f"{'engine':8s} {'quant':10s} {'phase':8s} {'n':>4s} {'geomean':>8s} {'min':>6s} {'max':>6s}")
    for g in group_summary(results):
        print(f"{g['engine']:8s} {g['aic_quant_mode']:10s} {g['phase']:8s} {g['n']:4d} {g['geomean']:8.2f} "
              f"{g['min']:6.2f} {g['max']:6.2f}")
    if args.agreement:
        print_agreement(results, compare(read_estimates(PARALLEL_CSV_PATH, PARALLEL_COLUMNS)))
    return 0


def print_agreement(results: list[dict], parallel: list[dict]) -> None:
    """The target table: share within +-10 % of AIConfigurator, measured source and roofline fallback, over the
    tensor-parallel grid (by engine x weights x phase), the parallel grid (by engine x sharding x phase) and
    both."""
    sys.path.insert(0, str(ROOT))
    from fleetplan.perf.measured.aic import package_version

    version = package_version()
    source = f"aiconfigurator-core {version}" if version else "aiconfigurator-core not installed: no measured source"
    print(f"\nshare within +-{AGREEMENT_TOLERANCE:.0%} of AIConfigurator (target >= {AGREEMENT_TARGET:.0%}); "
          f"measured = {source}, kernels only (the measured source is fitted on the same tables' steps at a grid "
          "of batch shapes, so this measures its coefficient form, not an independent check)")
    measured_all, roofline_all = [], []
    for rows, by_sharding in ((results, False), (parallel, True)):
        measured = measured_ms(rows) if version is not None else [None] * len(rows)
        roofline = [r["ours_ms"] for r in rows]
        measured_all += measured
        roofline_all += roofline
        by_key = {(g["engine"], g["aic_quant_mode"], g["phase"]): g
                  for g in agreement(rows, measured, by_sharding=by_sharding)}
        print(f"\n{'engine':8s} {'sharding' if by_sharding else 'quant':18s} {'phase':8s} {'n':>4s} {'measured':>9s} "
              f"{'roofline':>9s}")
        for g in agreement(rows, roofline, by_sharding=by_sharding):
            m = by_key[(g["engine"], g["aic_quant_mode"], g["phase"])]
            print(f"{g['engine']:8s} {g['aic_quant_mode']:18s} {g['phase']:8s} {g['n']:4d} {m['within']:9.1%} "
                  f"{g['within']:9.1%}")
    both = results + parallel
    m, r = (next(g for g in agreement(both, ms) if g["engine"] == g["aic_quant_mode"] == "all")
            for ms in (measured_all, roofline_all))
    print(f"\nboth grids, {m['n']} configurations: measured {m['within']:.1%}, roofline {r['within']:.1%}")


if __name__ == "__main__":
    sys.exit(main())
