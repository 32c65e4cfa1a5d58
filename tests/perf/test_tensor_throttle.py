"""Throttled tensor cores (fleetplan.perf.roofline, 'Throttled tensor cores') and the 141 GB H20.

The H20 is the Hopper die with its tensor rate per SM cut; an efficiency read back on H100/H200 kernels is the
share of their peak those kernels reached while limited by other per-SM work, so on the H20 it becomes
``min(e_cap, e_ref * throttle)``.  The vLLM profile carries the derived values per GPU; these tests check that
they are that derivation (not hand-set numbers), and that the 141 GB H20 differs from the 96 GB one in memory
only.
"""

from __future__ import annotations

import pytest

from fleetplan.errors import ConfigError
from fleetplan.models import Dtype, load_model
from fleetplan.perf.engine_profile import load_engine_profile
from fleetplan.perf.kv_budget import kv_budget
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.roofline import sm_count, tensor_throttle, tensor_throttle_efficiency

THROTTLED_OPTIONS = ("attention_efficiency", "fp8_gemm_efficiency", "fp8_block_gemm_efficiency",
                     "moe_gemm_efficiency", "moe_fp8_gemm_efficiency")


def test_h20_tensor_rate_per_sm_is_h100_over_3_95(catalog) -> None:
    h100, h20 = catalog.get("H100-SXM"), catalog.get("H20")
    expected = (989.5 / 132) / (148.0 / 78)
    assert tensor_throttle(h20, h100) == pytest.approx(expected)
    assert tensor_throttle(h20, h100, fp8=True) == pytest.approx((1979.0 / 132) / (296.0 / 78))
    assert tensor_throttle(h20, h100) == pytest.approx(3.9507, abs=1e-4)
    assert tensor_throttle(h100, h100) == pytest.approx(1.0)


def test_throttled_efficiency_is_the_reference_share_times_the_throttle_up_to_the_cap() -> None:
    assert tensor_throttle_efficiency(0.1, 3.0, 0.66) == pytest.approx(0.3)
    assert tensor_throttle_efficiency(0.23, 3.95, 0.66) == pytest.approx(0.66)  # capped
    assert tensor_throttle_efficiency(0.5, 1.0, 0.66) == pytest.approx(0.5)  # no throttle: unchanged
    assert tensor_throttle_efficiency(0.6, 3.95, 0.5) == pytest.approx(0.6)  # never below the reference share
    with pytest.raises(ConfigError, match="throttle"):
        tensor_throttle_efficiency(0.5, 0.5, 0.66)
    with pytest.raises(ConfigError, match="cap"):
        tensor_throttle_efficiency(0.5, 2.0, 1.5)
    with pytest.raises(ConfigError, match="reference_efficiency"):
        tensor_throttle_efficiency(0.0, 2.0, 0.66)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "lmdeploy"])
@pytest.mark.parametrize("gpu_name", ["H20", "H20-3e"])
def test_h20_options_are_the_derivation(catalog, engine: str, gpu_name: str) -> None:
    """Every engine profile's H20 options are its own H100/H200 values passed through the throttle."""
    profile = load_engine_profile(engine)
    gpu, ref = catalog.get(gpu_name), catalog.get("H100-SXM")
    base, on_gpu = profile.options, profile.options_for(gpu, None)
    throttle = tensor_throttle(gpu, ref)
    for name in THROTTLED_OPTIONS:
        if getattr(base, name) is None:
            assert getattr(on_gpu, name) is None, name
            continue
        expected = tensor_throttle_efficiency(getattr(base, name), throttle, base.gemm_efficiency)
        assert getattr(on_gpu, name) == pytest.approx(expected, abs=0.0005), name
        if expected != getattr(base, name):
            assert "tensor_throttle" in profile.gpu_sources[gpu_name][name]


def test_vllm_h20_moe_rate_and_other_gpus_untouched(catalog) -> None:
    profile = load_engine_profile("vllm")
    on_h20 = profile.options_for(catalog.get("H20"), None)
    assert on_h20.moe_fp8_gemm_efficiency == pytest.approx(0.66)  # 0.23 x 3.95 = 0.91, capped at gemm_efficiency
    for other in ("H100-SXM", "H200", "A100-80GB", "L40S"):  # full-rate Hopper and other architectures keep theirs
        assert profile.options_for(catalog.get(other), None).moe_fp8_gemm_efficiency < 0.3


def test_h20_3e_is_the_h20_with_141_gb(catalog) -> None:
    h20, h20e = catalog.get("H20"), catalog.get("h20-141gb")
    assert h20e.name == "H20-3e" and h20e.hbm_gib == 141.0 and h20.hbm_gib == 96.0
    for field in ("bf16_tflops", "fp8_tflops", "hbm_tb_per_s", "nvlink_gb_per_s", "gpus_per_node", "tdp_w"):
        assert getattr(h20e, field) == getattr(h20, field), field
    assert sm_count(h20e) == sm_count(h20) == 78


def test_deepseek_v32_kv_cache_on_h20_memory_variants(catalog) -> None:
    """What the recipe's run needs (about 79 sequences decoding at 2-3K tokens of context): the 96 GB H20 holds
    V3.2's FP8 weights with a few GiB to spare (tens of thousands of KV tokens), the 141 GB one several hundred
    thousand; the budget grows by the extra memory's share, nothing else changes."""
    model = load_model("deepseek-v3.2")
    par = Parallelism(tp=8)
    small = kv_budget(model, catalog.get("H20"), par, weight_dtype="fp8", kv_dtype="bf16")
    large = kv_budget(model, catalog.get("H20-3e"), par, weight_dtype="fp8", kv_dtype="bf16")
    small_tokens = small.kv_blocks_per_replica * small.block_size_tokens
    large_tokens = large.kv_blocks_per_replica * large.block_size_tokens
    assert small_tokens < 79 * 2048 < large_tokens
    # MLA's latent is replicated on every TP rank: each GPU's extra memory holds the whole extra token count
    extra_bytes = 0.9 * (141.0 - 96.0) * 2**30  # vLLM's default 0.9 memory share of the extra 45 GiB
    assert large_tokens - small_tokens == pytest.approx(extra_bytes / model.kv_bytes_per_token(Dtype.BF16), rel=0.02)
