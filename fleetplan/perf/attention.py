"""Attention cost from the batch's per-request lengths (never one proxy length).

Prefill (causal, FlashAttention): a chunk of ``c`` new tokens at context offset ``o``
attends to ``o`` cached tokens plus, causally, half of its own, so per layer and query head

    FLOPs = 2 * (d_qk + d_v) * c * (o + c / 2)      (QK^T and PV, one multiply-add = 2 FLOPs)

which for GQA (``d_qk = d_v = d``) is the familiar ``4 d c (o + c/2)``.  A step's prefill
attention work is ``sum over chunks of c (o + c/2)`` (the kernel keeps twice it, exactly, as
an integer), so a 2048-token chunk at offset 0 and one at offset 30000 are costed
differently.  Time = FLOPs / (BF16 peak x attention efficiency); the KV read of the prefix is
small next to the FLOPs (arithmetic intensity ~ c) and is not charged.

Decode: each request reads its whole KV cache once per layer:

    bytes = sum over decode requests of context_tokens x kv_bytes_per_token_per_gpu
    FLOPs = sum of context_tokens x 2 (d_qk + d_v) x heads_per_gpu x n_layers

and the time is ``max(bytes / KV bandwidth, FLOPs / attention FLOP/s)`` per context token;
both are linear in the context sum, so a skewed batch (one 32K request among 1K ones) costs
exactly its total KV, as the paged-attention kernel reads it.  MLA decode with many heads
per latent (DeepSeek-V3: 128 heads, absorbed d_qk = r_kv + d_r, d_v = r_kv) is
compute-bound on that max; GQA decode is bandwidth-bound.

KV per GPU: GQA stores ``max(1, Kv / tp)`` heads (replicated when tp > Kv, as vLLM does);
MLA stores the full latent on every attention GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetplan.models import AttentionKind, Dtype, ModelConfig
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.roofline import DeviceRates

__all__ = ["AttentionCost", "attention_cost", "kv_bytes_per_token_per_gpu"]


def kv_bytes_per_token_per_gpu(model: ModelConfig, par: Parallelism, kv_dtype: Dtype) -> float:
    """KV-cache bytes one token occupies on one attention GPU, all layers."""
    if model.attention is AttentionKind.MLA:
        return model.n_layers * model.kv_bytes_per_token_per_layer(kv_dtype)
    heads = par.kv_heads_per_gpu(model)
    return model.n_layers * 2.0 * heads * model.head_dim * kv_dtype.bytes_per_param


def _head_dims(model: ModelConfig, decode: bool) -> tuple[int, int]:
    """(d_qk, d_v) of one query head; MLA decode uses the absorbed latent widths."""
    if model.attention is AttentionKind.GQA:
        return model.head_dim, model.head_dim
    if decode:
        return model.kv_lora_rank + model.qk_rope_head_dim, model.kv_lora_rank
    return model.head_dim, model.v_head_dim


@dataclass(frozen=True)
class AttentionCost:
    """Seconds per unit of attention work on one GPU (all layers)."""

    prefill_s_per_work: float  # per token-pair unit of sum c (o + c/2)
    decode_s_per_context_token: float
    decode_bound: str  # "memory" or "compute"


def attention_cost(model: ModelConfig, par: Parallelism, kv_dtype: Dtype, rates: DeviceRates) -> AttentionCost:
    """Attention coefficients for ``model`` sharded by ``par`` (see module docstring)."""
    heads_per_gpu = model.n_heads // par.attn_tp
    d_qk, d_v = _head_dims(model, decode=False)
    prefill_flop_per_work = 2.0 * (d_qk + d_v) * heads_per_gpu * model.n_layers
    d_qk, d_v = _head_dims(model, decode=True)
    decode_flop_per_ctx = 2.0 * (d_qk + d_v) * heads_per_gpu * model.n_layers
    memory_s = kv_bytes_per_token_per_gpu(model, par, kv_dtype) / rates.kv_bytes_per_s
    compute_s = decode_flop_per_ctx / rates.attention_flop_per_s
    return AttentionCost(
        prefill_s_per_work=prefill_flop_per_work / rates.attention_flop_per_s,
        decode_s_per_context_token=max(memory_s, compute_s),
        decode_bound="memory" if memory_s >= compute_s else "compute",
    )
