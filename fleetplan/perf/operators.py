"""The dense GEMMs of one engine step: shapes per GPU shard and their summed roofline.

Shapes follow vLLM's sharded linear layers (``h`` hidden, ``H`` query heads, ``Kv`` KV
heads, ``d`` head dim, ``I`` FFN width, ``tp`` = attention tensor-parallel size):

* GQA: ``qkv_proj`` K=h, N=(H + 2 Kv) d / tp (KV heads replicated when tp > Kv, as vLLM
  does); ``o_proj`` K=H d / tp, N=h.
* MLA (DeepSeek-V3 in vLLM): ``q_a_proj`` K=h, N=r_q (replicated), ``q_b_proj`` K=r_q,
  N=H d / tp (``q_proj`` K=h when r_q = 0); ``kv_a_proj`` K=h, N=r_kv + d_r (replicated);
  ``kv_b_proj`` K=r_kv, N=H (d - d_r + d_v) / tp; ``o_proj`` K=H d_v / tp, N=h.  The
  weight absorption of MLA decode is not modelled (``kv_b_proj`` runs for every token).
  DeepSeek-V3.2's lightning indexer adds, replicated on every attention GPU (vLLM ``Indexer``:
  "no tensor parallel, just replicated"), ``index_wq_b`` K=r_q, N=n_i d_i (the checkpoint's
  weight type) and ``index_wk`` K=h, N=d_i + n_i (the key and head-weight projections fused,
  BF16: vLLM loads them unquantised, ``quant_config=None``).
* Dense FFN (the ``n_dense_layers``): ``gate_up_proj`` K=h, N=2 I / tp; ``down_proj``
  K=I / tp, N=h.  MoE layers: shared experts the same with width ``n_shared * I_moe``
  (sharded like attention) and a replicated ``router`` K=h, N=E (BF16); routed experts
  are in ``moe``.
* ``lm_head`` K=h, N=V / tp, once per step on the sequences that sample (``n_seqs``).

All of one step's GEMMs share one roofline (``gemm_block_s``): they run back to back on
the same SMs and, being weight-dominated, have nearly the same arithmetic intensity, so
``max(sum compute, sum bytes)`` is the step's GEMM time.  With pipeline parallelism the
counts cover every stage (one step's latency crosses all stages; see ``predictor``).
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetplan.models import AttentionKind, Dtype, ModelConfig
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.roofline import ACTIVATION_BYTES, TILE_N, DeviceRates, padded_tokens, wave_factor

__all__ = ["GemmShape", "step_gemms", "layer_n_tiles", "GemmBlock", "gemm_block", "floored_memory_s"]

ROUTER_BYTES_PER_PARAM = 2.0  # vLLM keeps the MoE gate in BF16 under FP8/INT4 weight quantisation
INDEX_WK_BYTES_PER_PARAM = 2.0  # vLLM's fused indexer wk + weights_proj is BF16 (module docstring)


@dataclass(frozen=True)
class GemmShape:
    """One linear layer's shard on one GPU, repeated ``count`` times per step."""

    name: str
    k: int
    n: int
    count: int
    per_seq: bool  # True: M = sequences that sample (lm_head); False: M = all scheduled tokens
    weight_bytes_per_param: float

    @property
    def flop_per_row(self) -> float:
        """FLOPs per token row over all repetitions: ``2 K N count``."""
        return 2.0 * self.k * self.n * self.count

    @property
    def weight_bytes(self) -> float:
        return self.k * self.n * self.count * self.weight_bytes_per_param

    @property
    def activation_bytes_per_row(self) -> float:
        return (self.k + self.n) * self.count * ACTIVATION_BYTES


def _attention_gemms(model: ModelConfig, tp: int, wb: float) -> list[GemmShape]:
    h, n_h, d, L = model.hidden_size, model.n_heads, model.head_dim, model.n_layers
    if model.attention is AttentionKind.GQA:
        kv_per_gpu = max(1, model.n_kv_heads // tp)
        return [GemmShape("qkv_proj", h, (n_h // tp + 2 * kv_per_gpu) * d, L, False, wb),
                GemmShape("o_proj", n_h * d // tp, h, L, False, wb)]
    r_q, r_kv, d_r, d_v = model.q_lora_rank, model.kv_lora_rank, model.qk_rope_head_dim, model.v_head_dim
    q = ([GemmShape("q_a_proj", h, r_q, L, False, wb), GemmShape("q_b_proj", r_q, n_h * d // tp, L, False, wb)]
         if r_q else [GemmShape("q_proj", h, n_h * d // tp, L, False, wb)])
    mla = q + [GemmShape("kv_a_proj", h, r_kv + d_r, L, False, wb),
               GemmShape("kv_b_proj", r_kv, n_h * (d - d_r + d_v) // tp, L, False, wb),
               GemmShape("o_proj", n_h * d_v // tp, h, L, False, wb)]
    if model.index_n_heads:  # DeepSeek-V3.2's lightning indexer, replicated on every attention GPU (vLLM Indexer)
        n_i, d_i = model.index_n_heads, model.index_head_dim
        mla += [GemmShape("index_wq_b", r_q or h, n_i * d_i, L, False, wb),
                GemmShape("index_wk", h, d_i + n_i, L, False, INDEX_WK_BYTES_PER_PARAM)]
    return mla


def step_gemms(model: ModelConfig, par: Parallelism, weight_dtype: Dtype,
               weight_bytes_per_param: float | None = None) -> tuple[GemmShape, ...]:
    """Every dense GEMM of one step (routed experts excluded), sharded per ``par``; weights streamed as
    ``weight_bytes_per_param`` bytes each when given (block-scaled FP8, ``fleetplan.perf.quant``)."""
    tp, h = par.attn_tp, model.hidden_size
    wb = weight_dtype.bytes_per_param if weight_bytes_per_param is None else weight_bytes_per_param
    gemms = _attention_gemms(model, tp, wb)
    if model.n_dense_layers:
        width = model.intermediate_size // tp
        gemms += [GemmShape("gate_up_proj", h, 2 * width, model.n_dense_layers, False, wb),
                  GemmShape("down_proj", width, h, model.n_dense_layers, False, wb)]
    if model.is_moe:
        if model.n_shared_experts:
            width = model.n_shared_experts * model.moe_intermediate_size // tp
            gemms += [GemmShape("shared_gate_up", h, 2 * width, model.n_moe_layers, False, wb),
                      GemmShape("shared_down", width, h, model.n_moe_layers, False, wb)]
        gemms.append(GemmShape("router", h, model.n_experts, model.n_moe_layers, False, ROUTER_BYTES_PER_PARAM))
    gemms.append(GemmShape("lm_head", h, model.vocab_size // tp, 1, True, wb))
    return tuple(gemms)


def layer_n_tiles(gemms: tuple[GemmShape, ...]) -> int:
    """N-tiles per token tile of one layer: GEMMs repeated in every layer of their kind."""
    return sum(-(-g.n // TILE_N) for g in gemms if not g.per_seq)


@dataclass(frozen=True)
class GemmBlock:
    """Summed roofline terms of a step's GEMMs (seconds, see ``gemm_block_s``)."""

    compute_s_per_padded_token: float
    compute_s_per_seq: float
    memory_s: float
    memory_s_per_token: float
    memory_s_per_seq: float
    wave_ratio: float  # layer N-tiles / SMs (0: no wave quantisation)


def gemm_block(gemms: tuple[GemmShape, ...], rates: DeviceRates) -> GemmBlock:
    """Coefficients of the GEMM roofline for ``gemms`` at ``rates``."""
    tok = [g for g in gemms if not g.per_seq]
    seq = [g for g in gemms if g.per_seq]
    return GemmBlock(
        compute_s_per_padded_token=sum(g.flop_per_row for g in tok) / rates.gemm_flop_per_s,
        compute_s_per_seq=sum(g.flop_per_row for g in seq) / rates.gemm_flop_per_s,
        memory_s=sum(g.weight_bytes for g in gemms) / rates.weight_bytes_per_s,
        memory_s_per_token=sum(g.activation_bytes_per_row for g in tok) / rates.weight_bytes_per_s,
        memory_s_per_seq=sum(g.activation_bytes_per_row for g in seq) / rates.weight_bytes_per_s,
        wave_ratio=layer_n_tiles(gemms) / rates.n_sms if rates.n_sms else 0.0,
    )


def floored_memory_s(gemms: tuple[GemmShape, ...], rates: DeviceRates, quantised_bytes_per_param: float,
                     floor_s: float) -> float:
    """``GemmBlock.memory_s`` with every quantised per-token GEMM call taking at least ``floor_s``:
    ``sum_g count_g max(K N b / B, floor_s)`` over the GEMMs streamed at ``quantised_bytes_per_param``
    (the block-FP8 linear layers; not the BF16 router and indexer ``wk``, not the ``lm_head``, which
    checkpoints keep unquantised), ``sum_g K N b count_g / B`` over the others (``B`` = weight bytes/s).
    The floor of a block-FP8 GEMM call (``PredictorOptions.fp8_block_gemm_floor_s``) joins its weight
    stream, the memory side of the one roofline ``max(compute, memory)`` of the step's GEMMs: it shows
    where the step's compute is below it and hides behind compute above it."""
    total = 0.0
    for g in gemms:
        stream_s = g.k * g.n * g.weight_bytes_per_param / rates.weight_bytes_per_s
        if not g.per_seq and g.weight_bytes_per_param == quantised_bytes_per_param:
            stream_s = max(stream_s, floor_s)
        total += stream_s * g.count
    return total


def gemm_block_s(block: GemmBlock, n_tokens: int, n_seqs: int, tile_m_tokens: int) -> tuple[float, float]:
    """``(compute_s, memory_s)`` of the block for ``n_tokens`` scheduled and ``n_seqs`` sampling."""
    pad = padded_tokens(n_tokens, tile_m_tokens)
    compute = (block.compute_s_per_padded_token * pad * wave_factor(n_tokens, block.wave_ratio, tile_m_tokens)
               + block.compute_s_per_seq * n_seqs)
    memory = block.memory_s + block.memory_s_per_token * n_tokens + block.memory_s_per_seq * n_seqs
    return compute, memory
