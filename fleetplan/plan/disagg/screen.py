"""Analytical screen of disaggregated fleets: prefill pool, KV transfer, decode pool, AFD step.

Legend (symbols as in ``fleetplan.queueing``): λ arrival rate (1/s), P prefill instances,
D decode instances (AFD: decode units), n decode batch per instance, W, H the linear step
constants of a GPU (inference-fleet-sim eq. 3, H at the reference context L_ref), chunk the
prefill token budget, ρ_max the utilisation cap, p the SLO percentile.

Prefill pool: M/G/c on prefill work (inference-fleet-sim eqs. 2-5 with prefill as the service):

    S_p(L_in)  = ceil(L_in / chunk) W_p + (H_p / L_ref) L_in       (LinearStepModel.from_serving;
                 the PDD kernel's ``prefill_alone_s``: one prompt alone on an instance)
    T_x(L_in)  = latency + L_in * kv_bytes_per_token / bandwidth      (KV transfer, first-order)
    T0(L_in)   = S_p + T_x + t_dec(n)                                 (TTFT with no queue)
    TTFT_p     = p-quantile of W_q + T0,  P(W_q > t) = C(P, λE[S_p]) exp(-2 (Pμ - λ) t / (Ca² + Cs²))
                 (Kimura's two-moment GI/G/c form; Ca² of the arrival stream, 1 for Poisson)
    P          = min{P : TTFT_p(P) <= SLO, λ E[S_p] / P <= ρ_max}    (``queueing.size_pool``, 1 slot)

Each instance is one server taking one prompt at a time; the simulator packs short prompts
into one step (cheaper than separate steps), so the screen is conservative there.

Decode pool, sized by KV-slot capacity at the TPOT target:

    c̄          = E[L_out L_in + L_out (L_out - 1) / 2] / E[L_out]   (time-average context of a
                 decoding sequence: each request contributes its L_out steps, length-biased)
    t_dec(n)   = W_d + (H_d / L_ref) n c̄                             (eq. 3, every sequence at c̄)
    n_tpot     = max{n : t_dec(n) <= TPOT target} = floor((TPOT - W_d) L_ref / (H_d c̄))
    n_kv       = floor(kv_blocks / ceil(c̄ / block))
    n          = min(n_tpot, n_kv)                                    (infeasible when < 1)
    E[R]       = E[L_out] t_dec(n)                                    (residence, full-batch steps)
    D          = max(1, ceil(λ E[R] / (n ρ_max)))                     (ρ_d = λ E[R] / (D n) <= ρ_max)

The analytic TPOT reported is t_dec(n), an upper bound (steps at the full batch).

AFD decode unit (Frontier §3.2, ``perf.afd``): ``a`` attention GPUs and ``f`` FFN GPUs run the
step as ``m`` micro-batches per layer (ping-pong).  From the linear constants, with φ the
attention share of a layer's weights (``ModelShape``), per layer and micro-batch:

    attention_s = (φ W_a + (H_a / L_ref) c̄ n / (a m)) / L     (weights re-read per micro-batch;
                                                                 sequences split over the a GPUs)
    ffn_s       = (1 - φ) W_f / (f L)                           (weights sharded over the f GPUs)
    bytes       = ceil(n / m) / min(a, f) * hidden * 2          (BF16 activations per GPU link)
    t_afd(n)    = ``perf.afd.afd_step`` critical path over L identical layers

(``afd_step_s`` below is that recurrence vectorised over n).  With a = f = m = 1 and free
transfers t_afd(n) = t_dec(n).  n, E[R] and D then follow as above with t_afd and the unit's
KV blocks (a x the attention GPU's; the co-located calibration, so memory freed by moving
the FFN weights off the attention GPUs is not counted: conservative).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan.hardware import ServingConstants
from fleetplan.queueing import ServiceMoments

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


def prefill_service_s(prompt_tokens: np.ndarray, serving: ServingConstants) -> np.ndarray:
    """S_p(L_in) = ceil(L_in / chunk) W + (H / L_ref) L_in, seconds."""
    per_token = serving.iter_per_seq_s / serving.ref_context_tokens
    return np.ceil(prompt_tokens / serving.chunk_tokens) * serving.iter_base_s + per_token * prompt_tokens


def transfer_s(prompt_tokens: np.ndarray, kv_bytes_per_token: float, bandwidth_bytes_per_s: float,
               latency_s: float) -> np.ndarray:
    """T_x(L_in) = latency + L_in kv_bytes_per_token / bandwidth, seconds."""
    return latency_s + prompt_tokens * kv_bytes_per_token / bandwidth_bytes_per_s


def prefill_moments(prompt_tokens: np.ndarray, weight: np.ndarray, serving: ServingConstants,
                    after_prefill_s: np.ndarray) -> ServiceMoments:
    """Service moments of a prefill pool (one slot per instance): E[S_p], Cs² and the zero-wait
    TTFT points S_p + ``after_prefill_s`` (transfer + first decode step), sorted."""
    w = weight / weight.sum()
    service = prefill_service_s(prompt_tokens, serving)
    mean = float(w @ service)
    cs2 = float(w @ (service - mean) ** 2) / mean**2
    after = np.broadcast_to(np.asarray(after_prefill_s, dtype=np.float64), service.shape)
    order = np.argsort(service + after, kind="stable")
    return ServiceMoments(mean, cs2, 1, service[order], np.ascontiguousarray(after[order]), w[order])


def linear_decode_step_s(n: np.ndarray | float, serving: ServingConstants, context_tokens: float):
    """t_dec(n) = W + (H / L_ref) n c̄, seconds."""
    return serving.iter_base_s + serving.iter_per_seq_s * np.asarray(n, dtype=np.float64) * context_tokens \
        / serving.ref_context_tokens


def kv_batch_limit(kv_blocks: int, block_size_tokens: int, context_tokens: float) -> int:
    """n_kv = floor(kv_blocks / ceil(c̄ / block))."""
    return int(kv_blocks // max(1, math.ceil(context_tokens / block_size_tokens)))


def largest_batch(step_s: np.ndarray, tpot_target_s: float) -> int:
    """The largest n (1-based index into ``step_s``, ascending in n) with step <= target; 0 if none."""
    ok = np.flatnonzero(step_s <= tpot_target_s * (1.0 + 1e-12))
    return int(ok[-1] + 1) if ok.size else 0


def linear_decode_batch(serving: ServingConstants, context_tokens: float, tpot_target_s: float) -> int:
    """min(n_tpot, n_kv) of one co-located-style decode instance (module docstring)."""
    n_kv = kv_batch_limit(serving.kv_blocks, serving.block_size_tokens, context_tokens)
    slope = serving.iter_per_seq_s * context_tokens / serving.ref_context_tokens
    if tpot_target_s < serving.iter_base_s + slope:
        return 0
    n_tpot = math.floor((tpot_target_s - serving.iter_base_s) / slope * (1.0 + 1e-12)) if slope > 0 else n_kv
    return max(0, min(n_tpot, n_kv))


def decode_instances(rate_per_s: float, load: DecodeLoad, step_s: float, batch: int, rho_max: float) -> int:
    """D = max(1, ceil(λ E[L_out] t(n) / (n ρ_max))) (a quotient within 1e-9 of an integer counts as it)."""
    need = rate_per_s * load.mean_output_tokens * step_s / (batch * rho_max)
    return max(1, math.ceil(need - 1e-9 * max(1.0, need)))


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
