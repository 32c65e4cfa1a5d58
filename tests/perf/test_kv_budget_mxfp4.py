"""MXFP4 experts as the engine loads them (``fleetplan.perf.kv_budget.Mxfp4Layout``): padded per vLLM's
backend, checked against hand-computed bytes and against the loads vLLM logs ("Model loading took")."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.perf.kv_budget import kv_budget, mxfp4_layout, weight_bytes_per_gpu
from fleetplan.perf.parallelism import Parallelism

CATALOG = load_catalog()
GIB = 2**30
H, V = 2880, 201088  # gpt-oss hidden size (= expert intermediate size) and vocabulary


def _rest_bf16_bytes(layers: int, experts: int, tp: int = 1) -> float:
    """Everything but the routed experts (BF16): q/o split, 8 KV heads (replicated from TP 8), two norms per
    layer, the router, the embedding and LM head split over TP, the final norm."""
    kv_heads = max(8 // tp, 1)
    attn = 2 * H * 64 * 64 / tp + 2 * H * kv_heads * 64 + 2 * H
    return 2 * (layers * (attn + H * experts) + 2 * V * H / tp + H)


def _expert(i_p: int, h_p: int, scale_copies: int, bias_bytes: int) -> float:
    return 3 * i_p * h_p * (0.5 + scale_copies / 32) + (2 * i_p + h_p) * bias_bytes


@pytest.mark.parametrize(("gpu", "backend", "expert", "logged_gib"), [
    # Marlin (SM 8.0): I 2880 -> 2944 (128), h 2880 -> 3072 (256), BF16 bias; vLLM v0.10.1 logs 65.97 GiB
    # (vllm-project/vllm issue #23278, Marlin MXFP4 on one GPU).
    ("A100-80GB", "vllm-marlin", _expert(2944, 3072, 1, 2), 65.97),
    # Triton (SM 9.0): no padding at 2880 (a multiple of 64), scales kept twice, fp32 bias; v0.14.1 logs
    # 64.38 GiB (issue #33155).
    ("H100-SXM", "vllm-triton", _expert(2880, 2880, 2, 4), 64.38),
])
def test_gpt_oss_120b_loaded_like_vllm(gpu: str, backend: str, expert: float, logged_gib: float) -> None:
    m = load_model("gpt-oss-120b")
    layout = mxfp4_layout(CATALOG.get(gpu))
    assert layout.backend == backend
    want = math.ceil(36 * 128 * expert + _rest_bf16_bytes(36, 128))
    assert weight_bytes_per_gpu(m, Parallelism(1), Dtype.MXFP4, mxfp4=layout) == (want,)
    b = kv_budget(m, CATALOG.get(gpu), Parallelism(1), weight_dtype="mxfp4", kv_dtype="bf16")
    assert (b.weight_bytes, b.mxfp4_backend) == (want, backend)
    assert b.weight_bytes / GIB == pytest.approx(logged_gib, abs=0.25)  # attention biases and sinks left out
    assert b.weight_bytes > m.weight_bytes() + 3.4 * GIB  # the checkpoint's 60.69 GiB was short


def test_gpt_oss_120b_tp2_pads_the_split_intermediate():
    """TP 2 (experts split over 2 GPUs): each GPU's 1440 intermediate rows pad to 1536 under Marlin (128) and
    to 1472 under Triton (64)."""
    m, par = load_model("gpt-oss-120b"), Parallelism(2)
    a100 = weight_bytes_per_gpu(m, par, Dtype.MXFP4, mxfp4=mxfp4_layout(CATALOG.get("A100-80GB")))
    h100 = weight_bytes_per_gpu(m, par, Dtype.MXFP4, mxfp4=mxfp4_layout(CATALOG.get("H100-SXM")))
    rest = _rest_bf16_bytes(36, 128, tp=2)
    assert a100 == (math.ceil(36 * 128 * _expert(1536, 3072, 1, 2) + rest),)
    assert h100 == (math.ceil(36 * 128 * _expert(1472, 2880, 2, 4) + rest),)


def test_gpt_oss_20b_by_hand():
    """24 layers of 32 experts: Marlin 13.67 GiB on A100, Triton 13.38 GiB on H100, FlashInfer (h and I to
    3072) on B200; the checkpoint is 12.80 GiB."""
    m = load_model("gpt-oss-20b")
    rest = _rest_bf16_bytes(24, 32)
    for gpu, expert in (("A100-80GB", _expert(2944, 3072, 1, 2)), ("H100-SXM", _expert(2880, 2880, 2, 4)),
                        ("B200", _expert(3072, 3072, 1, 4))):
        b = kv_budget(m, CATALOG.get(gpu), Parallelism(1), weight_dtype="mxfp4", kv_dtype="bf16")
        assert b.weight_bytes == math.ceil(24 * 32 * expert + rest), gpu
    assert m.weight_bytes() / GIB == pytest.approx(12.80, abs=0.01)


def test_engines_and_dtypes_outside_vllms_mxfp4_loader():
    m, h100 = load_model("gpt-oss-120b"), CATALOG.get("H100-SXM")
    sglang = kv_budget(m, h100, Parallelism(1), weight_dtype="mxfp4", kv_dtype="bf16", engine="sglang")
    assert sglang.weight_bytes == math.ceil(36 * 128 * _expert(2880, 2880, 2, 4) + _rest_bf16_bytes(36, 128))
    assert sglang.mxfp4_backend == "sglang-triton"  # SGLang's Triton path on every GPU, A100 too
    a100 = kv_budget(m, CATALOG.get("A100-80GB"), Parallelism(1), weight_dtype="mxfp4", kv_dtype="bf16",
                     engine="sglang")
    assert a100.weight_bytes == sglang.weight_bytes
    trt = kv_budget(m, h100, Parallelism(1), weight_dtype="mxfp4", kv_dtype="bf16", engine="trtllm")
    assert (trt.weight_bytes, trt.mxfp4_backend) == (m.weight_bytes(), "checkpoint")
    with pytest.raises(UnknownNameError, match="valid engine names are lmdeploy, sglang, trtllm, vllm"):
        kv_budget(m, h100, Parallelism(1), weight_dtype="mxfp4", kv_dtype="bf16", engine="vlm")
    with pytest.raises(UnknownNameError):  # whatever the weight type
        kv_budget(m, h100, Parallelism(2), weight_dtype="fp8", kv_dtype="bf16", engine="vlm")
    fp8 = kv_budget(m, h100, Parallelism(2), weight_dtype="fp8", kv_dtype="bf16")
    assert fp8.weight_bytes == weight_bytes_per_gpu(m, Parallelism(2), Dtype.FP8)[0] and fp8.mxfp4_backend == ""


def test_vllm_on_a_gpu_without_a_known_capability_is_refused():
    gpu = CATALOG.get("H100-SXM")
    with pytest.raises(ConfigError, match="compute capability"):
        mxfp4_layout(replace(gpu, name="Mystery-GPU"))


def test_vllm_releases_before_triton_kernels_load_marlin_on_hopper():
    """vLLM shipped triton_kernels from v0.11.1 (commit a9f55dc5): 0.10.2 and 0.11.0 load Marlin on H100 (the
    65.97 GiB of issue #23278 was v0.10.1 on H100); Ampere is Marlin and Blackwell FlashInfer at any release."""
    h100, a100, b200 = CATALOG.get("H100-SXM"), CATALOG.get("A100-80GB"), CATALOG.get("B200")
    assert [mxfp4_layout(h100, "vllm", v).backend for v in ("0.10.1", "0.10.2", "0.11.0", "v0.11.1", "0.14.1rc1")] \
        == ["vllm-marlin"] * 3 + ["vllm-triton"] * 2
    assert mxfp4_layout(a100, "vllm", "0.14.1").backend == "vllm-marlin"
    assert mxfp4_layout(b200, "vllm", "0.10.2").backend == "vllm-flashinfer-sm100"
    m = load_model("gpt-oss-120b")
    old = kv_budget(m, h100, Parallelism(1), weight_dtype="mxfp4", kv_dtype="bf16", engine_version="0.10.2")
    assert old.weight_bytes == math.ceil(36 * 128 * _expert(2944, 3072, 1, 2) + _rest_bf16_bytes(36, 128))
    with pytest.raises(ConfigError, match="not a release number"):
        mxfp4_layout(h100, "vllm", "latest")
