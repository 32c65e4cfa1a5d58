"""Which pools the measured tables cover (``MeasuredKey``) and why the others fall back to the roofline;
the engines' fitted non-kernel overheads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fleetplan.errors import DataFormatError, UnknownNameError
from fleetplan.models import Dtype, load_model
from fleetplan.paths import data_dir
from fleetplan.perf.measured import overhead
from fleetplan.perf.measured.coverage import Fp8Scheme, MeasuredKey, coverage, fp8_scheme, match_model
from fleetplan.perf.parallelism import Parallelism

MODELS_DIR = Path(__file__).resolve().parents[3] / "models"


@pytest.fixture(scope="module")
def configs_dir(tmp_path_factory) -> Path:
    """AIConfigurator-style ``org--name_config.json`` files made from the bundled HuggingFace configs, plus a
    quantised variant of one shape (which must lose to the plain checkpoint)."""
    out = tmp_path_factory.mktemp("model_configs")
    for path in MODELS_DIR.glob("*.json"):
        hf = json.loads(path.read_text())["_source"]
        shutil.copy(path, out / f"{hf.replace('/', '--', 1)}_config.json")
    shutil.copy(MODELS_DIR / "llama-3.1-70b.json", out / "nvidia--Llama-3.1-70B-Instruct-FP8_config.json")
    (out / "nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant_config.json").write_text("{}")
    return out


def test_models_match_by_shape(configs_dir: Path) -> None:
    for name in ("llama-3.1-8b", "llama-3.1-70b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3"):
        hf = json.loads((MODELS_DIR / f"{name}.json").read_text())["_source"]
        assert match_model(load_model(name), configs_dir) == hf


def test_unknown_shape_has_no_match(tmp_path: Path) -> None:
    shutil.copy(MODELS_DIR / "llama-3.1-8b.json", tmp_path / "meta-llama--Meta-Llama-3.1-8B_config.json")
    assert match_model(load_model("llama-3.1-70b"), tmp_path) is None


def test_covered_pool_key(configs_dir: Path) -> None:
    dense = coverage(load_model("llama-3.1-70b"), "H200", "vllm", Parallelism(tp=4), Dtype.FP8, Dtype.FP8,
                     Fp8Scheme.BLOCK, configs_dir)
    assert dense == MeasuredKey("meta-llama/Llama-3.1-70B", "h200_sxm", "vllm", 4, None, None, "fp8_block", "fp8")
    moe = coverage(load_model("qwen3-30b-a3b"), "H100-SXM", "sglang", Parallelism(tp=4, ep=4), Dtype.BF16,
                   Dtype.BF16, Fp8Scheme.PER_TENSOR, configs_dir)
    assert isinstance(moe, MeasuredKey) and (moe.moe_tp, moe.moe_ep, moe.gemm_quant) == (1, 4, "bfloat16")
    assert "tp4" in moe.slug() and "/" not in moe.slug()


def test_pipeline_and_attention_data_parallel_keys(configs_dir: Path) -> None:
    """Pipeline stages and attention data parallelism reach AIConfigurator's ``pp_size`` and
    ``attention_dp_size``; the experts span a stage's GPUs in each engine's meaning (``Parallelism.ffn_tp``,
    ``ffn_ep``); the slug of a tensor-parallel key is unchanged (cached tables stay valid)."""
    dsv3 = load_model("deepseek-v3")
    vllm_dp = coverage(dsv3, "H200", "vllm", Parallelism.vllm(data_parallel_size=8, enable_expert_parallel=True),
                       Dtype.FP8, Dtype.BF16, Fp8Scheme.BLOCK, configs_dir)
    assert vllm_dp == MeasuredKey("deepseek-ai/DeepSeek-V3", "h200_sxm", "vllm", 1, 1, 8, "fp8_block", "bfloat16",
                                  pp=1, attention_dp=8)
    # SGLang --tp 8 --dp 8 --enable-dp-attention (no --ep-size): attention 8 ranks of 1 GPU, experts split 8 ways
    sglang_dp = coverage(dsv3, "H200", "sglang", Parallelism(tp=1, dp=8, tp_attn=1, dp_attn=8, tp_ffn=8, ep_ffn=1),
                         Dtype.FP8, Dtype.BF16, Fp8Scheme.BLOCK, configs_dir)
    assert (sglang_dp.tp, sglang_dp.attention_dp, sglang_dp.moe_tp, sglang_dp.moe_ep) == (1, 8, 8, 1)
    assert "-dp8-" in vllm_dp.slug() and "-pp" not in vllm_dp.slug()
    staged = coverage(load_model("qwen3-235b-a22b"), "H100-SXM", "vllm",
                      Parallelism.vllm(tensor_parallel_size=8, pipeline_parallel_size=2, enable_expert_parallel=True),
                      Dtype.BF16, Dtype.BF16, Fp8Scheme.PER_TENSOR, configs_dir)
    assert (staged.tp, staged.pp, staged.attention_dp, staged.moe_tp, staged.moe_ep) == (8, 2, 1, 1, 8)
    assert "-tp8-pp2-moetp1-ep8-" in staged.slug()
    plain = coverage(load_model("llama-3.1-70b"), "H200", "vllm", Parallelism(tp=4), Dtype.BF16, Dtype.BF16,
                     Fp8Scheme.PER_TENSOR, configs_dir)
    assert plain.slug() == "h200_sxm-vllm-meta-llama--Llama-3.1-70B-tp4-bfloat16-kvbfloat16"


@pytest.mark.parametrize(("gpu", "engine", "par", "weights", "reason"), [
    ("MI300X", "vllm", Parallelism(tp=1), Dtype.BF16, "no measured system for MI300X"),
    ("L4", "vllm", Parallelism(tp=1), Dtype.BF16, "no measured system for L4"),
    ("H100-SXM", "lmdeploy", Parallelism(tp=1), Dtype.BF16, "engine lmdeploy"),
    ("H100-SXM", "vllm", Parallelism(tp=1, dp=2), Dtype.BF16, "data-parallel attention of a dense model"),
    ("H100-SXM", "vllm", Parallelism(tp=1), Dtype.INT4, "int4 weights"),
])
def test_uncovered_pools_give_the_reason(configs_dir: Path, gpu, engine, par, weights, reason) -> None:
    got = coverage(load_model("llama-3.1-8b"), gpu, engine, par, weights, Dtype.BF16, Fp8Scheme.PER_TENSOR,
                   configs_dir)
    assert isinstance(got, str) and reason in got


def test_fp8_scheme_lookup_is_loud() -> None:
    assert fp8_scheme("fp8_block") is Fp8Scheme.BLOCK
    with pytest.raises(UnknownNameError, match="fp8_block"):
        fp8_scheme("mxfp8")


def test_engine_overheads_are_sourced() -> None:
    """vLLM and SGLang carry a fitted overhead with its source; engines without the section add nothing."""
    for engine in ("vllm", "sglang"):
        over = overhead.engine_overhead(engine)
        assert 0.5e-3 < over.step_s < 10e-3 and over.source and over.engine_versions
        assert f"{over.step_s * 1e3:.3g} ms/step" in over.label()
    for engine in ("trtllm", "lmdeploy"):
        over = overhead.engine_overhead(engine)
        assert (over.step_s, over.per_seq_s) == (0.0, 0.0) and "no" in over.label()


def test_bad_overhead_section_names_file_and_key(tmp_path: Path, monkeypatch) -> None:
    profiles = tmp_path / "engine_profiles"
    profiles.mkdir()
    text = (data_dir("engine_profiles") / "vllm.toml").read_text().replace("step_s = 1.66e-3", "step_s = -1.0")
    (profiles / "vllm.toml").write_text(text)
    monkeypatch.setattr(overhead, "data_dir", lambda name: profiles)
    overhead.engine_overhead.cache_clear()
    try:
        with pytest.raises(DataFormatError, match=r"\[measured_overhead\] step_s"):
            overhead.engine_overhead("vllm")
    finally:
        overhead.engine_overhead.cache_clear()
