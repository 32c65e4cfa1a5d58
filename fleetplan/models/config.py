"""Model architecture: the shape numbers a step-time or memory model needs.

``ModelConfig`` is a frozen record of a decoder-only transformer read from a
HuggingFace ``config.json`` (see ``fleetplan.models.hf_config``).  Parameter counts
are derived from the shape, never stored, with these per-layer formulas
(``h`` = hidden size, ``H`` = query heads, ``K`` = KV heads, ``d`` = head dim,
``V`` = vocabulary):

* GQA attention:  ``h*H*d`` (q) + ``2*h*K*d`` (k, v) + ``H*d*h`` (o).  Projection
  biases (Qwen2, gpt-oss) and per-head q/k norms (Qwen3) are ignored: < 0.1 % of
  parameters where present (Qwen3-30B-A3B: 12,288 of 30.5 B).
* MLA attention (DeepSeek-V2/V3, arXiv:2412.19437 §2.1.1), with ``r_q`` =
  ``q_lora_rank``, ``r_kv`` = ``kv_lora_rank``, ``d_r`` = ``qk_rope_head_dim``,
  ``d`` = ``qk_nope_head_dim + d_r`` and ``d_v`` = ``v_head_dim``:
  ``h*r_q + r_q + r_q*H*d`` (q down, norm, up; ``h*H*d`` when ``r_q`` = 0)
  + ``h*(r_kv + d_r) + r_kv`` (joint KV down + norm) + ``r_kv*H*(d - d_r + d_v)``
  (K/V up) + ``H*d_v*h`` (o).
* Gated FFN (SwiGLU): ``3*h*I``; one routed or shared expert: ``3*h*I_moe``;
  router: ``h*E``.
* Norms: ``2*h`` per layer plus a final ``h``; embeddings ``V*h``, doubled by an
  untied LM head.

An MoE model has ``n_dense_layers`` dense FFN layers (width ``intermediate_size``)
and ``n_layers - n_dense_layers`` MoE layers, each with ``n_experts`` routed experts
(``n_experts_per_token`` active) and ``n_shared_experts`` always-active experts of
width ``moe_intermediate_size``.

Hybrid and windowed attention (layer kinds, ``LayerMix``): a layer is full attention,
windowed (sliding-window or chunked-local attention over ``attention_window_tokens``) or
linear attention (Qwen3-Next's Gated DeltaNet, arXiv:2412.06464: a fixed-size recurrent state
per sequence instead of a KV cache).  A Gated DeltaNet layer with ``n_k`` key heads, ``n_v``
value heads of widths ``d_k``, ``d_v`` and a causal convolution of ``c`` taps holds

* ``h*(2*n_k*d_k + 2*n_v*d_v)`` (q, k, v, z in) + ``2*h*n_v`` (beta, alpha in)
  + ``c*(2*n_k*d_k + n_v*d_v)`` (conv) + ``2*n_v`` (A, dt bias) + ``d_v`` (norm)
  + ``n_v*d_v*h`` (out) parameters (HF ``Qwen3NextGatedDeltaNet``), and
* a state of ``n_v*d_k*d_v`` (recurrent) + ``(c-1)*(2*n_k*d_k + n_v*d_v)`` (conv) elements
  per sequence, whatever its length (``linear_state_bytes_per_seq``).

Qwen3-Next's full-attention layers gate their output with a second query-width projection
(``attn_output_gate``): ``h*H*d`` more per full layer.

KV cache per token, all layers (vLLM PagedAttention layout), over the ``n_kv_layers`` layers
whose cache grows with the context:

* GQA: ``2 * n_kv_layers * K * d * bytes``   (a K and a V vector per KV head)
* MLA: ``n_kv_layers * (r_kv + d_r) * bytes`` (one compressed latent plus the rope key), plus
  DeepSeek-V3.2's sparse-attention indexer key, ``index_head_dim`` FP8 bytes and one fp32
  scale per 128 (vLLM's indexer cache), when the model has one.
* MLA with a DSA indexer (DeepSeek-V3.2) in FP8: the sparse FlashMLA kernels read one packed
  record per token, ``r_kv`` FP8 latent values, one fp32 scale per 128 of them and the rope key
  kept in BF16: ``r_kv + 4 * r_kv / 128 + 2 * d_r`` = 512 + 16 + 128 = 656 bytes against
  1,152 in BF16 (vLLM 0.13.0 ``v1/attention/backends/mla/flashmla_sparse.py``, the
  ``fp8_ds_mla`` cache layout; SGLang 0.5.6.post2 ``mem_cache/memory_pool.py``
  ``NSATokenToKVPool``, the same 656 bytes for ``fp8_e4m3``).  Neither engine picks it for
  V3.2 on Hopper by default: vLLM 0.12.0 / 0.13.0 map a ``kv_cache_dtype`` of ``fp8`` to
  ``fp8_ds_mla`` and keep ``auto`` BF16 (``model_executor/models/config.py``
  ``DeepseekV32ForCausalLM``; vLLM 0.11.0's ``auto`` was ``fp8_ds_mla``, vLLM PR #25988);
  SGLang 0.5.6.post2 resolves ``auto`` to BF16 below SM100 and to ``fp8_e4m3`` on Blackwell
  (``server_args.py``, DeepSeek NSA).

``n_kv_layers`` counts full-attention layers and windowed layers whose window is at least
``WINDOW_AS_FULL_TOKENS`` (4,096): Llama-4's 8,192-token chunks hold a whole typical request,
so they are sized as full attention (an upper bound past 8K).  Narrower windows (gpt-oss's
128 tokens) hold at most ``W`` tokens per sequence, a constant left out of the per-token
size, as are linear-attention states.  ``kv_bytes_per_token_per_layer`` is the per-token size
averaged over all ``n_layers`` layers, so ``layers x per-layer`` budgets a pipeline stage.

Weights: the checkpoint's storage (``quantization_config``; ``fleetplan.models.hf_config``)
is ``default_weight_dtype`` with its ``quant_method``, ``weight_scaling`` (per-tensor,
per-channel, block or group scales) and ``weight_block_size`` / ``weight_group_size``; a
config without one is BF16.  Multi-token-prediction heads (``n_mtp_layers``, DeepSeek's
``num_nextn_predict_layers``) are not counted in ``n_params`` (the published totals leave
them out); ``mtp_params`` gives their size.

Published sizes (model cards) are reproduced within 2-3 % (``tests/models``).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from fleetplan.errors import ConfigError
from fleetplan.names import lookup

__all__ = ["AttentionKind", "Dtype", "LayerMix", "ModelConfig", "WeightScaling", "attention_kind", "dtype",
           "weight_scaling"]


class Dtype(enum.Enum):
    """Storage type of weights or KV cache."""

    BF16 = "bf16"
    FP8 = "fp8"
    INT4 = "int4"
    MXFP4 = "mxfp4"

    @property
    def bytes_per_param(self) -> float:
        """Bytes per stored element (INT4: 0.5, group scales ignored; MXFP4: 4 bits plus one 8-bit
        E8M0 scale per 32 elements = 4.25 bits, OCP Microscaling Formats spec v1.0 §5)."""
        return _BYTES_PER_PARAM[self]


_BYTES_PER_PARAM = {Dtype.BF16: 2.0, Dtype.FP8: 1.0, Dtype.INT4: 0.5, Dtype.MXFP4: 4.25 / 8}


class WeightScaling(enum.Enum):
    """How a quantized checkpoint scales its weights (what a GEMM kernel must dequantize)."""

    NONE = "none"  # unquantized (BF16)
    PER_TENSOR = "per-tensor"  # one scale per weight matrix (vLLM Fp8Config without weight_block_size)
    PER_CHANNEL = "per-channel"  # one scale per output row
    BLOCK = "block"  # one scale per weight_block_size tile (DeepSeek-V3: 128 x 128)
    GROUP = "group"  # one scale per weight_group_size elements of a row (MXFP4: 32; GPTQ/AWQ: 128)


def weight_scaling(name: str | WeightScaling) -> WeightScaling:
    """The ``WeightScaling`` called ``name``; unknown -> ``UnknownNameError``."""
    return lookup(WeightScaling, "weight scaling", name)


#: Windowed layers with at least this window are sized as full attention (module docstring).
WINDOW_AS_FULL_TOKENS = 4096
#: vLLM's DeepSeek-V3.2 indexer cache: one fp32 scale per 128 FP8 key elements.
INDEXER_SCALE_GROUP = 128
INDEXER_SCALE_BYTES = 4
#: Sparse FlashMLA's FP8 latent record (module docstring): one fp32 scale per 128 FP8 latent values,
#: rope key kept in BF16 (vLLM 0.13.0 flashmla_sparse.py, 656 bytes for DeepSeek-V3.2).
SPARSE_MLA_FP8_SCALE_GROUP = 128
SPARSE_MLA_FP8_SCALE_BYTES = 4


class AttentionKind(enum.Enum):
    """Attention family: grouped-query (incl. MHA, MQA) or multi-head latent."""

    GQA = "gqa"
    MLA = "mla"


def dtype(name: str | Dtype) -> Dtype:
    """The ``Dtype`` called ``name`` (case-insensitive); unknown -> ``UnknownNameError``."""
    return lookup(Dtype, "dtype", name)


def attention_kind(name: str | AttentionKind) -> AttentionKind:
    """The ``AttentionKind`` called ``name``; unknown -> ``UnknownNameError``."""
    return lookup(AttentionKind, "attention kind", name)


@dataclass(frozen=True)
class LayerMix:
    """Decoder layers that are not plain full attention (module docstring; all zero = none).

    Attributes
    ----------
    n_window_layers, attention_window_tokens : int
        Sliding-window or chunked-local attention layers and their window (config
        ``layer_types`` "sliding_attention" with ``sliding_window``; Gemma 2/3's layers outside every
        ``sliding_window_pattern``-th; Llama-4's rope layers with ``attention_chunk_size``).
    n_linear_layers : int
        Linear-attention (Gated DeltaNet) layers (``layer_types`` "linear_attention", or all but
        every ``full_attention_interval``-th layer).
    linear_key_heads, linear_value_heads, linear_key_head_dim, linear_value_head_dim, linear_conv_kernel : int
        Their shape (config ``linear_num_key_heads``, ``linear_num_value_heads``,
        ``linear_key_head_dim``, ``linear_value_head_dim``, ``linear_conv_kernel_dim``).
    output_gate : bool
        Full-attention layers gate their output with a second query-width projection (Qwen3-Next).
    """

    n_window_layers: int = 0
    attention_window_tokens: int = 0
    n_linear_layers: int = 0
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    output_gate: bool = False

    def __post_init__(self) -> None:
        for name in ("n_window_layers", "attention_window_tokens", "n_linear_layers", "linear_key_heads",
                     "linear_value_heads", "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"layer mix: {name}={value!r} must be an integer >= 0")
        if (self.n_window_layers > 0) != (self.attention_window_tokens > 0):
            raise ConfigError(f"layer mix: n_window_layers={self.n_window_layers} and attention_window_tokens="
                              f"{self.attention_window_tokens} go together; give both or neither")
        shape = (self.linear_key_heads, self.linear_value_heads, self.linear_key_head_dim,
                 self.linear_value_head_dim, self.linear_conv_kernel)
        if self.n_linear_layers and min(shape) < 1:
            raise ConfigError(f"layer mix: {self.n_linear_layers} linear-attention layers need linear key/value "
                              f"heads, head dims and conv kernel >= 1 (got {shape})")
        if not self.n_linear_layers and any(shape):
            raise ConfigError("layer mix: linear-attention shape given without linear-attention layers")

    @property
    def window_counts_as_full(self) -> bool:
        """Windowed layers are sized as full attention (window >= ``WINDOW_AS_FULL_TOKENS``)."""
        return self.attention_window_tokens >= WINDOW_AS_FULL_TOKENS

    def linear_params_per_layer(self, hidden_size: int) -> int:
        """Parameters of one Gated DeltaNet layer (module docstring)."""
        h, n_k, n_v = hidden_size, self.linear_key_heads, self.linear_value_heads
        d_k, d_v, c = self.linear_key_head_dim, self.linear_value_head_dim, self.linear_conv_kernel
        conv_width = 2 * n_k * d_k + n_v * d_v
        return h * (2 * n_k * d_k + 2 * n_v * d_v) + 2 * h * n_v + c * conv_width + 2 * n_v + d_v + n_v * d_v * h

    def linear_state_elements_per_seq(self) -> int:
        """Recurrent plus convolution state of one sequence in one linear layer (elements)."""
        n_k, n_v, d_k, d_v = self.linear_key_heads, self.linear_value_heads, self.linear_key_head_dim, \
            self.linear_value_head_dim
        return n_v * d_k * d_v + (self.linear_conv_kernel - 1) * (2 * n_k * d_k + n_v * d_v)


_POSITIVE = ("n_layers", "hidden_size", "n_heads", "n_kv_heads", "head_dim", "vocab_size")
_NON_NEGATIVE = (
    "intermediate_size", "n_experts", "n_experts_per_token", "n_shared_experts", "moe_intermediate_size",
    "n_dense_layers", "kv_lora_rank", "qk_rope_head_dim", "q_lora_rank", "v_head_dim", "n_mtp_layers",
    "index_n_heads", "index_head_dim", "index_topk", "weight_group_size",
)
_AT_LEAST_ONE = ("moe_layer_step",)


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer's shape.

    Attributes
    ----------
    name : str
        Display name, e.g. ``"Llama-3.1-70B"``.
    n_layers, hidden_size, n_heads, n_kv_heads, head_dim : int
        Decoder layers, model width, query heads, KV heads (MLA: equal to ``n_heads``),
        per-head query/key width (MLA: ``qk_nope_head_dim + qk_rope_head_dim``).
    intermediate_size : int
        Dense FFN width; for MoE the width of the ``n_dense_layers`` dense layers
        (0 when there are none).
    vocab_size : int
        Vocabulary entries.
    attention : AttentionKind
        GQA or MLA.
    n_experts, n_experts_per_token, n_shared_experts, moe_intermediate_size : int
        Routed experts (0 = dense), top-k, always-active shared experts, expert width.
    n_dense_layers : int
        Dense FFN layers (DeepSeek ``first_k_dense_replace``).  A dense model may pass
        0, which is normalised to ``n_layers``.
    kv_lora_rank, qk_rope_head_dim : int
        MLA compressed KV width and decoupled rope key width (0 for GQA).
    tie_word_embeddings : bool
        LM head shares the input embedding matrix.
    q_lora_rank, v_head_dim : int
        MLA query low-rank width (0 = full-rank query projection) and value head width.
        Zero for GQA, where the value head width is ``head_dim``.
    context_window_tokens : int or None
        The model's context window (config.json ``max_position_embeddings``): the longest
        prompt + output it serves, vLLM's default ``max_model_len``.  None when the config
        gives none (then a serving limit must be given explicitly; ``fleetplan.models.context``).
    default_weight_dtype : Dtype
        Storage type of the published weights (``quantization_config``; BF16 without one).
    quant_method : str
        The checkpoint's ``quantization_config`` method as written (``"fp8"``, ``"mxfp4"``,
        ``"compressed-tensors"``, ``"modelopt"``, ...); ``""`` for an unquantized checkpoint.
    weight_scaling : WeightScaling
        Scale granularity of the quantized weights (per-tensor vs block-scaled FP8, ...).
    weight_block_size : tuple of int or None
        ``(rows, cols)`` of one scale tile for ``WeightScaling.BLOCK`` (DeepSeek-V3: (128, 128)).
    weight_group_size : int
        Elements per scale for ``WeightScaling.GROUP`` (MXFP4: 32); 0 otherwise.
    n_mtp_layers : int
        Multi-token-prediction layers shipped with the model (DeepSeek/GLM
        ``num_nextn_predict_layers``, MiniMax ``num_mtp_modules``); not in ``n_params``.
    index_n_heads, index_head_dim, index_topk : int
        DeepSeek-V3.2 sparse-attention (DSA) lightning indexer: heads, key width, and keys each
        query attends to; 0 without an indexer.
    layers : LayerMix
        Windowed and linear-attention layers (hybrid models); default: every layer full attention.
    quantized_experts_only : bool
        The checkpoint quantizes only the routed experts; attention, router, shared parts,
        embeddings and LM head stay BF16 (gpt-oss's ``modules_to_not_convert``).
    attention_sinks : bool
        Every attention head has a learned sink logit in its softmax (gpt-oss, HF ``GptOssAttention.sinks``):
        a few parameters, but an engine needs attention kernels that take it (``fleetplan.perf.attention``,
        'Attention sinks').
    moe_layer_step : int
        1: the ``n_dense_layers`` dense layers come first (DeepSeek ``first_k_dense_replace``).
        k > 1: layer i is MoE iff ``(i + 1) % k == 0`` (Llama-4 ``interleave_moe_layer_step``);
        ``moe_layer_indices`` lists them either way.
    chat_template_tokens : int or None
        Tokens the model's chat template adds around one user message (the role markers, and a default
        system message where the template writes one): what a chat endpoint prefills on top of the text a
        client counts.  Not a ``config.json`` field (the template is in the tokenizer's files): the bundled
        models carry it as ``_chat_template_tokens`` with its derivation in ``_chat_template_source``; None
        when unknown (``fleetplan.bench.serve``, 'The chat template's tokens').
    """

    name: str
    n_layers: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    attention: AttentionKind
    n_experts: int = 0
    n_experts_per_token: int = 0
    n_shared_experts: int = 0
    moe_intermediate_size: int = 0
    n_dense_layers: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    tie_word_embeddings: bool = False
    q_lora_rank: int = 0
    v_head_dim: int = 0
    context_window_tokens: int | None = None
    default_weight_dtype: Dtype = Dtype.BF16
    quant_method: str = ""
    weight_scaling: WeightScaling = WeightScaling.NONE
    weight_block_size: tuple[int, int] | None = None
    weight_group_size: int = 0
    n_mtp_layers: int = 0
    index_n_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    layers: LayerMix = LayerMix()
    moe_layer_step: int = 1
    quantized_experts_only: bool = False
    attention_sinks: bool = False
    chat_template_tokens: int | None = None

    def __post_init__(self) -> None:
        who = f"model {self.name!r}"
        self._check_weights(who)
        template = self.chat_template_tokens
        if template is not None and (isinstance(template, bool) or not isinstance(template, int) or template < 0):
            raise ConfigError(f"{who}: chat_template_tokens={template!r} must be an integer >= 0, or None if unknown")
        if not isinstance(self.layers, LayerMix):
            raise ConfigError(f"{who}: layers={self.layers!r} must be a LayerMix")
        mixed = self.layers.n_window_layers + self.layers.n_linear_layers
        if mixed > self.n_layers:
            raise ConfigError(f"{who}: {mixed} windowed + linear-attention layers exceed n_layers={self.n_layers}")
        if self.layers.n_linear_layers and mixed == self.n_layers:
            raise ConfigError(f"{who}: a hybrid model needs at least one full-attention layer")
        if (self.index_n_heads > 0) != (self.index_head_dim > 0) or (self.index_topk > 0) != (self.index_head_dim > 0):
            raise ConfigError(f"{who}: index_n_heads, index_head_dim and index_topk describe one sparse-attention "
                              "indexer; give all three or none")
        if not isinstance(self.attention, AttentionKind):
            raise ConfigError(f"{who}: attention={self.attention!r} must be an AttentionKind (gqa or mla)")
        for name in _POSITIVE + _NON_NEGATIVE + _AT_LEAST_ONE:
            value = getattr(self, name)
            low = 0 if name in _NON_NEGATIVE else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{who}: {name}={value!r} must be an integer >= {low}")
        window = self.context_window_tokens
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
            raise ConfigError(f"{who}: context_window_tokens={window!r} must be an integer >= 1, or None if unknown")
        if self.n_heads % self.n_kv_heads:
            raise ConfigError(f"{who}: n_heads={self.n_heads} must be a multiple of n_kv_heads={self.n_kv_heads}")
        if self.n_experts == 0:
            self._check_dense(who)
        else:
            self._check_moe(who)
        if self.attention is AttentionKind.MLA:
            if self.kv_lora_rank < 1 or not 0 < self.qk_rope_head_dim < self.head_dim or self.v_head_dim < 1:
                raise ConfigError(
                    f"{who}: MLA needs kv_lora_rank >= 1, 0 < qk_rope_head_dim < head_dim={self.head_dim} and "
                    f"v_head_dim >= 1 (got {self.kv_lora_rank}, {self.qk_rope_head_dim}, {self.v_head_dim})"
                )
        elif self.kv_lora_rank or self.qk_rope_head_dim or self.q_lora_rank or self.v_head_dim:
            raise ConfigError(f"{who}: kv_lora_rank, qk_rope_head_dim, q_lora_rank, v_head_dim are MLA-only; "
                              f"set them to 0 for gqa attention")

    def _check_weights(self, who: str) -> None:
        if not isinstance(self.default_weight_dtype, Dtype) or not isinstance(self.weight_scaling, WeightScaling):
            raise ConfigError(f"{who}: default_weight_dtype must be a Dtype and weight_scaling a WeightScaling")
        scaling, block, group = self.weight_scaling, self.weight_block_size, self.weight_group_size
        allowed = {Dtype.BF16: {WeightScaling.NONE},
                   Dtype.FP8: {WeightScaling.PER_TENSOR, WeightScaling.PER_CHANNEL, WeightScaling.BLOCK},
                   Dtype.INT4: {WeightScaling.PER_CHANNEL, WeightScaling.GROUP},
                   Dtype.MXFP4: {WeightScaling.GROUP}}[self.default_weight_dtype]
        if scaling not in allowed:
            raise ConfigError(f"{who}: {self.default_weight_dtype.value} weights with {scaling.value} scales; use one "
                              f"of {', '.join(sorted(s.value for s in allowed))}")
        if (scaling is WeightScaling.BLOCK) != (block is not None):
            raise ConfigError(f"{who}: weight_block_size={block!r} goes with block scaling only (got "
                              f"{scaling.value}); give (rows, cols) for block-scaled weights, else None")
        if block is not None and not (isinstance(block, tuple) and len(block) == 2
                                      and all(isinstance(b, int) and not isinstance(b, bool) and b >= 1
                                              for b in block)):
            raise ConfigError(f"{who}: weight_block_size={block!r} must be two integers >= 1, e.g. (128, 128)")
        if (scaling is WeightScaling.GROUP) != (group > 0):
            raise ConfigError(f"{who}: weight_group_size={group} goes with group scaling only (got {scaling.value})")
        if self.quantized_experts_only and (self.n_experts == 0 or self.default_weight_dtype is Dtype.BF16):
            raise ConfigError(f"{who}: quantized_experts_only needs an MoE model with quantized weights")
        if (self.default_weight_dtype is Dtype.BF16) != (self.quant_method == ""):
            raise ConfigError(f"{who}: quant_method={self.quant_method!r} with {self.default_weight_dtype.value} "
                              "weights; an unquantized checkpoint has quant_method '' and a quantized one names it")

    def _check_dense(self, who: str) -> None:
        if self.moe_layer_step != 1:
            raise ConfigError(f"{who}: moe_layer_step={self.moe_layer_step} needs an MoE model; use 1")
        if self.n_experts_per_token or self.n_shared_experts or self.moe_intermediate_size:
            raise ConfigError(f"{who}: n_experts=0 (dense) but MoE fields are set; set n_experts >= 1 or clear them")
        if self.intermediate_size < 1:
            raise ConfigError(f"{who}: a dense model needs intermediate_size >= 1")
        if self.n_dense_layers == 0:
            object.__setattr__(self, "n_dense_layers", self.n_layers)
        elif self.n_dense_layers != self.n_layers:
            raise ConfigError(f"{who}: dense model has n_dense_layers={self.n_dense_layers}; it must equal "
                              f"n_layers={self.n_layers} (or 0)")

    def _check_moe(self, who: str) -> None:
        if self.moe_layer_step > 1 and self.n_moe_layers != self.n_layers // self.moe_layer_step:
            n_moe = self.n_layers // self.moe_layer_step
            raise ConfigError(f"{who}: moe_layer_step={self.moe_layer_step} makes {n_moe} "
                              f"of {self.n_layers} layers MoE, but n_dense_layers={self.n_dense_layers} leaves "
                              f"{self.n_moe_layers}; make them agree")
        if not 1 <= self.n_experts_per_token <= self.n_experts:
            raise ConfigError(f"{who}: n_experts_per_token={self.n_experts_per_token} must be in "
                              f"[1, n_experts={self.n_experts}]")
        if self.moe_intermediate_size < 1:
            raise ConfigError(f"{who}: an MoE model needs moe_intermediate_size >= 1")
        if self.n_dense_layers >= self.n_layers:
            raise ConfigError(f"{who}: n_dense_layers={self.n_dense_layers} must be < n_layers={self.n_layers} "
                              f"for an MoE model")
        if (self.n_dense_layers > 0) != (self.intermediate_size > 0):
            raise ConfigError(f"{who}: intermediate_size={self.intermediate_size} is the width of the "
                              f"n_dense_layers={self.n_dense_layers} dense layers; give both or neither")

    # ---- shape -------------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        """True when the model has routed experts."""
        return self.n_experts > 0

    @property
    def n_moe_layers(self) -> int:
        """Layers whose FFN is a mixture of experts."""
        return self.n_layers - self.n_dense_layers

    def moe_layer_indices(self) -> tuple[int, ...]:
        """Indices of the MoE layers (``moe_layer_step``): a pipeline stage's share of experts."""
        if not self.is_moe:
            return ()
        if self.moe_layer_step > 1:
            return tuple(range(self.moe_layer_step - 1, self.n_layers, self.moe_layer_step))
        return tuple(range(self.n_dense_layers, self.n_layers))

    # ---- parameter counts (see module docstring) ---------------------------------------------
    def embedding_params(self) -> int:
        """Input embedding plus LM head parameters (one matrix when tied)."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)

    def attention_params_per_layer(self) -> int:
        """Attention projection parameters of one full-attention layer (GQA or MLA formula; plus
        Qwen3-Next's output gate and DeepSeek-V3.2's indexer where present)."""
        h, n_h, d = self.hidden_size, self.n_heads, self.head_dim
        if self.attention is AttentionKind.GQA:
            gate = h * n_h * d if self.layers.output_gate else 0
            return 2 * h * n_h * d + 2 * h * self.n_kv_heads * d + gate
        r_q, r_kv, d_r, d_v = self.q_lora_rank, self.kv_lora_rank, self.qk_rope_head_dim, self.v_head_dim
        q = h * r_q + r_q + r_q * n_h * d if r_q else h * n_h * d
        kv = h * (r_kv + d_r) + r_kv + r_kv * n_h * (d - d_r + d_v)
        return q + kv + n_h * d_v * h + self.indexer_params_per_layer()

    def indexer_params_per_layer(self) -> int:
        """DeepSeek-V3.2 lightning indexer of one layer: query up-projection ``r_q * n_i * d_i``,
        key ``h * d_i`` with its LayerNorm ``2 * d_i``, head weights ``h * n_i`` (vLLM ``Indexer``)."""
        n_i, d_i, h = self.index_n_heads, self.index_head_dim, self.hidden_size
        if not n_i:
            return 0
        return (self.q_lora_rank or h) * n_i * d_i + h * d_i + 2 * d_i + h * n_i

    def attention_params(self) -> int:
        """Attention (or linear-attention) parameters of all decoder layers."""
        mix = self.layers
        return ((self.n_layers - mix.n_linear_layers) * self.attention_params_per_layer()
                + mix.n_linear_layers * mix.linear_params_per_layer(self.hidden_size))

    def dense_ffn_params(self) -> int:
        """Parameters of one dense (gated) FFN layer: ``3 * h * intermediate_size``."""
        return 3 * self.hidden_size * self.intermediate_size

    def expert_params(self) -> int:
        """Parameters of one routed or shared expert: ``3 * h * moe_intermediate_size``."""
        return 3 * self.hidden_size * self.moe_intermediate_size

    def router_params(self) -> int:
        """Router (gate) parameters of one MoE layer: ``h * n_experts``."""
        return self.hidden_size * self.n_experts

    def norm_params(self) -> int:
        """RMSNorm weights: two per layer plus the final norm."""
        return self.hidden_size * (2 * self.n_layers + 1)

    def _moe_layer_params(self, n_routed: int) -> int:
        return (n_routed + self.n_shared_experts) * self.expert_params() + self.router_params()

    def n_params(self) -> int:
        """Total parameters (all experts)."""
        return self._params(self.n_experts)

    def n_active_params(self) -> int:
        """Parameters used per token: MoE layers count shared plus top-k routed experts."""
        return self._params(self.n_experts_per_token)

    def _params(self, n_routed: int) -> int:
        layers = self.attention_params() + self.n_dense_layers * self.dense_ffn_params()
        if self.is_moe:
            layers += self.n_moe_layers * self._moe_layer_params(n_routed)
        return self.embedding_params() + layers + self.norm_params()

    def routed_expert_params(self) -> int:
        """Parameters of all routed experts (what an experts-only quantization stores quantized)."""
        return self.n_moe_layers * self.n_experts * self.expert_params()

    def weight_bytes(self, dtype: Dtype | None = None) -> int:
        """All weights stored in ``dtype`` (default: the checkpoint's), in bytes (rounded up).  The
        checkpoint's own type with ``quantized_experts_only`` keeps the non-expert weights in BF16."""
        dtype = dtype or self.default_weight_dtype
        if self.quantized_experts_only and dtype is self.default_weight_dtype:
            experts = self.routed_expert_params()
            return math.ceil(experts * dtype.bytes_per_param + (self.n_params() - experts) * Dtype.BF16.bytes_per_param)
        return math.ceil(self.n_params() * dtype.bytes_per_param)

    def mtp_params(self) -> int:
        """Parameters of the ``n_mtp_layers`` prediction layers (DeepSeek-V3 §2.2: each a decoder layer
        of the last kind, an ``eh_proj`` of ``2h x h`` and three norms; embedding and head shared)."""
        if not self.n_mtp_layers:
            return 0
        h = self.hidden_size
        ffn = self._moe_layer_params(self.n_experts) if self.is_moe else self.dense_ffn_params()
        return self.n_mtp_layers * (self.attention_params_per_layer() + ffn + 2 * h * h + 5 * h)

    # ---- KV cache and FLOPs ------------------------------------------------------------------
    @property
    def n_kv_layers(self) -> int:
        """Layers whose KV cache grows with the context (module docstring)."""
        mix = self.layers
        windowed = 0 if mix.window_counts_as_full else mix.n_window_layers
        return self.n_layers - mix.n_linear_layers - windowed

    def full_layer_kv_bytes_per_token(self, kv_dtype: Dtype = Dtype.BF16) -> float:
        """KV-cache bytes one token occupies in one full-attention layer (unsharded)."""
        if self.attention is AttentionKind.MLA:
            if self.index_head_dim and kv_dtype is Dtype.FP8:
                latent = self.sparse_mla_fp8_latent_bytes_per_token_per_layer()
            else:
                latent = (self.kv_lora_rank + self.qk_rope_head_dim) * kv_dtype.bytes_per_param
            return latent + self.indexer_kv_bytes_per_token_per_layer()
        return 2 * self.n_kv_heads * self.head_dim * kv_dtype.bytes_per_param

    def sparse_mla_fp8_latent_bytes_per_token_per_layer(self) -> int:
        """Sparse FlashMLA's packed FP8 latent record: ``r_kv`` FP8 values, an fp32 scale per 128 of
        them and the BF16 rope key, ``r_kv + 4 * ceil(r_kv / 128) + 2 * d_r`` (656 for DeepSeek-V3.2;
        module docstring)."""
        r = self.kv_lora_rank
        scales = math.ceil(r / SPARSE_MLA_FP8_SCALE_GROUP) * SPARSE_MLA_FP8_SCALE_BYTES
        return r + scales + self.qk_rope_head_dim * int(Dtype.BF16.bytes_per_param)

    def indexer_kv_bytes_per_token_per_layer(self) -> int:
        """DeepSeek-V3.2 indexer key cache: ``index_head_dim`` FP8 bytes plus an fp32 scale per 128."""
        d_i = self.index_head_dim
        return d_i + math.ceil(d_i / INDEXER_SCALE_GROUP) * INDEXER_SCALE_BYTES if d_i else 0

    def kv_bytes_per_token_per_layer(self, kv_dtype: Dtype = Dtype.BF16) -> float:
        """KV-cache bytes one token occupies per layer (unsharded), averaged over all layers when some
        hold no per-token cache (module docstring), so ``layers x this`` sizes a pipeline stage."""
        full = self.full_layer_kv_bytes_per_token(kv_dtype)
        return full if self.n_kv_layers == self.n_layers else full * self.n_kv_layers / self.n_layers

    def kv_bytes_per_token(self, kv_dtype: Dtype = Dtype.BF16) -> int:
        """KV-cache bytes one token occupies across all layers (unsharded), rounded up."""
        return math.ceil(self.n_kv_layers * self.full_layer_kv_bytes_per_token(kv_dtype))

    def window_kv_bytes_per_seq(self, kv_dtype: Dtype = Dtype.BF16) -> int:
        """Most KV bytes one sequence holds in the narrow-window layers left out of the per-token size."""
        mix = self.layers
        if mix.window_counts_as_full:
            return 0
        per_layer = self.full_layer_kv_bytes_per_token(kv_dtype)
        return math.ceil(mix.n_window_layers * mix.attention_window_tokens * per_layer)

    def linear_state_bytes_per_seq(self, state_dtype: Dtype = Dtype.BF16) -> int:
        """Linear-attention state of one sequence over all linear layers (bytes; module docstring)."""
        mix = self.layers
        return math.ceil(mix.n_linear_layers * mix.linear_state_elements_per_seq() * state_dtype.bytes_per_param)

    def flops_per_token_dense(self) -> float:
        """Matmul FLOPs per token, excluding attention scores: ``2 * (active params - gather)``.

        The input-embedding lookup is a gather, not a matmul, so an untied model's
        ``V*h`` input embedding is excluded; norms (< 0.01 %) are kept for simplicity.
        A tied matrix is counted once, as the LM head.
        """
        gather = 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size
        return 2.0 * (self.n_active_params() - gather)
