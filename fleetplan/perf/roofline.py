"""Achieved device rates and the GEMM roofline with tile and wave quantisation.

A GEMM of ``M`` tokens against a weight of ``K x N`` (one GPU's shard) costs

    compute_s = 2 * M_pad * K * N / (peak_flop_per_s * gemm_efficiency) * wave_factor
    memory_s  = (K * N * weight_bytes + (M * K + M * N) * activation_bytes)
                / (hbm_bytes_per_s * weight_bandwidth_efficiency)
    time_s    = max(compute_s, memory_s)                                    (roofline)

Efficiency curve over the token dimension (NVIDIA Deep Learning Performance Guide,
"Matrix Multiplication Background", sections "Tile Quantization" and "Wave Quantization"):
the output is cut into tiles of ``TILE_M_TOKENS x TILE_N`` (128 x 128, the cuBLAS/CUTLASS
BF16 tile on Ampere and Hopper that guide uses in its examples); a partial tile along the
token dimension costs a whole one, so ``M_pad = ceil(M / TILE_M) * TILE_M`` once ``M`` reaches
one tile (below it libraries pick skinny 16-64-row tiles or split-K, so ``M_pad = M``:
such GEMMs are bandwidth-bound anyway); the tiles run
in waves of one tile per SM, and a partly filled last wave costs a whole wave:

    wave_factor = ceil(m_tiles * r) / (m_tiles * r),   r = n_tiles_per_token_tile / n_sms

``r`` counts the N-tiles of *all* GEMMs of one layer (``operators.layer_n_tiles``): the
layer's tiles are treated as one stream of work over the SMs, as persistent / stream-K
schedulers (CUTLASS 3, cuBLAS on Hopper) issue them, so only the layer's last wave is
partial.  This is the form the simulator kernel evaluates exactly (``predictor``).

FLOP/s peak: ``fp8_tflops`` when weights are FP8 and the GPU has FP8 tensor cores (W8A8),
else ``bf16_tflops`` (BF16, or weight-only FP8/INT4 dequantised to BF16 as Marlin kernels
do on Ampere).  Bandwidth: ``hbm_tb_per_s``.  Efficiency defaults are estimates stated in
``overheads.PredictorOptions``; calibration (``calibrate``) replaces them with fitted scales.

Throttled tensor cores (``tensor_throttle_efficiency``).  The H20 is the Hopper die with its tensor
throughput cut per SM: 148 BF16 / 296 FP8 TFLOPS dense on 78 SMs, 1.90 / 3.79 TFLOPS per SM, against the
H100 SXM's 989.5 / 1,979 on 132 SMs, 7.50 / 14.99 per SM (3.95x lower), with the H100's clock domain,
memory system and 4.0 TB/s (gpu_profiles/h20.toml, ``SM_COUNTS``).  An efficiency read back on the
H100 / H200 (a share of their tensor peak) is the share a kernel reached while limited by its other work
per SM (scale loads, dequantisation, gathers, tile tails): that work runs at the H100's rate per SM on the
H20, so the kernel reaches ``throttle`` times the share of the H20's lower peak, up to the share the
profile's dense GEMMs reach when tensor-bound (``gemm_efficiency``):

    e_gpu = min(max(e_cap, e_ref), e_ref * throttle),   throttle = (peak_ref / SMs_ref) / (peak_gpu / SMs_gpu)

(``tensor_throttle_efficiency``).  Engine profiles apply it per GPU in ``[gpu_options.H20]``, each value
with this derivation as its source; it is not applied to other architectures (an A100 SM is an Ampere
SM, not a throttled Hopper one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType

from fleetplan.errors import ConfigError
from fleetplan.hardware import GpuProfile
from fleetplan.models import Dtype

__all__ = ["SM_COUNTS", "tensor_throttle", "tensor_throttle_efficiency",
           "TILE_M_TOKENS", "TILE_N", "ACTIVATION_BYTES", "DeviceRates", "device_rates",
           "sm_count", "wave_factor", "padded_tokens", "gemm_peak_flop_per_s", "w8a8"]

TILE_M_TOKENS = 128  # tokens per output tile row block (NVIDIA DL performance guide, tile quantization)
TILE_N = 128  # output columns per tile (same source)
ACTIVATION_BYTES = 2.0  # BF16 activations between layers (vLLM default dtype for BF16 checkpoints)

#: Streaming multiprocessors (AMD: compute units) per GPU, keyed by catalog name.
SM_COUNTS = MappingProxyType({
    "A100-40GB": (108, "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 108 SMs"),
    "A100-80GB": (108, "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 108 SMs"),
    "A10G": (80, "AWS EC2 G5 documentation / NVIDIA GA102 A10G: 80 SMs (10,240 CUDA cores / 128)"),
    "B200": (148, "NVIDIA Blackwell architecture technical brief (2024): 148 SMs per B200 (two dies)"),
    "H100-PCIe": (114, "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): H100 PCIe 114 SMs"),
    "H100-SXM": (132, "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): H100 SXM5 132 SMs"),
    "H20": (78, "public H20 specification listings (GH100 cut down): 78 SMs"),
    "H20-3e": (78, "the H20's die with 141 GB of memory (gpu_profiles/h20-3e.toml): 78 SMs as the H20"),
    "H200": (132, "NVIDIA H200 datasheet (2024): same GH100 die as H100 SXM5, 132 SMs"),
    "H800": (132, "NVIDIA H800 SXM5 product brief (2023): GH100 with 132 SMs (NVLink reduced only)"),
    "L4": (58, "NVIDIA Ada GPU architecture whitepaper (2023): L4 (AD104) 58 SMs"),
    "L40S": (142, "NVIDIA L40S datasheet (2023): AD102 with 142 SMs (18,176 CUDA cores / 128)"),
    "MI300X": (304, "AMD Instinct MI300X data sheet (2023): 304 compute units"),
})


def sm_count(gpu: GpuProfile) -> int:
    """SMs of ``gpu``; ``ConfigError`` for a GPU without a recorded count."""
    try:
        return SM_COUNTS[gpu.name][0]
    except KeyError:
        raise ConfigError(
            f"GPU {gpu.name!r} has no SM count for wave quantisation; valid GPUs are "
            f"{', '.join(sorted(SM_COUNTS))}, or turn wave quantisation off (PredictorOptions(wave_quantisation=False))"
        ) from None


def tensor_throttle(gpu: GpuProfile, reference: GpuProfile, fp8: bool = False) -> float:
    """``(peak_ref / SMs_ref) / (peak_gpu / SMs_gpu)``: how much lower ``gpu``'s tensor rate per SM is than
    ``reference``'s (module docstring, 'Throttled tensor cores'); FP8 peaks with ``fp8``, else BF16."""
    def per_sm(g: GpuProfile) -> float:
        peak = g.fp8_tflops if fp8 else g.bf16_tflops
        if peak is None:
            raise ConfigError(f"GPU {g.name!r} has no {'FP8' if fp8 else 'BF16'} tensor peak in the catalog")
        return peak / sm_count(g)
    return per_sm(reference) / per_sm(gpu)


def tensor_throttle_efficiency(reference_efficiency: float, throttle: float, cap: float) -> float:
    """``min(max(cap, reference_efficiency), reference_efficiency * throttle)`` (module docstring, 'Throttled tensor
    cores'): the share of a throttled GPU's tensor peak that a kernel reaching ``reference_efficiency`` of the
    reference's reaches (never below the reference share: a kernel shown to reach it keeps it)."""
    for name, v in (("reference_efficiency", reference_efficiency), ("cap", cap)):
        if not (math.isfinite(v) and 0.0 < v <= 1.0):
            raise ConfigError(f"{name}={v!r} must be a share of the tensor peak in (0, 1]")
    if not (math.isfinite(throttle) and throttle >= 1.0):
        raise ConfigError(f"throttle={throttle!r} must be >= 1 (the GPU's tensor rate per SM over the reference's)")
    return min(max(cap, reference_efficiency), reference_efficiency * throttle)


@dataclass(frozen=True)
class DeviceRates:
    """Achieved per-GPU rates used by every operator (units in the names)."""

    gemm_flop_per_s: float  # peak of the GEMM dtype x gemm efficiency
    attention_flop_per_s: float  # BF16 peak x attention efficiency
    weight_bytes_per_s: float  # HBM peak x weight-streaming efficiency
    kv_bytes_per_s: float  # HBM peak x KV-read efficiency
    n_sms: int  # 0 when wave quantisation is off

    def __post_init__(self) -> None:
        for name in ("gemm_flop_per_s", "attention_flop_per_s", "weight_bytes_per_s", "kv_bytes_per_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{name}={value!r} must be a finite rate > 0")
        if self.n_sms < 0:
            raise ConfigError(f"n_sms={self.n_sms} must be >= 0 (0 turns wave quantisation off)")


def w8a8(gpu: GpuProfile, weight_dtype: Dtype) -> bool:
    """True when ``weight_dtype`` GEMMs run on FP8 tensor cores (FP8 weights on a GPU with an FP8 peak)."""
    return weight_dtype is Dtype.FP8 and gpu.fp8_tflops is not None


def gemm_peak_flop_per_s(gpu: GpuProfile, weight_dtype: Dtype) -> float:
    """Dense peak FLOP/s of GEMMs with ``weight_dtype`` weights: ``fp8_tflops`` for W8A8, else ``bf16_tflops``
    (module docstring)."""
    return (gpu.fp8_tflops if w8a8(gpu, weight_dtype) else gpu.bf16_tflops) * 1e12


def device_rates(gpu: GpuProfile, weight_dtype: Dtype, *, gemm_efficiency: float, attention_efficiency: float,
                 weight_bandwidth_efficiency: float, kv_bandwidth_efficiency: float,
                 wave_quantisation: bool, fp8_gemm_efficiency: float | None = None, fp8_block: bool = False,
                 fp8_block_gemm_efficiency: float | None = None) -> DeviceRates:
    """Achieved rates of ``gpu`` for weights stored in ``weight_dtype`` (see module docstring); W8A8 GEMMs
    run at ``fp8_gemm_efficiency`` of the FP8 peak when given, else at ``gemm_efficiency``.  Block-scaled
    FP8 weights (``fp8_block``) use ``fp8_block_gemm_efficiency`` where given (``fleetplan.perf.quant``;
    their slower weight streaming is charged as more bytes per weight by the predictor)."""
    fp8 = w8a8(gpu, weight_dtype)
    efficiency = fp8_gemm_efficiency if fp8 and fp8_gemm_efficiency is not None else gemm_efficiency
    if fp8_block and fp8 and fp8_block_gemm_efficiency is not None:
        efficiency = fp8_block_gemm_efficiency
    hbm_bytes_per_s = gpu.hbm_tb_per_s * 1e12
    return DeviceRates(
        gemm_flop_per_s=gemm_peak_flop_per_s(gpu, weight_dtype) * efficiency,
        attention_flop_per_s=gpu.bf16_tflops * 1e12 * attention_efficiency,
        weight_bytes_per_s=hbm_bytes_per_s * weight_bandwidth_efficiency,
        kv_bytes_per_s=hbm_bytes_per_s * kv_bandwidth_efficiency,
        n_sms=sm_count(gpu) if wave_quantisation else 0,
    )


def padded_tokens(n_tokens: int, tile_m_tokens: int = TILE_M_TOKENS) -> int:
    """Tokens rounded up to whole tiles, ``ceil(n / tile) * tile``, from one tile up; ``n`` below one tile."""
    n = int(n_tokens)
    if n < tile_m_tokens:
        return n
    return -(-n // tile_m_tokens) * tile_m_tokens


def wave_factor(n_tokens: int, wave_ratio: float, tile_m_tokens: int = TILE_M_TOKENS) -> float:
    """``ceil(m_tiles * r) / (m_tiles * r)`` (>= 1); 1 when ``r == 0`` or there are no tokens.

    Evaluated in exactly the kernel's order (``sim._kernels.step_model``) so both agree bit for bit.
    """
    if wave_ratio <= 0.0 or n_tokens <= 0:
        return 1.0
    m_tiles = (int(n_tokens) + tile_m_tokens - 1) // tile_m_tokens
    work = m_tiles * wave_ratio
    return math.ceil(work) / work
