"""FP8 weight scaling schemes: per-tensor W8A8 against 128x128 block-scaled weights.

Both store one byte per weight (``Dtype.FP8``); they differ in the GEMM kernels an engine runs:

* ``per_tensor``: one scale per weight tensor (and per token or tensor for activations);
  CUTLASS ``scaled_mm`` / cuBLASLt FP8 GEMMs, at ``fp8_gemm_efficiency`` of the FP8 peak and
  streaming weights at ``weight_bandwidth_efficiency``.
* ``block``: one scale per 128x128 weight block and per 1x128 activation group (DeepSeek-V3's
  published checkpoint, ``quantization_config.weight_block_size = [128, 128]``).  The activation
  must be quantised per token group before every GEMM and the scales loaded with the tiles;
  vLLM's block-FP8 GEMMs at decode batch sizes are slower than its BF16 ones in AIConfigurator's
  measured vLLM 0.24.0 tables (docs/serving_validation.md, "FP8 against BF16": block-FP8 decode
  step 0.40x as fast as BF16, geometric mean, H100/H200/B200).  The predictor times them with
  ``fp8_block_gemm_efficiency`` (compute) and ``fp8_block_bandwidth_efficiency`` (weight
  streaming) where an engine profile gives them, else with the per-tensor values; block-scaled
  MoE experts compute at least ``BLOCK_FP8_MOE_TILE_M_TOKENS`` rows per hit expert (``moe``).

Wiring with the model: once ``ModelConfig`` carries its ``quantization_config`` (weight block
size), ``fp8_scaling_of(block_size)`` gives the scheme to pass as
``StepTimePredictor(fp8_scaling=...)``; until then callers state it (the ``perf explain`` command
takes it as an option).
"""

from __future__ import annotations

import enum

from fleetplan.names import fold_dashes, lookup

__all__ = ["Fp8Scaling", "fp8_scaling", "fp8_scaling_of", "BLOCK_FP8_MOE_TILE_M_TOKENS"]

#: Rows of the fused-MoE tile for block-scaled FP8 in vLLM (``BLOCK_SIZE_M`` of
#: vllm-project/vllm ``model_executor/layers/fused_moe/fused_moe.py`` ``get_default_config``,
#: ``dtype == "fp8_w8a8" and block_shape is not None``, before PR #34846 which lowered it to 16
#: for M <= 64).
BLOCK_FP8_MOE_TILE_M_TOKENS = 64


class Fp8Scaling(enum.Enum):
    """How FP8 weights are scaled: one scale per tensor, or per 128x128 block."""

    PER_TENSOR = "per_tensor"
    BLOCK = "block"


def fp8_scaling(name: str | Fp8Scaling) -> Fp8Scaling:
    """The ``Fp8Scaling`` called ``name`` (``per-tensor``, ``block``); unknown -> ``UnknownNameError``."""
    return lookup(Fp8Scaling, "FP8 scaling", name, fold_dashes)


def fp8_scaling_of(weight_block_size: tuple[int, int] | None) -> Fp8Scaling:
    """The scheme of a checkpoint whose ``quantization_config.weight_block_size`` is given (None: per tensor)."""
    return Fp8Scaling.PER_TENSOR if weight_block_size is None else Fp8Scaling.BLOCK
