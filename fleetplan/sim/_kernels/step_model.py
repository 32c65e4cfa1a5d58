"""Step-time models evaluated by the iteration-level kernel (the perf/sim seam).

Aggregates of the scheduled batch: ``n_seqs`` (requests scheduled), ``n_decode`` (those
decoding one token), ``prefill_tokens``, ``decode_context_tokens`` (sum of the decoding
requests' contexts) and ``attn2 = sum over prefill chunks of chunk * (2 * offset + chunk)``
(twice the prefill attention work, kept as an exact integer so the sum is
order-independent).  ``T = prefill_tokens + n_decode`` tokens pass the GEMMs.

``STEP_MODEL_LINEAR`` (``fleetplan.perf.linear``) with coefficients ``c[0..4]``:

    step_s = c[0] + c[1] * n_seqs + c[2] * prefill_tokens
             + c[3] * decode_context_tokens + c[4] * prefill_attention_work

``STEP_MODEL_ROOFLINE`` (``fleetplan.perf.predictor``; layout in ``fleetplan.perf.linear``):

    pad   = ceil(T / c[5]) * c[5]  (T below one tile),  m = ceil(T / c[5])
    wf    = ceil(m c[6]) / (m c[6])  (1 when c[6] = 0)
    gemm  = max(c[1] pad wf + c[8] n_seqs, c[2] + c[7] T + c[9] n_seqs)
    q     = 1 - exp(c[15] T)
    moe   = max(c[12] T + c[13] sqrt(T) + c[21] q, c[14] q + c[16] sqrt(q (1 - q)) + c[17] T)  (0 if c[12] = c[14] = 0)
    window = c[18] (n_decode + min(P, (attn2 / 2 + P / 2) / c[19])) + c[20] P  (c[18] (n_decode + P) when c[19] = 0)
    step_s = (c[0] + gemm + c[3] attn2 / 2 + c[10] T + c[11] n_seqs + moe + window) + c[4] decode_context_tokens

Both expressions are evaluated in exactly this order (the Python twin does the same, which
is what makes float results match bit for bit).
"""

from __future__ import annotations

from fleetplan.perf.step_terms import roofline_gemm_s, roofline_moe_s, roofline_window_s
from fleetplan.sim._kernels.codes import N_STEP_MODELS, STEP_MODEL_LINEAR, STEP_MODEL_ROOFLINE
from fleetplan.sim._kernels.jit import njit_helper, njit_inline

# the roofline's GEMM and MoE terms: the same functions perf evaluates in Python (perf.step_terms)
_roofline_gemm_s = njit_inline(roofline_gemm_s)
_roofline_moe_s = njit_inline(roofline_moe_s)
_roofline_window_s = njit_inline(roofline_window_s)


@njit_inline
def _roofline_base_s(coef, n_seqs, n_decode, prefill_tokens, attn2):
    """Everything of STEP_MODEL_ROOFLINE but the decode-context term (added last)."""
    n_tokens = prefill_tokens + n_decode
    gemm = _roofline_gemm_s(coef, n_seqs, n_tokens)
    moe = _roofline_moe_s(coef, n_tokens)
    window = _roofline_window_s(coef, n_decode, prefill_tokens, attn2)
    return coef[0] + gemm + coef[3] * (attn2 * 0.5) + coef[10] * n_tokens + coef[11] * n_seqs + moe + window


@njit_inline
def step_time_s(code, coef, n_seqs, n_decode, prefill_tokens, decode_context_tokens, attn2):
    """Duration (s) of one engine step with the given batch aggregates (-1 for an unknown code)."""
    if code == STEP_MODEL_LINEAR:
        return (coef[0] + coef[1] * n_seqs + coef[2] * prefill_tokens
                + coef[3] * decode_context_tokens + coef[4] * (attn2 * 0.5))
    if code == STEP_MODEL_ROOFLINE:
        return _roofline_base_s(coef, n_seqs, n_decode, prefill_tokens, attn2) + coef[4] * decode_context_tokens
    return -1.0


@njit_inline
def decode_step_parts(code, coef, n_seqs):
    """``(base_s, s_per_context_token)`` of a pure-decode step of ``n_seqs`` requests, such that
    ``base_s + s_per_context_token * ctx`` is bit for bit ``step_time_s(code, coef, n, n, 0, ctx, 0)``
    (the context term is the last addition, and adding the zero prefill terms is exact).
    Runs of identical decode steps ("cruise") evaluate the base once."""
    if code == STEP_MODEL_LINEAR:
        return coef[0] + coef[1] * n_seqs + coef[2] * 0, coef[3]
    if code == STEP_MODEL_ROOFLINE:
        return _roofline_base_s(coef, n_seqs, n_seqs, 0, 0), coef[4]
    return -1.0, 0.0


@njit_inline
def verify_step_parts(code, coef, n_seqs, n_decode, prefill_tokens):
    """The terms of ``step_time_s(code, coef, n_seqs, n_decode, prefill_tokens, ctx, attn2)`` that do
    not depend on ``ctx`` and ``attn2`` (the steps of a speculative run differ only in those), for
    ``verify_step_s``; the partial sums are the ones ``step_time_s`` forms, in its order (the last two entries
    are the window term's own aggregates: it depends on ``attn2``)."""
    if code == STEP_MODEL_ROOFLINE:
        n_tokens = prefill_tokens + n_decode
        head = coef[0] + _roofline_gemm_s(coef, n_seqs, n_tokens)
        return (head, coef[10] * n_tokens, coef[11] * n_seqs, _roofline_moe_s(coef, n_tokens), float(n_decode),
                float(prefill_tokens))
    return coef[0] + coef[1] * n_seqs + coef[2] * prefill_tokens, 0.0, 0.0, 0.0, 0.0, 0.0


@njit_inline
def verify_step_s(code, coef, parts, ctx, attn2):
    """Bit for bit ``step_time_s(code, coef, n_seqs, n_decode, prefill_tokens, ctx, attn2)`` from
    ``parts = verify_step_parts(code, coef, n_seqs, n_decode, prefill_tokens)``."""
    if code == STEP_MODEL_ROOFLINE:
        return (parts[0] + coef[3] * (attn2 * 0.5) + parts[1] + parts[2] + parts[3]
                + _roofline_window_s(coef, parts[4], parts[5], attn2) + coef[4] * ctx)
    if code == STEP_MODEL_LINEAR:
        return parts[0] + coef[3] * ctx + coef[4] * (attn2 * 0.5)
    return -1.0


@njit_helper
def check_step_codes(codes):
    """ValueError unless every entry of ``codes`` is a known step-model code (a kernel precondition)."""
    for p in range(codes.shape[0]):
        if codes[p] < 0 or codes[p] >= N_STEP_MODELS:
            raise ValueError("unknown step-model code")
