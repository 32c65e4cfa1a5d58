"""Operator level: the predictor's per-layer GEMM time against vidur's profiled kernels.

Run from the repository root: ``python benchmarks/bench_operators.py``.  Data:
``benchmarks/data/vidur_layer_gemms.csv`` (rows copied from microsoft/vidur, MIT licence, with
the commit and file of each row): median times of one layer's QKV, o_proj, gate+up and down
projections by tokens in the batch, Llama-2-7B (TP 1) and Llama-2-70B (TP 4) on A100 and H100.
Prediction: the ``gemm`` term of ``StepTimePredictor`` for a one-layer copy of the model with a
one-token vocabulary (so the lm_head adds nothing), i.e. the same four projections under the
roofline with tile and wave quantisation and the default efficiencies.  Prints one line per row
and the mean signed / absolute error per GPU.
"""

from __future__ import annotations

import csv
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package, not an installed one
from fleetplan.hardware import load_catalog  # noqa: E402
from fleetplan.models import load_model  # noqa: E402
from fleetplan.perf.batch import BatchComposition  # noqa: E402
from fleetplan.perf.parallelism import Parallelism  # noqa: E402
from fleetplan.perf.predictor import StepTimePredictor  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "vidur_layer_gemms.csv"
GPUS = {"a100": "A100-80GB", "h100": "H100-SXM"}
MODELS = {"meta-llama/Llama-2-7b-hf": "llama-2-7b", "meta-llama/Llama-2-70b-hf": "llama-2-70b"}
OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")


def one_layer(name: str):
    model = load_model(ROOT / "benchmarks" / "data" / "models" / f"{MODELS[name]}.json")
    return replace(model, n_layers=1, n_dense_layers=1, vocab_size=1)


def main() -> None:
    lines = [line for line in DATA.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    catalog = load_catalog()
    errors: dict[str, list[float]] = {}
    print(f"{'gpu':5} {'model':26} {'tp':>2} {'tokens':>6} {'measured ms':>11} {'predicted ms':>12} {'error':>7}")
    for row in csv.DictReader(lines):
        model = one_layer(row["model"])
        tp = int(row["tp"])
        p = StepTimePredictor(model, catalog.get(GPUS[row["gpu"]]), Parallelism(tp=tp))
        n = int(row["num_tokens"])
        predicted_ms = 1e3 * p.predict(BatchComposition.uniform(n_prefill=1, chunk_tokens=n)).seconds["gemm"]
        measured_ms = sum(float(row[op]) for op in OPS)
        err = predicted_ms / measured_ms - 1.0
        errors.setdefault(row["gpu"], []).append(err)
        print(f"{row['gpu']:5} {row['model']:26} {tp:>2} {n:>6} {measured_ms:>11.3f} {predicted_ms:>12.3f} "
              f"{err:>+7.1%}")
    for gpu, errs in errors.items():
        e = np.array(errs)
        print(f"{gpu}: {e.size} rows, mean signed {e.mean():+.1%}, mean absolute {np.abs(e).mean():.1%}")


if __name__ == "__main__":
    main()
