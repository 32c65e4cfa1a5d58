"""Published measurements reproduced by the default predictor within a stated tolerance.

Each row: what was measured, where (source precise enough to find the number), the batch
the measurement corresponds to, and the measured step or latency.  The table with errors is
``docs/step_time_validation.md`` (regenerate with ``python -m tests.perf.test_validation``).
Tolerance: every row within 35 %; mean absolute error at most 15 %; mean signed error within
+-10 % (no systematic bias).  The predictor's GEMM, weight-streaming and host defaults are
fitted to these rows within literature bounds (``fleetplan.perf.overheads``); the
leave-one-out test refits them without each row and predicts it, so the table's accuracy is
not the fit's alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from fleetplan.hardware import load_catalog
from fleetplan.models import AttentionKind, Dtype, ModelConfig, load_model
from fleetplan.perf.batch import BatchComposition
from fleetplan.perf.overheads import PredictorOptions
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor

ROW_TOLERANCE = 0.35
MEAN_ABS_TOLERANCE = 0.15
MEAN_SIGNED_TOLERANCE = 0.10

#: Llama-2 shapes from the published HuggingFace config.json files (meta-llama/Llama-2-{7,13,70}b-hf).
LLAMA2 = {
    "7b": ModelConfig("Llama-2-7B", 32, 4096, 32, 32, 128, 11008, 32000, AttentionKind.GQA),
    "13b": ModelConfig("Llama-2-13B", 40, 5120, 40, 40, 128, 13824, 32000, AttentionKind.GQA),
    "70b": ModelConfig("Llama-2-70B", 80, 8192, 64, 8, 128, 28672, 32000, AttentionKind.GQA),
}
LMDEPLOY = ("InternLM/lmdeploy docs/en/benchmark/a100_fp16.md (v0.1.0a1, 8x A100-80G, CUDA 11.8), "
            "static inference table")
TRTLLM = "NVIDIA/TensorRT-LLM docs/source/performance.md, 'Low Latency' tables (TensorRT-LLM v0.5)"
BUILDKITE = ("vLLM nightly performance benchmark, buildkite.com/vllm/performance-benchmark/builds/9515, "
             "'Latency tests' (input 32, output 128, batch 8)")


@dataclass(frozen=True)
class Measurement:
    name: str
    source: str
    model: ModelConfig
    gpu: str
    tp: int
    dtype: Dtype
    kind: str  # "decode": per-token latency of n x ctx; "prefill": one chunk; "request": batch end to end
    n: int
    tokens: int
    measured_s: float


def _m(name, source, model, gpu, tp, dtype, kind, n, tokens, measured_s) -> Measurement:
    return Measurement(name, source, model, gpu, tp, dtype, kind, n, tokens, measured_s)


MEASUREMENTS = (
    _m("Llama-2-7B decode, batch 1", f"{LMDEPLOY}: batch 1, tp 1, 128/128 tokens, per-token 50% = 0.010 s",
       LLAMA2["7b"], "A100-80GB", 1, Dtype.BF16, "decode", 1, 192, 0.010),
    _m("Llama-2-7B decode, batch 16", f"{LMDEPLOY}: batch 16, tp 1, 128/128 tokens, per-token 50% = 0.011 s",
       LLAMA2["7b"], "A100-80GB", 1, Dtype.BF16, "decode", 16, 192, 0.011),
    _m("Llama-2-13B decode, batch 1", f"{LMDEPLOY}: batch 1, tp 1, 128/128 tokens, per-token 50% = 0.017 s",
       LLAMA2["13b"], "A100-80GB", 1, Dtype.BF16, "decode", 1, 192, 0.017),
    _m("Llama-2-70B decode, batch 1, TP4", f"{LMDEPLOY}: batch 1, tp 4, 128/128 tokens, per-token 50% = 0.029 s",
       LLAMA2["70b"], "A100-80GB", 4, Dtype.BF16, "decode", 1, 192, 0.029),
    _m("Llama-2-7B prefill 2048", f"{LMDEPLOY}: batch 1, tp 1, prompt 2048, FTL(ave) = 0.139 s",
       LLAMA2["7b"], "A100-80GB", 1, Dtype.BF16, "prefill", 1, 2048, 0.139),
    _m("Llama-2-13B prefill 2048", f"{LMDEPLOY}: batch 1, tp 1, prompt 2048, FTL(ave) = 0.242 s",
       LLAMA2["13b"], "A100-80GB", 1, Dtype.BF16, "prefill", 1, 2048, 0.242),
    _m("Llama-2-70B prefill 2048, TP4", f"{LMDEPLOY}: batch 1, tp 4, prompt 2048, FTL(ave) = 0.402 s",
       LLAMA2["70b"], "A100-80GB", 4, Dtype.BF16, "prefill", 1, 2048, 0.402),
    _m("LLaMA-7B prefill 2048 (TRT-LLM)", f"{TRTLLM}, A100 FP16: LLaMA 7B, TP 1, input 2048, 1st token 133 ms",
       LLAMA2["7b"], "A100-80GB", 1, Dtype.BF16, "prefill", 1, 2048, 0.133),
    _m("LLaMA-70B prefill 2048, TP4 (TRT-LLM)", f"{TRTLLM}, A100 FP16: LLaMA 70B, TP 4, input 2048, 1st token 377 ms",
       LLAMA2["70b"], "A100-80GB", 4, Dtype.BF16, "prefill", 1, 2048, 0.377),
    _m("LLaMA-70B prefill 2048, TP4, FP8 (TRT-LLM)",
       f"{TRTLLM}, H100 FP8: LLaMA 70B, TP 4, input 2048, 1st token 109 ms",
       LLAMA2["70b"], "H100-SXM", 4, Dtype.FP8, "prefill", 1, 2048, 0.109),
    _m("Llama-3.1-8B decode, batch 1 (vLLM)",
       "J. Musgrave, 'vLLM throughput-latency sweep on NVIDIA A100' (johnmusgrave.com): A100 40GB, vLLM 0.23, "
       "BF16, 1024 in / 128 out, concurrency 1 decodes at about 75 tokens/s",
       load_model("llama-3.1-8b"), "A100-40GB", 1, Dtype.BF16, "decode", 1, 1088, 1.0 / 75.0),
    _m("Llama-3.1-8B decode, concurrency 1 (vLLM)",
       "InferenceBench 'Recipe: concurrency sweep' (yobitelcomm.github.io/bench): H100-80GB-HBM3, vLLM 0.21, fp16, "
       "chatbot-short, conc 1 tpot_p50 = 6.48 ms (short prompts: context taken as 300)",
       load_model("llama-3.1-8b"), "H100-SXM", 1, Dtype.BF16, "decode", 1, 300, 6.48e-3),
    _m("Llama-3.1-8B request latency, batch 8 (vLLM)", f"{BUILDKITE}: latency_llama8B_tp1 on H200, mean 833.421 ms",
       load_model("llama-3.1-8b"), "H200", 1, Dtype.BF16, "request", 8, 32, 0.833421),
    _m("Llama-3-70B request latency, batch 8, TP4 (vLLM)",
       f"{BUILDKITE}: latency_llama70B_tp4 on H200, mean 2077.53 ms",
       load_model("llama-3.1-70b"), "H200", 4, Dtype.BF16, "request", 8, 32, 2.07753),
)
REQUEST_OUTPUT_TOKENS = 128  # the buildkite latency tests' output length


def predicted_s(m: Measurement, options: PredictorOptions | None = None) -> float:
    catalog = load_catalog()
    p = StepTimePredictor(m.model, catalog.get(m.gpu), Parallelism(tp=m.tp), m.dtype, m.dtype,
                          options or PredictorOptions())
    if m.kind == "decode":
        return p.predict(BatchComposition.uniform(m.n, m.tokens)).total_s
    if m.kind == "prefill":
        return p.predict(BatchComposition.uniform(n_prefill=m.n, chunk_tokens=m.tokens)).total_s
    first = p.predict(BatchComposition.uniform(n_prefill=m.n, chunk_tokens=m.tokens)).total_s
    return first + sum(p.predict(BatchComposition.uniform(m.n, m.tokens + j)).total_s
                       for j in range(1, REQUEST_OUTPUT_TOKENS))


@pytest.mark.parametrize("m", MEASUREMENTS, ids=lambda m: m.name)
def test_measurement_within_tolerance(m: Measurement) -> None:
    assert predicted_s(m) == pytest.approx(m.measured_s, rel=ROW_TOLERANCE)


def test_mean_absolute_error() -> None:
    errors = [predicted_s(m) / m.measured_s - 1.0 for m in MEASUREMENTS]
    assert len(MEASUREMENTS) >= 5
    assert float(np.mean(np.abs(errors))) <= MEAN_ABS_TOLERANCE


def test_no_systematic_bias() -> None:
    errors = [predicted_s(m) / m.measured_s - 1.0 for m in MEASUREMENTS]
    assert abs(float(np.mean(errors))) <= MEAN_SIGNED_TOLERANCE
    assert min(errors) < 0 < max(errors)  # both signs occur


FITTED = ("gemm_efficiency", "weight_bandwidth_efficiency", "cpu_overhead_s")
FIT_LOWER, FIT_UPPER = (0.5, 0.6, 0.5e-3), (0.85, 0.92, 3.0e-3)  # literature ranges (overheads docstring)


def _fit(rows) -> PredictorOptions:
    """Bounded least squares of the ``FITTED`` options on ``rows`` (relative errors)."""
    from scipy.optimize import least_squares

    def residuals(x):
        o = PredictorOptions(**dict(zip(FITTED, (x[0], x[1], x[2] * 1e-3), strict=True)))
        return [predicted_s(m, o) / m.measured_s - 1.0 for m in rows]

    x = least_squares(residuals, [0.66, 0.78, 1.7], bounds=([FIT_LOWER[0], FIT_LOWER[1], FIT_LOWER[2] * 1e3],
                                                            [FIT_UPPER[0], FIT_UPPER[1], FIT_UPPER[2] * 1e3])).x
    return PredictorOptions(**dict(zip(FITTED, (x[0], x[1], x[2] * 1e-3), strict=True)))


def test_defaults_are_the_fit() -> None:
    """The shipped defaults are the fit on all rows (to the precision they are written with)."""
    fitted, default = _fit(MEASUREMENTS), PredictorOptions()
    assert fitted.gemm_efficiency == pytest.approx(default.gemm_efficiency, abs=0.01)
    assert fitted.weight_bandwidth_efficiency == pytest.approx(default.weight_bandwidth_efficiency, abs=0.01)
    assert fitted.cpu_overhead_s == pytest.approx(default.cpu_overhead_s, abs=0.1e-3)


def test_leave_one_out_holds_the_targets() -> None:
    """Refit without each row and predict it: no bias and every row within the row tolerance."""
    errors = []
    for i, m in enumerate(MEASUREMENTS):
        options = _fit(MEASUREMENTS[:i] + MEASUREMENTS[i + 1:])
        errors.append(predicted_s(m, options) / m.measured_s - 1.0)
    assert abs(float(np.mean(errors))) <= MEAN_SIGNED_TOLERANCE
    assert max(abs(e) for e in errors) <= ROW_TOLERANCE


def markdown_table() -> str:
    """The validation table of docs/step_time_validation.md."""
    lines = ["| # | measurement | model, GPU, TP, dtype | measured | predicted | error | source |",
             "|---|---|---|---|---|---|---|"]
    for i, m in enumerate(MEASUREMENTS, 1):
        pred = predicted_s(m)
        lines.append(f"| {i} | {m.name} | {m.model.name}, {m.gpu}, TP{m.tp}, {m.dtype.value} | "
                     f"{m.measured_s * 1e3:.1f} ms | {pred * 1e3:.1f} ms | {pred / m.measured_s - 1:+.1%} | "
                     f"{m.source} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table())
