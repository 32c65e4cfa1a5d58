"""The roofline step model's GEMM and MoE terms: the one implementation of both.

Plain functions of ``math`` only, written so that numba compiles them unchanged:
``fleetplan.perf.linear.roofline_step_s`` (and through it ``perf.calibrate`` and
``perf.predictor``) calls them as Python, and the simulator kernels compile them
(``fleetplan.sim._kernels.step_model``, the one module outside ``sim/_kernels`` that the kernels
may import; ``tests/test_layering.py`` says so).  Same code, same operation order, so Python and
kernel step times agree bit for bit.  Coefficient layout and the full expression:
``fleetplan.perf.linear`` module docstring (``T`` = tokens through the GEMMs).
"""

from __future__ import annotations

import math

__all__ = ["roofline_gemm_s", "roofline_moe_s", "roofline_window_s"]


def roofline_gemm_s(coef, n_seqs, n_tokens):
    """``gemm = max(c[1] pad wf + c[8] n_seqs, c[2] + c[7] T + c[9] n_seqs)`` (s): compute with the
    tile padding ``pad`` and wave factor ``wf``, or memory."""
    tile = int(coef[5])
    m_tiles = (n_tokens + tile - 1) // tile
    pad = m_tiles * tile if n_tokens >= tile else n_tokens
    wf = 1.0
    if coef[6] > 0.0 and n_tokens > 0:
        work = m_tiles * coef[6]
        wf = math.ceil(work) / work
    gc = coef[1] * pad * wf + coef[8] * n_seqs
    gm = coef[2] + coef[7] * n_tokens + coef[9] * n_seqs
    return gc if gc > gm else gm


def roofline_moe_s(coef, n_tokens):
    """``moe = max(c[12] T + c[13] sqrt(T) + c[21] q, c[14] q + c[16] sqrt(q (1 - q)) + c[17] T)`` (s) with
    ``q = 1 - exp(c[15] T)`` (``c[21] q``: the hit experts' compute offset, ``fleetplan.perf.moe`` 'Rows per
    expert'); 0 for a dense model (``c[12] = c[14] = 0``)."""
    moe = 0.0
    if coef[12] > 0.0 or coef[14] > 0.0:
        q = 1.0 - math.exp(coef[15] * n_tokens)
        mc = coef[12] * n_tokens + coef[13] * math.sqrt(n_tokens) + coef[21] * q
        mm = coef[14] * q + coef[16] * math.sqrt(q * (1.0 - q)) + coef[17] * n_tokens
        moe = mc if mc > mm else mm
    return moe


def roofline_window_s(coef, n_decode, prefill_tokens, attn2):
    """``window = c[18] (n_decode + min(P, (attn2 / 2 + P / 2) / c[19])) + c[20] P`` (s): attention over a window of
    at most ``c[19]`` keys per query (narrow-window layers, DeepSeek Sparse Attention's top-k), ``c[18]`` seconds per
    query at the full window.  A decode token is charged the whole window; the ``P`` prefill tokens the keys they
    have, ``min(position, c[19])`` each: for a chunk of ``c`` tokens at offset ``o`` that ends within the window
    that is ``c (o + c / 2) + c / 2`` keys (the prefill attention work plus half a key per token), so the step's
    prefill queries count ``min(P, (attn2 / 2 + P / 2) / c[19])`` full windows, exact when every chunk ends within
    the window or starts past it and an upper bound otherwise (``min`` of sums >= sum of ``min``).  ``c[19] = 0``:
    every token at the full window.  Plus ``c[20] P``: a sparse-attention prefill query's cost outside its keys and
    pairs (``fleetplan.perf.attention``, "Per-query prefill cost"; added only when ``c[20] > 0``)."""
    if coef[19] > 0.0:
        clipped = (attn2 * 0.5 + prefill_tokens * 0.5) / coef[19]
        window = coef[18] * (n_decode + (clipped if clipped < prefill_tokens else prefill_tokens))
    else:
        window = coef[18] * (n_decode + prefill_tokens)
    if coef[20] > 0.0:
        window = window + coef[20] * prefill_tokens
    return window
