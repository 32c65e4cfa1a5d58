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

KV cache per token, all layers (vLLM PagedAttention layout):

* GQA: ``2 * n_layers * K * d * bytes``   (a K and a V vector per KV head)
* MLA: ``n_layers * (r_kv + d_r) * bytes`` (one compressed latent plus the rope key)

Published sizes (model cards) are reproduced within 2 % (``tests/models``).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from fleetplan.errors import ConfigError
from fleetplan.names import lookup

__all__ = ["AttentionKind", "Dtype", "ModelConfig", "attention_kind", "dtype"]


class Dtype(enum.Enum):
    """Storage type of weights or KV cache."""

    BF16 = "bf16"
    FP8 = "fp8"
    INT4 = "int4"

    @property
    def bytes_per_param(self) -> float:
        """Bytes per stored element (INT4: 0.5, group scales ignored)."""
        return _BYTES_PER_PARAM[self]


_BYTES_PER_PARAM = {Dtype.BF16: 2.0, Dtype.FP8: 1.0, Dtype.INT4: 0.5}


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


_POSITIVE = ("n_layers", "hidden_size", "n_heads", "n_kv_heads", "head_dim", "vocab_size")
_NON_NEGATIVE = (
    "intermediate_size", "n_experts", "n_experts_per_token", "n_shared_experts", "moe_intermediate_size",
    "n_dense_layers", "kv_lora_rank", "qk_rope_head_dim", "q_lora_rank", "v_head_dim",
)


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

    def __post_init__(self) -> None:
        who = f"model {self.name!r}"
        if not isinstance(self.attention, AttentionKind):
            raise ConfigError(f"{who}: attention={self.attention!r} must be an AttentionKind (gqa or mla)")
        for name in _POSITIVE + _NON_NEGATIVE:
            value = getattr(self, name)
            low = 1 if name in _POSITIVE else 0
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

    def _check_dense(self, who: str) -> None:
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

    # ---- parameter counts (see module docstring) ---------------------------------------------
    def embedding_params(self) -> int:
        """Input embedding plus LM head parameters (one matrix when tied)."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)

    def attention_params_per_layer(self) -> int:
        """Attention projection parameters of one layer (GQA or MLA formula)."""
        h, n_h, d = self.hidden_size, self.n_heads, self.head_dim
        if self.attention is AttentionKind.GQA:
            return 2 * h * n_h * d + 2 * h * self.n_kv_heads * d
        r_q, r_kv, d_r, d_v = self.q_lora_rank, self.kv_lora_rank, self.qk_rope_head_dim, self.v_head_dim
        q = h * r_q + r_q + r_q * n_h * d if r_q else h * n_h * d
        kv = h * (r_kv + d_r) + r_kv + r_kv * n_h * (d - d_r + d_v)
        return q + kv + n_h * d_v * h

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
        layers = self.n_layers * self.attention_params_per_layer() + self.n_dense_layers * self.dense_ffn_params()
        if self.is_moe:
            layers += self.n_moe_layers * self._moe_layer_params(n_routed)
        return self.embedding_params() + layers + self.norm_params()

    def weight_bytes(self, dtype: Dtype) -> int:
        """All weights stored in ``dtype``, in bytes (rounded up)."""
        return math.ceil(self.n_params() * dtype.bytes_per_param)

    # ---- KV cache and FLOPs ------------------------------------------------------------------
    def kv_bytes_per_token_per_layer(self, kv_dtype: Dtype = Dtype.BF16) -> float:
        """KV-cache bytes one token occupies in one layer (unsharded)."""
        if self.attention is AttentionKind.MLA:
            return (self.kv_lora_rank + self.qk_rope_head_dim) * kv_dtype.bytes_per_param
        return 2 * self.n_kv_heads * self.head_dim * kv_dtype.bytes_per_param

    def kv_bytes_per_token(self, kv_dtype: Dtype = Dtype.BF16) -> int:
        """KV-cache bytes one token occupies across all layers (unsharded), rounded up."""
        return math.ceil(self.n_layers * self.kv_bytes_per_token_per_layer(kv_dtype))

    def flops_per_token_dense(self) -> float:
        """Matmul FLOPs per token, excluding attention scores: ``2 * (active params - gather)``.

        The input-embedding lookup is a gather, not a matmul, so an untied model's
        ``V*h`` input embedding is excluded; norms (< 0.01 %) are kept for simplicity.
        A tied matrix is counted once, as the LM head.
        """
        gather = 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size
        return 2.0 * (self.n_active_params() - gather)
