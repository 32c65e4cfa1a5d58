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

Prefill kernel efficiency by head dimension.  FlashAttention's share of the peak grows with the head width
(more work per loaded tile): ``attention_efficiency`` is read as the head-dim-128 value (the FlashAttention-2/3
figures it cites) and the prefill FLOP rate is scaled by ``flash_head_dim_factor(d_qk)``, the median efficiency
of vLLM 0.24.0's FlashAttention-3 prefill on H100 at that head dim over its head-dim-128 median
(aiconfigurator-core 0.12.0 ``systems/data/h100_sxm/attention/vllm/0.24.0/context_attention_perf.parquet``,
BF16, no window, prompts >= 4,096 tokens; ``attention_table_efficiency`` of ``benchmarks/aiconfigurator_compare.py``):
0.453 / 0.579 / 0.657 / 0.677 of the BF16 peak at head dim 64 / 128 / 192 / 256, factors 0.78 / 1 / 1.13 / 1.17,
linear between, clamped outside (gpt-oss's 64-wide heads 1.28x slower than before, MLA prefill's 192-wide
query-key heads 12 % faster, every head-dim-128 model unchanged).  Decode attention keeps
``attention_efficiency`` (its kernels differ and it is mostly bandwidth-bound).

Attention sinks (``ModelConfig.attention_sinks``: gpt-oss's learned per-head sink logit in the softmax).  Only some
kernels take a sink: in vLLM FlashAttention 3 (Hopper), FlashInfer's TRT-LLM kernels (Blackwell) and its Triton
unified attention; FlashAttention 2 does not, so below Hopper vLLM runs such a model with the Triton kernels
(vllm-project/recipes ``OpenAI/GPT-OSS.md``, 'A100': "using the TRITON_ATTN attention backend"; vllm-project/vllm
issue #40153: FLASH_ATTN and FLASHINFER rejected with "sink setting not supported").  Their prefill is far slower than
FlashAttention's: AIConfigurator 0.12.0's measured vLLM 0.24.0 context-attention tables of the L40S and the RTX PRO 6000
time both kernels on the same shapes (head dim 192, prompts >= 4,096 tokens): Triton 0.204 / 0.220 of the BF16 peak,
FlashAttention 2 0.477 / 0.588 (``triton_attention_table_efficiency`` of ``benchmarks/aiconfigurator_compare.py``).  An
engine profile gives that share per GPU (``sink_attention_prefill_efficiency``); for a sink model the prefill FLOP rate
of the full and window layers is then ``BF16 peak x sink_attention_prefill_efficiency`` (``sink_prefill_flop_per_s``)
in place of ``attention FLOP/s x flash_head_dim_factor(d_qk)``, with no head-dim factor (SGLang 0.5.14's Triton prefill
tables on the same GPUs give head dim 64 at or above 192, 0.32-0.38 against 0.32, where FlashAttention 3 falls to
0.69x).  The context layers' decode term keeps its bandwidth-bound rate (a window layer's per-token compute takes
the slower rate for decode tokens too: at most 0.6 us per token for gpt-oss-120b on an A100).  gpt-oss on one A100
(64 heads of width 64): prefill attention 0.21 of the peak where FlashAttention's rate gave 0.47, 2.2x the time.

Narrow-window layers (``LayerMix``: sliding-window or chunked-local attention whose window ``W`` is below
``WINDOW_AS_FULL_TOKENS``, e.g. gpt-oss's 18 of 36 layers with a 128-token sliding window).  A query of such a
layer attends to at most ``W`` keys and a decode step reads at most ``W`` tokens of its KV cache, so the
context-growing terms above count only the ``n_context_layers`` other layers, and the window layers cost
at most, per GPU,

    window_s_per_token = n_window_layers * W * 2 (d_qk + d_v) heads / attention FLOP/s   (each scheduled token's
                                                                                         query against W keys)
    window_s_per_seq   = n_window_layers * W * kv_bytes_per_token_per_layer / KV bandwidth  (each scheduled
                                                                                         sequence reads its window)

(upper bounds for tokens in the first ``W`` positions; a prefill chunk reads its window's keys once, as
FlashAttention streams keys once per query block, a decode token reads its own); vLLM runs those layers with
the same attention kernels, window-limited.  Before this term every layer was charged the full context, twice the
attention of gpt-oss.  Linear-attention layers (Qwen3-Next) are still charged as full attention (an upper
bound; their recurrent-state update is not modelled here).

DeepSeek Sparse Attention (DSA; DeepSeek-V3.2, ``DeepseekV32ForCausalLM``; DeepSeek-AI, "DeepSeek-V3.2-Exp:
Boosting Long-Context Efficiency with DeepSeek Sparse Attention", 2025, section 2.1; ``sparse_attention``).  In
every layer a lightning indexer of ``n_i = index_n_heads`` heads of width ``d_i = index_head_dim`` (64 and 128 in
the model's config.json) scores every previous key in FP8 (``I_ts = sum_j w_tj ReLU(q_tj . k_s)``) and the MLA
attends only the ``K = index_topk`` (2,048) best keys, in its absorbed (MQA) form: one latent of
``r_kv + d_r`` values per key shared by all heads, ``d_qk = r_kv + d_r``, ``d_v = r_kv``.  Per GPU and layer:

    indexer, per (query, previous key) pair:  FLOPs = 2 n_i d_i            (FP8 peak x attention efficiency)
    indexer, decode, per context token:       bytes = d_i + 4 d_i / 128    (its FP8 key cache and fp32 scales)
    sparse MLA, per scheduled token:          FLOPs = 2 K (2 r_kv + d_r) h_k   (BF16 peak x attention efficiency)
    sparse MLA, per scheduled sequence:       bytes = K (r_kv + d_r) x KV dtype bytes
                                              (FP8: K x 656, the packed record of ``fleetplan.models.config``)

The indexer is replicated on every attention GPU (vLLM ``Indexer``: "no tensor parallel, just replicated"; its
query up-projection and key projection are ``step_gemms``' ``index_wq_b`` / ``index_wk``), so its terms do not
shrink with TP; they are the context-growing terms (``prefill_s_per_work``, ``decode_s_per_context_token``) in
place of the dense MLA's.  The sparse MLA costs ``K`` keys per query whatever the context: the kernels take a
fixed-size index tensor of ``K`` slots per query, unused ones masked (vLLM ``FlashMLASparse`` metadata: "all
elements = topk_tokens (constant for full-CG)"; FlashMLA ``flash_mla_sparse_fwd``: logits of shape
``[s_q, h_q, topk]``), so it takes the narrow-window slots (``window_s_per_token``, ``window_s_per_seq``) with
``W = K``.  ``h_k`` is the GPU's query heads padded to the sparse kernels' head tile, ``DSA_HEAD_TILE`` = 64
(vllm-project/recipes@8959cf6 ``DeepSeek/DeepSeek-V3_2.md`` line 45: "TP=8 yields only 16 heads (128/8) per rank
but is padded to 64 heads, incurring overhead and hurting performance"; vLLM ``flashmla_sparse.py``: "FP8 decode
kernel only supports h_q = 64 or 128, so we need to pad"): 16 heads per GPU at TP 8 cost as 64, while attention
data parallelism (128 heads per rank) pads nothing.  On Blackwell the tile is 128 (``DSA_HEAD_TILES``; vLLM
``v1/attention/backends/mla/flashmla_sparse.py`` at vllm-project/vllm@008a0c31dc020099dd40e8a2b7d2bdb37699b047,
``_bf16_flash_mla_kernel``: "kernel requires num_local_head to be a multiple of 64 on hopper and 128 on
blackwell"), which AIConfigurator's measured modules show (vLLM 0.24.0, prefill, the ``v`` of the fit below: 16
heads per GPU cost 0.49x what 128 do on the H200, 0.92x on the B200).  FlashMLA's release note (2025-09-29) gives
the sparse kernels 640 TFLOP/s in prefill and 410 in decode on H800 (0.65 / 0.41 of the 989 TFLOP/s peak), around
the profile's ``attention_efficiency`` (0.6) that both terms use.

The indexer's prefill rate is read back from measured modules, not the profile's ``attention_efficiency``:
AIConfigurator 0.12.0 (aiconfigurator-core, ``systems/data/{h100_sxm,h200_sxm,b200_sxm}/sparse_attention/
{vllm/0.24.0,sglang/0.5.14}/dsa_context_module_perf.parquet``) times DeepSeek-V3.2's whole attention module of one
layer in prefill (projections, indexer logits and top-k, sparse MLA) at 1-256 prompts of up to 32,768 tokens and
prefixes up to 65,536.  A least-squares fit of each table (relative error, rows of 1,024-65,536 tokens, FP8 block
weights, per heads per GPU and KV dtype) to ``a T + v V + b P + c`` (``T`` tokens, ``V`` keys the sparse MLA reads,
``P`` causal query-key pairs the indexer scores; ``dsa_indexer_table_efficiency`` of
``benchmarks/aiconfigurator_compare.py``) gives
the indexer ``b`` = 2.2-2.7e-11 s per pair on the H100 and H200 (vLLM 0.24.0 FlashMLA-sparse and SGLang 0.5.14,
1-128 heads, BF16 and FP8 KV, 48 tables) and 1.3-1.8e-11 on the B200: the indexer's DeepGEMM FP8 logits, their
FP32 write and the per-row top-k over the context reach ``2 n_i d_i / (b x FP8 peak)`` = 0.31-0.38 of the Hopper
FP8 peak (median 0.34) and 0.21-0.29 of the B200's (median 0.27), ``DSA_INDEXER_PREFILL_EFFICIENCY`` per GPU,
where ``attention_efficiency`` gave 0.6 (the indexer 1.8x too fast: the H200 module came out 0.76-0.84 of the
measured time at 8-32K-token prompts, 0.86-0.96 with the read-back).  The H800 is the H100's die; other GPUs
keep the profile's ``attention_efficiency`` (no table; the throttled H20's derivation,
``fleetplan.perf.roofline``, lifts 0.34 back to its 0.66).  The decode indexer is unchanged: the same tables'
decode modules give 3.9-4.0e-11 s per context token and layer on the H200, fleetplan's memory-bound term (132
bytes at the KV bandwidth).  From the same fits: the decode module is within 10 % at 256 sequences per GPU
(16 heads) and 1.2x the measured at 128 heads; SGLang 0.5.14 runs prompts of at most 2,048 tokens as dense MHA on
Hopper (its tables' ``sglang_dsa_dense_mha_fa3`` rows; aiconfigurator-core ``sdk/operations/dsa.py``: "dense ragged
prefill is selected by SHAPE (isl <= 2048)"), not modelled.

Per-query prefill cost.  vLLM's measured DSA attention module costs more per prefill token than the terms above
and its GEMMs explain: AIConfigurator 0.12.0's vLLM 0.24.0 tables (``dsa_context_module_perf.parquet``, FLASHMLA_SPARSE,
FP8 block weights, BF16 KV, no prefix, 4,096-65,536 step tokens; ``dsa_prefill_query_table_cost`` of
``benchmarks/aiconfigurator_compare.py``) put fleetplan's module of one layer at a median 0.62-0.74 of the measured on
the H100 and H200 (0.51-0.57 on the B200), short prompts worst (0.46 at 4 x 2,048 tokens, 16 heads, H200), and the
measured minus fleetplan's module is ``r T + c`` with ``r`` = 1.5-1.8e-7 s per token and layer at 1-16 heads per GPU on
the H200 (1.6-2.0e-7 on the H100), rising to 2.6e-7 (3.3e-7) at 128 heads: nearly flat in the heads, which points
to per-query work of the replicated indexer path (its query and key RoPE, Hadamard rotation and FP8 quantisation, the
key-cache gather before the logits, the per-row top-k's fixed passes, the indices' conversion to cache slots) rather
than the sparse MLA's padded heads (a reading of the fit; the tables time the module, not its kernels).  Each prefill
token pays it in every layer,

    prefill_s_per_token = n_layers x r       (r: the engine profile's ``dsa_prefill_s_per_token`` per GPU)

the kernel's ``c[20]`` (``fleetplan.perf.step_terms.roofline_window_s``); with it the module's median is 0.95-0.96 of
the measured (``c``, 0.44-0.75 ms per layer and call, is left out: a serving step's thousands of prefill tokens hide a
per-call launch chain).  SGLang 0.5.14's tables show almost none of it on Hopper at BF16 KV (``r`` 0.9-4.6e-8 at 16-128
heads, H100) and its profile leaves it 0.  With an FP8 KV cache (vLLM's ``fp8_ds_mla`` record, whose latents the prefill
path dequantises) the same fit gives 6.2-6.7e-7 at 1-16 heads on the H100 and H200 (2.3-4.1e-7 at 32-128; module
median 0.30-0.32 -> 0.87-0.89 of the measured), the profile's ``dsa_prefill_fp8_kv_s_per_token``; vLLM 0.13.0 runs
DeepSeek-V3.2 with BF16 KV unless asked (``fleetplan.models.config``).  Decode keeps
the terms above (its measured module was within 10 %, below).  Measured effect on the held-out vLLM 0.13.0 DeepSeek-V3.2
runs on 8x H200 (``benchmarks/bench_validation.py``; not fitted on them): 2,000 / 100 tokens, 500 prompts, output
throughput +44 % -> +24 %, mean TTFT -33 % -> -21 %, mean TPOT -22 % -> -9 %; 4,000 / 200 tokens +18 % -> +5 %,
-19 % -> -9 %; 32,000 / 100 tokens +7 % -> -4 %, -6 % -> +5 %.

A dense MLA module (DeepSeek-V3/R1, Kimi-K2: no indexer) shows the same shape of miss. AIConfigurator 0.12.0's vLLM
0.24.0 tables (``mla/vllm/0.24.0/mla_context_module_perf.parquet``, DeepSeek-V3, FLASH_ATTN prefill (vLLM's MLA
prefill path: FlashAttention varlen over the up-projected heads), FP8 block weights, BF16 KV, no prefix, 4,096-65,536
step tokens; ``mla_prefill_query_table_cost`` of ``benchmarks/aiconfigurator_compare.py``) put fleetplan's module of
one layer (its five projections' roofline and the MHA-form prefill attention above) at a median 0.66 / 0.70 / 0.77 of
the measured on the H100 / H200 / B200 at 16 heads per GPU, and the measured minus fleetplan's is ``r T + c`` with
``r`` = 4.7e-8 / 3.8e-8 / 7.5e-9 s per token and layer, nearly flat in the heads (H200 3.8-4.8e-8 at 1-128 heads):
per-token work around the kernels the roofline times (the latents' RMS norms, RoPE on the query and key, the
projections' per-token FP8 activation quantisation, the cache write), again a reading of the fit. The engine profile's
``mla_prefill_s_per_token`` carries it, charged as DSA's (``prefill_s_per_token = n_layers x r``, ``c[20]``); with it
the module's median is 0.91-0.95 of the measured. SGLang's tables time its MLA attention kernel, not the module, and
its profile leaves it 0. Measured effect on the held-out vLLM 0.11.0 DeepSeek-R1 runs on 8x H200 (not fitted on them):
2,000 / 100 and 4,000 / 200 tokens, 500 prompts, output throughput +26 % / +24 % -> +20 % / +19 %, mean TTFT -27 % /
-22 % -> -22 % / -18 %.

Keys a query has.  A query at position ``p`` of a window layer (or of DSA's sparse MLA) attends ``min(p, W)`` keys,
not ``W``: the same fits show the sparse MLA's prefill cost following ``min(position, K)`` (about 0.73 of the BF16
peak at 128 heads; ``dsa_indexer_table_efficiency`` of ``benchmarks/aiconfigurator_compare.py``: vLLM 0.24.0's
tables on the H100, H200 and B200, BF16 KV and FP8 KV at 32-128 heads, fit with ``min(position, K)`` keys to a
median 1.0-6.8 % error and with ``K`` keys per query to 8.2-13.8 %; its FP8-KV tables at 1-16 heads and SGLang
0.5.14's fit both alike), and with every prefill query charged ``K`` keys prompts of up to 2,048 tokens came out
1.2-1.6x the measured module on the H200 (longer ones 0.86-0.96x).  So ``window_s_per_token`` is the cost of a query
at the full window and the step charges the prefill queries the keys they have: a chunk of ``c`` tokens at offset
``o`` ending within the window has ``sum_{p=o+1}^{o+c} p = c (o + c / 2) + c / 2`` keys, its prefill attention work
plus half a key per token; over the step, ``min(P, (work + P / 2) / W)`` full windows for its ``P`` prefill tokens
(``fleetplan.perf.step_terms.roofline_window_s``: exact when each chunk ends within the window or starts past it,
an upper bound for a chunk straddling it).  A decode token keeps the full window (its measured module is within
10 % at 16 heads) and a sequence's window read ``window_s_per_seq`` stays ``W`` latents (about 2 % of a short
prompt's sparse-MLA time).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from fleetplan.errors import ConfigError
from fleetplan.models import AttentionKind, Dtype, ModelConfig
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.roofline import DeviceRates

__all__ = ["AttentionCost", "attention_cost", "kv_bytes_per_token_per_gpu", "n_context_layers",
           "narrow_window_layers", "flash_head_dim_factor", "FLASH_HEAD_DIM_FACTORS", "sparse_attention",
           "DSA_HEAD_TILE", "DSA_HEAD_TILES", "dsa_head_tile", "DSA_INDEXER_PREFILL_EFFICIENCY",
           "dsa_indexer_prefill_efficiency", "sink_prefill_flop_per_s"]

#: Query heads per GPU the DSA sparse-MLA kernels compute, padded up to a multiple of this (module docstring)
DSA_HEAD_TILE = 64
#: The tile where it differs by GPU: Blackwell's sparse FlashMLA kernels pad to 128 heads (module docstring)
DSA_HEAD_TILES = MappingProxyType({"B200": 128})
#: Share of the FP8 peak the DSA indexer reaches in prefill, logits write and top-k included, by catalog GPU: read
#: back from AIConfigurator 0.12.0's measured DeepSeek-V3.2 attention modules (module docstring; medians of
#: ``dsa_indexer_table_efficiency`` of ``benchmarks/aiconfigurator_compare.py``: H100 / H200 0.34, B200 0.27; H800
#: and H100-PCIe: the H100's die)
DSA_INDEXER_PREFILL_EFFICIENCY = MappingProxyType({"H100-SXM": 0.34, "H100-PCIe": 0.34, "H200": 0.34, "H800": 0.34,
                                                   "B200": 0.27})


#: (head dim, prefill efficiency / head-dim-128 efficiency), module docstring
FLASH_HEAD_DIM_FACTORS = ((64, 0.453 / 0.579), (128, 1.0), (192, 0.657 / 0.579), (256, 0.677 / 0.579))


def flash_head_dim_factor(head_dim: int) -> float:
    """Prefill attention efficiency at ``head_dim`` over that at 128 (module docstring; linear between the
    table's head dims, clamped outside)."""
    dims = [d for d, _ in FLASH_HEAD_DIM_FACTORS]
    factors = [f for _, f in FLASH_HEAD_DIM_FACTORS]
    if head_dim <= dims[0]:
        return factors[0]
    for (d0, f0), (d1, f1) in zip(FLASH_HEAD_DIM_FACTORS, FLASH_HEAD_DIM_FACTORS[1:], strict=False):
        if head_dim <= d1:
            return f0 + (f1 - f0) * (head_dim - d0) / (d1 - d0)
    return factors[-1]


def narrow_window_layers(model: ModelConfig) -> tuple[int, int]:
    """(layers, window tokens) of the model's narrow-window attention layers (module docstring); (0, 0) when
    it has none or its windows count as full attention."""
    mix = model.layers
    if mix.n_window_layers == 0 or mix.window_counts_as_full:
        return 0, 0
    return mix.n_window_layers, mix.attention_window_tokens


def sparse_attention(model: ModelConfig) -> bool:
    """True for DeepSeek Sparse Attention: MLA whose queries attend the ``index_topk`` keys a lightning indexer
    selects (module docstring)."""
    return model.attention is AttentionKind.MLA and model.index_topk > 0


def dsa_head_tile(gpu_name: str) -> int:
    """Query heads per GPU the sparse-MLA kernels pad to on ``gpu_name`` (``DSA_HEAD_TILES``, else
    ``DSA_HEAD_TILE``; module docstring)."""
    return DSA_HEAD_TILES.get(gpu_name, DSA_HEAD_TILE)


def dsa_indexer_prefill_efficiency(gpu_name: str, attention_efficiency: float) -> float:
    """Share of the peak at which the DSA indexer scores prefill pairs on ``gpu_name``: its read-back
    ``DSA_INDEXER_PREFILL_EFFICIENCY``, else ``attention_efficiency`` (module docstring)."""
    return DSA_INDEXER_PREFILL_EFFICIENCY.get(gpu_name, attention_efficiency)


def sink_prefill_flop_per_s(model: ModelConfig, bf16_peak_flop_per_s: float,
                            sink_efficiency: float | None) -> float | None:
    """The prefill attention FLOP rate of ``model`` when its attention sinks send it to the engine's Triton
    attention kernels: ``bf16_peak_flop_per_s x sink_efficiency`` (the profile's
    ``sink_attention_prefill_efficiency`` on that GPU, module docstring 'Attention sinks'); None (the
    FlashAttention rate) for a model without sinks or a GPU and engine without the value."""
    if not model.attention_sinks or sink_efficiency is None:
        return None
    return bf16_peak_flop_per_s * sink_efficiency


def n_context_layers(model: ModelConfig) -> int:
    """Layers whose attention grows with the context: all but the narrow-window ones."""
    return model.n_layers - narrow_window_layers(model)[0]


def _gqa_layer_kv_bytes_per_gpu(model: ModelConfig, par: Parallelism, kv_dtype: Dtype) -> float:
    return 2.0 * par.kv_heads_per_gpu(model) * model.head_dim * kv_dtype.bytes_per_param


def kv_bytes_per_token_per_gpu(model: ModelConfig, par: Parallelism, kv_dtype: Dtype) -> float:
    """KV-cache bytes one token occupies on one attention GPU, over the layers whose cache grows with the
    context (narrow-window layers left out, module docstring)."""
    if model.attention is AttentionKind.MLA:
        return model.n_layers * model.kv_bytes_per_token_per_layer(kv_dtype)
    return n_context_layers(model) * _gqa_layer_kv_bytes_per_gpu(model, par, kv_dtype)


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
    window_s_per_token: float = 0.0  # narrow-window layers' compute, per scheduled token (module docstring)
    window_s_per_seq: float = 0.0  # narrow-window layers' KV read, per scheduled sequence (module docstring)
    #: keys of the window (W; DSA: index_topk): a prefill query at position p < W is charged p / W of
    #: ``window_s_per_token`` (module docstring, "Keys a query has"); 0 for no window
    window_tokens: int = 0
    #: DSA and dense MLA: per prefill query, the engine's attention-module work outside the terms above (module
    #: docstring, "Per-query prefill cost"); 0 for GQA
    prefill_s_per_token: float = 0.0


def _sparse_attention_cost(model: ModelConfig, par: Parallelism, kv_dtype: Dtype, rates: DeviceRates,
                           index_flop_per_s: float, index_prefill_flop_per_s: float, head_tile: int,
                           prefill_s_per_token_layer: float) -> AttentionCost:
    """DSA: the indexer over the whole context, the MLA over ``index_topk`` keys per query (module docstring)."""
    layers, topk = model.n_layers, model.index_topk
    n_i, d_i = model.index_n_heads, model.index_head_dim
    index_flop_per_pair = 2.0 * n_i * d_i
    memory_s = layers * model.indexer_kv_bytes_per_token_per_layer() / rates.kv_bytes_per_s
    compute_s = layers * index_flop_per_pair / index_flop_per_s
    heads = -(-(model.n_heads // par.attn_tp) // head_tile) * head_tile
    r_kv, d_r = model.kv_lora_rank, model.qk_rope_head_dim
    mla_flop_per_key = 2.0 * (2 * r_kv + d_r) * heads
    # FP8: sparse FlashMLA's packed record (FP8 latent, fp32 scales, BF16 rope; fleetplan.models.config)
    latent_bytes = (model.sparse_mla_fp8_latent_bytes_per_token_per_layer() if kv_dtype is Dtype.FP8
                    else (r_kv + d_r) * kv_dtype.bytes_per_param)
    return AttentionCost(
        prefill_s_per_work=layers * index_flop_per_pair / index_prefill_flop_per_s,
        decode_s_per_context_token=max(memory_s, compute_s),
        decode_bound="memory" if memory_s >= compute_s else "compute",
        window_s_per_token=layers * topk * mla_flop_per_key / rates.attention_flop_per_s,
        window_s_per_seq=layers * topk * latent_bytes / rates.kv_bytes_per_s,
        window_tokens=topk,
        prefill_s_per_token=layers * prefill_s_per_token_layer,
    )


def attention_cost(model: ModelConfig, par: Parallelism, kv_dtype: Dtype, rates: DeviceRates,
                   index_flop_per_s: float | None = None,
                   index_prefill_flop_per_s: float | None = None, head_tile: int = DSA_HEAD_TILE,
                   prefill_flop_per_s: float | None = None,
                   dsa_prefill_s_per_token_layer: float = 0.0,
                   mla_prefill_s_per_token_layer: float = 0.0) -> AttentionCost:
    """Attention coefficients for ``model`` sharded by ``par`` (see module docstring).  ``index_flop_per_s``:
    the FP8 rate of a DSA model's lightning indexer in decode (default ``rates.attention_flop_per_s``);
    ``index_prefill_flop_per_s``: its rate over prefill pairs, logits write and top-k included (default
    ``index_flop_per_s``); ``head_tile``: the sparse MLA's query-head padding (``dsa_head_tile``);
    ``prefill_flop_per_s``: the GQA / MLA prefill kernels' FLOP rate, full and window layers (default
    ``rates.attention_flop_per_s x flash_head_dim_factor(d_qk)``; ``sink_prefill_flop_per_s`` for a sink model
    on a GPU whose engine runs it with Triton attention, module docstring 'Attention sinks');
    ``dsa_prefill_s_per_token_layer``: a DSA prefill query's per-layer cost outside those terms (seconds; the
    engine profile's ``dsa_prefill_s_per_token``, module docstring "Per-query prefill cost");
    ``mla_prefill_s_per_token_layer``: the same for a dense MLA model's module (its ``mla_prefill_s_per_token``);
    a GQA model pays neither."""
    for name, value in (("dsa_prefill_s_per_token_layer", dsa_prefill_s_per_token_layer),
                        ("mla_prefill_s_per_token_layer", mla_prefill_s_per_token_layer)):
        if not value >= 0.0:
            raise ConfigError(f"{name}={value!r} must be >= 0 seconds per prefill token and layer; fix the engine "
                              "profile")
    if sparse_attention(model):
        if head_tile < 1:
            raise ConfigError(f"head_tile={head_tile} must be >= 1 query head (the sparse kernels' padding)")
        index = rates.attention_flop_per_s if index_flop_per_s is None else index_flop_per_s
        return _sparse_attention_cost(model, par, kv_dtype, rates, index,
                                      index if index_prefill_flop_per_s is None else index_prefill_flop_per_s,
                                      head_tile, dsa_prefill_s_per_token_layer)
    heads_per_gpu = model.n_heads // par.attn_tp
    layers = n_context_layers(model)
    d_qk, d_v = _head_dims(model, decode=False)
    prefill_flop_per_pair_layer = 2.0 * (d_qk + d_v) * heads_per_gpu
    if prefill_flop_per_s is None:
        prefill_flop_per_s = rates.attention_flop_per_s * flash_head_dim_factor(d_qk)
    d_qk, d_v = _head_dims(model, decode=True)
    decode_flop_per_ctx_layer = 2.0 * (d_qk + d_v) * heads_per_gpu
    memory_s = kv_bytes_per_token_per_gpu(model, par, kv_dtype) / rates.kv_bytes_per_s
    compute_s = layers * decode_flop_per_ctx_layer / rates.attention_flop_per_s
    window_token = window_seq = 0.0
    n_window, window_tokens = narrow_window_layers(model)
    if n_window:
        layer_kv = (model.full_layer_kv_bytes_per_token(kv_dtype) if model.attention is AttentionKind.MLA
                    else _gqa_layer_kv_bytes_per_gpu(model, par, kv_dtype))
        window_token = n_window * window_tokens * max(prefill_flop_per_pair_layer / prefill_flop_per_s,
                                                      decode_flop_per_ctx_layer / rates.attention_flop_per_s)
        window_seq = n_window * window_tokens * layer_kv / rates.kv_bytes_per_s
    return AttentionCost(
        prefill_s_per_work=layers * prefill_flop_per_pair_layer / prefill_flop_per_s,
        decode_s_per_context_token=max(memory_s, compute_s),
        decode_bound="memory" if memory_s >= compute_s else "compute",
        window_s_per_token=window_token,
        window_s_per_seq=window_seq,
        window_tokens=window_tokens if n_window else 0,
        prefill_s_per_token=layers * mla_prefill_s_per_token_layer if model.attention is AttentionKind.MLA else 0.0,
    )
