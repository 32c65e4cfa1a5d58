"""Model figures of the disaggregated screen and the AFD decode unit's step.

The roles' queueing physics (prefill role, KV transfer, decode role, TTFT and TPOT as the PDD simulator
measures them) is ``fleetplan.queueing.disagg``; ``plan.disagg.candidates`` sizes every role with it.
This module holds what that needs of the served model (``ModelShape``), the decode side's workload
moments (``decode_load``: c̄ = E[L_out L_in + L_out (L_out - 1) / 2] / E[L_out], the time-average
context of a decoding sequence, length-biased) and the AFD unit.

Legend: W, H the linear step constants of a GPU (inference-fleet-sim eq. 3, H at the reference context
L_ref), n the decode batch, c̄ the mean decode context, L layers.

AFD decode unit (Frontier §3.2, ``perf.afd``): ``a`` attention GPUs and ``f`` FFN GPUs run the
step as ``m`` micro-batches per layer (ping-pong).  From the linear constants, with φ the
attention share of a layer's weights (``ModelShape``), per layer and micro-batch:

    attention_s = (φ W_a + (H_a / L_ref) c̄ n / (a m)) / L     (weights re-read per micro-batch;
                                                                 sequences split over the a GPUs)
    ffn_s       = (1 - φ) W_f / (f L)                           (weights sharded over the f GPUs)
    bytes       = ceil(n / m) / min(a, f) * hidden * 2          (BF16 activations per GPU link)
    t_afd(n)    = ``perf.afd.afd_step`` critical path over L identical layers

(``afd_step_s`` below is that recurrence vectorised over n).  With a = f = m = 1 and free
transfers t_afd(n) = W + (H / L_ref) n c̄, the fused step.  The unit's batch cap n is the largest within
the TPOT target whose sequences of c̄ tokens fit its KV blocks (a x the attention GPU's; the co-located
calibration, so memory freed by moving the FFN weights off the attention GPUs is not counted:
conservative); the simulator runs t_afd linearised through t_afd(1) and t_afd(n) (``linear_fit``), and so
does the decode role's analytic model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan.hardware import ServingConstants

#: Bytes per activation element crossing the attention <-> FFN link (BF16).
ACTIVATION_BYTES = 2


@dataclass(frozen=True)
class ModelShape:
    """What the screen needs of the served model: KV bytes per token, layers, hidden size and
    the attention share φ of a layer's weights (GQA/MLA projections over projections + FFN)."""

    name: str
    kv_bytes_per_token: float
    n_layers: int
    hidden_size: int
    attention_weight_share: float

    @classmethod
    def of(cls, model, kv_dtype=None) -> ModelShape:
        """From a ``fleetplan.models.ModelConfig``, its KV cache in ``kv_dtype`` (a ``models.Dtype``; BF16)."""
        body = model.n_params() - model.embedding_params()
        attention = model.n_layers * model.attention_params_per_layer()
        kv = model.kv_bytes_per_token() if kv_dtype is None else model.kv_bytes_per_token(kv_dtype)
        return cls(model.name, float(kv), int(model.n_layers), int(model.hidden_size),
                   attention / body if body > 0 else 0.0)


@dataclass(frozen=True)
class DecodeLoad:
    """Decode-side moments of the workload: mean output tokens, its Cs² and the mean context c̄."""

    mean_output_tokens: float
    output_cs2: float
    mean_context_tokens: float


def decode_load(prompt_tokens: np.ndarray, output_tokens: np.ndarray, weight: np.ndarray) -> DecodeLoad:
    """E[L_out], Cs²[L_out] and c̄ = E[L_out L_in + L_out (L_out - 1) / 2] / E[L_out]."""
    w = weight / weight.sum()
    mean_out = float(w @ output_tokens)
    cs2 = float(w @ (output_tokens - mean_out) ** 2) / mean_out**2
    ctx = float(w @ (output_tokens * prompt_tokens + output_tokens * (output_tokens - 1) / 2)) / mean_out
    return DecodeLoad(mean_out, cs2, ctx)


def kv_batch_limit(kv_blocks: int, block_size_tokens: int, context_tokens: float) -> int:
    """n_kv = floor(kv_blocks / ceil(c̄ / block))."""
    return int(kv_blocks // max(1, math.ceil(context_tokens / block_size_tokens)))


def largest_batch(step_s: np.ndarray, tpot_target_s: float) -> int:
    """The largest n (1-based index into ``step_s``, ascending in n) with step <= target; 0 if none."""
    ok = np.flatnonzero(step_s <= tpot_target_s * (1.0 + 1e-12))
    return int(ok[-1] + 1) if ok.size else 0


def afd_step_s(attention_s: np.ndarray, ffn_s: float, serialise_s: np.ndarray, latency_s: float,
               n_layers: int, n_micro_batches: int) -> np.ndarray:
    """``perf.afd.afd_step(...).step_s`` for identical layers and micro-batches, vectorised over
    the leading axis of ``attention_s`` / ``serialise_s`` (one entry per batch size)."""
    attn = np.asarray(attention_s, dtype=np.float64)
    ser = np.broadcast_to(np.asarray(serialise_s, dtype=np.float64), attn.shape)
    zero = np.zeros_like(attn)
    a_free, go_free, f_free, bk_free = zero.copy(), zero.copy(), zero.copy(), zero.copy()
    back = [zero] * n_micro_batches
    for layer in range(n_layers):
        for j in range(n_micro_batches):
            ready = back[j] if layer else zero
            a_free = np.maximum(a_free, ready) + attn
            go_free = np.maximum(go_free, a_free) + ser
            f_free = np.maximum(f_free, go_free + latency_s) + ffn_s
            bk_free = np.maximum(bk_free, f_free) + ser
            back[j] = bk_free + latency_s
    return back[-1]


@dataclass(frozen=True)
class AfdUnit:
    """One AFD decode unit: ``a`` attention GPUs of ``attention`` and ``f`` FFN GPUs of ``ffn``."""

    attention: ServingConstants
    ffn: ServingConstants
    a: int
    f: int
    n_micro_batches: int
    link_bandwidth_bytes_per_s: float
    link_latency_s: float

    def step_s(self, n: np.ndarray, context_tokens: float, shape: ModelShape) -> np.ndarray:
        """t_afd(n), seconds (module docstring), for an array of batch sizes ``n``."""
        n = np.asarray(n, dtype=np.float64)
        m, L, phi = self.n_micro_batches, shape.n_layers, shape.attention_weight_share
        at = self.attention
        attention = (phi * at.iter_base_s + at.iter_per_seq_s * context_tokens / at.ref_context_tokens
                     * n / (self.a * m)) / L
        ffn = (1.0 - phi) * self.ffn.iter_base_s / (self.f * L)
        n_bytes = np.ceil(n / m) / min(self.a, self.f) * shape.hidden_size * ACTIVATION_BYTES
        return afd_step_s(attention, ffn, n_bytes / self.link_bandwidth_bytes_per_s, self.link_latency_s, L, m)

    def kv_blocks(self) -> int:
        return self.a * int(self.attention.kv_blocks)

    def batch(self, context_tokens: float, tpot_target_s: float, shape: ModelShape) -> tuple[int, float, float]:
        """(n, t_afd(n), t_afd(1)): the largest batch within the TPOT target and the unit's KV blocks."""
        n_kv = kv_batch_limit(self.kv_blocks(), self.attention.block_size_tokens, context_tokens)
        if n_kv < 1:
            return 0, math.nan, math.nan
        steps = self.step_s(np.arange(1, n_kv + 1), context_tokens, shape)
        n = largest_batch(steps, tpot_target_s)
        return n, float(steps[n - 1]) if n else float(steps[0]), float(steps[0])


def linear_fit(step_1_s: float, step_n_s: float, n: int, context_tokens: float) -> tuple[float, float]:
    """(base_s, s_per_context_token) of the line through t(1) and t(n) at c̄ tokens per sequence:
    t = base + slope * (sum of the batch's context tokens); flat when n = 1."""
    if n <= 1 or not step_n_s > step_1_s:
        return step_1_s, 0.0
    slope = (step_n_s - step_1_s) / ((n - 1) * context_tokens)
    return max(0.0, step_1_s - slope * context_tokens), slope
