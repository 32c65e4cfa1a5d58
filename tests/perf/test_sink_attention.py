"""Attention sinks on Triton attention kernels (``fleetplan.perf.attention``, 'Attention sinks').

Theory checked: a model with sinks (gpt-oss) served by an engine whose profile gives
``sink_attention_prefill_efficiency`` on the GPU (vLLM below Hopper) computes prefill attention, full and window
layers, at ``BF16 peak x that share`` with no head-dim factor, so its prefill attention time is exactly
``FlashAttention rate / sink rate`` times the FlashAttention-rate time; the context layers' decode term, the GEMMs and
the experts do not move; a model without sinks, or a GPU without the value (Hopper: FlashAttention 3 takes sinks),
is unchanged; the simulator's coefficients (both phases) carry the same terms; the option is a fraction.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.models import Dtype, load_model, model_config_from_dict
from fleetplan.perf.attention import flash_head_dim_factor, sink_prefill_flop_per_s
from fleetplan.perf.batch import BatchComposition
from fleetplan.perf.engine_profile import load_engine_profile
from fleetplan.perf.overheads import PredictorOptions
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor

#: one 2,048-token chunk at a 16K offset (attention-heavy) beside 32 decodes
LONG_PREFILL = BatchComposition(np.array([2048]), np.array([16384]), np.full(32, 4096))


def _predictor(catalog, model_name: str, gpu: str, **options) -> StepTimePredictor:
    model = load_model(model_name)
    return StepTimePredictor(model, catalog.get(gpu), Parallelism.vllm(tensor_parallel_size=1),
                             model.default_weight_dtype, options=PredictorOptions(**options))


def test_only_gpt_oss_carries_sinks() -> None:
    assert load_model("gpt-oss-120b").attention_sinks and load_model("gpt-oss-20b").attention_sinks
    for name in ("qwen3-32b", "llama-3.1-8b", "deepseek-v3", "qwen3-235b-a22b", "llama-4-scout"):
        assert not load_model(name).attention_sinks, name
    # read from the architecture of any config.json, not from a bundled name
    config = json.loads(json.dumps({"architectures": ["GptOssForCausalLM"], "num_hidden_layers": 2,
                                    "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                                    "head_dim": 16, "vocab_size": 100, "intermediate_size": 64,
                                    "num_local_experts": 4, "num_experts_per_tok": 2}))
    assert model_config_from_dict(config, source="test", name="tiny").attention_sinks


@pytest.mark.parametrize("model_name", ["gpt-oss-120b", "gpt-oss-20b"])
def test_sink_model_prefills_at_the_triton_share_of_the_peak(catalog, model_name) -> None:
    flash = _predictor(catalog, model_name, "A100-80GB")
    triton = _predictor(catalog, model_name, "A100-80GB", sink_attention_prefill_efficiency=0.21)
    model, gpu = flash.model, catalog.get("A100-80GB")
    flash_rate = gpu.bf16_tflops * 1e12 * 0.6 * flash_head_dim_factor(model.head_dim)
    triton_rate = gpu.bf16_tflops * 1e12 * 0.21
    assert sink_prefill_flop_per_s(model, gpu.bf16_tflops * 1e12, 0.21) == pytest.approx(triton_rate)
    a, b = flash.attention, triton.attention
    assert b.prefill_s_per_work == pytest.approx(a.prefill_s_per_work * flash_rate / triton_rate, rel=1e-12)
    assert b.window_s_per_token == pytest.approx(a.window_s_per_token * flash_rate / triton_rate, rel=1e-12)
    assert (b.decode_s_per_context_token, b.window_s_per_seq, b.window_tokens) == (
        a.decode_s_per_context_token, a.window_s_per_seq, a.window_tokens)
    fs, ts = flash.predict(LONG_PREFILL).seconds, triton.predict(LONG_PREFILL).seconds
    assert ts["attention_prefill"] == pytest.approx(fs["attention_prefill"] * flash_rate / triton_rate, rel=1e-12)
    for name in ("gemm", "attention_decode", "moe_experts", "norms", "cpu_overhead"):
        assert ts[name] == fs[name], name
    # the simulator and the analytic side read the same terms
    code, coef = triton.kernel_coefficients()
    assert coef[3] == b.prefill_s_per_work and coef[18] == b.window_s_per_token


def test_models_without_sinks_ignore_the_option(catalog) -> None:
    for name in ("qwen3-32b", "qwen3-30b-a3b"):
        base = _predictor(catalog, name, "A100-80GB")
        with_option = _predictor(catalog, name, "A100-80GB", sink_attention_prefill_efficiency=0.21)
        assert with_option.attention == base.attention
        assert with_option.kernel_coefficients()[1].tolist() == base.kernel_coefficients()[1].tolist()


def test_vllm_profile_gives_the_read_back_below_hopper_only(catalog) -> None:
    """The vLLM profile's per-GPU value: 0.21 on the A100s (L40S / RTX PRO 6000 mean), 0.20 on the L40S, none on
    Hopper and Blackwell (FlashAttention 3 / FlashInfer take sinks); the GPUStack rows' releases (0.10.2, 0.11.0)
    resolve to it, and its source names the measured tables."""
    profile = load_engine_profile("vllm")
    for gpu, value in (("A100-80GB", 0.21), ("A100-40GB", 0.21), ("L40S", 0.20), ("L4", 0.21), ("A10G", 0.21),
                       ("H100-SXM", None), ("H200", None), ("B200", None), ("MI300X", None)):
        for version in (None, "0.10.2", "0.11.0"):
            assert profile.options_for(catalog.get(gpu), Dtype.MXFP4, version).sink_attention_prefill_efficiency \
                == value, (gpu, version)
    source = profile.source_of("sink_attention_prefill_efficiency", catalog.get("A100-80GB"))
    assert "vllm_triton_attn" in source and "recipes@" in source and "Not fitted" in source


def test_hopper_keeps_flash_attention(catalog) -> None:
    profile = load_engine_profile("vllm")
    gpu = catalog.get("H100-SXM")
    model = load_model("gpt-oss-120b")
    p = StepTimePredictor(model, gpu, Parallelism.vllm(tensor_parallel_size=1), Dtype.MXFP4,
                          options=profile.options_for(gpu, Dtype.MXFP4))
    plain = StepTimePredictor(model, gpu, Parallelism.vllm(tensor_parallel_size=1), Dtype.MXFP4,
                              options=PredictorOptions())
    assert p.attention.prefill_s_per_work == pytest.approx(plain.attention.prefill_s_per_work, rel=1e-12)


@pytest.mark.parametrize("value", [0.0, -0.1, 1.5, float("nan")])
def test_option_must_be_a_fraction(value) -> None:
    with pytest.raises(ConfigError, match="sink_attention_prefill_efficiency"):
        PredictorOptions(sink_attention_prefill_efficiency=value)


def test_perf_explain_says_which_kernels_time_it() -> None:
    """``fleetplan perf explain --model gpt-oss-120b --gpu a100 --engine vllm`` names the mechanism and both rates;
    on H100 it does not."""
    from click.testing import CliRunner

    from fleetplan.cli.main import cli

    runner = CliRunner()
    result = runner.invoke(cli, ["perf", "explain", "--model", "gpt-oss-120b", "--gpu", "a100", "--engine", "vllm"],
                           env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "attention sinks: gpt-oss-120b runs on Triton attention kernels on A100-80GB" in result.output
    assert "prefill attention at 0.21 of the BF16 peak, not FlashAttention's 0.47" in result.output
    result = runner.invoke(cli, ["perf", "explain", "--model", "gpt-oss-120b", "--gpu", "h100", "--engine", "vllm"],
                           env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "attention sinks" not in result.output
