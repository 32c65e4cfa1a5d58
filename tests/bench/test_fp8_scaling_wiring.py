"""``bench serve`` times FP8 weights in the checkpoint's own scaling: block-scaled when the model's
``quantization_config`` gives a ``weight_block_size`` (DeepSeek-V3's published checkpoint), per-tensor
otherwise; the engine profile's block-FP8 efficiencies then apply (``fleetplan.perf.quant``)."""

from __future__ import annotations

import dataclasses

import pytest

from fleetplan.bench import EngineArgs
from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.perf.batch import BatchComposition
from fleetplan.perf.engine_profile import load_engine_profile
from fleetplan.perf.quant import Fp8Scaling


@pytest.fixture(scope="module")
def h200():
    return load_catalog().get("H200")


def test_block_scaled_checkpoint_is_timed_as_block_fp8(h200) -> None:
    model = load_model("deepseek-v3")
    assert model.weight_block_size == (128, 128)
    options = load_engine_profile("vllm").options_for(h200, Dtype.FP8)
    p = EngineArgs(model, h200, 8, Dtype.FP8, options=options).predictor()
    assert p.fp8_scaling is Fp8Scaling.BLOCK and p.block_fp8
    # vLLM's block-FP8 weight streaming (0.16 of the peak, engine_profiles/vllm.toml) makes decode slower than
    # the per-tensor reading of the same weights
    per_tensor = dataclasses.replace(p, fp8_scaling=Fp8Scaling.PER_TENSOR)
    batch = BatchComposition.uniform(8, 2048)
    assert p.predict(batch).total_s > per_tensor.predict(batch).total_s


def test_checkpoint_without_block_size_stays_per_tensor(h200) -> None:
    model = load_model("qwen3-235b-a22b")
    assert model.weight_block_size is None
    assert EngineArgs(model, h200, 8, Dtype.FP8).predictor().fp8_scaling is Fp8Scaling.PER_TENSOR
