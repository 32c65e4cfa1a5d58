"""The routed experts' weight stream at decode sizes (``PredictorOptions.moe_weight_bandwidth_efficiency``) and the vLLM
profile's MoE layer overhead, both read back from AIConfigurator 0.12.0's fused-MoE tables (issue 26).

Theory: at decode sizes each hit expert's weights are read once per step (``fleetplan.perf.moe``, ``memory_r``), at
``moe_weight_bandwidth_efficiency`` of the HBM peak where the profile gives it, else at ``weight_bandwidth_efficiency``.
So when the weight reads bind, the routed experts' time scales as the inverse of that efficiency exactly (the hit
experts' reads and the activation bytes both travel at that rate), and nothing else in the step moves.  Invariants:
unset keeps every coefficient bit for bit; the analytic step and the simulator's agree on the new coefficients; the
profiles carry the tables' read-backs (checked against the tables when ``aiconfigurator-core`` is installed).
"""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.models import Dtype, load_model
from fleetplan.perf.batch import BatchComposition
from fleetplan.perf.engine_profile import load_engine_profile
from fleetplan.perf.overheads import PredictorOptions
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from tests.perf.phases import assert_phases_agree

ROOT = Path(__file__).resolve().parents[2]


def _predictor(catalog, efficiency: float | None, model: str = "qwen3-235b-a22b", gpu: str = "H100-SXM",
               par: Parallelism | None = None, dtype: Dtype = Dtype.BF16) -> StepTimePredictor:
    """No rows-per-expert offset (``rho = 0``), so the weight reads bind at decode sizes; expert TP 8 by default."""
    par = Parallelism(tp=8) if par is None else par
    opts = PredictorOptions(moe_gemm_efficiency=0.38, weight_bandwidth_efficiency=0.6,
                            moe_weight_bandwidth_efficiency=efficiency)
    return StepTimePredictor(load_model(model), catalog.get(gpu), par, dtype, options=opts)


def test_unset_keeps_the_weight_streaming_efficiency(catalog) -> None:
    """``None``: the experts stream at ``weight_bandwidth_efficiency``, every kernel coefficient bit for bit as
    before the option existed (the option set to the same value)."""
    unset, same = _predictor(catalog, None), _predictor(catalog, 0.6)
    assert unset.moe_rates.weight_bytes_per_s == unset.rates.weight_bytes_per_s
    assert np.array_equal(unset.kernel_coefficients()[1], same.kernel_coefficients()[1])


@pytest.mark.parametrize("n_decode", [1, 16, 32, 96, 256])
def test_weight_bound_experts_scale_as_the_inverse_efficiency(catalog, n_decode: int) -> None:
    """Qwen3-235B-A22B BF16 on 8 H100 (expert TP 8), decode batches of 1-256: the routed experts' time at 0.85 over
    at 0.6 is 0.6 / 0.85 exactly (weight reads bind in both), and the rest of the step is unchanged."""
    slow, fast = _predictor(catalog, 0.6), _predictor(catalog, 0.85)
    assert fast.moe_rates.weight_bytes_per_s == pytest.approx(catalog.get("H100-SXM").hbm_tb_per_s * 1e12 * 0.85)
    batch = BatchComposition.uniform(n_decode, 2000, 0, 0)
    s_slow, s_fast = slow.predict(batch).seconds, fast.predict(batch).seconds
    assert s_fast["moe_experts"] / s_slow["moe_experts"] == pytest.approx(0.6 / 0.85, rel=1e-12)
    assert {k: v for k, v in s_fast.items() if k != "moe_experts"} == \
        {k: v for k, v in s_slow.items() if k != "moe_experts"}


@pytest.mark.parametrize(("model", "gpu", "dtype", "par"), [
    ("qwen3-235b-a22b", "H100-SXM", Dtype.BF16, Parallelism(tp=8)),
    ("deepseek-v3", "H200", Dtype.FP8, Parallelism(tp=8, ep=8)),
])
def test_analytic_and_simulator_steps_agree(catalog, model, gpu, dtype, par) -> None:
    """Both phases read the one set of coefficients: the simulator's step (``roofline_step_s``) and the analytic
    engine model's (``step_time_array_s``) agree, and equal the predictor's sum of parts, at decode and mixed steps."""
    step = _predictor(catalog, 0.85, model, gpu, par, dtype)
    assert_phases_agree(step, ((1, 0), (32, 0), (256, 0), (16, 512), (0, 4096)), 2000)


@pytest.mark.parametrize("bad", [0.0, 1.5, -0.2, float("nan")])
def test_an_efficiency_outside_zero_one_is_refused(bad: float) -> None:
    with pytest.raises(ConfigError, match="moe_weight_bandwidth_efficiency"):
        PredictorOptions(moe_weight_bandwidth_efficiency=bad)


@pytest.mark.parametrize(("engine", "gpu", "efficiency", "overhead_s"), [
    ("vllm", "H100-SXM", 0.85, 1.7e-5), ("vllm", "A100-80GB", 0.85, 1.7e-5), ("vllm", "MI300X", 0.40, 1.0e-4),
    ("sglang", "H200", 0.76, 1.0e-4), ("sglang", "MI300X", 0.6, 3.0e-4), ("trtllm", "H100-SXM", None, 0.0),
])
def test_profiles_carry_the_read_backs(catalog, engine, gpu, efficiency, overhead_s) -> None:
    """``python benchmarks/aiconfigurator_compare.py --moe-decode-tables`` / ``--moe-decode-overhead``; MI300X (no
    table) keeps its weight streaming and overhead as before; engines without a read-back leave the option unset."""
    profile = load_engine_profile(engine)
    opts = profile.options_for(catalog.get(gpu), Dtype.BF16)
    assert opts.moe_weight_bandwidth_efficiency == efficiency
    assert opts.moe_layer_overhead_s == pytest.approx(overhead_s)
    if efficiency is not None and gpu != "MI300X":
        assert "--moe-decode-tables" in profile.sources["moe_weight_bandwidth_efficiency"]
    if engine == "vllm" and gpu != "MI300X":
        assert "--moe-decode-overhead" in profile.sources["moe_layer_overhead_s"]


def _aic():
    pytest.importorskip("aiconfigurator_core")
    spec = importlib.util.spec_from_file_location("aiconfigurator_compare",
                                                  ROOT / "benchmarks" / "aiconfigurator_compare.py")
    aic = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(aic)
    return aic


def test_the_tables_give_the_profiles_efficiencies() -> None:
    """Against AIConfigurator 0.12.0's fused-MoE tables (skipped without ``aiconfigurator-core``): the weight-bound
    rows fit 0.85 (vLLM 0.24.0) and 0.76 (SGLang 0.5.14) of the HBM peak, each a better fit than the engine-wide
    weight streaming the experts had (0.78 / 0.6), and every table's own fit within 0.70-0.95."""
    fits = {g["engine"]: g for g in _aic().moe_decode_bandwidth_fit()}
    for engine, value in (("vllm", 0.85), ("sglang", 0.76)):
        assert round(fits[engine]["eff"], 2) == value
        assert fits[engine]["mean_abs_log"] < 0.25
        assert all(0.70 <= v <= 0.95 for v in fits[engine]["per_table"].values())


def test_the_tables_give_the_vllm_overhead() -> None:
    """The vLLM tables at 1-512 tokens exceed fleetplan's routed-expert time by 17 us per MoE layer (the median of
    the six tables' medians, each 5-25 us), not the 100 us the profile transferred from SGLang."""
    rows = [g for g in _aic().moe_decode_overhead() if g["engine"] == "vllm"]
    assert len(rows) == 6 and all(5.0 <= g["median_us"] <= 25.0 for g in rows)
    median_us = statistics.median(g["median_us"] for g in rows)
    assert round(median_us) == 17
    vllm = load_engine_profile("vllm")
    assert vllm.options.moe_layer_overhead_s == pytest.approx(round(median_us) * 1e-6)
