"""Shared by the per-query prefill-cost tests (DSA, dense MLA): fleetplan's attention module of one layer in a
prefill step, the quantity AIConfigurator's measured module tables time."""

from __future__ import annotations

import dataclasses

from fleetplan.models import Dtype, ModelConfig
from fleetplan.perf.batch import parse_batch
from fleetplan.perf.engine_profile import load_engine_profile
from fleetplan.perf.operators import gemm_block, gemm_block_s, step_gemms
from fleetplan.perf.overheads import PredictorOptions
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.perf.roofline import DeviceRates

#: Round device rates for the by-hand checks.
RATES = DeviceRates(gemm_flop_per_s=100e12, attention_flop_per_s=50e12, weight_bytes_per_s=2e12,
                    kv_bytes_per_s=1e12, n_sms=0)
#: The MLA module's projections (``fleetplan.perf.operators.step_gemms`` names); DSA adds the indexer's two.
MLA_GEMMS = ("q_a_proj", "q_b_proj", "kv_a_proj", "kv_b_proj", "o_proj")
DSA_GEMMS = MLA_GEMMS + ("index_wq_b", "index_wk")


def module_prefill_ms(model: ModelConfig, gpu, options: PredictorOptions, gemms: tuple[str, ...], n: int, prompt: int,
                      kv_dtype: Dtype = Dtype.BF16) -> float:
    """One layer's module (ms) of a step prefilling ``n`` prompts of ``prompt`` tokens at TP 8, FP8 block weights:
    the ``gemms``' roofline (tile padding included) plus the attention terms, the per-query cost among them."""
    p = StepTimePredictor(model, gpu, Parallelism(tp=8), Dtype.FP8, kv_dtype, options=options, fp8_scaling="block")
    block = gemm_block(tuple(g for g in step_gemms(model, p.parallelism, Dtype.FP8, p.weight_stream_bytes_per_param)
                             if g.name in gemms), p.rates)
    s = p.predict(parse_batch("prefill=" + ",".join([f"{prompt}@0"] * n))).seconds
    gemm_s = max(gemm_block_s(block, n * prompt, n, options.tile_m_tokens))
    return (gemm_s + s["attention_prefill"] + s["attention_window"]) / model.n_layers * 1e3


def vllm_module_errors(model: ModelConfig, gpu, gemms: tuple[str, ...], option: str, n: int, prompt: int,
                       measured_ms: float) -> tuple[float, float]:
    """``module_prefill_ms / measured - 1`` with the vLLM profile's options for ``gpu`` (FP8 weights), and with its
    per-query cost ``option`` set to 0: (with the term, without it)."""
    opts = load_engine_profile("vllm").options_for(gpu, Dtype.FP8)
    with_term = module_prefill_ms(model, gpu, opts, gemms, n, prompt) / measured_ms - 1
    without = module_prefill_ms(model, gpu, dataclasses.replace(opts, **{option: 0.0}), gemms, n, prompt)
    return with_term, without / measured_ms - 1
