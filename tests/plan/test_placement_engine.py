"""The plan sees the engine profile: ``place_model(engine=...)`` times each placement with the profile's
options for its GPU and weight type (MoE layer latency, block-FP8 efficiencies), W and H of the serving
constants included; dense BF16 placements are what the predictor's defaults give (vLLM's profile
differs from them only in FP8, MoE and API-server terms)."""

from __future__ import annotations

import dataclasses

import pytest

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.perf.derive import linear_constants
from fleetplan.perf.engine_profile import load_engine_profile
from fleetplan.perf.overheads import PredictorOptions
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.plan.optimize import OptimizeRequest
from fleetplan.plan.placement import place_model, place_on_gpus
from fleetplan.workload import load_workload


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_the_placement_predictor_carries_the_engine_options_for_its_gpu(catalog, engine):
    gpu = catalog.get("mi300x")
    (p,) = place_model(load_model("qwen3-30b-a3b"), gpu, parallelism=Parallelism.vllm(tensor_parallel_size=1),
                       engine=engine)
    want = load_engine_profile(engine).options_for(gpu, p.predictor.weight_dtype)
    assert p.predictor.options == want
    if engine == "sglang":  # the profile's MI300X override reaches the plan: 300 us per MoE layer
        assert p.predictor.options.moe_layer_overhead_s == pytest.approx(3e-4)


def test_moe_layer_latency_reaches_w_and_the_step(catalog):
    """vLLM's profile adds 17 us per MoE layer to every step (48 layers: 0.82 ms); W of eq. 3 carries it (the
    roofline's W: where aiconfigurator-core is installed its measured tables would time this pool)."""
    model, gpu = load_model("qwen3-30b-a3b"), catalog.get("h100")
    par = Parallelism.vllm(tensor_parallel_size=1)
    (p,) = place_model(model, gpu, parallelism=par, timing_source="roofline")  # default engine: vLLM
    assert p.predictor.options.moe_layer_overhead_s == pytest.approx(1.7e-5)
    bare = StepTimePredictor(model, gpu, par, p.predictor.weight_dtype, p.predictor.kv_dtype,
                             dataclasses.replace(p.predictor.options, moe_layer_overhead_s=0.0))
    added = model.n_moe_layers * 1.7e-5
    assert p.predictor.t_iter_s(8, 2048.0) - bare.t_iter_s(8, 2048.0) == pytest.approx(added, rel=1e-9)
    serving = p.gpu.require_serving()
    w_s, _ = linear_constants(p.predictor, 8, int(serving.ref_context_tokens))
    assert serving.iter_base_s == pytest.approx(w_s, rel=1e-9)
    assert w_s - linear_constants(bare, 8, int(serving.ref_context_tokens))[0] == pytest.approx(added, rel=1e-9)


def test_block_fp8_checkpoint_uses_the_engine_block_efficiencies(catalog):
    gpu = catalog.get("h100")
    model = load_model("qwen3-235b-a22b-fp8")
    par = Parallelism.vllm(tensor_parallel_size=4, enable_expert_parallel=True)
    by_engine = {e: place_model(model, gpu, parallelism=par, engine=e)[0] for e in ("vllm", "trtllm")}
    for engine, p in by_engine.items():
        assert p.predictor.block_fp8 and p.predictor.weight_dtype is Dtype.FP8
        opts = load_engine_profile(engine).options
        assert p.predictor.options.fp8_block_bandwidth_efficiency == opts.fp8_block_bandwidth_efficiency
    # TRT-LLM streams block-FP8 weights at 0.48 of the bandwidth, vLLM at 0.16: its decode steps are shorter
    assert by_engine["trtllm"].predictor.t_iter_s(1, 2048.0) < by_engine["vllm"].predictor.t_iter_s(1, 2048.0)
    assert by_engine["trtllm"].gpu.serving.iter_base_s < by_engine["vllm"].gpu.serving.iter_base_s


def test_dense_bf16_placements_are_the_default_predictor(catalog):
    model, gpu = load_model("llama-3.1-70b"), catalog.get("h100")
    for p in place_model(model, gpu):
        default = dataclasses.replace(p.predictor, options=PredictorOptions())
        code, coef = p.predictor.kernel_coefficients()
        assert code == default.kernel_coefficients()[0]
        assert tuple(coef) == tuple(default.kernel_coefficients()[1])


def test_an_unknown_engine_is_its_own_error(catalog):
    model = load_model("llama-3.1-8b")
    with pytest.raises(UnknownNameError, match="unknown engine 'vllmx'"):
        place_model(model, catalog.get("h100"), engine="vllmx")
    with pytest.raises(UnknownNameError, match="unknown engine 'vllmx'"):
        place_on_gpus(model, [catalog.get("h100")], engine="vllmx")


def test_the_request_records_a_known_engine(catalog):
    wl = load_workload("lmsys")
    assert OptimizeRequest(workload=wl, gpus=(catalog.get("h100"),), slo_ttft_s=1.0, rate_per_s=1.0).engine == "vllm"
    with pytest.raises(ConfigError, match="engine"):
        OptimizeRequest(workload=wl, gpus=(catalog.get("h100"),), slo_ttft_s=1.0, rate_per_s=1.0, engine="vLLM 0.11")


def test_the_measured_source_is_asked_for_the_same_engine_and_fp8_scheme(catalog, monkeypatch):
    """Where aiconfigurator-core is installed, the placement reads the tables of its engine and of the
    checkpoint's FP8 scaling (block for Qwen3-235B-A22B-FP8); recorded here without the package."""
    import fleetplan.plan.placement as placement
    from fleetplan.perf.measured.coverage import Fp8Scheme

    asked = []
    monkeypatch.setattr(placement, "measured_step_model",
                        lambda p, engine, scheme, timing=None: asked.append((engine, scheme)))
    par = Parallelism.vllm(tensor_parallel_size=4, enable_expert_parallel=True)
    place_model(load_model("qwen3-235b-a22b-fp8"), catalog.get("h200"), parallelism=par, engine="sglang")
    place_model(load_model("llama-3.1-8b"), catalog.get("h200"), parallelism=Parallelism.vllm(tensor_parallel_size=1),
                weight_dtype=Dtype.FP8, engine="trtllm")
    assert asked == [("sglang", Fp8Scheme.BLOCK), ("trtllm", Fp8Scheme.PER_TENSOR)]
